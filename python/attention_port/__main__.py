"""`python -m attention_port ...` is the same as the `attention-port` command."""

import sys

from .cli import main

sys.exit(main())
