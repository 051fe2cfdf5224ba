"""NumPy scalars as operands of Tensor operators, as PyTorch takes them.

PyTorch reads np.int64(3) or np.float32(2) next to a tensor as the Python number it holds,
a weak scalar: int32 tensor & np.int64(3) is int32, float32 tensor * np.float64(2) is
float32 (and np.bool_, which it does not take for a bool, as a float: np.True_ * t is
float32, np.True_ & t raises as a float does). Handed to the op table's NumPy impls as
they are, NumPy's own promotion (NEP 50: its scalars are strong) would widen the result
to the scalar's dtype; and a NumPy scalar on the *left* would not reach the tensor at all:
NumPy would convert the tensor through __array__ and return an ndarray. So:

* Tensor.__array_priority__ (torch.Tensor's value) makes NumPy scalars and arrays defer to
  the tensor's reflected operator (np.int64(3) & t calls t.__rand__); NumPy ufuncs called
  by name (np.exp(t)) convert the tensor and their result is wrapped back into one
  (Tensor.__array_wrap__, tensor_memory.py);
* every binary operator of Tensor reads a NumPy number operand as PyTorch does first
  (python_number), and so does the dispatcher for every op's operands (t.add(np.float64(1))
  stays float32, as torch's);
* a reflected arithmetic or bitwise operator refuses an ndarray on the left, as
  torch.Tensor's do: `arr * t` and `arr += t` raise TypeError (else `arr += t` would
  rebind arr to a tensor); comparisons (arr == t) give a tensor, as there;
* an operator other than == and != returns NotImplemented for an ndarray on the right, as
  torch.Tensor's: NumPy computes `t * arr` from t.__array__() (NumPy's dtypes: int32 * a
  float32 array is float64; a tensor that requires grad raises, as t.numpy() does; a traced
  one stops the trace) and __array_wrap__ makes the result a tensor; `t += arr` rebinds t."""
import numpy as np

from .sym_int import SymInt
from .tensor import Tensor

_NUMBERS = (np.number, np.bool_)
# the concrete NumPy scalar types (a set lookup per operand: the dispatcher's check)
NUMPY_SCALARS = frozenset(t for t in set(np.sctypeDict.values())
                          if isinstance(t, type) and issubclass(t, _NUMBERS)
                          and not issubclass(t, np.timedelta64))

OPERATORS = [f"__{p}{name}__" for name in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "lshift",
    "rshift") for p in ("", "r", "i")] + ["__eq__", "__ne__", "__lt__", "__le__", "__gt__",
                                          "__ge__"]


def python_number(x):
    """A NumPy scalar as the Python number PyTorch reads it as (anything else as it is):
    .item() gives the same value (a float32's exactly, as a double); np.bool_ a float; a
    size the user's code read in a trace (SymInt) its int."""
    if type(x) is SymInt:
        return x.plain()
    if isinstance(x, np.bool_):
        return float(x)
    return x.item() if isinstance(x, np.number) else x


# what an operator takes besides a tensor; for anything else it returns NotImplemented, as
# torch.Tensor's, so that Python raises its "unsupported operand type(s)" or asks the other
# operand (a traced function's SymbolicScalar passes as the number it stands for)
_OPERANDS = (Tensor, int, float, complex, np.generic, np.ndarray)


def _reading_numpy_numbers(fn, reflected, equality):
    def operator(self, other):
        if type(other) is not Tensor:       # (tensor operands first: no isinstance walk)
            if isinstance(other, _NUMBERS) or type(other) is SymInt:  # (a size read: its
                # int lands in the graph, where a size template fits it)
                other = python_number(other)
            elif (reflected or not equality) and isinstance(other, np.ndarray) or \
                    not equality and not isinstance(other, _OPERANDS):
                return NotImplemented
        return fn(self, other)
    operator.__name__, operator.__doc__ = fn.__name__, fn.__doc__
    operator.__wrapped__, operator._reads_numbers = fn, True
    return operator


def _matmul_operator(fn, reflected):
    def operator(self, other):      # (torch.Tensor's @ takes tensors; NumPy does t @ arr)
        if type(other) is not Tensor and not isinstance(other, Tensor):
            return NotImplemented
        return fn(self, other)
    operator.__name__, operator.__doc__ = fn.__name__, fn.__doc__
    operator.__wrapped__, operator._reads_numbers = fn, True
    return operator


def wrap_operators():
    """Give Tensor's binary operators their NumPy-scalar reading (runtime/__init__.py calls
    this once every operator is defined)."""
    Tensor.__array_priority__ = 1000
    for name in ("__matmul__", "__rmatmul__"):
        fn = Tensor.__dict__.get(name)
        if fn is not None and not hasattr(fn, "_reads_numbers"):
            setattr(Tensor, name, _matmul_operator(fn, name == "__rmatmul__"))
    for name in OPERATORS:
        fn = Tensor.__dict__.get(name)
        if fn is not None and not hasattr(fn, "_reads_numbers"):
            setattr(Tensor, name, _reading_numpy_numbers(fn, name.startswith("__r"),
                                                         name in ("__eq__", "__ne__")))
