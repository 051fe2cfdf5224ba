"""F.linear, below nn.functional so that the attention functions use it too."""
from ..runtime.tensor import Tensor
from ..runtime.autocast_cast import autocast_lower


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
        # with a 1-D bias is flattened to a matrix for addmm and viewed back
        nd = input._data.ndim
        if nd == 2:
            return bias.addmm(input, weight.t())
        if nd and bias._data.ndim == 1 and input.is_contiguous():
            shape = input._data.shape
            n = 1
            for k in shape[:-1]:
                n *= k
            out = bias.addmm(input.reshape(n, shape[-1]), weight.t())
            return out.view(shape[:-1] + (out._data.shape[1],))
    out = input.matmul(weight.t())
    return out + bias if bias is not None else out
