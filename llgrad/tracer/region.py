"""Regions: a branch or a loop body traced as a closed sub-Graph by a tracer nested in the
enclosing one (which may itself be a region's).

A region's inputs are the values handed to it (a loop's carried values), then its captures:
tensors of an enclosing trace that the code reads (through closures, globals, arguments or
attributes) become extra inputs, and the control-flow node passes them as operands. A tensor
no enclosing trace has seen (a global constant, a tensor made inside) is the region's own.
Regions are traced under no_grad: the control-flow node gets one autograd node for all of it
(control_ops.py).

What a region cannot do is refused with the user's line: a Python decision on a value made
inside it (bool(t), t.item(): the outcome may differ between branches or iterations), random
draws (the generator state is not threaded through regions yet), and in-place writes to a
tensor from outside it (both branches run while tracing, a loop body runs once)."""
import numpy as np

from ..ir.graph import StackType, Value
from ..ir.passes import dce
from ..runtime import grad_mode, trace_state
from ..runtime.saved_tensor import user_location
from ..runtime.tensor import Tensor
from .errors import ControlFlowError
from .trace import Tracer, tensor_type


class RegionTracer(Tracer):
    def __init__(self, name, parent, what):
        super().__init__(name)
        self.parent = parent          # the enclosing tracer (None: a standalone region)
        self.reused = getattr(parent, "reused", False)
        self.leaf_hooks = getattr(parent, "leaf_hooks", None)     # (compile's: trace.py)
        self.what = what              # "the tensor-dependent `if` at f.py:3", for errors
        self.captures = []            # [(tensor, the enclosing trace's Value)]
        self._names = set()

    def _fresh(self, name):
        base, k = name, 1
        while name in self._names:
            name, k = f"{base}_{k}", k + 1
        self._names.add(name)
        return name

    def input(self, t, name, type=None):
        v = self.builder.input(type or tensor_type(t), self._fresh(name))
        self.inputs[id(t._storage)] = len(self.builder.graph.inputs) - 1
        self._bind_root(t, v)
        return v

    def knows(self, t):
        return super().knows(t) or (self.parent is not None and self.parent.knows(t))

    def value_of(self, t):
        v = self.value_entry(t)
        if v is not None:
            return v
        if not self._owns(t) and self.parent is not None \
                and self.parent.knows(t):
            return self._capture(t)
        return super().value_of(t)

    def _capture(self, t):
        pv = self.parent.value_of(t)
        typ = pv.type if isinstance(pv.type, StackType) else tensor_type(t)
        v = self.builder.input(typ, self._fresh(f"c{len(self.captures)}"))
        self.captures.append((t, pv))
        self._set_value(t, v)
        return v

    def publish(self):
        """Tell the enclosing traces which tensors were made here: if one reaches them
        (through a side effect), using it is an error rather than a silent constant."""
        made = {id(t): (t, self.what) for t, _ in self.live_values() if self._owns(t)}
        p = self.parent
        while p is not None:
            p.region_made.update(made)
            p = getattr(p, "parent", None)

    def constant(self, value, dtype, shape):
        """A Value of `shape` filled with the Python scalar value (a `full` node)."""
        return self.add("full", [], {"shape": tuple(shape), "value": value, "dtype": dtype})

    # ---- what a region refuses -------------------------------------------------------------
    def guard(self, t, value):
        if self._owns(t):
            raise ControlFlowError(
                f"{user_location()}: a Python decision (bool(), .item(), int(), float()) on a "
                f"tensor computed inside {self.what} cannot be traced: its outcome may differ "
                "between branches or iterations. Use the tensor itself as the condition of "
                "an if/while, or llgrad.where.")
        if self.parent is not None:       # an outer value: a guard of the enclosing trace
            self.parent.guard(t, value)

    def graph_break(self, reason):
        """What cannot be compiled inside a branch (a backward reaching the enclosing trace's
        graph, say) may still be compiled with the branch left as Python, its condition a
        value guard: the control-flow error that makes compile trace it that way."""
        raise ControlFlowError(f"{user_location()}: {reason} inside {self.what}")

    def random(self, opname, result, *operands, **attrs):
        raise ControlFlowError(f"{user_location()}: random numbers inside {self.what} are not "
                         "supported yet (draw them before the if/while and pass them in)")

    def stops_gradient(self, what):
        """detach(), .data or a grad-mode switch in the user's code: the region is traced
        under no_grad and its backward differentiates the whole graph, so eager's stop of
        the gradient would be lost (a branch's `(x * 5).detach()` got x's gradient)."""
        if self.parent is not None:         # (a standalone region is a backward's own)
            raise ControlFlowError(f"{user_location()}: {what} inside {self.what}: where "
                                   "eager's gradient stops cannot be traced there yet")

    def record_inplace(self, op, t, operands, attrs):
        if not self._owns(t):
            raise ControlFlowError(
                f"{user_location()}: in-place {op.name} on a tensor from outside {self.what}: "
                "inside tensor-dependent control flow both branches are traced and a loop "
                "body runs once while tracing, so only tensors made inside may be modified "
                "in place. Assign a new value instead (x = x + 1 rather than x += 1).")
        super().record_inplace(op, t, operands, attrs)


class Region:
    """One region being traced: run(fn, ...) traces fn's ops into it; finish(results)
    makes the results its outputs and returns the Graph (dead code removed)."""

    def __init__(self, name, what, standalone=False):
        parent = None if standalone else trace_state.state.tracer
        self.tracer = RegionTracer(name, parent, what)

    def run(self, fn, *args, inputs=()):
        """Trace fn(*args); inputs [(name, tensor, type or None)] become region inputs."""
        tracer = self.tracer
        prev = trace_state.state.tracer
        mode = grad_mode._save()
        # (no_grad set directly: a grad-mode switch while a region traces is the user's)
        grad_mode.state.grad_enabled = grad_mode.state.inference_grad = False
        trace_state.state.tracer = tracer
        try:
            for name, t, typ in inputs:
                tracer.input(t, name, typ)
            return fn(*args)
        finally:
            trace_state.state.tracer = prev
            grad_mode._restore(mode)
            tracer.publish()

    def finish(self, results, loc=None):
        """results: Tensors, or (value, dtype, shape) for a Python scalar to fill with; the
        nodes this adds carry loc (the statement's line)."""
        tracer = self.tracer
        tracer.loc_override = loc
        outs = [tracer.value_of(r) if isinstance(r, Tensor) else tracer.constant(*r)
                for r in results]
        tracer.loc_override = None
        g = tracer.builder.graph
        g.outputs = outs
        return dce(g)

    @property
    def captures(self):
        return self.tracer.captures


def unify_captures(graphs, captures, n_explicit):
    """Give every graph the same inputs: its n_explicit own inputs, then the union of all
    captures (in first-seen order; a graph gets an unused input for one it did not read).
    graphs[k] captured captures[k] ([(tensor, outer Value)]). Returns the union."""
    union, where = [], {}
    for caps in captures:
        for t, pv in caps:
            if pv not in where:
                where[pv] = len(union)
                union.append((t, pv))
    for g, caps in zip(graphs, captures):
        own = {pv: v for (_, pv), v in zip(caps, g.inputs[n_explicit:])}
        taken = {v.name for v in g.inputs}
        extra = []
        for k, (t, pv) in enumerate(union):
            v = own.get(pv)
            if v is None:
                name = f"c{k}"
                while name in taken:
                    name += "_"
                taken.add(name)
                v = Value(_capture_type(t, pv), None, 0, name)
            extra.append(v)
        g.inputs = g.inputs[:n_explicit] + extra
        for i, v in enumerate(g.inputs):
            v.index = i
    return union


def _capture_type(t, pv):
    return pv.type if isinstance(pv.type, StackType) else tensor_type(t)


def snapshot(t):
    """A fresh contiguous tensor holding t's current data (a region input standing for t)."""
    return Tensor._from_array(np.array(t._data, order="C"))
