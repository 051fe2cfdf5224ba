"""A compiled function's changing int (a SymbolicScalar, symbolic_scalar.py) where PyTorch
takes a number as an index or a fill value: a diffusion sampler's `betas[i]` and
`torch.full((n,), i)` for each step i of its loop, a decoder's `emb[pos]`. Reading the
number there would guard it by value, a trace per step; these give graph ops instead.

* x[..., i, ...] (i a stand-in int, the other items basic: ints, slices, None, ...): the
  element (or slice) at i, as index_select on the wrapped index and a squeeze. PyTorch's
  x[i] is a view, this a copy of the same numbers, with the same shape and strides (only
  where the view would be contiguous: x[:, i] of a matrix reads the number): a write into
  either afterwards (which a view would share) ends the trace instead (`watch`,
  Tracer.record_inplace), as does returning the copy or a view of it (`check_returned`:
  eager's result is the view, which later writes reach x through) and an index out of
  range for this call's number; later calls
  out of range trace again (a guard). What tells a view from a copy (storage_offset(),
  data_ptr(), _version, untyped_storage(), _is_view()) ends the trace too (`check_layout`).
* torch.full(size, i) (and full_like): the stand-in's 0-d tensor cast to the dtype and
  expanded, copied. Only where the cast is exact for every number the guards let through
  (a float32 or float64 fill, an int64 one from an int); else the number is read.

Where a stand-in is not used thus, its number is read as before (an escape)."""
from ..ir.geometry import contiguous_strides
from . import trace_state
from .creation_checks import fill_value_fits as checked_fill
from .symbolic_operands import _FLOAT32_MAX, past, within
from .symbolic_scalar import _FLOAT_EXACT, ScalarEscape, SymbolicScalar, _require
from .tensor import Tensor

_BASIC = (int, slice, type(None), type(Ellipsis))


def _tracing():
    tracer = trace_state.state.tracer
    # (inside tensor-dependent control flow a guard is refused: the number is read there)
    return tracer if tracer is not None and not hasattr(tracer, "parent") else None


def has_stand_in(idx):
    """Whether the index idx (of x[idx]) holds a stand-in int."""
    return type(idx) is SymbolicScalar or (
        type(idx) is tuple and any(type(i) is SymbolicScalar for i in idx))


def getitem(x, idx, plain):
    """x[idx] for an idx with stand-in ints; plain(x, idx) is the indexing of an idx without
    them (where this cannot take a stand-in, its number is read: an escape while tracing)."""
    items = idx if type(idx) is tuple else (idx,)
    stand = [type(i) is SymbolicScalar for i in items]

    def read():
        got = tuple(i._escape("used as an index") if s else i for s, i in zip(stand, items))
        return plain(x, got if type(idx) is tuple else got[0])

    tracer = _tracing()
    if tracer is None or not x.dim() or \
            any(s and type(i.value) is not int for s, i in zip(stand, items)) or \
            any(not s and type(i) not in _BASIC for s, i in zip(stand, items)) or \
            sum(i is Ellipsis for i in items) > 1:     # (count() would compare)
        return read()
    # the rest indexed first, a stand-in's dim kept whole; then the dims it keeps, where
    # each stand-in's index is, from the back (a later dim's number does not move)
    kept = plain(x, tuple(slice(None) if s else i for s, i in zip(stand, items)))
    used = sum(1 for i in items if i is not None and i is not Ellipsis)
    dims, d = [], 0
    for s, i in zip(stand, items):
        if i is Ellipsis:
            d += x.dim() - used
        elif s:
            dims.append((d, i))
            d += 1
        elif type(i) is slice or i is None:
            d += 1
    if any(not -kept.shape[d] <= i.value < kept.shape[d] for d, i in dims):
        return read()               # (this call's number out of range: eager's IndexError)
    at_dims = {d for d, _ in dims}
    shape = tuple(n for d, n in enumerate(kept.shape) if d not in at_dims)
    if tuple(s for d, s in enumerate(kept.stride()) if d not in at_dims) != \
            contiguous_strides(shape):
        return read()               # (the view's strides would not be the copy's: x[:, i])
    out = kept
    for d, i in reversed(dims):
        n = kept.shape[d]
        _require((i.tensor >= -n) & (i.tensor < n))
        at = (i.tensor % n).reshape(1)      # (a negative index from the end, as Python's)
        out = out.index_select(d, at).squeeze(d)
    watch(tracer, x, dims[0][1].path)
    watch(tracer, out, dims[0][1].path, copy=True)
    return out


def watch(tracer, t, path, copy=False):
    """A write into t's memory later in the trace ends it (the stand-in at path is then read
    as its number): t and a copy made of it stand for a view PyTorch would share. copy: t is
    that copy, which the function must not return either (check_returned)."""
    # (t is kept with its path: the keys are ids of storages, which must stay alive as long
    # as the trace, or a later tensor's storage could take a dead one's id)
    tracer.__dict__.setdefault("_llgrad_index_copies", {})[tracer._sid(t)] = (path, t)
    if copy:
        tracer.__dict__.setdefault("_llgrad_index_copy_of", {})[tracer._sid(t)] = (path, t)


def check_returned(tracer, results):
    """Called with a traced function's results, and again with every tensor its calls give
    back (returned, put into an object or a global, set as a .grad or by `.data =`:
    compile/entry.py): one over a copy getitem made (the copy itself or a view of it) ends
    the trace, the stand-in then read as its number: eager's is PyTorch's view, which later
    writes into the indexed tensor reach (and whose writes reach it)."""
    copies = tracer.__dict__.get("_llgrad_index_copy_of")
    if not copies:
        return
    for t in results:
        if isinstance(t, Tensor) and (watched := copies.get(tracer._sid(t))) is not None:
            raise ScalarEscape(watched[0], "a result or a tensor kept indexed by it "
                               "(PyTorch's view of its tensor)")


def check_layout(tracer, t):
    """Called where the user reads where t lies in memory (storage_offset(), data_ptr(),
    _version, untyped_storage(), storage(), _is_view()): of a copy getitem made (or a view
    of it) these are the copy's, not PyTorch's view's (x[i].storage_offset() gave 0 for
    every i, silently): the trace ends, the stand-in then read as its number."""
    while getattr(tracer, "parent", None) is not None:     # (the copies are the top's)
        tracer = tracer.parent
    copies = tracer.__dict__.get("_llgrad_index_copy_of")
    if copies and (watched := copies.get(tracer._sid(t))) is not None:
        raise ScalarEscape(watched[0], "where a tensor indexed by it lies in memory "
                           "(PyTorch's view of its tensor)")


def check_write(tracer, sid):
    """Called for each in-place write the trace records into the memory of root sid."""
    watched = tracer.__dict__.get("_llgrad_index_copies", {}).get(sid)
    if watched is not None:
        raise ScalarEscape(watched[0], "a write into a tensor indexed by it (PyTorch's view)")


def fill_value_fits(s, d):
    """torch.full's fill value s checked for dtype d (creation_checks.fill_value_fits); a
    stand-in kept where its cast is exact for every number the guards let through, else its
    number read (and checked)."""
    if type(s) is not SymbolicScalar:
        return checked_fill(s, d)
    v = s.value
    if _tracing() is None or not (d.name in ("float32", "float64") or
                                  (d.name == "int64" and type(v) is int)):
        return checked_fill(s._escape(f"the fill value of full() ({d.name})"), d)
    if type(v) is int and d.name != "int64":        # (an int a float type holds exactly)
        exact = 2 ** 24 if d.name == "float32" else _FLOAT_EXACT
        if abs(v) >= exact:
            return checked_fill(s._escape(f"the fill value of full() ({d.name})"), d)
        _require(s.tensor.abs() < exact)
    elif d.name == "float32":       # (PyTorch refuses a finite number past float32's range)
        if past(v, _FLOAT32_MAX):
            return checked_fill(s._escape("the fill value of full() (past float32)"), d)
        within(s, _FLOAT32_MAX)
    return s

