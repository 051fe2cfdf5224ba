"""Random ops as pure functions of an explicit generator state.

The state is PyTorch's CPU generator as the int64 array of torch_random.py, so a traced
`randn` is `%values, %state1 = rng_normal %state0`: given the eager generator's state at the
start, the interpreter draws exactly the numbers eager mode drew (PyTorch's numbers)."""
import numpy as np

from . import torch_gamma, torch_random
from .optable import defop

STATE_SHAPE = (torch_random.WORDS,)


def _uniform(state, shape, dtype):
    new = np.array(state, dtype=np.int64, copy=True)
    return torch_random.uniform(new, int(np.prod(shape, dtype=np.int64)), dtype).reshape(shape), new


def _normal(state, shape, dtype, fill=True):
    """fill=False: ATen's per-element Box-Muller (log_normal_, a non-contiguous normal_)."""
    new = np.array(state, dtype=np.int64, copy=True)
    n = int(np.prod(shape, dtype=np.int64))
    return torch_random.normal(new, n, dtype, contiguous=fill).reshape(shape), new


def _integers(state, shape, dtype="int64", of="int64", low=0, high=1, full=False):
    """Tensor.random_'s integers (int64) for a tensor of dtype `of` (torch_random.integers)."""
    new = np.array(state, dtype=np.int64, copy=True)
    n = int(np.prod(shape, dtype=np.int64))
    return torch_random.integers(new, n, of, low, high, full).reshape(shape), new


def _randperm(state, shape, dtype="int64"):
    """torch.randperm(shape[0]) (torch_random.randperm)."""
    new = np.array(state, dtype=np.int64, copy=True)
    return torch_random.randperm(new, int(shape[0])), new


def _rrelu_noise(state, x, lower=1.0 / 8, upper=1.0 / 3, shape=None, dtype=None):
    """Training-mode rrelu's slopes for x (torch_random.rrelu_noise): the draws' count
    depends on x's values, so the op reads x (shape and dtype: the tracer's, x's own)."""
    new = np.array(state, dtype=np.int64, copy=True)
    return torch_random.rrelu_noise(new, np.asarray(x), lower, upper), new


def _standard_gamma(state, alpha, shape=None, dtype=None):
    """torch._standard_gamma(alpha) (torch_gamma.py): rejection sampling, so the draws'
    count depends on alpha's values, which the op reads."""
    new = np.array(state, dtype=np.int64, copy=True)
    return torch_gamma.standard_gamma(new, np.asarray(alpha)), new


def _dirichlet(state, alpha, shape=None, dtype=None):
    """torch._sample_dirichlet(alpha) (torch_gamma.py)."""
    new = np.array(state, dtype=np.int64, copy=True)
    return torch_gamma.dirichlet(new, np.asarray(alpha)), new


def _poisson(state, rates, shape=None, dtype=None):
    """torch.poisson(rates) (torch_gamma.py)."""
    new = np.array(state, dtype=np.int64, copy=True)
    return torch_gamma.poisson(new, np.asarray(rates)), new


def _binomial(state, count, prob, shape=None, dtype=None):
    """torch.binomial(count, prob) (torch_gamma.py)."""
    new = np.array(state, dtype=np.int64, copy=True)
    n, p = np.broadcast_arrays(np.asarray(count), np.asarray(prob))
    return torch_gamma.binomial(new, n, p), new


# The eager creation functions (rand, randn) draw with the same functions, so both agree.
defop("rng_normal", _normal, args=("state",), nout=2, kind="random")
defop("rng_uniform", _uniform, args=("state",), nout=2, kind="random")
defop("rng_integers", _integers, args=("state",), nout=2, kind="random")
defop("rng_randperm", _randperm, args=("state",), nout=2, kind="random")
# (no loop of its own: compiled code calls the implementation back, codegen host_call.py)
defop("rng_rrelu_noise", _rrelu_noise, args=("state", "self"), nout=2, kind="random",
      native_host=True)
defop("rng_standard_gamma", _standard_gamma, args=("state", "self"), nout=2, kind="random",
      native_host=True)
defop("rng_dirichlet", _dirichlet, args=("state", "self"), nout=2, kind="random",
      native_host=True)
defop("rng_poisson", _poisson, args=("state", "self"), nout=2, kind="random",
      native_host=True)
defop("rng_binomial", _binomial, args=("state", "self", "prob"), nout=2, kind="random",
      native_host=True)
