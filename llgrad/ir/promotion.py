"""PyTorch's type promotion, written once: the IR's type rules (shape_rules.py) and the eager
dispatcher (runtime/dtypes.py, dispatch.py) both call it.

Operands are described as (dtype name, has dims) for a tensor, or the Python number itself.
Dimensioned tensors decide the dtype; 0-d tensors, then Python numbers, only when they are
of a higher category (bool < integer < floating < complex); within a category NumPy's
promotion applies (float32 with int64 is float32, not NumPy's float64). A complex operand
of a lower priority keeps a floating higher one's precision (float64 tensor * 1j is
complex128: PyTorch's combine_categories)."""
import functools

import numpy as np

_DEFAULT = {0: "bool", 1: "int64", 2: "float32"}      # a Python number's dtype, by category
_ON_DEFAULT_CHANGE = []     # caches of results that depend on the default float dtype


def default_float():
    """The default floating dtype (llgrad.set_default_dtype): a Python float's dtype, and
    what integer operands of float_out ops (exp, div, ...) give."""
    return _DEFAULT[2]


def set_default_float(name):
    if name != _DEFAULT[2]:
        _DEFAULT[2] = name
        for clear in _ON_DEFAULT_CHANGE:
            clear()


def on_default_change(clear):
    """clear() runs whenever the default float dtype changes (a cache of type rules)."""
    _ON_DEFAULT_CHANGE.append(clear)


def category(dtype):
    """0 bool, 1 integer, 2 floating, 3 complex, of a dtype name."""
    return 0 if dtype == "bool" else 1 if dtype[0] in "iu" else 3 if dtype[0] == "c" else 2


def scalar_category(v):
    # (a NumPy integer reads as the Python int it holds, as PyTorch does; np.bool_ as a float)
    return 0 if isinstance(v, bool) else 1 if isinstance(v, (int, np.integer)) else \
        3 if isinstance(v, (complex, np.complexfloating)) else 2


def complex_of(dtype):
    """The complex dtype with a floating (or complex) dtype's precision."""
    return "complex128" if dtype in ("float64", "complex128") else "complex64"


@functools.lru_cache(maxsize=None)
def promote_types(*dtypes):
    """PyTorch's promote_types of dtype names: the highest category wins, and NumPy's
    promotion only within it; complex with floating takes the wider precision
    (complex64 with float64 is complex128), and bfloat16 with another float is what float32
    with it is (bfloat16 with float16: float32)."""
    top = max(category(d) for d in dtypes)
    if top == 3 and "float64" in dtypes:
        return "complex128"
    tops = [d for d in dtypes if category(d) == top]
    if "bfloat16" in tops:      # (NumPy has none: with any other float, float32's place)
        if all(d == "bfloat16" for d in tops):
            return "bfloat16"
        tops = ["float32" if d == "bfloat16" else d for d in tops]
    return np.result_type(*tops).name


def _combine(higher, lower):
    """PyTorch's combine_categories: a lower-priority operand's dtype counts only when it
    is of a higher category; a complex one then keeps a floating higher's precision."""
    if lower is None or higher is not None and category(lower) <= category(higher):
        return higher
    if higher is not None and category(lower) == 3 and category(higher) == 2:
        return complex_of(higher)
    return lower


def result_dtype(operands, float_out=False):
    """The dtype name operands promote to (None: no tensor or number among them); with
    float_out, integer and bool results become float32 (exp, div, ...)."""
    dims, zeros, scal = [], [], -1
    for o in operands:
        if isinstance(o, tuple):
            (dims if o[1] else zeros).append(o[0])
        elif o is not None:
            scal = max(scal, scalar_category(o))
    res = promote_types(*dims) if dims else None
    if zeros:
        res = _combine(res, promote_types(*zeros))
    if scal >= 0 and (res is None or scal > category(res)):
        res = _combine(res, complex_of(_DEFAULT[2]) if scal == 3 else _DEFAULT[scal])
    if float_out and res is not None and category(res) < 2:
        res = _DEFAULT[2]
    return res
