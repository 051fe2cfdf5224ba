"""A compiled graph: a Kernel runs one native call per call (launch.py checks the inputs,
fills the pointer array and makes the call), then builds the returned arrays: the output
buffers themselves, views of them, inputs or constants (run, _build).

A Kernel keeps its code loaded, and so does every native function and launch made from it
(they hold the jit.CodeAddress they were made from): the JIT frees the code of kernels
nothing uses any more (native/jit.py), so a launch kept after its Kernel is gone stays
safe to call."""
import ctypes
import weakref

import numpy as np

from ..ir.ops_shape import strided_view
from .launch import _Context, _InSpec, _launcher, data_pointer
from .native import trampoline
from .schedule.plan import escaping_values, root_of

# (data_pointer lives in launch.py: named here so that `kernel.` keeps offering it)
__all__ = ["TAIL", "Kernel", "live_kernels", "data_pointer"]

TAIL = "_tail"      # the entry of a split kernel's second part: entry + TAIL (lower.py)


_live = weakref.WeakSet()           # Kernels alive (tests: memory stays bounded)


def live_kernels():
    """How many Kernels are alive."""
    import gc
    gc.collect()
    return len(_live)


class Kernel:
    """Call with a sequence of arrays (one per graph input); returns the outputs' arrays.

    ir_before / ir_after: the module's LLVM IR before and after optimisation."""

    def __init__(self, graph, plan, compiled, entry, split=None, bind=None):
        _live.add(self)
        self.graph = graph
        self.plan = plan
        self.compiled = compiled
        self.entry_name = entry
        self.address = compiled.address(entry)
        self.split = split              # (tail's first group, late slots, released inputs)
        self._in = [_InSpec(v) for v in graph.inputs]
        self._fast_specs = [(sp.dtype, sp.shape, sp.bstrides, sp.mask) for sp in self._in]
        self._pool = []              # free _Context objects (list.pop/append are atomic)
        self._pool.append(self._new_context())
        self._outs = [(b.slot, np.dtype(b.dtype), tuple(b.value.type.shape))
                      for b in plan.outputs]
        index = {b: k for k, b in enumerate(plan.outputs)}
        self._recipes = [self._recipe(v, index) for v in plan.escaping]
        self._nout = len(graph.outputs)
        self._copies = self._unshared(graph)
        # run()'s extras are keyed by `graph`'s Values: the traced graph, which the plan's
        # (simplified, lower.simplify) graph matches position by position
        self._extra_keys = escaping_values(graph)[self._nout:]
        self._mutated = sorted(graph.mutated)
        self._direct_outs = self._direct_layout()
        self._tail = None
        # bind: wraps each native function of code shared between sizes (lower.py)
        bind = bind or (lambda fn: fn)
        if split is not None:
            self._tail = (bind(self._native_fn(compiled.address(entry + TAIL))),
                          frozenset(split[1]), split[2])
        # (setting _fn makes the launchers) a builtin costs a fraction of a ctypes call
        self._fn = bind(self._native_fn(self.address))

    @staticmethod
    def _native_fn(address):
        """A callable f(ctx_address) for the entry at address. It holds what the address
        holds (jit.CodeAddress: the Compiled), so the code stays loaded while f lives."""
        fn = trampoline.caller(address)
        if fn is None:
            fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)
            fn.code = getattr(address, "code", None)
        return fn

    @property
    def _fn(self):
        """The native entry point as a function of the pointer array's address: the
        trampoline's builtin (trampoline.py), or a ctypes function where that is off."""
        return self._native

    @_fn.setter
    def _fn(self, fn):      # the launchers hold the function itself: remade when it is set
        self._native = fn
        # (a direct kernel's calls take launch_direct; run() is its rare path, not worth
        # compiling a lean launch for)
        self._launch = _launcher(fn, self._pool, self.plan, self.graph.name, self._fast_specs,
                                 self._in, self._outs, direct=False,
                                 lean=self._direct_outs is None, tail=self._tail)
        # launch_direct(arrays) -> the outputs, for a direct kernel (see `direct`)
        self.launch_direct = None if self._direct_outs is None else _launcher(
            fn, self._pool, self.plan, self.graph.name, self._fast_specs, self._in,
            self._direct_outs, direct=True, tail=self._tail)

    def _new_context(self):
        return _Context(self.plan)

    @property
    def ir_before(self):
        return self.compiled.ir_before

    @property
    def ir_after(self):
        return self.compiled.ir_after

    def _recipe(self, v, index):
        """How to build the array of a returned value after the call."""
        root = root_of(v)
        buf = self.plan.buffers[root]
        t = v.type
        if buf.role == "stack":         # after the output buffers (see _launch)
            return ("out", len(self.plan.outputs) + self.plan.stacks.index(buf), None)
        if buf.role == "constant":
            node = root.node
            base = np.asarray(node.attrs["value"], dtype=node.attrs["dtype"])
            if v is root:
                return ("const", base, None)
            return ("const", base, (t.shape, t.strides, t.offset - root.type.offset))
        if buf.role == "input":
            if v is root:
                return ("input", buf.index, None)
            return ("input", buf.index, (t.shape, t.strides, t.offset - root.type.offset))
        k = index[buf]
        if v is root:
            return ("out", k, None)
        it = np.dtype(t.dtype).itemsize
        return ("outview", k, (t.shape, tuple(s * it for s in t.strides),
                               (t.offset - root.type.offset) * it))

    # ---- calling ------------------------------------------------------------------------
    def _direct_layout(self):
        """For a direct kernel, the (slot, dtype, shape) of each returned value, in return
        order; else None. Direct: each returned value (every escaping value an output: a
        mutated input's or guard's buffer is not) is a whole output buffer of its own, or
        a view of one with the same C-contiguous layout (a reshape, such as a bias
        gradient's (1, n) -> (n,)): allocating each buffer with the returned value's shape
        makes a call one launch with nothing rebuilt, and the outputs fresh arrays."""
        if self.plan.stacks or not len(self._recipes) == len(self._outs) == self._nout:
            return None                 # (a loop's stacks are harvested after the outputs)
        layout, used = [], set()
        for kind, k, geom in self._recipes:
            if kind not in ("out", "outview") or k in used or k >= len(self._outs):
                return None
            slot, dt, shape = self._outs[k]
            if kind == "outview":
                vshape, bstrides, boff = geom
                vshape = tuple(vshape)
                if boff or np.prod(vshape, dtype=np.int64) != np.prod(shape, dtype=np.int64) \
                        or np.empty(vshape, dt).strides != tuple(bstrides):
                    return None
                shape = vshape
            used.add(k)
            layout.append((slot, dt, shape))
        return layout

    @property
    def direct(self):
        """Whether the outputs are exactly the output buffers (fresh arrays that alias
        nothing); then `launch_direct(arrays)` returns them as a list, one launch."""
        return self._direct_outs is not None

    def _unshared(self, graph):
        """The outputs that simplify() (lower.py) made share a buffer with an input or an
        earlier output that the traced graph computes apart (common subexpressions merged:
        x.new_zeros(2) and zeros_like(x)): run() returns copies of them, so writing one
        leaves the other as in eager."""
        copies, seen = [], {}
        for j, ((kind, k, _), v) in enumerate(zip(self._recipes, graph.outputs)):
            if kind not in ("out", "outview", "input"):
                continue
            root, where = root_of(v), ("input" if kind == "input" else "out", k)
            if (kind == "input" and root is not graph.inputs[k]) or \
                    seen.setdefault(where, root) is not root:
                copies.append(j)
        return tuple(copies)

    def run(self, arrays):
        """(outputs, extras): extras maps each mutated input's final value and each guard's
        value (Values of the graph) to its array; nothing is written back."""
        arrays, outs = self._launch(arrays)
        results = [self._build(r, arrays, outs) for r in self._recipes]
        for j in self._copies:
            results[j] = np.array(results[j], order="K")
        n = self._nout
        return tuple(results[:n]), dict(zip(self._extra_keys, results[n:]))

    def __call__(self, arrays):
        """Run the kernel; mutated inputs are written back (as ir.interpret does)."""
        if self._direct_outs is not None:              # outputs are the output buffers
            return tuple(self.launch_direct(arrays))
        outs, extras = self.run(arrays)
        for i in self._mutated:
            final = extras[self.graph.mutated[i]]
            if final is not arrays[i]:          # (else written in place: plan.in_place)
                arrays[i][...] = final
        return outs

    @staticmethod
    def _build(recipe, arrays, outs):
        kind, k, geom = recipe
        if kind == "out":
            return outs[k]
        if kind == "outview":
            shape, bstrides, boff = geom
            base = outs[k]
            if 0 in shape:      # an empty view: no element to address (and an offset into a
                boff = 0        # 0-byte buffer is out of its bounds for NumPy)
            return np.ndarray(shape, base.dtype, buffer=base, offset=boff, strides=bstrides)
        base = arrays[k] if kind == "input" else k.copy()
        if geom is None:
            return base
        shape, strides, shift = geom
        return strided_view(base, shape, strides, shift)

    def dump(self, optimized=True):
        return self.ir_after if optimized else self.ir_before

    def __repr__(self):
        return f"<Kernel {self.entry_name}: {len(self.plan.groups)} groups>"
