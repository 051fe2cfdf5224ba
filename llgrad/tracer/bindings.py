"""What a trace knows of the tensors it has seen, held weakly so that a traced run frees
its intermediates when eager would (a training step's activations, gradients and the
optimiser's temporaries would otherwise all live until the trace ends).

    values  id(tensor) -> (weak ref to the tensor, its Value, the storage's version when
            bound, the storage): dropped when the tensor dies (so an id is never stale)
    roots   key -> (weak ref to the root tensor, the memory's current Value, the root's
            layout as bound, weak ref to the memory's base array): the Value of a buffer,
            one per storage (key: id(storage)). It lives as long as the memory does, not
            as the root tensor: another tensor may still reach that memory (x.detach(),
            x.data, a saved tensor unpacked) after the root is gone, and then the layout
            kept here stands for the root's.
    bases   id(base array) -> the key of the first storage bound over it (tensors over the
            same memory under a storage of their own, as x.data, find its root)
    aliased keys of roots whose memory another storage views
    regions id(base array) -> [((first byte, end byte), key)]: roots over one buffer that
            hold disjoint bytes of it (inputs under Storages of their own, as the
            parameters vector_to_parameters makes of one vector); a tensor over the buffer
            under another Storage belongs to the region holding its bytes

A storage that died while its memory lives on (held by x.data's storage) may have its
address taken by a new storage: its root is then moved to a key no storage has."""
import weakref

import numpy as np

from ..ir.geometry import contiguous_strides, geometry_span
from ..ir.graph import Value
from ..runtime.tensor import Tensor


class _Ref(weakref.ref):
    __slots__ = ("key",)

    def __new__(cls, obj, callback, key):
        ref = weakref.ref.__new__(cls, obj, callback)
        ref.key = key
        return ref

    def __init__(self, obj, callback, key):
        super().__init__(obj, callback)


def geometry(t):
    """(shape, strides, storage offset) of t, in elements."""
    return (tuple(t._data.shape), t.stride(), t._storage_offset())


def _layout(t):
    """What geometry(t) is computed from, cheaply (a root's layout is read only once the
    root is dead, which is rare)."""
    d = t._data
    return (d.shape, d.strides, d.itemsize, 0 if d is t._storage.base else t._storage_offset())


def _from_layout(layout):
    shape, strides, item, offset = layout
    strides = contiguous_strides(shape) if 0 in shape else tuple(s // item for s in strides)
    return (tuple(shape), strides, offset)


class Bindings:
    def __init__(self):
        self.values, self.roots, self.bases, self.aliased = {}, {}, {}, set()
        self.regions = {}
        # (the callbacks hold the tables weakly: no reference cycle keeps them, and the
        # Values they hold, once the trace is over)
        me = weakref.ref(self)

        def drop_value(ref):
            b = me()
            e = None if b is None else b.values.get(ref.key)
            if e is not None and e[0] is ref:
                del b.values[ref.key]

        def drop_root(ref):
            b = me()
            if b is None:
                return
            key, bid = ref.key
            rec = b.roots.get(key)
            if rec is not None and rec[3] is ref:
                del b.roots[key]
                b.aliased.discard(key)
            if b.bases.get(bid) == key:
                del b.bases[bid]

        self._drop_value, self._drop_root = drop_value, drop_root

    def _set_value(self, t, v):
        """t holds v (until its storage's version moves)."""
        key = id(t)
        e = self.values.get(key)
        ref = e[0] if e is not None and e[0]() is t else _Ref(t, self._drop_value, key)
        self.values[key] = (ref, v, t._storage.version, t._storage)

    def _bind_root(self, t, v):
        """t's memory (all of its storage) holds v; t is its root."""
        self._set_value(t, v)
        st = t._storage
        sid, base = id(st), st.base
        rec = self.roots.get(sid)
        if rec is not None and rec[3]() is not base:
            # a dead storage's root at this address, its memory held on (y.data): moved
            # to a key of its own, not overwritten (its weak ref's callback would go with
            # it, and `bases` would keep naming this key for that memory)
            self._owns(t)
            rec = None
        bref = rec[3] if rec is not None else _Ref(base, self._drop_root, (sid, id(base)))
        self.roots[sid] = (self.values[id(t)][0], v, _layout(t), bref)
        self.bases.setdefault(id(base), sid)

    def _rebind(self, key, v):
        """The memory of root `key` holds v."""
        _, _, layout, bref = self.roots[key]
        rt = self._root_tensor(key)
        if rt is not None:
            self._bind_root(rt, v)
        else:
            self.roots[key] = (self.roots[key][0], v, layout, bref)

    def _root(self, key):
        """(the root tensor or None once dead, the memory's Value, the root's geometry)."""
        _, v, layout, _ = self.roots[key]
        rt = self._root_tensor(key)
        return rt, v, geometry(rt) if rt is not None else _from_layout(layout)

    def _root_tensor(self, key):
        """Root key's tensor, or None once it is dead or holds another Storage: `p.data = y`
        moves p to y's (a later write into p's old memory, through `v = p.data`, bound p and
        y's root to that memory's new value), `p.data = p.data.t()` to another Storage over
        the same memory, laid out otherwise (p was read as the root's value, untransposed)."""
        ref, _, _, bref = self.roots[key]
        rt = ref()
        return rt if rt is not None and id(rt._storage) == key and \
            rt._storage.base is bref() else None

    def _in_storage_order(self, t, operands, attrs):
        """as_strided's operands and attributes where it reads t's storage: where the IR lays
        t's root out otherwise than eager's memory (a result of a non-view op is contiguous
        in the IR where eager kept its input's strides, x.t() * 2), a flat copy of the root's
        memory in eager's order, read at eager's storage offsets."""
        sid = self._sid(t)
        if sid not in self.roots:
            return operands, attrs
        _, rv, geom = self._root(sid)
        if all(a == b or n <= 1 for a, b, n in zip(rv.type.strides, geom[1], geom[0])):
            return operands, attrs
        span = max(geometry_span(*geom), geometry_span(*geometry(t)))
        flat = self._root_memory(geom, rv, span)
        return [flat] + operands[1:], {**attrs, "in_strides": (1,), "in_offset": 0}

    def _owns(self, t):
        """Whether t's own storage has a root here."""
        st = t._storage
        sid = id(st)
        rec = self.roots.get(sid)
        if rec is None:
            return False
        if rec[3]() is st.base:
            return True
        # a dead storage's root (its memory lives on) at the address of t's storage
        bref = rec[3]
        bid = bref.key[1]
        new = ("memory", bid)
        del self.roots[sid]
        self.roots[new] = rec
        bref.key = (new, bid)
        if self.bases.get(bid) == sid:
            self.bases[bid] = new
        if sid in self.aliased:
            self.aliased.discard(sid)
            self.aliased.add(new)
        return False

    def _input_alias(self, t, name):
        """Bind input t as another input's alias when t has that input's very Storage and
        geometry (`p.data = y` with y kept too: the same memory under two names). Reads
        and writes of either go through the one root, so the trace sees each write through
        the other name as eager does; where the run wrote that memory, the graph then reads
        one Value for both (merge_inputs) and compiled calls check the two still share a
        Storage (compile/moved_data.py). True when bound so. (A Tracer's: its inputs and
        builder.)"""
        sid = id(t._storage)
        j = self.inputs.get(sid)
        if j is None or not self._owns(t):
            return False
        rt = self.roots[sid][0]()
        if rt is None or geometry(rt) != geometry(t) or rt._dtype != t._dtype:
            return False
        self._set_value(t, self.builder.input(self.roots[sid][1].type, name))
        self.input_aliases.append((len(self.builder.graph.inputs) - 1, j, t._storage.version))
        return True

    def merge_inputs(self, pairs):
        """Make the graph read input j's Value wherever it read input k's, for (k, j) in
        pairs: two inputs over one memory that the traced run wrote. Kept apart, code
        generation would not see that a read of k is a read of j's memory and could write
        j's final value into its buffer before a later group reads k (a reduction fused
        after an in-place update: codegen/schedule/plan.py in_place_results). k's input
        stays in place (the call's positions), unread; calls check that the two still
        share memory (compile/moved_data.py aliases_hold)."""
        inputs = self.builder.graph.inputs
        sub = {id(inputs[k]): inputs[j] for k, j in pairs}
        if not sub:
            return

        def swap(x):
            if isinstance(x, (list, tuple)):
                return type(x)(swap(e) for e in x)
            return sub.get(id(x), x) if isinstance(x, Value) else x
        for node in self.builder.graph.nodes:
            node.inputs = [swap(x) for x in node.inputs]
            node.view_of = swap(node.view_of)
        for key, e in list(self.values.items()):
            if id(e[1]) in sub:
                self.values[key] = (e[0], sub[id(e[1])], e[2], e[3])
        for key, rec in list(self.roots.items()):
            if id(rec[1]) in sub:
                self.roots[key] = (rec[0], sub[id(rec[1])], rec[2], rec[3])

    def memory_written(self, st, j):
        """Whether the trace wrote the memory of input j (Storage st): its root holds another
        Value than the input's. (A write through x.data moves x.data's version counter, not
        st's, so st.version alone misses it.)"""
        rec = self.roots.get(id(st))
        return rec is None or rec[1] is not self.builder.graph.inputs[j]

    def _sid(self, t):
        """The key of the root that holds t's memory: t's own storage's, or the owner's for
        a tensor over the same buffer under a storage of its own (x.data: its own version
        counter, the same memory); else id(t's storage), which has no root."""
        st = t._storage
        if self._owns(t):
            return id(st)
        owner = self.bases.get(id(st.base))
        if owner is not None and id(st.base) in self.regions:
            owner = self._region_key(t, self.regions[id(st.base)])
        if owner is not None:
            rec = self.roots.get(owner)
            if rec is not None and rec[3]() is st.base:
                self.aliased.add(owner)
                return owner
        return id(st)

    def _disjoint_region(self, t):
        """Whether input t, under a Storage of its own over a buffer that roots bound before
        are over too, holds none of their bytes (their tensors' byte ranges, and no other
        buffer over that memory); then t's bytes are a region of the buffer (`regions`).
        Else the regions' keys are marked shared with t (Tracer.input marks t's)."""
        base = t._storage.base
        lo, hi = _bounds(t._data)
        taken = []
        for key, rec in self.roots.items():
            if rec[3]() is base:
                rt = self._root_tensor(key)
                taken.append((None, key) if rt is None else (_bounds(rt._data), key))
        if taken and all(b is not None and (b[1] <= lo or hi <= b[0]) for b, _ in taken) \
                and all(st.base is base or not np.shares_memory(st.base, base)
                        for st in self.arrays.values()):
            self.regions[id(base)] = taken + [((lo, hi), id(t._storage))]
            return True
        self.shared.update(key for _, key in self.regions.get(id(base), ()))
        return False

    def _region_key(self, t, regions):
        """The key of the region holding t's bytes (a graph break where none holds them)."""
        lo, hi = _bounds(t._data)
        for (first, end), key in regions:
            if first <= lo and hi <= end:
                return key
        self.graph_break("reading memory that inputs share (pass separate tensors, or "
                         ".clone() one of them)")

    def value_entry(self, t):
        """t's Value if t is bound and its memory has not changed since, else None."""
        e = self.values.get(id(t))
        if e is not None and e[0]() is t and e[2] == t._storage.version and \
                e[3] is t._storage:
            return e[1]
        return None

    def operands(self, inputs, results=()):
        """The Values of a recorded op's inputs (value_of: the Tracer's), its other operands
        as they are. A NumPy array operand (t == arr, t.add(arr)) stops the trace: eager
        computes with it, a graph cannot hold it as a constant (an argument's changes)."""
        if any(type(x) is np.ndarray for x in inputs):
            self.untraceable("a NumPy array as an operand of a tensor op")
        self.real_values(inputs)
        self.real_values(results)
        return [self.value_of(x) if isinstance(x, Tensor) else x for x in inputs]

    def real_values(self, xs):
        """Stop at a bfloat16 tensor among xs: compiled code has no bfloat16 values (eager
        rounds them: dispatch_bf16.py). Complex values are traced: the IR interpreter runs
        them as eager does, and native code calls their NumPy implementations back."""
        for x in xs:
            if isinstance(x, Tensor) and not x._dtype._plain and not x._dtype.is_complex:
                self.graph_break("bfloat16 tensors (compiled code has no bfloat16 values)")

    def inplace_view(self, t, v, memory=True):
        """t itself became a view of its memory (t.t_(), x.unsqueeze_(0)) with value v;
        memory=False: its memory's root keeps its value (an input that compiled calls view
        so after the call, compile/input_reshapes.py: nothing to write back)."""
        self._set_value(t, v)
        if not memory:
            return
        rec = self.roots.get(id(t._storage))
        if rec is not None and rec[0]() is t:
            self.roots[id(t._storage)] = (rec[0], v, _layout(t), rec[3])

    def live_values(self):
        """[(tensor, Value)] of the tensors bound now."""
        out = []
        for e in list(self.values.values()):
            t = e[0]()
            if t is not None:
                out.append((t, e[1]))
        return out

    def memory_now(self):
        """What each memory the trace knows holds now: a mark for writes_since."""
        return {sid: rec[1] for sid, rec in self.roots.items()}

    def writes_since(self, mark):
        """Whether code traced since memory_now() gave mark wrote memory that was there before
        it: one the trace knew then, or an input it met since (a module's buffer first read
        there); memory made since is not counted."""
        inputs = self.builder.graph.inputs
        for sid, rec in list(self.roots.items()):
            was = mark.get(sid)
            if was is None and sid in self.inputs:
                was = inputs[self.inputs[sid]]
            if was is not None and rec[1] is not was:
                return True
        return False


def _bounds(arr):
    return np.lib.array_utils.byte_bounds(arr)


def overlaps_input(t, arrays):
    """Whether t's memory overlaps an input's (arrays: the inputs' storages), though its
    Storage is its own (two from_numpy tensors over one NumPy buffer)."""
    base = t._storage.base
    if base.base is None and all(st.base.base is None and st.base is not base
                                 for st in arrays.values()):
        return False        # distinct buffers that own their memory cannot overlap
    return any(np.shares_memory(base, st.base) for st in arrays.values())


def array_storage(tracer, arr):
    """Tracer.array_storage(arr): the Storage of the input over NumPy array arr or over the
    memory arr views, or None; noted in the top tracer's linked_arrays (an input array read
    this way is read as a tensor: compile/numpy_reads.py)."""
    arrays = tracer.arrays
    st = arrays.get(id(arr))
    if st is None and arr.base is not None:
        st = arrays.get(id(arr.base))
    if st is None or not (st.base is arr or st.base is arr.base):
        # an input array that is itself a view (X = a.reshape(500, 4), X = a[:, :4]): a view
        # of it has a, not X, as its base (it was baked into the trace as a constant)
        st = _viewed_input(arr, arrays)
    if st is not None:
        while getattr(tracer, "parent", None) is not None:
            tracer = tracer.parent
        tracer.linked_arrays.add(id(st))
    return st


def _viewed_input(arr, arrays):
    """The Storage of the input whose array is a view of the memory arr also views (both
    have arr.base as their base) and holds arr's bytes, or None."""
    owner = arr.base
    if owner is None:
        return None
    lo, hi = np.lib.array_utils.byte_bounds(arr)
    for st in arrays.values():
        b = st.base
        if (b.base is not owner and b is not owner) or b.dtype != arr.dtype:
            continue
        blo, bhi = np.lib.array_utils.byte_bounds(b)
        if blo <= lo and hi <= bhi and (lo - blo) % arr.itemsize == 0:
            return st
    return None
