"""More random fills and samplers, as PyTorch's: Tensor.random_ / exponential_ / geometric_ /
log_normal_ / cauchy_, torch.normal (every overload) and randint_like. The continuous ones
draw through rand/randn, as uniform_ and normal_ draw (methods_random.py): traced, a draw is
an rng op, so compiled code gives eager's numbers; the ops of llgrad/ir/ops_fill_more.py
map the draws, with PyTorch's backward nodes; random_ maps PyTorch's integers (raw draws
mod the range: the rng_integers op)."""
import numpy as np

from ..ir import OPS, torch_gamma, torch_random
from . import creation, dtypes, trace_state
from .creation import _state, empty, rand, randn, random_integers
from .device import check as _check_device
from .dispatch import call
from .dispatch import scalar_type_name as tname
from .functions import export
from .inplace import call_inplace
from .memory_layout import like_layout
from .methods_random import _def, _in_memory_order
from .random_bounds import _C_NAMES, _MANTISSA, check_bounds as _check_bounds, random_bounds
from .random_state import _value_dependent_draw
from .shapes import broadcast_shapes, unpack_shape
from .tensor import Tensor
from .vmap_fallback import values_read

def _num(v):
    """A number as PyTorch's messages print it (-1.0 as -1)."""
    return f"{v:g}" if isinstance(v, float) else f"{v}"


def _draws(self, generator):
    """Double uniforms for self's elements, in its memory order (ATen's serial fill)."""
    return _in_memory_order(self, lambda s: rand(s, dtype=dtypes.float64, generator=generator))


def _continuous(self, what):
    if not self._dtype.is_floating_point:
        name = _C_NAMES.get(self._dtype.name) if what == "Cauchy" else tname(self._dtype)
        raise RuntimeError(f"{what} distribution is a continuous probability distribution. "
                           f"dtype must be a floating point but you specified {name}")


def _default_range(dt):
    if dt.is_floating_point:
        return 0, 2 ** _MANTISSA[dt.name] + 1
    if dt is dtypes.bool_:
        return 0, 2
    return 0, int(np.iinfo(dt.np).max) + 1


def random_(self, *args, generator=None, **kwargs):
    """As torch.Tensor.random_(): integers drawn uniformly from [0, 2^mantissa] (floats) or
    [0, the dtype's maximum]; random_(to): from [0, to); random_(from, to): from [from, to)."""
    low = kwargs.pop("from", None)
    high = kwargs.pop("to", None)
    if kwargs:
        raise TypeError(f"random_() got an unexpected keyword argument {next(iter(kwargs))!r}")
    if len(args) == 2:
        low, high = args
    elif len(args) == 1:
        high = args[0]
    elif args:
        raise TypeError(f"random_() takes at most 2 positional arguments ({len(args)} given)")
    if high is None:
        form = "default" if low is None else "from"
        if low is not None:
            _check_bounds(self._dtype, low, low + 1)
        lo, hi = _default_range(self._dtype)
        low = lo if low is None else low
        high = hi
    else:
        form = "to" if low is None else "from_to"
        low, high = random_bounds(self._dtype, 0 if low is None else low, high)
    drawn = _in_memory_order(self, lambda s: random_integers(
        s, self._dtype.name, low, high, form == "default", generator))
    return call_inplace(OPS["random_"], self, (self, drawn),
                        {"low": int(low), "high": int(high), "form": form})


def exponential_(self, lambd=1.0, *, generator=None):
    """Fill with Exp(lambd) draws in place, as torch.Tensor.exponential_."""
    _continuous(self, "Exponential")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={_num(lambd)}")
    return call_inplace(OPS["exponential"], self, (self, _draws(self, generator)),
                        {"lambd": float(lambd)})


def geometric_(self, p, *, generator=None):
    """Fill with Geometric(p) draws (the trial of the first success, from 1), as
    torch.Tensor.geometric_."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={_num(p)}")
    return call_inplace(OPS["geometric"], self, (self, _draws(self, generator)), {"p": float(p)})


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fill with exp(N(mean, std^2)) draws in place, as torch.Tensor.log_normal_."""
    if not self._dtype.is_floating_point:
        raise NotImplementedError(f"\"log_normal_cpu\" not implemented for '{tname(self._dtype)}'")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={_num(std)}")
    n = _in_memory_order(self, lambda s: randn(s, dtype=dtypes.float64, generator=generator,
                                               _fill=False))
    return call_inplace(OPS["log_normal"], self, (self, n),
                        {"mean": float(mean), "std": float(std)})


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Fill with Cauchy(median, sigma) draws in place, as torch.Tensor.cauchy_."""
    _continuous(self, "Cauchy")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={_num(sigma)}")
    return call_inplace(OPS["cauchy"], self, (self, _draws(self, generator)),
                        {"median": float(median), "sigma": float(sigma)})


for _n, _f in (("random_", random_), ("exponential_", exponential_),
               ("geometric_", geometric_), ("log_normal_", log_normal_), ("cauchy_", cauchy_)):
    _def(_n, _f)


# ---- torch.normal, randint_like -------------------------------------------------------------

def _std_check(std):
    if isinstance(std, Tensor):
        if not bool((std >= 0).all()):     # (a NaN fails it too, as in ATen)
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif not std >= 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_num(std)}")


@values_read
def normal(mean, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None,
           device=None, pin_memory=False, requires_grad=False):
    """As torch.normal: draws of N(mean, std^2) for a tensor mean and/or std (their broadcast
    shape and float dtype; the gradients are zero, as PyTorch's), or for numbers mean and
    std, of the given size (and dtype)."""
    tensors = [x for x in (mean, std) if isinstance(x, Tensor)]
    if not tensors:
        if size is None:
            raise TypeError(f"normal() received an invalid combination of arguments - got "
                            f"({type(mean).__name__}, {type(std).__name__}), but expected one "
                            "of:")
        _std_check(std)
        r = creation.empty(unpack_shape((size,) if isinstance(size, int) else size),
                           dtype=dtype, device=device)     # (meta_factories': device='meta')
        r.normal_(mean, std, generator=generator)
        r = r.requires_grad_(requires_grad) if requires_grad else r
        return r if out is None else out.copy_(r)
    for t in tensors:
        if not t._dtype.is_floating_point:
            raise NotImplementedError(f"\"normal_kernel_cpu\" not implemented for "
                                      f"'{tname(t._dtype)}'")
    _std_check(std)
    shape = broadcast_shapes(*[t._data.shape for t in tensors])
    dt = dtypes.result_type(*tensors)
    if isinstance(std, Tensor):
        noise = randn(shape, dtype=dt, generator=generator)
    else:   # (ATen: normal_(0, std) rounded to the dtype, then mean added)
        noise, std = empty(shape, dtype=dt).normal_(0, std, generator=generator), 1.0
    r = call(OPS["normal_tensor"], (mean, std, noise), {})
    return r if out is None else out.copy_(r)


def randint_like(input, low=0, high=None, *, dtype=None, layout=None, device=None,
                 requires_grad=False, memory_format=None, generator=None):
    """As torch.randint_like: integers from [low, high) (randint_like(input, high): from
    [0, high)) in input's shape and (unless dtype says otherwise) dtype."""
    if high is None:
        low, high = 0, low
    _check_device(device)       # (empty_like's layout: filled in its memory order)
    r = like_layout(input, lambda s: empty(s, dtype=dtype or input.dtype), memory_format).random_(
        low, high, generator=generator)
    return r.requires_grad_(True) if requires_grad else r


def rrelu_noise(input, lower, upper, generator=None):
    """Training-mode rrelu's slopes for input, drawn as ATen's CPU kernel draws them (PyTorch's
    numbers for a seed): a double uniform on [lower, upper) for each element <= 0, in C
    order, 1 at the others. How many draws depends on the values, so a trace records the
    rng_rrelu_noise op of the generator state and input (compiled calls replay eager's)."""
    arr = torch_random.rrelu_noise(_state(generator), input._data, lower, upper)
    t = Tensor._from_array(arr)
    tracer = trace_state.state.tracer
    if generator is None and tracer is not None:
        tracer.random("rng_rrelu_noise", t, input, lower=float(lower), upper=float(upper))
    return t


def _gamma_like(kernel, op, draw, alpha, generator):
    if alpha._dtype not in (dtypes.float32, dtypes.float64):
        raise NotImplementedError(f'"{kernel}" not implemented for \'{tname(alpha._dtype)}\'')
    _value_dependent_draw(op, generator)
    t = Tensor._from_array(draw(_state(generator), np.ascontiguousarray(alpha._data)))
    tracer = trace_state.state.tracer
    if generator is None and tracer is not None:
        tracer.random(op, t, alpha)
    return t


def _standard_gamma(alpha, generator=None):
    """torch._standard_gamma: Gamma(alpha, 1) draws in alpha's shape, drawn as ATen's CPU
    kernel draws them (PyTorch's samples for a seed; torch_gamma.py). The draws' count
    depends on alpha's values, so a trace records the rng_standard_gamma op of the generator
    state and alpha (compiled calls replay eager's)."""
    return _gamma_like("gamma_cpu", "rng_standard_gamma", torch_gamma.standard_gamma, alpha,
                       generator)


def _sample_dirichlet(alpha, generator=None):
    """torch._sample_dirichlet: Dirichlet(alpha) draws over alpha's last dim, as ATen's CPU
    kernel draws them (torch_gamma.py; traced: the rng_dirichlet op)."""
    if not alpha._data.ndim:
        raise RuntimeError("dirichlet: alpha must have at least one dimension")
    return _gamma_like("dirichlet", "rng_dirichlet", torch_gamma.dirichlet, alpha, generator)


export(normal)
export(_standard_gamma)
export(_sample_dirichlet)
export(randint_like)
