"""PyTorch's out= keyword of its functions (torch.add(a, b, out=c), torch.max(x, 1,
out=(values, indices))): the result is computed as without it, then written into out
(resized when its shape differs, with PyTorch's warning unless out is empty), and out is
returned. PyTorch's checks come first: no out= while autograd records (an argument requires
grad), and a result dtype out can hold (a factory's values take out's dtype). Each
llgrad.<name> function without an out parameter of its own is wrapped once, after every
module has defined them."""
import functools
import inspect
import sys
import warnings

from . import creation, functions, grad_mode
from .dispatch import scalar_type_name as tname
from .dtypes import C_NAMES
from .functions_math import _can_cast
from .numpy_names import param_names
from .saved_tensor import _internal
from .tensor import Tensor

# the creation functions PyTorch gives out= (their values take out's dtype)
_FACTORIES = ("zeros", "ones", "empty", "full", "arange", "linspace", "eye", "rand", "randn",
              "randint", "randperm")


def _requires_grad(args, kwargs):
    for a in list(args) + list(kwargs.values()):
        for t in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(t, Tensor) and t.requires_grad:
                return True
    return False


def _users_level():
    """The stacklevel, for a warnings.warn in _write, of the user's line that called the
    function (PyTorch's warnings name it; once-per-line filters count by it)."""
    f, level = sys._getframe(2), 2
    while f is not None and _internal[f.f_code.co_filename]:
        f, level = f.f_back, level + 1
    return level


# reductions PyTorch computes in out's dtype when no dtype= is given (sum(x, 0, out=int32))
_IN_OUT_DTYPE = ("sum", "prod", "cumsum", "cumprod")
# functions whose out must have the result's dtype itself, and PyTorch's words when not
_EXACT = {n: "Expected out tensor to have dtype {r}, but got {o} instead" for n in (
    "argmax", "argmin", "max", "min", "norm", "sum", "prod", "cumsum", "cumprod")}
_EXACT.update({n: "Expected the dtype for input and out to match, but got {R} for input's "
                  "dtype and {O} for out's dtype." for n in ("amax", "amin")})


def _check_exact(name, r, out):
    if name in _EXACT and r._dtype is not out._dtype:
        raise RuntimeError(_EXACT[name].format(
            r=C_NAMES[r._dtype.name], o=C_NAMES[out._dtype.name], R=tname(r._dtype),
            O=tname(out._dtype)))


def _write(out, r, factory, name=None):
    if isinstance(out, (tuple, list)):
        for o, x in zip(out, r):
            _write(o, x, factory, name)
        return out
    _check_exact(name, r, out)
    if not factory and not _can_cast(r._dtype, out._dtype):
        raise RuntimeError(f"result type {tname(r._dtype)} can't be cast to the desired output "
                           f"type {tname(out._dtype)}")
    shape = tuple(r._data.shape)
    if tuple(out._data.shape) != shape:
        if out._data.size:
            warnings.warn(f"An output with one or more elements was resized since it had shape "
                          f"{list(out._data.shape)}, which does not match the required output "
                          f"shape {list(shape)}. This behavior is deprecated, and in a future "
                          "PyTorch release outputs will not be resized unless they have zero "
                          "elements. You can explicitly reuse an out tensor t by resizing it, "
                          "inplace, to zero elements with t.resize_(0).", UserWarning,
                          stacklevel=_users_level())
        out.resize_(shape)
    with grad_mode.no_grad():
        out.copy_(r)
    return out


def _wrap(fn, name, factory):
    @functools.wraps(fn)
    def f(*args, **kwargs):
        if not kwargs or kwargs.get("out") is None:
            kwargs.pop("out", None)
            return fn(*args, **kwargs)
        out = kwargs.pop("out")
        if grad_mode.state.grad_enabled and _requires_grad(args, kwargs):
            raise RuntimeError(f"{name}(): functions with out=... arguments don't support "
                               "automatic differentiation, but one of the arguments requires "
                               "grad.")
        if (factory or name in _IN_OUT_DTYPE) and kwargs.get("dtype") is None and \
                isinstance(out, Tensor):
            kwargs["dtype"] = out.dtype
        return _write(out, fn(*args, **kwargs), factory, name)
    return f


def _takes_out(fn):
    return "out" in param_names(fn)


def wrap_out_args():
    done = {}           # (an aliased function gets one wrapper under all its names)
    for name in list(functions.__all__):
        fn = getattr(functions, name, None)
        if not inspect.isfunction(fn) or _takes_out(fn):
            continue
        if id(fn) not in done:
            done[id(fn)] = _wrap(fn, name, False)
        functions.export(done[id(fn)], name)
    for name in _FACTORIES:
        fn = getattr(creation, name)
        if not _takes_out(fn):
            setattr(creation, name, _wrap(fn, name, True))
