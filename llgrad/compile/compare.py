"""Bisecting a mismatch: which node of a compiled graph first computes something else than
the reference does (llgrad.debug.compare).

For the entry a call selects (traced if needed, with nothing the caller can see changed):

  1. eager vs interpreter, op by op: the traced forward graph replayed through the eager
     dispatcher (each node an eager op) and run on the IR interpreter, node by node;
  2. native vs interpreter, group by group: the graph the native kernel computes (the
     traced graph as lowered: composites expanded, CSE, DCE) run on the interpreter, and
     the kernel's own groups run one at a time (groupkernel.py) with each group's results
     read out of its buffers after it ran; the first group whose results differ is then
     narrowed to a node by compiling a graph that returns each of that group's nodes;
  3. the same for the backward graph, fed the interpreter's saved values and fixed
     pseudo-random cotangents.

The first difference beyond the tolerance is reported with its node (op, operand and
result types, the user's line) and the largest difference. Inputs are copied: nothing
the caller holds is written. LLGRAD_CHECK=1 runs this before every call of every compiled
function that has an entry for the call (debug.py)."""
import numpy as np

from ..ir.graph import Graph
from ..ir.interpret import evaluate
from ..ir.printer import _names
from ..runtime import grad_mode
from ..runtime.creation import default_generator
from ..runtime.tensor import Tensor
from ..tracer.control_ops import replay
from .backends import backward_run, forward_run
from .compiled_function import CompiledFunction
from .groupkernel import GroupKernel, flag_raised, group_kernel, read_value
from .guards import collect

RTOL = {"float16": 1e-2, "float32": 1e-4, "float64": 1e-9}
ATOL = {"float16": 1e-3, "float32": 1e-5, "float64": 1e-12}


class Mismatch:
    """The first node whose values differ: where, what, by how much."""

    def __init__(self, graph, comparison, node, value, got, want, text, group=None, note="",
                 names=None):
        self.graph = graph              # "forward" or "backward"
        self.comparison = comparison    # "llvm vs interpreter", "eager vs interpreter"
        self.node, self.value = node, value
        self.op = node.op if node is not None else None
        self.loc = getattr(node, "loc", "") if node is not None else ""
        self.line = text                # the node as the IR prints it
        self.group = group              # the kernel group's label (native comparisons)
        self.note = note
        self.got, self.want = got, want
        self.max_abs_diff, self.index = _largest(got, want)
        names = names or {}
        self.operands = [f"%{names.get(x, x.name or '?')}: {x.type}"
                         for x in (node.inputs if node is not None else ())
                         if hasattr(x, "type")]

    def text(self):
        """The mismatch as readable lines (graph, node, operands, largest difference)."""
        a, b = self.comparison.split(" vs ")
        lines = [f"first difference: {self.graph} graph, {self.comparison}",
                 f"  {self.line}"]
        if self.node is not None:
            if self.operands:
                lines.append(f"  operands: {', '.join(self.operands)}")
            lines.append(f"  result: {self.value.type}    at {self.loc or '?'}")
        if self.index is not None:
            lines.append(f"  largest difference {self.max_abs_diff:.6g} at index "
                         f"{self.index}: {a} {_at(self.got, self.index)!r} vs {b} "
                         f"{_at(self.want, self.index)!r}")
        else:
            lines.append(f"  {a} gives shape {np.shape(self.got)}, {b} {np.shape(self.want)}")
        if self.group:
            lines.append(f"  in kernel group {self.group}")
        if self.note:
            lines.append(f"  {self.note}")
        return "\n".join(lines)

    __str__ = __repr__ = text


class Report:
    """What compare found: `.ok`, `.mismatch` (the first Mismatch or None), `.checked`
    (what was compared) and `.skipped` (what could not be, and why)."""

    def __init__(self, name):
        self.name = name
        self.mismatch = None
        self.checked = []
        self.skipped = []

    @property
    def ok(self):
        """Whether no difference was found."""
        return self.mismatch is None

    def text(self):
        """The report as readable lines."""
        head = f"llgrad.debug.compare({self.name}): " + (
            "no difference" if self.ok else "MISMATCH")
        lines = [head]
        if self.mismatch is not None:
            lines.append(self.mismatch.text())
        lines += [f"  checked: {c}" for c in self.checked]
        lines += [f"  skipped: {s}" for s in self.skipped]
        return "\n".join(lines)

    __str__ = __repr__ = text


def _at(a, index):
    try:
        return np.asarray(a)[index].item()
    except Exception:
        return None


def _largest(got, want):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return float("inf"), None
    if got.size == 0:
        return 0.0, None
    g = got.astype(np.float64) if got.dtype.kind in "fiub" else got
    w = want.astype(np.float64) if want.dtype.kind in "fiub" else want
    diff = np.abs(g - w)
    both_nan = np.isnan(g) & np.isnan(w)
    diff = np.where(both_nan, 0.0, np.where(np.isnan(diff), np.inf, diff))
    k = int(np.argmax(diff))
    return float(diff.reshape(-1)[k]), tuple(int(i) for i in np.unravel_index(k, got.shape))


def differs(got, want, rtol=None, atol=None):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return True
    if got.dtype.kind not in "fc" and want.dtype.kind not in "fc":
        return not np.array_equal(got, want)
    dt = str(want.dtype) if want.dtype.kind == "f" else str(got.dtype)
    rt = RTOL.get(dt, 1e-4) if rtol is None else rtol
    at = ATOL.get(dt, 1e-5) if atol is None else atol
    g, w = got.astype(np.float64), want.astype(np.float64)
    return not np.all(np.isclose(g, w, rtol=rt, atol=at, equal_nan=True))


def _label_names(graph):
    return _names(graph)


def _node_line(graph, node, names=None):
    names = names or _label_names(graph)
    lhs = ", ".join("%" + names.get(o, "?") for o in node.outputs)
    ops = ", ".join(("%" + names[x]) if x in names else repr(x) for x in node.inputs)
    attrs = " ".join(f"{k}={v!r}" for k, v in node.attrs.items()
                     if not hasattr(v, "nodes"))
    types = ", ".join(str(o.type) for o in node.outputs)
    line = f"{lhs} = {node.op} {ops} {attrs}".rstrip()
    return f"{line}   : {types}   # {node.loc or '?'}"


# ---- running the graphs -----------------------------------------------------------------------
def compare(fn, *args, rtol=None, atol=None, trace=True, eager=True, **kwargs):
    """Report (see module) for fn(*args, **kwargs); fn a compiled function, a compiled
    module, or a plain function (compiled here, llvm backend)."""
    cf = getattr(fn, "_compiled", fn)
    if not isinstance(cf, CompiledFunction):
        cf = CompiledFunction(fn, backend="llvm")
    report = Report(getattr(cf.fn, "__name__", "fn"))
    entry = cf._entry_for(args, kwargs, trace=trace)
    if entry is None:
        report.skipped.append("no compiled entry for these arguments (the call runs eagerly "
                              "or has not been traced)")
        return report
    tensors, _, _ = collect(cf.fn, args, kwargs, dynamic=cf._dynamic)
    arrays = [np.array(t._data) for _, t in tensors]
    if entry.rng_index is not None:
        arrays.append(default_generator.state.copy())
    tol = dict(rtol=rtol, atol=atol)
    fwd = entry.forward
    if eager:
        _eager_vs_interpreter(report, "forward", fwd, arrays, tol)
        if report.mismatch is not None:
            return report
    outs = _native_vs_interpreter(report, entry, "forward", arrays, tol)
    if report.mismatch is not None or entry.backward is None or outs is None:
        return report
    feeds, j = [], 0
    for s in entry.saved:
        if s.input_index is not None:
            feeds.append(np.array(arrays[s.input_index]))
        else:
            feeds.append(np.array(outs[entry.n_out + j]))
            j += 1
    rng = np.random.default_rng(0)
    for v in entry.backward.inputs[len(feeds):]:
        t = v.type
        feeds.append((rng.standard_normal(t.shape) if t.dtype.startswith("float")
                      else np.ones(t.shape)).astype(t.dtype))
    _native_vs_interpreter(report, entry, "backward", feeds, tol)
    return report


def _eager_vs_interpreter(report, which, graph, arrays, tol):
    try:
        _, env_i = evaluate(graph, [np.array(a) for a in arrays])
        with grad_mode.no_grad():
            env_e = replay(graph, [Tensor._from_array(np.array(a)) for a in arrays])
    except Exception as e:
        report.skipped.append(f"{which}: eager vs interpreter ({type(e).__name__}: {e})")
        return
    names = _label_names(graph)
    for node in graph.nodes:
        for v in node.outputs:
            e, i = env_e.get(v), env_i.get(v)
            if e is None or i is None:
                continue
            got = e._data if isinstance(e, Tensor) else np.asarray(e)
            if differs(got, i, **tol):
                report.mismatch = Mismatch(which, "eager vs interpreter", node, v, got, i,
                                           _node_line(graph, node, names), names=names)
                return
    report.checked.append(f"{which}: eager vs interpreter, {len(graph.nodes)} nodes")


def _native_vs_interpreter(report, entry, which, arrays, tol):
    """Compare the native kernel of entry's `which` graph with the interpreter, group by
    group -> the interpreter's outputs of the graph as traced (None on failure)."""
    from ..codegen.kernel import Kernel      # (codegen loads llvmlite: on first use)
    graph = getattr(entry, which)
    try:
        ref_outs, _ = evaluate(graph, [np.array(a) for a in arrays])
    except Exception as e:
        report.skipped.append(f"{which}: the interpreter failed ({type(e).__name__}: {e})")
        return None
    if entry.backend.name != "llvm":
        report.skipped.append(f"{which}: backend {entry.backend.name} (no native kernel)")
        return ref_outs
    (forward_run if which == "forward" else backward_run)(entry, sync=True)
    kernel = entry.kernels.get(which)
    kernel = getattr(kernel, "_llgrad_original", kernel)
    if not isinstance(kernel, Kernel):
        report.skipped.append(f"{which}: not native ({kernel})")
        return ref_outs
    gk = group_kernel(kernel)
    plan_graph = kernel.plan.graph
    _, env_ref = evaluate(plan_graph, [np.array(a) for a in arrays])
    names = _label_names(plan_graph)
    if not isinstance(gk, GroupKernel):
        report.skipped.append(f"{which}: group by group ({gk}); compared the outputs only")
        outs, _ = kernel.run([np.array(a) for a in arrays])
        for k, (got, want) in enumerate(zip(outs, ref_outs)):
            if differs(got, want, **tol):
                v = graph.outputs[k]
                report.mismatch = Mismatch(which, "llvm vs interpreter", v.node, v, got, want,
                                           f"output {k} of {graph.name}")
                return ref_outs
        return ref_outs
    found = []

    def native(addr):
        for c in gk.calls:
            c.fn(addr)
            for v in c.group.results:
                if v in env_ref:
                    got = read_value(addr, gk.plan, v)
                    if differs(got, env_ref[v], **tol):
                        found.append((c, v, got))
                        return
            if c.checks and any(flag_raised(addr, s) for s in c.checks):
                return
    try:
        gk.variant(native).run([np.array(a) for a in arrays])
    except Exception as e:
        report.skipped.append(f"{which}: running the groups raised {type(e).__name__}: {e}")
        return ref_outs
    if not found:
        report.checked.append(f"{which}: llvm vs interpreter, {len(gk.calls)} kernel groups "
                              f"({len(plan_graph.nodes)} nodes as lowered)")
        return ref_outs
    c, v, got = found[0]
    node, value, got2, note = _narrow(gk, c, arrays, env_ref, tol)
    if node is None:
        node, value, note = v.node, v, ("the group's nodes compiled one by one agree with "
                                        "the interpreter: the group as fused differs")
    else:
        got = got2
    report.mismatch = Mismatch(which, "llvm vs interpreter", node, value, got, env_ref[value],
                               _node_line(plan_graph, node, names), group=c.label, note=note,
                               names=names)
    return ref_outs


def _narrow(gk, call, arrays, env_ref, tol):
    """The first node of a group whose value differs, found by compiling a graph that
    returns every node of the group -> (node, value, native value, note) or Nones."""
    from ..codegen.lower import lower
    g = gk.plan.graph
    members = call.group.members or [call.group.root]
    outs = [o for n in members for o in n.outputs]
    probe = Graph(f"{g.name}_probe_g{call.index}", g.inputs, g.nodes, outs)
    try:
        k = lower(probe)
        got = k.run([np.array(a) for a in arrays])[0]
    except Exception as e:
        return None, None, None, f"(narrowing to a node failed: {type(e).__name__}: {e})"
    for v, a in zip(outs, got):
        if v in env_ref and differs(a, env_ref[v], **tol):
            return v.node, v, a, "(narrowed to this node by compiling the group's nodes " \
                                 "as outputs of their own)"
    return None, None, None, ""
