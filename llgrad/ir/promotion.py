"""PyTorch's type promotion, written once: the IR's type rules (shape_rules.py) and the eager
dispatcher (runtime/dtypes.py, dispatch.py) both call it.

Operands are described as (dtype name, has dims) for a tensor, or the Python number itself.
Dimensioned tensors decide the dtype; 0-d tensors, then Python numbers, only when they are
of a higher category (bool < integer < floating); within a category NumPy's promotion
applies (float32 with int64 is float32, not NumPy's float64)."""
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
    """0 bool, 1 integer, 2 floating, of a dtype name."""
    return 0 if dtype == "bool" else 1 if dtype[0] in "iu" else 2


def scalar_category(v):
    # (a NumPy integer reads as the Python int it holds, as PyTorch does; np.bool_ as a float)
    return 0 if isinstance(v, bool) else 1 if isinstance(v, (int, np.integer)) else 2


@functools.lru_cache(maxsize=None)
def promote_types(*dtypes):
    """PyTorch's promote_types of dtype names: the highest category wins, and NumPy's
    promotion only within it."""
    top = max(category(d) for d in dtypes)
    return np.result_type(*[d for d in dtypes if category(d) == top]).name


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
        z = promote_types(*zeros)
        if res is None or category(z) > category(res):
            res = z
    if scal >= 0 and (res is None or scal > category(res)):
        res = _DEFAULT[scal]
    if float_out and res is not None and category(res) < 2:
        res = _DEFAULT[2]
    return res
