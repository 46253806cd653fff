"""`python -m attention_port ...` is the same as the `attention-port` command."""

import sys

from attention_port.cli import main

sys.exit(main())
