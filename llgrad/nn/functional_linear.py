"""F.linear, below nn.functional so that the attention functions use it too."""
from ..ir import OPS
from ..runtime.tensor import Tensor
from ..runtime.autocast_cast import autocast_lower, state as _autocast
from ..runtime.dispatch import call

_T, _ADDMM = OPS["t"], OPS["addmm"]
_tensor_t, _tensor_addmm = Tensor.t, Tensor.addmm


def _check(arg, position, v):
    # PyTorch's argument parser rejects a non-tensor (a None weight, a list) before the op
    if not isinstance(v, Tensor):
        raise TypeError(f"linear(): argument '{arg}' (position {position}) must be Tensor, not "
                        f"{type(v).__name__}")


def linear(input, weight, bias=None):
    """As torch.nn.functional.linear (PyTorch's fused addmm path, so the backward nodes are
    PyTorch's)."""
    input, weight, bias = autocast_lower(input, weight, bias)
    _check("input", 1, input)
    _check("weight", 2, weight)
    if bias is not None:
        _check("bias", 3, bias)
    if not input._data.ndim or not weight._data.ndim:
        raise RuntimeError("both arguments to linear need to be at least 1D, but they are "
                           f"{input._data.ndim}D and {weight._data.ndim}D")
    if bias is not None:
        # PyTorch's fused paths: addmm for a matrix; a contiguous input of another rank
        # with a contiguous 1-D bias is flattened to a matrix for addmm and viewed back
        nd = input._data.ndim
        if nd == 2:
            return _addmm_2d(input, weight, bias)
        if nd and bias._data.ndim == 1 and input.is_contiguous() and bias.is_contiguous():
            shape = input._data.shape
            n = 1
            for k in shape[:-1]:
                n *= k
            out = _addmm_2d(input.reshape(n, shape[-1]), weight, bias)
            return out.view(shape[:-1] + (out._data.shape[1],))
    out = input.matmul(weight.t())
    return out + bias if bias is not None else out


def _addmm_2d(input, weight, bias):
    """bias.addmm(input, weight.t()): the same two ops, straight to the dispatcher where
    none of addmm's checks can fail (every Linear's forward: ~3 us of per-call checks and
    method layers); any other case, and a subclass's own t or addmm, by the methods."""
    w, b = weight._data, bias._data
    dt = input._dtype
    if _autocast.dtype is None and w.ndim == 2 and b.ndim == 1 and \
            weight._dtype is dt and bias._dtype is dt and dt._cat >= 2 and \
            input._data.shape[1] == w.shape[1] and b.shape[0] in (w.shape[0], 1) and \
            type(weight).t is _tensor_t and type(bias).addmm is _tensor_addmm:
        return call(_ADDMM, (bias, input, call(_T, (weight,), {})), {"beta": 1, "alpha": 1})
    return bias.addmm(input, weight.t())
