"""Random fills and sampling: uniform_, normal_, bernoulli_, llgrad.bernoulli and
multinomial. Every draw comes from llgrad's generator through rand/randn (a traced draw is
an rng op of the generator state: a compiled function replays eager's numbers), then an op
of llgrad/ir/ops_fill.py maps it to the distribution with PyTorch's backward node.

multinomial: with replacement, each sample is the number of cumulative probabilities at or
below a uniform draw; without replacement, the top num_samples of p / E with E drawn from
Exp(1) (PyTorch's own method on the CPU): both are ops of the table, so a compiled
sampling step stays native. Value checks (negative probabilities, ...) read the data
through Tensor.__bool__, which a trace records as value guards."""
import math

from ..ir import OPS
from ..ir.optable import method_doc
from . import dtypes
from .creation import rand, randn, tensor
from .dispatch import call
from .inplace import call_inplace
from .memory_layout import like_layout
from .dispatch import scalar_type_name as tname
from .functions import _method_fn, cat
from .tensor import Tensor


_SERIAL64 = (dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16)
_HALVES = (dtypes.float16, dtypes.bfloat16)     # (their fills: float32 noise, rounded once)


def _def(name, fn):
    fn.__name__ = name
    fn.__doc__ = fn.__doc__ or method_doc(name)     # ("As torch.Tensor.<name>.")
    setattr(Tensor, name, fn)


def _float_only(self, kernel):
    if not self._dtype.is_floating_point:
        raise NotImplementedError(f'"{kernel}" not implemented for \'{tname(self._dtype)}\'')


def _in_memory_order(self, draw):
    """draw(shape) -> the draws for self's elements: ATen's serial kernels fill a tensor in
    its memory order (TensorIterator's, strides descending), not its logical one."""
    if self.is_contiguous():
        return draw(self._data.shape)
    order = sorted(range(self._data.ndim), key=lambda d: -abs(self._data.strides[d]))
    drawn = draw(tuple(self._data.shape[d] for d in order))
    return drawn.permute(*[order.index(d) for d in range(len(order))])


def uniform_(self, a=0, b=1, *, generator=None):
    """Fill with U(a, b) samples in place, as torch.Tensor.uniform_.
    PyTorch's numbers for a seed."""
    if self._dtype.is_complex:      # (ATen's: the real view, each part U(a, b))
        self._op("view_as_real").uniform_(a, b, generator=generator)
        return self
    _float_only(self, "check_uniform_bounds")
    if a > b:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={a} "
                           f"> to={b}")
    # (float16, bfloat16: ATen draws in float32 and maps it there, rounding once)
    draw = dtypes.float32 if self._dtype in _HALVES else self._dtype
    u = _in_memory_order(self, lambda s: rand(s, dtype=draw, generator=generator))
    if self._dtype is dtypes.bfloat16:      # (mapped, rounded; one rounded up to b becomes a)
        v = u._op("uniform", u, low=float(a), high=float(b)).bfloat16()
        u, a, b = v.masked_fill(v == b, a).float(), 0.0, 1.0
    return call_inplace(OPS["uniform"], self, (self, u), {"low": float(a), "high": float(b)})


def normal_(self, mean=0, std=1, *, generator=None):
    """Fill with N(mean, std^2) samples in place, as torch.Tensor.normal_.
    PyTorch's numbers for a seed."""
    if not std >= 0:        # (a NaN too, as in ATen)
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    if self._dtype.is_complex:      # (ATen's: the real view, each part of variance std^2 / 2)
        self._op("view_as_real").normal_(mean, std / math.sqrt(2), generator=generator)
        return self
    _float_only(self, "normal_kernel_cpu")
    if self._dtype in _HALVES and self.is_contiguous() and self._data.size >= 16:
        n = _half_fill_noise(self._data.shape, generator)
    elif self.is_contiguous() and (self._data.size >= 16 or self._dtype not in _SERIAL64):
        n = randn(self._data.shape, dtype=self._dtype, generator=generator)
    else:       # (ATen's per-element draws: doubles, n * std + mean rounded once)
        draw = dtypes.float64 if self._dtype in _SERIAL64 else self._dtype
        n = _in_memory_order(self, lambda s: randn(s, dtype=draw, generator=generator,
                                                   _fill=False))
    return call_inplace(OPS["normal"], self, (self, n), {"mean": float(mean), "std": float(std)})


def _half_fill_noise(shape, generator):
    """ATen's float16 (and bfloat16) normal fill, in float32 (mean and std are applied there, then the
    result rounded once): whole blocks of 16 uniforms, then a ragged end's 16 drawn afresh,
    i.e. float32 fills of the whole blocks and of the last 16."""
    n = math.prod(shape)
    full = n // 16 * 16
    a = randn(full, dtype=dtypes.float32, generator=generator)
    if n % 16:
        a = cat([a[:n - 16], randn(16, dtype=dtypes.float32, generator=generator)])
    return a.reshape(shape)


def _check_probabilities(p, what):
    if p.is_meta:           # (no values to check)
        return
    if not bool(((p >= 0) & (p <= 1)).all()):     # (a NaN fails it too, as in ATen)
        raise RuntimeError(what)


def bernoulli_(self, p=0.5, *, generator=None):
    """Fill with Bernoulli(p) draws in place, as torch.Tensor.bernoulli_.
    PyTorch's numbers for a seed."""
    if isinstance(p, Tensor):
        _float_only(p, "bernoulli_tensor_cpu_p_")
        _check_probabilities(p, "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  "
                                "(Could this error message be improved?  If so, please report "
                                "an enhancement request to PyTorch.)")
        draw = _bernoulli_draw(p._dtype)
    else:
        if not 0 <= p <= 1:
            raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
        p = float(p)
        draw = dtypes.float64           # (ATen draws a double per element for a number p)
    u = _in_memory_order(self, lambda s: rand(s, dtype=draw, generator=generator))
    return call_inplace(OPS["bernoulli_p"], self, (self, p, u), {})


def bernoulli(self, p=None, *, generator=None):
    """Draws of self's probabilities (or of one probability p), in self's shape and dtype."""
    if p is not None:
        return self.new_empty(self._data.shape).bernoulli_(p, generator=generator)
    _float_only(self, "bernoulli_tensor_cpu_p_")
    _check_probabilities(self, "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  "
                               "(Could this error message be improved?  If so, please report "
                               "an enhancement request to PyTorch.)")
    d = _bernoulli_draw(self._dtype)
    u = self.new_empty(self._data.shape, dtype=d) if self.is_meta else \
        rand(self._data.shape, dtype=d, generator=generator)    # (meta: no draw)
    return call(OPS["bernoulli"], (self, u), {})


def _bernoulli_draw(p_dtype):
    # ATen's bernoulli_distribution<float> for float16 and bfloat16 probabilities: a float32
    # uniform (24 bits; a bfloat16 uniform has 8)
    return dtypes.float32 if p_dtype in (dtypes.float16, dtypes.bfloat16) else p_dtype


def multinomial(self, num_samples, replacement=False, *, generator=None):
    """Indices sampled from each row's probabilities, as torch.Tensor.multinomial (without
    replacement: the top num_samples of p / E, E ~ Exp(1), PyTorch's CPU method).
    PyTorch's numbers for a seed."""
    nd = self._data.ndim
    if nd not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not self._dtype.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{tname(self._dtype)}")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    n = self._data.shape[-1]
    if not replacement and num_samples > n:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    p = self.detach()
    if p.is_meta:           # (no values to check: the draw's shape and dtype)
        pass
    elif replacement and num_samples > 1:
        _check_rows_with_replacement(p)
    elif bool(((p < 0) | p.isfinite().logical_not()).any()):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    total = p.sum(-1, keepdim=True)
    if not p.is_meta and bool((total <= 0).any()):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    batch = self._data.shape[:-1]
    if replacement and num_samples > 1:
        # ATen's loop: a double uniform per sample, row by row, counted against the running
        # sums (float32's in float32, float16's and bfloat16's too) divided by the total,
        # the last set to 1
        cdf = (p.float() if p._dtype in _HALVES else p)._op("cumsum", dim=p.ndim - 1,
                                                             in_dtype=True)
        cdf = (cdf / cdf[..., -1:]).index_fill(-1, _last(n), 1.0)
        u = rand(batch + (num_samples, 1), dtype=dtypes.float64, generator=generator)
        return (cdf.unsqueeze(-2) < u).sum(-1)
    # ATen's fast path (without replacement, or one sample): the top of p / q, q ~ Exp(1),
    # q laid out as p (empty_like), so that its draws go to p's elements in memory order
    q = like_layout(self, self.new_empty).exponential_(1, generator=generator)
    return (p / q).topk(num_samples, -1).indices


def _check_rows_with_replacement(p):
    """ATen's with-replacement kernel's checks and messages: row by row, each entry must be
    >= 0 (a NaN fails here), then finite, then the row's sum > 0."""
    rows = p.reshape(-1, p.shape[-1]).double()
    if bool((rows.isfinite() & (rows >= 0)).all() & (rows.sum(-1) > 0).all()):
        return              # (valid: no loop in Python)
    for row in rows.tolist():
        for v in row:
            if not v >= 0:
                raise RuntimeError("invalid multinomial distribution (encountering probability "
                                   "entry < 0)")
            if not math.isfinite(v):
                raise RuntimeError("invalid multinomial distribution (encountering probability "
                                   "entry = infinity or NaN)")
        if not sum(row) > 0:
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")


def _last(n):
    return tensor([n - 1])


for _n, _f in (("uniform_", uniform_), ("normal_", normal_), ("bernoulli_", bernoulli_),
               ("bernoulli", bernoulli), ("multinomial", multinomial)):
    _def(_n, _f)
for _n in ("bernoulli", "multinomial"):
    _method_fn(_n)
