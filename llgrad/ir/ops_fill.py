"""Random fills: uniform_, normal_, bernoulli_ and bernoulli, as elementwise ops of draws.

The draws themselves come from llgrad's generator through the rng ops (ops_random.py: a
traced draw is `rng_uniform` / `rng_normal` of the generator state, so compiled code replays
eager's numbers); these ops map them to the distribution asked for, in the result's dtype:
uniform_ is low + (high - low) * u, normal_ mean + std * n, bernoulli u < p. They exist so
that the results have PyTorch's backward nodes (UniformBackward0, ...): the gradient of
what was overwritten, and of the probabilities, is zero."""
import numpy as np

from .fused_madd import fma, fma64
from .optable import defop

_FUSED = (np.float32, np.float64)


def _is_tensor(x):
    return hasattr(x, "_dtype")


def _zeros(c, g):
    return (g.new_zeros(g.shape),) + (None,) * (c.ninputs - 1)


def _uniform(x, u, low=0.0, high=1.0):
    dt = x.dtype.type
    if dt in _FUSED:        # (ATen: u * (high - low) + low, fused)
        return np.asarray(fma(u, dt(high) - dt(low), dt(low), x.dtype), dtype=x.dtype)
    if dt is np.float16 and u.dtype == np.float32:
        # (a float32 draw: mapped in float32 and rounded once; a value rounded up to high
        # becomes low, as ATen keeps the range [low, high))
        lo, hi = np.float32(low), np.float32(high)
        v = fma(u, hi - lo, lo, np.float16)
        return np.where(v == np.float16(high), np.float16(low), v).astype(np.float16)
    return np.asarray(dt(low) + (dt(high) - dt(low)) * u.astype(x.dtype), dtype=x.dtype)


def _normal(x, n, mean=0.0, std=1.0):
    """n * std + mean, fused as ATen's: in float64 for float64 draws (its serial kernel's
    normal_distribution<double>, then rounded), else in the result's dtype."""
    dt = x.dtype.type
    if dt in _FUSED:
        if n.dtype == np.float64:
            return np.asarray(fma64(n, std, mean), dtype=x.dtype)
        return np.asarray(fma(n, std, mean, x.dtype), dtype=x.dtype)
    if n.dtype == np.float64:   # (float16 from a double: through float, c10::Half's way)
        return fma64(n, std, mean).astype(np.float32).astype(x.dtype)
    if n.dtype == np.float32:   # (float16's fill: in float32, rounded once)
        return fma(n, np.float32(std), np.float32(mean), np.float32).astype(x.dtype)
    return np.asarray(dt(mean) + dt(std) * n.astype(x.dtype), dtype=x.dtype)


def _bernoulli_p(x, p, u):
    """x's shape and dtype, 1 where the draw u is below p (a number or a tensor)."""
    return np.broadcast_to(np.less(u, p), x.shape).astype(x.dtype)


defop("uniform", _uniform, args=("self", "u"), nondiff=("u",), vjp=_zeros,
      grad_fn="UniformBackward0", kind="elementwise")
defop("normal", _normal, args=("self", "noise"), nondiff=("noise",), vjp=_zeros,
      grad_fn="NormalBackward0", kind="elementwise")
# bernoulli_(p) in place: BernoulliBackward2 for a number p, BernoulliBackward1 for a tensor
defop("bernoulli_p", _bernoulli_p, args=("self", "p", "u"), nondiff=("u",), kind="elementwise",
      vjp=lambda c, g: (g.new_zeros(g.shape), g.new_zeros(c.shape(1)) if c.needs(1) else None,
                        None),
      grad_fn=lambda ins, at: "BernoulliBackward1" if _is_tensor(ins[1]) else "BernoulliBackward2")
# bernoulli(input): draws with input's probabilities, in its dtype
defop("bernoulli", lambda p, u: np.less(u, p).astype(p.dtype), args=("self", "u"),
      nondiff=("u",), vjp=_zeros, grad_fn="BernoulliBackward0", kind="elementwise")
