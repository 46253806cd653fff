"""attention-port: scaled dot-product attention as a cross-language reference.

Ports: `reference` (numpy float64), `torch_port` (PyTorch, GPU when there is one) and the
TypeScript ports under typescript/src/, all checked against the golden fixtures in fixtures/.
"""

from attention_port.inputs import ERROR_KINDS, AttentionInputError

__all__ = ["ERROR_KINDS", "AttentionInputError"]
__version__ = "0.1.0"
