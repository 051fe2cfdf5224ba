"""Numbers a compiled function returns that it read out of a tensor (`return loss.item()`).

`t.item()` while tracing is a value guard: the number could steer Python control flow, so
the trace holds only for that value. A number that goes straight into the return value
steers nothing: the source rewrite (convert.py) turns `.item()` calls that stand in a
`return` statement, alone or inside tuple, list and dict displays, into `returned_item`,
which while tracing gives a ReturnedScalar: the tensor is an output of the graph, and each
compiled call returns its value as a Python number (no guard, no trace per value)."""
from ..runtime import trace_state
from ..runtime.tensor import Tensor


class ReturnedScalar:
    """t.item() as a graph output: `tensor` the traced 0-d value, `value` the number."""
    __slots__ = ("tensor", "value")

    def __init__(self, tensor):
        self.tensor = tensor
        self.value = tensor._data.reshape(()).item()


def returned_item(t):
    """t.item() in a return statement (see the module)."""
    if not isinstance(t, Tensor) or trace_state.state.tracer is None or t._data.size != 1:
        return t.item()     # (not a tensor, not tracing, or item()'s own error)
    return ReturnedScalar(t.detach().reshape(()))


def is_constant(leaf):
    """Leaves of a compiled function's result that are values, not outputs."""
    return leaf is None or type(leaf) in (int, float, bool, str)


def values_in(result):
    """result with each ReturnedScalar replaced by its number (what eager returned)."""
    if isinstance(result, ReturnedScalar):
        return result.value
    if isinstance(result, (list, tuple)) and not hasattr(result, "_fields"):
        return type(result)(values_in(x) for x in result)
    if isinstance(result, tuple):
        return type(result)(*(values_in(x) for x in result))
    if isinstance(result, dict):
        return {k: values_in(v) for k, v in result.items()}
    return result
