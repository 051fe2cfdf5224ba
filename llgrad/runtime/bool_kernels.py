"""PyTorch's errors for the ops it has no bool kernel for, where NumPy computes one (floor
of a bool tensor is a bool there, round a float16, relu an int64): checked on the first
argument before the op, on the Tensor method, its in-place form and the llgrad function of
that name (trace and searchsorted check their own, being called inside llgrad too)."""
import functools

from . import dtypes, functions
from .tensor import Tensor


def _missing(kernel):
    return NotImplementedError, f"\"{kernel}\" not implemented for 'Bool'"


_ERRORS = {"floor": _missing("floor_vml_cpu"), "ceil": _missing("ceil_vml_cpu"),
           "round": _missing("round_vml_cpu"), "trunc": _missing("trunc_vml_cpu"),
           "fix": _missing("trunc_vml_cpu"),
           "relu": (RuntimeError, "Boolean inputs not supported for relu"),
           "topk": (RuntimeError, "topk does not support bool dtypes on CPU")}


def _checked(fn, error):
    kind, message = error

    @functools.wraps(fn)
    def checked(x, *args, **kwargs):
        if isinstance(x, Tensor) and x._dtype is dtypes.bool_:
            raise kind(message)
        return fn(x, *args, **kwargs)
    return checked


def _install():
    for name, error in _ERRORS.items():
        for n in (name, name + "_"):
            method = Tensor.__dict__.get(n)
            if method is not None:
                setattr(Tensor, n, _checked(method, error))
        fn = functions.__dict__.get(name)
        if fn is not None and fn.__module__ != functions.__name__:   # (not a method's)
            functions.export(_checked(fn, error), name)


_install()
