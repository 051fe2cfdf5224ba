"""The IR layer: the op table (and, later, types, graphs, passes, the interpreter).
Imports nothing from the rest of llgrad and never imports llvmlite."""
from .optable import OPS, OpDef, defop  # noqa: F401
from . import ops_elementwise, ops_reduce, ops_shape, ops_nn  # noqa: F401  (fill OPS)
