"""The Tensor methods and llgrad functions of a composition written in Python: attach (one
function as llgrad.<name> and Tensor.<name>) and make_inplace (its in-place form, with
PyTorch's checks before the write)."""
from .dispatch import scalar_type_name as tname
from .dtypes import result_type
from .functions import export
from .inplace import check_shape_into
from .node_names import rename_copy
from .tensor import Tensor


def _can_cast(src, dst):
    # PyTorch's canCast: no floating -> integral, no non-bool -> bool
    return not (src._cat > dst._cat)


def _check_cast(dt, out, name=None):
    if not _can_cast(dt, out):
        # (ldexp_, a composite in PyTorch, names itself where the others name the dtype)
        what = "ldexp" if name == "ldexp_" else f"result type {tname(dt)}"
        raise RuntimeError(f"{what} can't be cast to the desired output type {tname(out)}")


# the in-place forms whose operand's promotion PyTorch checks before it computes
_CAST_FIRST = frozenset(("fmod_", "remainder_", "hypot_", "igamma_", "igammac_",
                         "nextafter_"))
# the elementwise binary ones, whose operand must broadcast into self before anything else
_BINARY = _CAST_FIRST | {"logical_and_", "logical_or_", "logical_xor_", "copysign_", "xlogy_"}


def make_inplace(fn, name):
    """The in-place method of fn: fn's result written into self (copy_), as PyTorch's
    x.<name>_(): same dtype rules (a float result cannot go into an integer tensor), a
    result that broadcasts beyond self raises, the write bumps self's version, and autograd
    sees fn's ops then the copy (fn runs on a clone when self requires grad, so the tensors
    its ops saved are not the ones the write changes)."""
    def method(self, *args, **kwargs):
        if name in _BINARY and args:
            check_shape_into(self, args[0])
        if name in _CAST_FIRST and args:    # (checked before the kernel's ZeroDivisionError)
            _check_cast(result_type(self, args[0]), self._dtype)
        src = self.clone() if self.requires_grad else self
        out = fn(src, *args, **kwargs)
        _check_cast(out._dtype, self._dtype, name)
        if tuple(out._data.shape) != tuple(self._data.shape):
            raise RuntimeError(f"output with shape {list(self._data.shape)} doesn't match the "
                               f"broadcast shape {list(out._data.shape)}")
        return rename_copy(self.copy_(out), out)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"In-place {name.rstrip('_')}, as torch.Tensor.{name}."
    return method


def attach(fn, *names, function=True, method=True, inplace_name=None):
    """fn as llgrad.<name> (function), Tensor.<name> (method) for its name and aliases, and
    an in-place Tensor method (and llgrad function, as PyTorch has them) under inplace_name."""
    all_names = (fn.__name__,) + names
    if function:
        export(fn, *names)
    if method:
        for n in all_names:
            setattr(Tensor, n, fn)
    if inplace_name:
        for n in (inplace_name,) if isinstance(inplace_name, str) else inplace_name:
            setattr(Tensor, n, make_inplace(fn, n))
    return fn
