"""Random fills: uniform_, normal_, bernoulli_ and bernoulli, as elementwise ops of draws.

The draws themselves come from llgrad's generator through the rng ops (ops_random.py: a
traced draw is `rng_uniform` / `rng_normal` of the generator state, so compiled code replays
eager's numbers); these ops map them to the distribution asked for, in the result's dtype:
uniform_ is low + (high - low) * u, normal_ mean + std * n, bernoulli u < p. They exist so
that the results have PyTorch's backward nodes (UniformBackward0, ...): the gradient of
what was overwritten, and of the probabilities, is zero."""
import numpy as np

from .optable import defop


def _is_tensor(x):
    return hasattr(x, "_dtype")


def _zeros(c, g):
    return (g.new_zeros(g.shape),) + (None,) * (c.ninputs - 1)


def _uniform(x, u, low=0.0, high=1.0):
    dt = x.dtype.type
    return np.asarray(dt(low) + (dt(high) - dt(low)) * u.astype(x.dtype), dtype=x.dtype)


def _normal(x, n, mean=0.0, std=1.0):
    dt = x.dtype.type
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
