"""The rest of PyTorch's small compositions: renorm, vander, logspace, unravel_index, the
dtype queries (result_type, can_cast, promote_types, scalar_tensor), and Tensor's aliases and
attributes PyTorch has (divide_, logical_and_, ndimension, nbytes, byte(), ...).
(searchsorted / bucketize: functions_search.py; index_fill / index_copy / put /
fill_diagonal_: functions_index_writes.py.)"""
from ..ir import OPS
from . import dtypes, size_reads, trace_state
from .creation import tensor as _tensor
from .device import check as check_device
from .dispatch import call
from .functions import equal, export, where
from .functions_math import _can_cast, attach, make_inplace
from .linalg import vector_norm
from .shapes import norm_dim
from .tensor import Tensor
from .node_names import torch_node
from .ranges import check_bounds, checked_steps, logspace_values


@torch_node("RenormBackward0")
def renorm(input, p, dim, maxnorm):
    """As torch.renorm: each slice along dim whose p-norm exceeds maxnorm scaled to it
    (by maxnorm / (norm + 1e-7))."""
    nd = input._data.ndim
    if nd <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {nd} dimensions")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    d = norm_dim(dim, nd)
    norm = vector_norm(input, p, tuple(j for j in range(nd) if j != d), True)
    # (contiguous, as PyTorch's result, whatever input's layout)
    return input.contiguous() * where(norm > maxnorm, maxnorm / (norm + 1e-7),
                                      1.0).to(input._dtype)


def vander(x, N=None, increasing=False):
    """As torch.vander: the powers x**0 .. x**(N-1) as columns (highest first unless
    increasing), by PyTorch's cumulative product."""
    if x._data.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x._data.shape[0] if N is None else int(N)
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    dt = dtypes.promote_types(x._dtype, dtypes.int64)
    xs = x.to(dt)
    cols = [xs.new_ones((x._data.shape[0], min(n, 1)))]
    if n > 1:
        cols.append(xs.unsqueeze(1).expand((x._data.shape[0], n - 1)).cumprod(1))
    out = cols[0] if len(cols) == 1 else call(OPS["cat"], tuple(cols), {"dim": 1})
    return out if increasing else out.flip(1)


def logspace(start, end, steps, base=10.0, *, dtype=None, layout=None, device=None,
             requires_grad=False):
    """As torch.logspace: base ** (steps values from start to end)."""
    check_device(device, "create a tensor on")
    steps = checked_steps("logspace", steps)
    check_bounds("logspace", start, end)
    d = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
    vals = logspace_values(float(start), float(end), int(steps), float(base), d.np)
    return _tensor(vals, dtype=d, requires_grad=requires_grad)     # (bfloat16's: d says so)


def unravel_index(indices, shape):
    """As torch.unravel_index: the coordinates in shape of flat indices (a tuple of
    tensors)."""
    if not isinstance(indices, Tensor):
        indices = _tensor(indices)
    if indices._dtype._cat != 1:
        raise TypeError(f"expected 'indices' to be integer dtype, but got "
                        f"{indices._dtype}")
    shape = (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)
    out, rest = [], indices.long()
    for s in reversed(shape):
        out.append(rest.remainder(s))
        rest = rest.div(s, rounding_mode="floor")
    return tuple(reversed(out))


def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=False,
                  requires_grad=False):
    """As torch.scalar_tensor: a 0-d tensor of s (the default float dtype unless given)."""
    check_device(device, "create a tensor on")
    d = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
    return _tensor(s, dtype=d, requires_grad=requires_grad)


def result_type(tensor, other):
    """As torch.result_type: the dtype PyTorch's promotion gives the two operands."""
    return dtypes.result_type(tensor, other)


def can_cast(from_, to):
    """As torch.can_cast: whether PyTorch's casting rules allow from_ -> to."""
    return _can_cast(dtypes.to_dtype(from_), dtypes.to_dtype(to))


def promote_types(type1, type2):
    """As torch.promote_types."""
    return dtypes.promote_types(dtypes.to_dtype(type1), dtypes.to_dtype(type2))


attach(renorm, inplace_name="renorm_")
for _f in (vander, logspace, unravel_index, scalar_tensor, result_type, can_cast,
           promote_types):
    export(_f)
Tensor.cumsum_ = make_inplace(lambda self, dim, dtype=None: self.cumsum(dim, dtype), "cumsum_")
for _n in ("and", "or", "xor"):
    setattr(Tensor, f"logical_{_n}_", make_inplace(
        (lambda m: lambda self, other: getattr(self, m)(other))(f"logical_{_n}"),
        f"logical_{_n}_"))
Tensor.divide_ = Tensor.true_divide_ = Tensor.div_
Tensor.multiply_ = Tensor.mul_
Tensor.subtract_ = Tensor.sub_
Tensor.equal = equal


def _cast(d):
    def f(self, memory_format=None):
        return self.to(d, memory_format=memory_format)
    f.__doc__ = f"As torch.Tensor.{d._tensor_type[:-6].lower()}(): the tensor as {d.name}."
    return f


Tensor.byte, Tensor.char, Tensor.short = (_cast(d) for d in (dtypes.uint8, dtypes.int8,
                                                              dtypes.int16))


def _ndimension(self):
    """As torch.Tensor.ndimension (dim())."""
    return self._data.ndim


def _get_device(self):
    """As torch.Tensor.get_device: -1, the CPU."""
    return -1


Tensor.ndimension = _ndimension
Tensor.get_device = _get_device
def _nbytes(self):
    """As torch.Tensor.nbytes: numel() * element_size() (a size the user's code reads)."""
    n = self._data.size * self._dtype.itemsize
    return n if trace_state.state.tracer is None else size_reads.noted(n, symbolic=False)


Tensor.nbytes = property(_nbytes)
Tensor.itemsize = property(lambda self: self._dtype.itemsize,
                           doc="As torch.Tensor.itemsize: element_size().")
del _f, _n


def pow(input, exponent):
    """As torch.pow: input ** exponent; input may be a Python number (then exponent is a
    tensor)."""
    if isinstance(input, Tensor):
        return input.pow(exponent)
    if not isinstance(exponent, Tensor):
        raise TypeError(f"pow() received an invalid combination of arguments - got "
                        f"({type(input).__name__}, {type(exponent).__name__}), but expected "
                        "one of:")
    return exponent.__rpow__(input)


export(pow)


def fill(input, value):
    """As torch.fill: a new tensor of input's shape and dtype filled with value."""
    return input.clone().fill_(value)


export(fill)
