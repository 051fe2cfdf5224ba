"""PyTorch's TypeError for a Python number (or anything else) where a function or method
takes only tensors: torch.maximum(x, 0) raises "maximum(): argument 'other' (position 2)
must be Tensor, not int" (x.maximum(0): position 1), where llgrad's ops would broadcast the
number. Only the user-facing llgrad.<name> functions and Tensor.<name> methods are wrapped
(after every module has defined them); llgrad's own code calls the ops."""
import functools

from . import functions
from .tensor import Tensor

# name -> PyTorch's names of its first two arguments (both must be tensors)
_TENSOR_ARGS = {
    "maximum": ("input", "other"), "minimum": ("input", "other"), "fmax": ("input", "other"),
    "fmin": ("input", "other"), "logical_and": ("input", "other"),
    "logical_or": ("input", "other"), "logical_xor": ("input", "other"),
    "hypot": ("input", "other"), "logaddexp": ("input", "other"),
    "logaddexp2": ("input", "other"), "ldexp": ("input", "other"), "dist": ("input", "other"),
    "isclose": ("input", "other"), "allclose": ("input", "other"), "equal": ("input", "other"),
    "heaviside": ("input", "values"), "outer": ("input", "vec2"), "dot": ("input", "tensor"),
    "kron": ("input", "other"), "cross": ("input", "other"), "cdist": ("x1", "x2"),
    "nextafter": ("input", "other"), "igamma": ("input", "other"),
    "igammac": ("input", "other"), "gcd": ("input", "other"), "lcm": ("input", "other"),
}


def need_tensor(v, name, arg, position):
    """PyTorch's TypeError where a tensor argument is not one (a list: not an
    AttributeError from llgrad's code)."""
    if not isinstance(v, Tensor):
        raise TypeError(f"{name}(): argument '{arg}' (position {position}) must be Tensor, not "
                        f"{type(v).__name__}")


def _check(name, arg, position, v):
    need_tensor(v, name, arg, position)


def _function(fn, name, names):
    @functools.wraps(fn)
    def f(*args, **kwargs):
        for i, arg in enumerate(names):
            if i < len(args):
                _check(name, arg, i + 1, args[i])
            elif arg in kwargs:
                _check(name, arg, i + 1, kwargs[arg])
        return fn(*args, **kwargs)
    return f


def _method(fn, name, arg):
    @functools.wraps(fn)
    def m(self, *args, **kwargs):
        if args:
            _check(name, arg, 1, args[0])
        elif arg in kwargs:
            _check(name, arg, 1, kwargs[arg])
        return fn(self, *args, **kwargs)
    return m


def wrap_tensor_args():
    for name, names in _TENSOR_ARGS.items():
        fn = getattr(functions, name, None)
        if fn is not None:
            functions.export(_function(fn, name, names), name)
        for n in (name, name + "_"):       # (x.hypot_(2): "hypot_(): argument ...")
            meth = Tensor.__dict__.get(n)
            if meth is not None:
                setattr(Tensor, n, _method(meth, n, names[1]))
