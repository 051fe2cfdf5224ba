"""llgrad.explain(fn, *args): what compile makes of a call, as torch._dynamo.explain
tells it: the graphs and their ops, the graph breaks with their reasons and lines, the
guards in readable form, what runs as native code and what on the interpreter, and the
bytes each backward keeps.

Like fn.dump(*args) it changes nothing the caller can see: a trace it needs runs on the
state as it is and everything it wrote is put back; warnings the trace gives are reported
here rather than raised. A plain function is explained through a fresh llgrad.compile of it;
a compiled function (or module) through its own cache."""
from __future__ import annotations
import collections
import warnings
from typing import TYPE_CHECKING

from .backends import backward_run, forward_run
from .compiled_function import CompiledFunction, TraceError
from .groupkernel import group_label
from .guards import collect
from .guard_expressions import Names
from .readable import guard_lines

if TYPE_CHECKING:
    from collections.abc import Callable


class GraphInfo:
    """One graph of the entry: which (forward / backward), its op counts, how it runs."""

    def __init__(self, which, graph, kernel):
        self.which, self.graph = which, graph
        self.name = graph.name
        self.n_ops = len(graph.nodes)
        self.ops = collections.Counter(n.op for n in graph.nodes)
        self.native = kernel is not None and not isinstance(kernel, str)
        self.interpreted = kernel if isinstance(kernel, str) else None
        self.groups = [] if not self.native else _group_labels(kernel)

    def summary(self):
        ops = ", ".join(f"{op} x{k}" if k > 1 else op for op, k in self.ops.most_common())
        how = (f"native: {len(self.groups)} kernel groups" if self.native else
               self.interpreted or "not built")
        return f"{self.which} graph {self.name}: {self.n_ops} ops ({ops}); {how}"


def _group_labels(kernel):
    return [group_label(g) for g in kernel.plan.groups]


BreakReason = collections.namedtuple("BreakReason", "reason user_stack graph_break")
# (torch's GraphCompileReason)


class Explanation:
    """What llgrad.explain found; str() / repr() is the report."""

    def __init__(self, name):
        self.name = name
        self.graphs = []            # [GraphInfo]
        self.graph_breaks = []      # [reason (with the user's line)]
        self.runs_eagerly = False
        self.guards = []            # [readable guard]
        self.saved = []             # [(name, type, bytes, where)] of the backward
        self.saved_bytes = 0        # excluding inputs
        self.step = False
        self.n_traces = 0
        self.notes = []             # other warnings the call gave

    @property
    def graph_count(self):
        return len(self.graphs)

    @property
    def break_count(self):
        return len(self.graph_breaks)

    graph_break_count = break_count     # (torch's ExplainOutput name)

    @property
    def break_reasons(self):
        """torch's ExplainOutput.break_reasons: one per graph break, its .reason the text."""
        return [BreakReason(r, [], True) for r in self.graph_breaks]

    @property
    def op_count(self):
        """torch's ExplainOutput.op_count: the ops over the graphs."""
        return sum(g.n_ops for g in self.graphs)

    @property
    def out_guards(self):
        """torch's ExplainOutput.out_guards: the guards of the compiled entries."""
        return list(self.guards)

    @property
    def ops_per_graph(self):
        return {g.which: g.n_ops for g in self.graphs}

    def text(self):
        lines = [f"llgrad.explain({self.name}): {self.graph_count} graph(s), "
                 f"{self.break_count} graph break(s)"
                 + ("; the call runs eagerly" if self.runs_eagerly else "")]
        if self.graph_breaks:
            lines.append("graph breaks:")
            lines += [f"  {k + 1}. {r}" for k, r in enumerate(self.graph_breaks)]
        for g in self.graphs:
            lines.append(g.summary())
            if g.native:
                lines += [f"    {label}" for label in g.groups]
        if self.step:
            lines.append("the function runs its own backward (a training step): one graph, "
                         "no compiled backward")
        if any(g.which == "backward" for g in self.graphs):
            lines.append(f"saved for the backward: {self.saved_bytes:,} bytes in "
                         f"{sum(1 for s in self.saved if s[3] != 'input')} value(s), "
                         f"besides {sum(1 for s in self.saved if s[3] == 'input')} input(s)")
            lines += [f"    {n:8s} {t:28s} {b:>10,d}  {w}" for n, t, b, w in self.saved]
        if self.guards:
            lines.append(f"guards ({len(self.guards)}):")
            lines += [f"  {g}" for g in self.guards]
        if self.notes:
            lines.append("warnings:")
            lines += [f"  {n}" for n in self.notes]
        lines.append(f"traces of {self.name} so far: {self.n_traces}")
        return "\n".join(lines)

    __str__ = __repr__ = text


def explain(fn: Callable, *args: object, **kwargs: object) -> Explanation:
    """An Explanation of what llgrad.compile makes of fn(*args, **kwargs) (see module)."""
    cf = getattr(fn, "_compiled", fn)
    if not isinstance(cf, CompiledFunction):
        cf = CompiledFunction(fn)
    out = Explanation(getattr(cf.fn, "__name__", "fn"))
    before = len(cf.graph_breaks)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            entry = cf._entry_for(args, kwargs)
        except TraceError as e:         # (fullgraph=True: the break raised)
            entry = None
            cf.graph_breaks.append(str(e).split("\n")[0])
        if entry is not None:           # (built: native or interpreted, and why)
            forward_run(entry, sync=True)
            if entry.backward is not None:
                backward_run(entry, sync=True)
    out.graph_breaks = list(dict.fromkeys(cf.graph_breaks[before:]))
    _, guards, n_own = collect(cf.fn, args, kwargs)
    key = tuple(v for _, v in guards)
    if entry is None:
        out.runs_eagerly = True
        reason = cf._eager_reasons.get(key) or cf._not_kept
        if reason and reason not in out.graph_breaks:
            out.graph_breaks.append(reason)
    notes = [str(w.message) for w in caught]
    out.notes = [n for n in dict.fromkeys(notes)
                 if not any(r in n for r in out.graph_breaks)]
    out.n_traces = cf.n_traces
    if entry is None:
        return out
    out.step = entry.step
    out.graphs.append(GraphInfo("forward", entry.forward, entry.kernels.get("forward")))
    if entry.backward is not None:
        out.graphs.append(GraphInfo("backward", entry.backward, entry.kernels.get("backward")))
        for s in entry.saved:
            out.saved.append((s.name, str(s.type), s.nbytes,
                              "input" if s.input_index is not None else str(s.loc)))
        out.saved_bytes = sum(s.nbytes for s in entry.saved if s.input_index is None)
    out.guards = guard_lines(entry.guard_items, Names(cf.fn, args, kwargs),
                             entry.forward.guards, entry.forward)
    return out
