"""The rest of PyTorch's small compositions: searchsorted / bucketize (PyTorch's binary
search, in NumPy eagerly, as tensor ops while traced),
index_fill / index_copy / put / fill_diagonal_ (index_put with slices), renorm, vander,
logspace, unravel_index, the dtype queries (result_type, can_cast, promote_types,
scalar_tensor), and Tensor's aliases and attributes PyTorch has (divide_, logical_and_,
ndimension, nbytes, byte(), ...)."""
import math

import numpy as np

from ..ir import OPS
from . import dispatch, dtypes, trace_state
from .creation import tensor as _tensor
from .creation_checks import fill_value_fits
from .device import check as check_device
from .dispatch import scalar_type_name as tname
from .dispatch import call
from .functions import _method_fn, equal, export, where
from .functions_math import _can_cast, attach, make_inplace
from .linalg import vector_norm
from .shapes import check_index_bounds, norm_dim
from .tensor import Tensor
from .autocast_cast import autocast_promote
from .node_names import torch_node
from .ranges import check_bounds, checked_steps, logspace_values
from .vmap_fallback import values_read


@values_read
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """As torch.searchsorted: for each value, the index of the first element of the sorted
    last dim of sorted_sequence that is >= it (> it with right=True or side='right'); nan
    goes last (PyTorch's binary search: in NumPy eagerly, as tensor ops traced)."""
    dtypes.no_bool_kernel((sorted_sequence,), "searchsorted_out_cpu")
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, "
                               "got side of left while right was True")
        right = side == "right"
    seq = sorted_sequence if sorter is None else sorted_sequence.gather(-1, sorter)
    values = input if isinstance(input, Tensor) else _tensor(input)
    sb, vb = tuple(seq._data.shape[:-1]), tuple(values._data.shape[:-1])
    if seq._data.ndim > 1 and (sb != vb or values._data.ndim == 0):
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or "
                           "the first N-1 dimensions of boundaries tensor and input value "
                           "tensor must match, but we got boundaries tensor "
                           f"{list(seq._data.shape)} and input value tensor "
                           f"{list(values._data.shape)}")
    found = _binary_search(seq, values, right)
    if found is None:
        found = _traced_search(seq, values, right)
    return found.int() if out_int32 else found


def _traced_search(seq, values, right):
    """_binary_search as whole-tensor ops, which a trace records: PyTorch's result for any
    boundaries (a count of comparisons differs past a NaN or out of order)."""
    m = seq._data.shape[-1]
    lo = values.new_zeros(values._data.shape, dtype=dtypes.int64)
    hi = lo + m
    if not m:
        return lo
    for _ in range(m.bit_length()):         # (each round halves every live range)
        mid = (lo + hi) // 2
        live = lo < hi
        k = mid.clamp(max=m - 1)
        at = seq.gather(-1, k) if seq._data.ndim > 1 else seq[k]
        # (lower bound: go right while !(mid >= v); upper bound: while !(mid > v))
        go = ~(at > values) if right else ~(at >= values)
        lo = where(live & go, mid + 1, lo)
        hi = where(live & ~go, mid, hi)
    return lo


def _binary_search(seq, values, right):
    """searchsorted as PyTorch's CPU kernel searches, all values at once: log2(m) vectorised
    halvings, not n x m comparisons (65,536 boundaries and 4,096 values took 180 ms and
    1 GiB that way). Eagerly; None traced or batched (then _traced_search)."""
    a, v = seq._data, values._data
    if trace_state.state.tracer is not None or dispatch.batching is not None or \
            not a.size or not v.size:
        return None
    m = a.shape[-1]
    rows = a.reshape(-1, m) if a.ndim > 1 else a.reshape(1, m)
    vals = v.reshape(len(rows), -1) if a.ndim > 1 else v.reshape(1, -1)
    row = np.arange(len(rows))[:, None]
    lo = np.zeros(vals.shape, np.int64)
    hi = np.full(vals.shape, m, np.int64)
    with np.errstate(invalid="ignore"):
        while True:
            live = lo < hi
            if not live.any():
                break
            mid = lo + ((hi - lo) >> 1)
            at = rows[row, np.minimum(mid, m - 1)]
            # (lower bound: go right while !(mid >= v); upper bound: while !(mid > v))
            go = ~(at > vals) if right else ~(at >= vals)
            lo = np.where(live & go, mid + 1, lo)
            hi = np.where(live & ~go, mid, hi)
    return _tensor(lo.reshape(v.shape))


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """As torch.bucketize: searchsorted of input's values in the 1-D boundaries."""
    if boundaries._data.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries._data.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def _along(input, dim, index, what):
    d = norm_dim(dim, input._data.ndim)
    if index._dtype is not dtypes.int64:        # (PyTorch's types and words, op by op)
        if what == "index_fill_":
            raise IndexError("index_fill_(): Expected dtype int64 for index.")
        raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got "
                           f"{tname(index._dtype)}")
    if index._data.ndim > 1:
        if what == "index_fill_":
            raise RuntimeError("Index has to be a vector/scalar")
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got "
                         f"{index._data.ndim})")
    n = input._data.shape[d] if input._data.ndim else 1
    if what == "index_fill_":           # (index_fill reads a negative index from the end)
        check_index_bounds(index, n, d, lambda bad: IndexError(
            f"index {bad} is out of bounds for dimension {d} with size {n}"), low=-n)
    else:
        check_index_bounds(index, n, d, lambda bad: IndexError(
            f"index_copy_(): index {bad} is out of bounds for dimension {d} with size {n}"))
    spec = (("slice", None, None, None),) * d + ("T",)
    return spec, index.reshape(-1)


@torch_node(lambda input, dim, index, value: "IndexFillBackward1" if isinstance(value, Tensor) else "IndexFillBackward0")
def index_fill(input, dim, index, value):
    """As torch.index_fill: input with the slices at index along dim set to value."""
    if not input._data.ndim:        # (a 0-d input's dim 0 is one of size 1, as PyTorch's)
        norm_dim(dim, 0)
        return index_fill(input.reshape(1), 0, index, value).reshape(())
    spec, idx = _along(input, dim, index, "index_fill_")
    if isinstance(value, Tensor) and value._data.ndim:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value._data.ndim} dimension(s).")
    # (a value tensor under vmap may be batched: no item() to check, as torch's batching rule)
    if not (isinstance(value, Tensor) and trace_state.state.vmap_levels):
        fill_value_fits(value.item() if isinstance(value, Tensor) else value, input._dtype)
    v = value if isinstance(value, Tensor) else _tensor(value, dtype=input._dtype)
    if v.requires_grad:     # (value's gradient counts a slot its index repeats once, PyTorch's)
        mask = index_fill(input.new_zeros(input.shape, dtype=dtypes.bool_), dim, index, True)
        return v.to(input._dtype).where(mask, input)
    return call(OPS["index_put"], (input, v.to(input._dtype), idx),
                {"spec": spec, "accumulate": False})


def _index_copy_shapes(input, d, index, source):
    """PyTorch's checks that source's slices are input's (else index_put would broadcast a
    source of fewer dims into every indexed slice)."""
    xs, ss = list(input._data.shape), list(source._data.shape)
    if not ss and index._data.size != 1:
        raise IndexError(f"index_copy_(): When source is scalar, index should have one element "
                         f"(got {index._data.size})")
    if ss and len(ss) != len(xs):
        raise IndexError(f"index_copy_(): When source and destination are not scalars, their "
                         f"dimensionality must match. Source dimensionality ({len(ss)}), "
                         f"destination dimensionality ({len(xs)})")
    if xs[:d] + xs[d + 1:] != ss[:d] + ss[d + 1:]:
        raise RuntimeError(f"index_copy_(): Source/destination tensor must have same slice "
                           f"shapes. Destination slice shape: "
                           f"{' '.join(map(str, xs[:d] + xs[d + 1:]))} at dimension {d} and "
                           f"source slice shape: {' '.join(map(str, ss[:d] + ss[d + 1:]))} at "
                           "dimension 0.")
    if ss and index._data.size != ss[d]:
        raise IndexError(f"index_copy_(): Number of indices ({index._data.size}) should be "
                         f"equal to source.size(dim) ({ss[d]})")


@torch_node("IndexCopyBackward0")
def _index_copy(input, dim, index, source):
    """As torch.index_copy: input with the slices at index along dim taken from source."""
    if not input._data.ndim and isinstance(source, Tensor) and source._data.size == 1:
        norm_dim(dim, 0)            # (a 0-d input's dim 0 is one of size 1, as PyTorch's)
        if not source._data.ndim and index._data.size != 1:
            raise IndexError(f"index_copy_(): When source is scalar, index should have one "
                             f"element (got {index._data.size})")
        return _index_copy(input.reshape(1), 0, index, source.reshape(1)).reshape(())
    spec, idx = _along(input, dim, index, "index_copy_")
    if source._dtype is not input._dtype:       # (not promoted: PyTorch's error)
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, "
                           f"but got (self) {tname(input._dtype)} and (source) "
                           f"{tname(source._dtype)}")
    _index_copy_shapes(input, len(spec) - 1, idx, source)
    # (PyTorch's result is contiguous whatever input's layout; index_put keeps input's)
    return call(OPS["index_put"], (input.contiguous(), source, idx),
                {"spec": spec, "accumulate": False})


def index_copy(input, dim, index, source):
    """As torch.index_copy: input with the slices at index along dim taken from source (on
    CPU autocast's promote list; its in-place form, index_copy_, is not)."""
    input, source = autocast_promote(input, source)
    return _index_copy(input, dim, index, source)


@torch_node("PutBackward0")
def put(input, index, source, accumulate=False):
    """As torch.put: input with the elements at index of the flattened input set to (or,
    with accumulate, added) source's."""
    if index._dtype is not dtypes.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got {tname(index._dtype)}")
    if isinstance(source, Tensor) and source._dtype is not input._dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {tname(input._dtype)} and source.dtype = "
                           f"{tname(source._dtype)}")
    if source._data.size != index._data.size:    # (index_put would broadcast a one-element one)
        raise IndexError(f"put_(): Expected source and index to have the same number of "
                         f"elements, but got source.numel() = {source._data.size}, "
                         f"index.numel() = {index._data.size}")
    n = input._data.size
    idx = index.reshape(-1)
    idx = idx + (idx < 0).long() * n
    flat = call(OPS["index_put"], (input.reshape(-1), source.reshape(-1), idx),
                {"spec": ("T",), "accumulate": bool(accumulate)})
    return flat.reshape(tuple(input._data.shape))


def _fill_diagonal(self, fill_value, wrap=False):
    nd = self._data.ndim
    if nd < 2:
        raise RuntimeError("dimensions must larger than 1")
    shape = self._data.shape
    if nd > 2 and len(set(shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    n = math.prod(shape)
    step = sum(math.prod(shape[k + 1:]) for k in range(nd))
    stop = n if (nd == 2 and wrap) else min(shape) * step
    idx = _tensor(np.arange(0, min(stop, n), step, dtype=np.int64))
    return put(self, idx, _tensor(fill_value, dtype=self._dtype).expand(idx._data.shape))


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


def result_type(tensor1, tensor2):
    """As torch.result_type: the dtype PyTorch's promotion gives the two operands."""
    return dtypes.result_type(tensor1, tensor2)


def can_cast(from_, to):
    """As torch.can_cast: whether PyTorch's casting rules allow from_ -> to."""
    return _can_cast(dtypes.to_dtype(from_), dtypes.to_dtype(to))


def promote_types(type1, type2):
    """As torch.promote_types."""
    return dtypes.promote_types(dtypes.to_dtype(type1), dtypes.to_dtype(type2))


for _f, _inp in ((index_fill, "index_fill_"), (put, "put_"), (renorm, "renorm_")):
    attach(_f, inplace_name=_inp)
attach(index_copy)
Tensor.index_copy_ = make_inplace(_index_copy, "index_copy_")
for _f in (searchsorted, bucketize, vander, logspace, unravel_index, scalar_tensor,
           result_type, can_cast, promote_types):
    export(_f)
for _n in ("index_put", "index_put_"):
    _method_fn(_n)
Tensor.fill_diagonal_ = make_inplace(_fill_diagonal, "fill_diagonal_")
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
Tensor.nbytes = property(lambda self: self._data.size * self._dtype.itemsize,
                         doc="As torch.Tensor.nbytes: numel() * element_size().")
Tensor.itemsize = property(lambda self: self._dtype.itemsize,
                           doc="As torch.Tensor.itemsize: element_size().")
del _f, _inp, _n


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
