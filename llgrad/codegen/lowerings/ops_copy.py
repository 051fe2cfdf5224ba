"""Lowerings of the copies, casts and fills (ir/ops_copy.py's elementwise ones): clone,
to_dtype, copy, fill, zero, full, and constants."""
from .scalar import Scalar
from .table import elementwise, register


@elementwise("to_dtype", "clone")
def _identity(sg, node, a):
    return a                         # the result is cast to the node's dtype by the caller


@elementwise("copy")
def _copy(sg, node, x, src):
    return src


@elementwise("fill")
def _fill(sg, node, x, value):
    dt = node.outputs[0].type.dtype
    return sg.cast(value, dt) if isinstance(value, Scalar) else sg.const(value, dt)


@elementwise("zero")
def _zero(sg, node, x):
    return sg.const(0, node.outputs[0].type.dtype)


@elementwise("full")
def _full(sg, node):
    return sg.const(node.attrs["value"], node.attrs["dtype"])


register("constant", "constant")
