"""Gradient clipping with PyTorch's semantics (torch.nn.utils.clip_grad): the total norm
is the norm of the per-tensor norms; gradients are scaled in place by
clamp(max_norm / (total_norm + 1e-6), max=1), with no branch on the norm's value, so a
compiled training step that clips does not re-trace when clipping starts or stops.
`foreach` is accepted and ignored (the single-tensor path)."""
import functools
import math
import types
import warnings

import numpy as np

from ...ir import OPS
from ...runtime import dispatch, dtypes, trace_state
from ...runtime.creation import tensor
from ...runtime.functions import stack
from ...runtime.grad_mode import no_grad
from ...runtime.linalg import vector_norm as linalg_vector_norm
from ...runtime.meta_tensor import is_meta
from ...runtime.saved_tensor import user_position
from ...runtime.tensor import Tensor

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_",
           "get_total_norm"]


def _no_grad(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with no_grad():
            return fn(*args, **kwargs)
    return wrapper


_HALVES = (dtypes.float16, dtypes.bfloat16)


def _vector_norm(t, p):
    """torch.linalg.vector_norm(t, p) of a tensor flattened (a 0-d result)."""
    if t.dtype in _HALVES:      # (accumulated in float32, as PyTorch's: |g|^2 in float16
        return linalg_vector_norm(t, p)     # overflows past 255, which zeroed the grads)
    a = t.abs()
    if p == math.inf:
        return a.max()
    if p == -math.inf:
        return a.min()
    if p == 0:
        return (t != 0).sum().to(t.dtype)
    if p == 1:
        return a.sum()
    if p == 2:
        return (a * a).sum().sqrt()
    return (a ** p).sum() ** (1.0 / p)


@_no_grad
def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of the norms of `tensors` (a tensor or an iterable of them): one 0-d tensor.
    error_if_nonfinite=True raises when it is nan or inf."""
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    norm_type = float(norm_type)
    if len(tensors) == 0:
        return tensor(0.0)
    norms = _plain_l2_norms(tensors) if norm_type == 2.0 else None
    if norms is None:
        norms = [_vector_norm(g, norm_type) for g in tensors]
    total_norm = _vector_norm(stack(norms), norm_type)
    if error_if_nonfinite and not bool(total_norm.isfinite()):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the "
            "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return total_norm


@_no_grad
def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the parameters' gradients in place by clamp(max_norm / (total_norm + 1e-6),
    max=1)."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    grads = [p.grad for p in parameters if p.grad is not None]
    max_norm = float(max_norm)
    if len(grads) == 0:
        return
    clip_coef = max_norm / (total_norm + 1e-6)
    clip_coef_clamped = clip_coef.clamp(max=1.0)
    if _plain(grads) and _scale_plain(grads, clip_coef_clamped):
        return
    for g in grads:
        g.mul_(clip_coef_clamped)


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_tstate = trace_state.state


def _plain(tensors):
    """Whether every tensor is a plain float32/float64 CPU tensor and nothing records,
    traces, batches or differentiates forward the ops: then the ops' NumPy implementations
    run on the arrays directly, the same calls the dispatcher makes for them one op at a time
    (each op's dispatch cost ~5-10 us, five ops per gradient: a model's parameters' worth
    cost more than the arithmetic)."""
    if _tstate.tracer is not None or _tstate.func_transforms or dispatch.batching is not None \
            or dispatch.forward_ad is not None or dispatch.profiler is not None:
        return False
    for t in tensors:
        if type(t) is not Tensor or t._data.dtype not in _FLOATS or is_meta(t):
            return False
    return True


def _plain_l2_norms(tensors):
    """[_vector_norm(t, 2) for t in tensors] (0-d tensors of the same values: abs, a * a,
    sum, sqrt by the same implementations), or None where _plain refuses them or a tensor is
    not C-contiguous (the dispatcher lays an intermediate out as PyTorch would, and a sum's
    order follows the layout)."""
    if not _plain(tensors) or not all(t._data.flags.c_contiguous for t in tensors):
        return None
    absolute, mul, total, sqrt = _L2_OPS
    norms = []
    with np.errstate(all="ignore"):     # (PyTorch's silence, as the dispatcher's filter)
        for t in tensors:
            a = absolute.impl(t._data)
            norms.append(Tensor._from_array(
                sqrt.impl(total.impl(mul.impl(a, a), dim=None, keepdim=False))))
    return norms


_L2_OPS = (OPS["abs"], OPS["mul"], OPS["sum"], OPS["sqrt"])


def _scale_plain(grads, coef):
    """g.mul_(coef) for each of grads on the arrays (the mul op's implementation, written
    in place, the version bumped as mul_ does) where each is its own storage's only tensor,
    wants no gradient and has coef's dtype; False (nothing written) otherwise."""
    c = coef._data
    for g in grads:
        a = g._data
        if g._base is not None or g._requires_grad or g._grad_fn is not None or \
                a.dtype != c.dtype or not a.flags.writeable or type(coef) is not Tensor:
            return False
    mul = OPS["mul"]
    where = user_position()
    with np.errstate(all="ignore"):
        for g in grads:
            g._data[...] = mul.impl(g._data, c)
            g._storage.version += 1
            g._storage.write_loc = where
    return True


@_no_grad
def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Clip the gradients of `parameters` (a tensor or an iterable of tensors) so that
    their total norm of order norm_type (inf included) is at most max_norm; returns the
    total norm before clipping (a 0-d tensor)."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        is_generator = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)
        if is_generator and len(parameters) == 0:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will "
                          "occur.", stacklevel=3)
    grads = [p.grad for p in parameters if p.grad is not None]
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                   foreach=None):
    """Deprecated alias of clip_grad_norm_ (with PyTorch's FutureWarning)."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


@_no_grad
def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp the gradients of `parameters` in place to [-clip_value, clip_value]."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    clip_value = float(clip_value)
    for p in parameters:
        if p.grad is not None:
            p.grad.clamp_(min=-clip_value, max=clip_value)
