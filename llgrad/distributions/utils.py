"""torch.distributions.utils: broadcasting parameters, logits <-> probs, clamping, and the
lazy_property the distributions compute their other parametrisation with."""
from functools import update_wrapper
from numbers import Number

from ..nn import functional as F
from ..runtime.creation import arange, empty, tensor
from ..runtime.dtype_info import finfo
from ..runtime.dtypes import get_default_dtype
from ..runtime.functions import broadcast_tensors, log, log1p, sigmoid
from ..runtime.grad_mode import enable_grad
from ..runtime.tensor import Tensor

__all__ = ["broadcast_all", "logits_to_probs", "clamp_probs", "probs_to_logits",
           "lazy_property", "tril_matrix_to_vec", "vec_to_tril_matrix"]

euler_constant = 0.57721566490153286060     # the Euler-Mascheroni constant


def broadcast_all(*values):
    """The values broadcast to one shape; numbers become tensors of the first tensor's
    dtype (the default dtype when all are numbers)."""
    if not all(isinstance(v, (Tensor, Number)) for v in values):
        raise ValueError("Input arguments must all be instances of Number, torch.Tensor or "
                         "objects implementing __torch_function__.")
    if not all(isinstance(v, Tensor) for v in values):
        dtype = next((v.dtype for v in values if isinstance(v, Tensor)), get_default_dtype())
        values = [v if isinstance(v, Tensor) else tensor(v, dtype=dtype) for v in values]
    return broadcast_tensors(*values)


def _standard_normal(shape, dtype, device=None):
    return empty(shape, dtype=dtype).normal_()


def _sum_rightmost(value, dim):
    """value summed over its dim rightmost dimensions."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:-dim]) + (-1,)).sum(-1)


def logits_to_probs(logits, is_binary=False):
    """Probabilities of logits: sigmoid (binary) or softmax over the last dim."""
    if is_binary:
        return sigmoid(logits)
    return F.softmax(logits, dim=-1)


def clamp_probs(probs):
    """probs clamped into [eps, 1 - eps] (eps of probs' dtype)."""
    eps = finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    """Logits of probabilities: log-odds (binary) or log of the clamped probabilities."""
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return log(ps_clamped) - log1p(-ps_clamped)
    return log(ps_clamped)


class lazy_property:
    """A property computed (with grad mode on) on first read, then kept as an attribute."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def _tril_mask(n, diag):
    rows = arange(n)
    return rows < rows.view(-1, 1) + (diag + 1)


def tril_matrix_to_vec(mat, diag=0):
    """The entries of mat's (batched) lower triangle from diagonal diag, row by row."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    return mat[..., _tril_mask(n, diag)]


def vec_to_tril_matrix(vec, diag=0):
    """The inverse of tril_matrix_to_vec: a (batched) square matrix, zero elsewhere."""
    n = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * vec.shape[-1]
                            + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if round(n) - n > finfo(vec.dtype).eps:
        raise ValueError(f"The size of last dimension is {vec.shape[-1]} which cannot be "
                         "expressed as the lower triangular part of a square D x D matrix.")
    n = round(n)
    mat = vec.new_zeros(tuple(vec.shape[:-1]) + (n, n))
    mat[..., _tril_mask(n, diag)] = vec
    return mat
