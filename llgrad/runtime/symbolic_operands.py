"""How a SymbolicScalar (symbolic_scalar.py) enters a tensor op: as the 0-d tensor PyTorch
would take its number as (the op's computation dtype), or an escape where the number would
be an attribute of the graph (a constant) or mean something else than that tensor."""
import numpy as np

from . import trace_state
from .derived_number import DerivedNumber
from .sym_int import SymInt
from .dtypes import check_int_operand, result_type, to_dtype
from .numpy_scalars import NUMPY_SCALARS, python_number
from .symbolic_scalar import (_FLOAT_EXACT, _IN_SELF_DTYPE, _SUPPORTED_OPS, SymbolicScalar,
                              _require, stand_ins)  # noqa: F401 (the dispatcher's, with these)
from .tensor import Tensor


def as_operands(op, inputs, attrs):
    """The inputs of op with each SymbolicScalar made the 0-d tensor PyTorch would take its
    number as (cast to the op's computation dtype, from the other operand and the number);
    an escape where that is not exactly the number's meaning."""
    syms = [x for x in inputs if type(x) is SymbolicScalar]
    others = [x for x in inputs if type(x) is not SymbolicScalar]
    s = syms[0]
    places = _IN_SELF_DTYPE.get(op.name, ())
    if all(type(x.value) is float for x in syms) and isinstance(inputs[0], Tensor) and \
            inputs[0]._dtype.name in ("float32", "float64") and \
            all(k in places for k, x in enumerate(inputs) if type(x) is SymbolicScalar):
        # (an EMA's p.lerp_(q, 1 - decay), PPO's ratio.clamp(1 - clip, 1 + clip) with the
        # clip range annealed: PyTorch reads such a number in self's dtype)
        if inputs[0]._dtype.name == "float32" and op.name.startswith("clamp"):
            for x in syms:      # (clamp refuses such a bound; lerp makes it inf, as cast)
                if past(x.value, _FLOAT32_MAX):
                    x._escape(f"an operand of {op.name} past float32's range")
                within(x, _FLOAT32_MAX)
        return [x.tensor.to(inputs[0]._dtype) if type(x) is SymbolicScalar else x
                for x in inputs]
    if op.name not in _SUPPORTED_OPS or len(inputs) != 2 or len(syms) != 1 or \
            not isinstance(others[0], Tensor) or attrs.get("rounding_mode") is not None or \
            attrs.get("alpha", 1) != 1:
        return [x._escape(f"an operand of {op.name}") if type(x) is SymbolicScalar else x
                for x in inputs]
    dt = result_type(others[0], s.value)
    v = s.value
    if dt is None or dt.name in ("complex64", "complex128") or (
            dt._cat == 2 and dt.name not in ("float32", "float64")) or (
            type(v) is int and dt._cat < 2 and not _fits(v, dt)) or (
            type(v) is int and dt._cat == 2 and abs(v) >= 2 ** 24):
        s._escape(f"an operand of {op.name} ({dt})")
    if type(v) is int and dt._cat == 1:     # (the checks above, for the numbers of later calls)
        info = np.iinfo(dt.name)
        _require((s.tensor >= int(info.min)) & (s.tensor <= int(info.max)))
    elif type(v) is int and dt._cat == 2:   # (one rounding to the float type, not two)
        _require(s.tensor.abs() < _FLOAT_EXACT)
    t = s.tensor if s.tensor._dtype is dt else s.tensor.to(dt)
    return [t if type(x) is SymbolicScalar else x for x in inputs]


def past(v, top):
    """Whether the number v is finite and past top (a float type's largest value)."""
    return abs(v) > top and v - v == 0


def within(s, top):
    """A guard that stand-in s is not past top in the calls the trace serves (an op that
    refuses such a number, "value cannot be converted to type float without overflow",
    raises for this call's already, escaping or as eager), once per stand-in and trace."""
    tracer = trace_state.state.tracer
    if tracer is None:      # (a stand-in left in Python state acts as its number)
        return
    done = tracer.__dict__.setdefault("_llgrad_within", {})
    t = s.tensor
    if (id(t), top) not in done:
        done[id(t), top] = t        # (held: its id is not another's while tracing)
        _require(t.abs().le(top) | t.isfinite().logical_not())


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _fits(v, dt):
    info = np.iinfo(dt.name) if dt.name != "bool" else None
    return info is not None and info.min <= v <= info.max


def escape_in_attrs(op, attrs):
    """An escape if a SymbolicScalar is among op's attributes (one level deep): an attribute
    is a constant of the graph. (The `full` op's value, which full() checked, makes its
    result instead, returned: the stand-in's tensor cast, expanded and copied,
    symbolic_uses.py.)"""
    if op.name == "full" and type(attrs["value"]) is SymbolicScalar:
        t = attrs["value"].tensor.to(to_dtype(attrs["dtype"]))
        return t.expand(attrs["shape"]).clone(memory_format="contiguous_format")
    for v in attrs.values():
        for x in (v if type(v) in (tuple, list) else (v,)):
            if type(x) is SymbolicScalar:
                x._escape(f"an argument of {op.name}")
            elif type(x) is DerivedNumber:      # (its number read: not traced)
                x.read(f"an argument of {op.name}")


# operands read before an op runs: NumPy scalars, and a compiled function's dynamic numbers
SPECIAL_OPERANDS = NUMPY_SCALARS | {SymbolicScalar, DerivedNumber, SymInt}


def special_operands(op, inputs, attrs):
    """inputs with NumPy scalars read as the Python numbers torch reads them as (np.float64(2)
    is 2.0) and each SymbolicScalar as its graph value (as_operands); a Python int past
    [-2**63, 2**64) raises OverflowError, as PyTorch's."""
    inputs = [check_int_operand(v) if type(v) is int else v.read(f"an operand of {op.name}")
              if type(v) is DerivedNumber else v.plain() if type(v) is SymInt  # (size_reads.py)
              else python_number(v) for v in inputs]
    if any(type(v) is SymbolicScalar for v in inputs):
        inputs = as_operands(op, inputs, attrs)
    return inputs
