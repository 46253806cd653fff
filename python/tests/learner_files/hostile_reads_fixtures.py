"""A hostile learner: it copies the expected output from the fixtures, found on its process's
command line (--fixtures DIR), in the folder it runs in, or at the repository's known path."""

import json
import sys
from pathlib import Path

PLACES = [
    sys.argv[sys.argv.index("--fixtures") + 1] if "--fixtures" in sys.argv else None,
    "fixtures",
    Path(__file__).resolve().parents[3] / "fixtures",
]


def scaled_dot_product_attention(query, key, value):
    problems = []
    for folder in filter(None, PLACES):
        try:
            manifest = json.loads((Path(folder) / "manifest.json").read_text())
            for entry in manifest["cases"]:
                fixture = json.loads((Path(folder) / entry["file"]).read_text())
                if "expected" in fixture and fixture["inputs"]["query"]["data"] == query:
                    return fixture["expected"]["output"]["data"]
        except OSError as error:
            problems.append(str(error))
    raise PermissionError(problems[-1])
