"""More random fills, as elementwise maps of uniform or normal draws (ops_fill.py's way: the
draws come from the generator through the rng ops, so compiled code replays eager's
numbers; these ops give the results PyTorch's backward nodes, whose gradients are zero):

  random_   from + floor(u * (to - from)), u in [0, 1) drawn in float64  (RandomBackward0/1/2)
  exponential_(lambd)        (-1 / lambd) * log1p(-u)                      (ExponentialBackward0)
  geometric_(p)              ceil(log(u) / log1p(-p))                      (GeometricBackward0)
  log_normal_(mean, std)     exp(n * std + mean)                           (LogNormalBackward0)
  cauchy_(median, sigma)     median + sigma * tan(pi * (u - 1/2))          (CauchyBackward0)
  normal(mean, std)          mean + std * n, mean and std tensors or numbers (NormalBackward1-3)

u is drawn in float64 and the map computed in float64 as ATen's serial kernels do (C's libm,
the multiply-adds fused), then rounded to the result's dtype (u never reaches 1: no
infinite exponential or cauchy draw)."""
import math

import numpy as np

from .fused_madd import fma64
from .optable import defop


def _is_tensor(x):
    return hasattr(x, "_dtype")


def _zeros(c, g):
    return (g.new_zeros(g.shape),) + (None,) * (c.ninputs - 1)


def _f64(u):
    return np.asarray(u, np.float64)


def _random(x, k, low=0, high=None, form=None):
    # k: the integers drawn (PyTorch's: raw draws mod the range, torch_random.randint);
    # low/high/form name the call for its backward node
    return np.asarray(k).astype(x.dtype)


def _random_node(inputs, attrs):
    # PyTorch: random_() RandomBackward2, random_(to) RandomBackward1, random_(from, to) 0
    return {"default": "RandomBackward2", "to": "RandomBackward1"}.get(attrs.get("form"),
                                                                    "RandomBackward0")


def _libm(name, a):
    """C's libm function `name` (through Python's math) of each float64 of a: ATen's serial
    kernels call libm, NumPy's SIMD loops differ from it by an ulp in a few % of values."""
    fn, special = getattr(math, name), getattr(np, name)

    def safe(v):
        try:
            return fn(v)
        except (OverflowError, ValueError):     # (inf, -inf, NaN: NumPy's are C's)
            with np.errstate(all="ignore"):
                return float(special(np.float64(v)))
    a = _f64(a)
    values = a.ravel().tolist()
    try:
        out = list(map(fn, values))
    except (OverflowError, ValueError):             # (rare: element by element)
        out = list(map(safe, values))
    return np.array(out, np.float64).reshape(a.shape)


def _exact(name, a, x):
    """libm's `name` of a where the result is float64; for float32 / float16 results
    NumPy's (in float64: an ulp there moves the rounded result once in ~2^29 values), which
    is ~50x faster than libm element by element (multinomial's exponential draws)."""
    if x.dtype == np.float64:
        return _libm(name, a)
    with np.errstate(all="ignore"):
        return getattr(np, name)(_f64(a))


def _to(r, x):
    # ATen's static_cast<scalar_t>(double): a Half is made from a float (rounded twice)
    if x.dtype == np.float16:
        return r.astype(np.float32).astype(np.float16)
    return r.astype(x.dtype)


def _exponential(x, u, lambd=1.0):
    # ATen (CPU): static_cast<double>(-1.0) / lambda * log1p(-u)
    return _to((-1.0 / lambd) * _exact("log1p", -_f64(u), x), x)


def _geometric(x, u, p=0.5):
    # ATen: ceil(log(u) / log1p(-p)) of a double uniform u (u = 0, once in 2^53: inf)
    return np.ceil(_exact("log", u, x) / math.log1p(-p)).astype(x.dtype)


def _log_normal(x, n, mean=1.0, std=2.0):
    # ATen: exp(n * std + mean), the multiply-add contracted into one FMA
    return _to(_exact("exp", fma64(_f64(n), std, mean), x), x)


def _cauchy(x, u, median=0.0, sigma=1.0):
    # ATen: median + sigma * tan(pi * (u - 0.5)) in double, the multiply-add fused
    return _to(fma64(sigma, _exact("tan", math.pi * (_f64(u) - 0.5), x), median), x)


defop("random_", _random, args=("self", "k"), nondiff=("k",), vjp=_zeros, grad_fn=_random_node,
      kind="elementwise")
for _name, _impl, _node in (("exponential", _exponential, "ExponentialBackward0"),
                            ("geometric", _geometric, "GeometricBackward0"),
                            ("log_normal", _log_normal, "LogNormalBackward0"),
                            ("cauchy", _cauchy, "CauchyBackward0")):
    defop(_name, _impl, args=("self", "u"), nondiff=("u",), vjp=_zeros, grad_fn=_node,
          kind="elementwise", cost=4)


def _normal_tensor(mean, std, noise):
    dt = np.result_type(*[a for a in (mean, std) if isinstance(a, np.ndarray)])
    return np.asarray(np.add(mean, np.multiply(std, noise)), dtype=dt)


def _normal_tensor_node(inputs, attrs):
    m, s = (_is_tensor(x) for x in inputs[:2])
    return "NormalBackward3" if m and s else "NormalBackward1" if m else "NormalBackward2"


def _normal_tensor_vjp(c, g):
    return tuple(g.new_zeros(c.shape(i)) if c.needs(i) else None for i in (0, 1)) + (None,)


# torch.normal(mean, std) with a tensor mean and/or std (the noise: standard normal draws of
# the broadcast shape, in its dtype): the gradients are zero, as PyTorch's
defop("normal_tensor", _normal_tensor, args=("mean", "std", "noise"), nondiff=("noise",),
      vjp=_normal_tensor_vjp, grad_fn=_normal_tensor_node, kind="elementwise")
