"""BatchedTensor: what a function under llgrad.func.vmap sees in place of a tensor that has
a batch dimension.

A BatchedTensor holds one ordinary tensor, its *physical* value, whose leading dimensions
are the batch dimensions of the vmap levels it is batched over (in level order, outermost
first), followed by the *logical* dimensions the function sees. Its shape, dtype, strides
and storage offset are those of one sample (sample 0, so that view / reshape / contiguous
decide as they would per sample); its data cannot be read directly: every op goes through
the dispatcher, where llgrad.func.batching applies
the op to the physical value (so autograd and llgrad.compile's tracer record ordinary ops
on ordinary tensors). Anything that would read the data without an op raises VmapDataError
rather than see one sample's values.

Levels are numbered in the order vmaps are entered; the active ones (with their batch
sizes and randomness modes) are on a thread-local stack."""
import itertools
import threading

import numpy as np

from ..runtime import grad_mode
from ..runtime.tensor import Tensor


class VmapDataError(RuntimeError):
    """Code read a batched tensor's data outside the op table (a NumPy call on `_data`)."""


class _Logical:
    """Stands in for a BatchedTensor's `_data`: the logical metadata of one sample (shape,
    dtype, strides: those of sample 0 in the physical value), and nothing else (reshape
    gives another, or NumPy's error when a view cannot have the new shape; any read of the
    data raises)."""
    __slots__ = ("shape", "dtype", "ndim", "size", "itemsize", "strides", "nbytes")

    def __init__(self, shape, dtype, strides):
        shape = tuple(int(s) for s in shape)
        self.shape, self.dtype, self.ndim = shape, dtype, len(shape)
        n = 1
        for s in shape:
            n *= s
        self.size, self.itemsize = n, dtype.itemsize
        self.nbytes = n * dtype.itemsize
        self.strides = tuple(strides)

    def _probe(self):
        """An array of this geometry over one element (never read)."""
        return np.lib.stride_tricks.as_strided(np.zeros(1, dtype=self.dtype), self.shape,
                                               self.strides)

    def reshape(self, *shape, order="C", copy=None):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if copy is False:
            v = np.reshape(self._probe(), shape, copy=False)
        else:
            v = np.zeros(self.shape, dtype=self.dtype).reshape(shape)
        return _Logical(v.shape, self.dtype, v.strides)

    def __len__(self):
        return self.shape[0]

    def _refuse(self, *args, **kwargs):
        raise _data_error("an operator on `_data`")

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __truediv__ = __rtruediv__ = __floordiv__ = __pow__ = __neg__ = __abs__ = _refuse
    __and__ = __or__ = __xor__ = __invert__ = __getitem__ = __setitem__ = _refuse
    __iter__ = __bool__ = __float__ = __int__ = __index__ = __matmul__ = _refuse
    __hash__ = None

    def __array__(self, *args, **kwargs):
        raise _data_error("NumPy's conversion")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise _data_error(f"`_data.{name}`")

    def __repr__(self):
        return f"<logical array {self.shape} {self.dtype}>"


def _data_error(what):
    return VmapDataError(
        f"vmap: {what} read the data of a batched tensor outside llgrad's op table, which "
        "vmap cannot batch (this is llgrad code or user code using NumPy on a tensor's "
        "payload); write it with tensor operations, or run the function per sample")


# ---- the active levels ------------------------------------------------------------------

class _State(threading.local):
    def __init__(self):
        self.levels = []        # [(level, batch size, randomness)], outermost first


state = _State()
_counter = itertools.count(1)


def push_level(size, randomness):
    level = next(_counter)
    state.levels.append((level, size, randomness))
    return level


def pop_level(level):
    levels = state.levels
    if levels and levels[-1][0] == level:
        levels.pop()
    else:                   # (an exception unwound an inner level's bookkeeping)
        state.levels = [x for x in levels if x[0] != level]


def active_levels():
    """((level, size), ...) of the vmaps active on this thread, outermost first."""
    return tuple((lv, n) for lv, n, _ in state.levels)


# ---- wrapping -------------------------------------------------------------------------------

class BatchedTensor(Tensor):
    __slots__ = ("_phys", "_levels")

    # -- autograd lives on the physical value ---------------------------------------------
    @property
    def requires_grad(self):
        return self._phys.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad=True):
        raise RuntimeError("vmap: requires_grad_() on a batched tensor is not supported; use "
                           "llgrad.func.grad / vjp inside the vmapped function instead")

    @property
    def grad_fn(self):
        return self._phys.grad_fn

    @property
    def is_leaf(self):
        return self._phys.is_leaf

    @property
    def grad(self):
        return None

    def backward(self, *args, **kwargs):
        raise RuntimeError("vmap: backward() of a batched tensor is not supported inside "
                           "vmap; use llgrad.func.grad or llgrad.func.vjp (they nest with vmap)")

    def register_hook(self, hook):
        """The hook on the physical value (grad inside vmap), seeing and giving gradients
        batched as self is."""
        levels = self._levels

        def on_physical(g):
            # g: the graph-level gradient, its leading dims self's levels; a cotangent
            # batched over levels the graph lacks (jacrev's) is a BatchedTensor over those
            extra, phys = (g._levels, g._phys) if type(g) is BatchedTensor else ((), g)
            order = extra + levels              # (phys's leading dims, in this order)
            every = tuple(sorted(order))
            perm = [order.index(lv) for lv in every]
            n = len(order)
            r = hook(wrap(_permute_lead(phys, perm, n), every))
            if r is None:
                return None
            r = align(r, every, tuple(phys._data.shape[order.index(lv)] for lv in every))
            return wrap(_permute_lead(r, [perm.index(i) for i in range(n)], n), extra)
        return self._phys.register_hook(on_physical)

    def retain_grad(self):
        raise RuntimeError("vmap: retain_grad() on a batched tensor is not supported")

    def detach(self):
        return wrap(self._phys.detach(), self._levels)

    def detach_(self):
        raise RuntimeError("vmap: detach_() on a batched tensor is not supported; use detach()")

    @property
    def data(self):
        return wrap(self._phys.data, self._levels)

    # -- new tensors are batched as self is (torch's batching rules for new_*), so that a
    # buffer made with them can take batched values in place ------------------------------
    def _new(self, shape, value, dtype, device):
        lead = self._phys._data.shape[:len(self._levels)]
        return wrap(self._phys.new_full(lead + tuple(shape), value, dtype=dtype, device=device),
                    self._levels)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False,
                 layout=None, pin_memory=False):
        return self._new(size, fill_value, dtype, device)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
                  pin_memory=False):
        return self._new(_shape(size), 0, dtype, device)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
                 pin_memory=False):
        return self._new(_shape(size), 1, dtype, device)

    new_empty = new_zeros

    # -- the geometry of sample 0 ---------------------------------------------------------
    def storage_offset(self):
        return self._phys.storage_offset()

    _storage_offset = storage_offset

    def data_ptr(self):
        return self._phys.data_ptr()

    # -- reading the values --------------------------------------------------------------
    def item(self):
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted "
                               "to Scalar")
        return _uniform(self, "vmap: It looks like you're calling .item() on a Tensor. We "
                              "don't support vmap over calling .item() on a Tensor, please "
                              "try to rewrite what you're doing with other operations. If "
                              "error is occurring somewhere inside PyTorch internals, please "
                              "file a bug report.")

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(_uniform(self, "vmap: It looks like you're attempting to use a Tensor in "
                                   "some data-dependent control flow. We don't support that "
                                   "yet, please file an issue at "
                                   "https://github.com/pytorch/pytorch/issues ."))

    def numpy(self, force=False):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    def tolist(self):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    def __array__(self, dtype=None, copy=None):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    def __dlpack__(self, *args, **kwargs):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    def __reduce_ex__(self, proto):
        raise RuntimeError("vmap: a batched tensor cannot be pickled")

    def __repr__(self):
        # (torch's lvl is the vmap's depth, 1 for the outermost: each call of a vmapped
        # function prints the same, not the level's id, which differs at every call)
        depth = {lv: k + 1 for k, (lv, _, _) in enumerate(state.levels)}
        text = repr(self._phys)
        for level in self._levels:
            text = f"BatchedTensor(lvl={depth.get(level, level)}, bdim=0, value=\n    " \
                   + text.replace("\n", "\n    ") + "\n)"
        return text

    __str__ = __repr__


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return tuple(size)


def _uniform(t, message):
    """The value of a one-element batched tensor when every sample has the same one (then a
    Python decision on it is the same for every sample, so it is exact); torch's error
    otherwise."""
    with grad_mode.no_grad():
        flat = t._phys.reshape(-1)
        first = flat[0]
        if flat._data.size > 1:
            same = (flat == first) | (flat.isnan() & first.isnan()) \
                if flat._dtype.is_floating_point else flat == first
            if not bool(same.all()):
                raise RuntimeError(message)
        return first.item()


def wrap(phys, levels):
    """A tensor whose leading len(levels) dims of `phys` are batch dims (levels sorted);
    phys itself when there are none."""
    if not levels:
        return phys
    t = object.__new__(BatchedTensor)
    t._phys, t._levels = phys, tuple(levels)
    d = phys._data
    k = len(levels)
    t._data = _Logical(d.shape[k:], d.dtype, d.strides[k:])
    t._storage = phys._storage
    t._dtype = phys._dtype
    t._requires_grad = t._retains_grad = t._multi_view = False
    t._grad = t._grad_fn = t._base = t._hooks = t._acc = None
    t._output_nr = t._view_version = 0
    t._inference = phys._inference
    return t


def unwrap(x):
    """(physical tensor, levels) of a tensor (levels () for an ordinary one)."""
    if type(x) is BatchedTensor:
        return x._phys, x._levels
    return x, ()


def sizes_of(x):
    """{level: batch size} of a tensor."""
    if type(x) is not BatchedTensor:
        return {}
    shape = x._phys._data.shape
    return {lv: shape[i] for i, lv in enumerate(x._levels)}


def align(x, levels, sizes=None):
    """x's physical value with leading dims for exactly `levels` (a sorted superset of x's):
    a missing level is a size-1 dim, or its full size (a view: expand) with `sizes`."""
    phys, have = unwrap(x)
    if have == tuple(levels) and sizes is None:
        return phys
    shape = phys._data.shape
    k = len(have)
    lead, i = [], 0
    for lv in levels:
        if i < k and have[i] == lv:
            lead.append(shape[i])
            i += 1
        else:
            lead.append(1)
    if i != k:
        raise RuntimeError(f"vmap internal error: levels {have} are not within {levels}")
    new = tuple(lead) + shape[k:]
    if new != shape:
        phys = phys.reshape(new)
    if sizes is not None:
        full = tuple(sizes) + shape[k:]
        if full != new:
            phys = phys.expand(full)
    return phys


def _permute_lead(phys, perm, n):
    """phys with its n leading dims in the order perm (a view)."""
    if perm == list(range(n)):
        return phys
    return phys.permute(list(perm) + list(range(n, phys._data.ndim)))


def move_dim(phys, src, dst):
    """phys with dim src moved to position dst (a view)."""
    if src == dst:
        return phys
    order = list(range(phys._data.ndim))
    order.insert(dst, order.pop(src))
    return phys.permute(order)


def is_batched(x):
    return type(x) is BatchedTensor

