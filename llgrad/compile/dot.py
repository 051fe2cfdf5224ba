"""A compiled entry's graphs as a picture: Graphviz DOT text (`fn.dump(*args,
format="dot")`, `python -m llgrad dump --dot`) and SVG (`--svg`: through Graphviz's `dot`
program when it is installed, else drawn by svg.py's own layered layout).

The forward and the backward graph are two clusters. A node shows its op, result type and
the user's line; graph inputs are ellipses; views are dashed (they alias their base and
cost no code); values the forward saves for the backward are filled yellow, with a dotted
edge to the backward input that receives them; each fused kernel group (one loop nest of
the native code) is a dashed cluster labelled with its group number and ops. Where the
native code computes a simplified graph (composites expanded, CSE, DCE: codegen.lower),
that graph is drawn, since its nodes are the ones the groups are made of."""
import shutil
import subprocess

from ..ir.optable import OPS
from ..ir.printer import _names
from .groupkernel import group_label
from .log import short_loc
from .svg import draw

class Model:
    """The picture, independent of its drawing: clusters of nodes and edges."""

    def __init__(self, name):
        self.name = name
        self.clusters = []      # [Cluster]
        self.cross = []         # [(src id, dst id, label)]: saved values, forward -> backward


class Cluster:
    def __init__(self, key, label):
        self.key, self.label = key, label
        self.nodes = []         # [(id, [label lines], kind)]: kind input, op, view, saved,
        #                         const or return
        self.edges = []         # [(src, dst, label)]
        self.groups = []        # [(label, [node ids])]


def _is_view(node):
    op = OPS.get(node.op)
    return op is not None and op.kind == "view"


def _plan(graph, kernel):
    """The plan the native code follows (the kernel's, else planned now, without LLVM),
    or None where the graph is not lowered."""
    if kernel is not None and not isinstance(kernel, str):
        return kernel.plan
    if isinstance(kernel, str):
        return None
    try:
        from ..codegen.build import blas_available, plan_graph, simplify, unsupported
        from ..codegen.lowerings.ops_matmul import small_gemm_bound
        g = simplify(graph)
        if unsupported(g) is not None:
            return None
        return plan_graph(g, {"blas": blas_available(), "small_gemm": small_gemm_bound()})
    except Exception:
        return None


def _value_names(graph):
    return _names(graph)


def _attrs_text(node, limit=36):
    parts = []
    for k, v in node.attrs.items():
        if hasattr(v, "nodes"):                 # a region
            parts.append(f"{k}=<region>")
            continue
        s = f"{k}={v!r}".replace(" ", "")
        parts.append(s)
    text = " ".join(parts)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def graph_cluster(graph, key, title, kernel=None, saved_outputs=(), saved_inputs=(),
                  n_results=None):
    """A Cluster of graph (ids prefixed with key): saved_outputs are output positions whose
    values the backward keeps; saved_inputs input positions that receive saved values;
    n_results how many outputs are results (the rest feed the backward)."""
    plan = _plan(graph, kernel)
    drawn = plan.graph if plan is not None else graph
    lowered = drawn is not graph
    c = Cluster(key, title + (" (as lowered: composites expanded, CSE, DCE)" if lowered
                              else "") + ("" if plan is not None else " (not native)"))
    names = _value_names(drawn)
    ids = {}
    for k, v in enumerate(drawn.inputs):
        ids[v] = f"{key}_in{k}"
        kind = "saved" if k in saved_inputs else "input"
        c.nodes.append((ids[v], [f"%{v.name}" + (" (saved)" if kind == "saved" else ""),
                                 str(v.type)], kind))
    saved_values = {drawn.outputs[k] for k in saved_outputs if k < len(drawn.outputs)}
    node_ids = {}
    for j, node in enumerate(drawn.nodes):
        nid = f"{key}_n{j}"
        node_ids[node] = nid
        for o in node.outputs:
            ids[o] = nid
        lhs = ", ".join("%" + names.get(o, "?") for o in node.outputs)
        if node.op == "constant":
            val = node.attrs.get("value")
            text = repr(val) if not hasattr(val, "__len__") or len(repr(val)) < 24 else "array"
            c.nodes.append((nid, [f"{lhs} = constant {text}", str(node.outputs[0].type)],
                            "const"))
            continue
        lines = [f"{lhs} = {node.op}"]
        attrs = _attrs_text(node)
        if attrs:
            lines.append(attrs)
        lines.append(", ".join(str(o.type) for o in node.outputs))
        view = _is_view(node)
        if view and node.view_of is not None:
            lines.append(f"view of %{names.get(node.view_of, '?')}")
        if node.loc:
            lines.append(short_loc(node.loc))
        kind = "view" if view else "op"
        if any(o in saved_values for o in node.outputs):
            kind = "saved"
            lines[0] += "  (saved)"
        c.nodes.append((nid, lines, kind))
        for x in node.inputs:
            if hasattr(x, "type") and x in ids:
                c.edges.append((ids[x], nid, ""))
    ret = f"{key}_return"
    results = drawn.outputs if n_results is None else drawn.outputs[:n_results]
    c.nodes.append((ret, ["return"], "return"))
    for k, v in enumerate(results):
        if v in ids:
            c.edges.append((ids[v], ret, str(k)))
    for i, v in sorted(drawn.mutated.items()):
        if v in ids:
            c.edges.append((ids[v], ids[drawn.inputs[i]], "written back"))
    if plan is not None:
        for grp in plan.groups:
            members = [node_ids[n] for n in (grp.members or [grp.root]) if n in node_ids]
            if members:
                c.groups.append((group_label(grp), members))
    return c


def entry_model(entry):
    m = Model(entry.name)
    kernels = dict(getattr(entry, "kernels", {}))
    if getattr(entry.backend, "name", "llvm") != "llvm":     # (no kernel groups to show)
        kernels = {w: f"{entry.backend.name} backend" for w in ("forward", "backward")}
    n_saved_out = 0
    saved_inputs = ()
    if entry.backward is not None:
        n_saved_out = sum(1 for s in entry.saved if s.input_index is None)
        saved_inputs = range(len(entry.saved))
    n_out = entry.n_out if entry.backward is not None else None
    saved_outputs = range(entry.n_out, entry.n_out + n_saved_out) if n_saved_out else ()
    fwd = graph_cluster(entry.forward, "f", f"forward: {entry.forward.name}",
                        kernels.get("forward"), saved_outputs=saved_outputs,
                        n_results=n_out)
    m.clusters.append(fwd)
    if entry.backward is not None:
        bwd = graph_cluster(entry.backward, "b", f"backward: {entry.backward.name}",
                            kernels.get("backward"), saved_inputs=saved_inputs)
        m.clusters.append(bwd)
        fwd_ids = {}
        plan = _plan(entry.forward, kernels.get("forward"))
        drawn = plan.graph if plan is not None else entry.forward
        j = 0
        for k, s in enumerate(entry.saved):
            if s.input_index is not None:
                src = f"f_in{s.input_index}"
            else:
                v = drawn.outputs[entry.n_out + j]
                j += 1
                src = _id_of(drawn, v, "f", fwd_ids)
            if src is not None:
                m.cross.append((src, f"b_in{k}", s.name))
    return m


def _id_of(graph, v, key, cache):
    if not cache:
        for k, x in enumerate(graph.inputs):
            cache[x] = f"{key}_in{k}"
        for j, node in enumerate(graph.nodes):
            for o in node.outputs:
                cache[o] = f"{key}_n{j}"
    return cache.get(v)


# ---- DOT text -----------------------------------------------------------------------------------
_STYLE = {
    "input": 'shape=ellipse, style=filled, fillcolor="#dbe9f6"',
    "saved": 'shape=box, style="filled,rounded", fillcolor="#fff2b3"',
    "op": 'shape=box, style=rounded',
    "view": 'shape=box, style="rounded,dashed", color="#777777", fontcolor="#555555"',
    "const": 'shape=box, style="rounded,dotted", fontcolor="#555555"',
    "return": 'shape=doubleoctagon, style=filled, fillcolor="#e6e6e6"',
}


def quote(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _label(lines):
    return quote("\n".join(lines)).replace("\n", "\\n")


def to_dot(model):
    out = [f"digraph {quote(model.name)} {{",
           '  graph [rankdir=TB, fontname="Helvetica", fontsize=11, newrank=true];',
           '  node [fontname="Courier", fontsize=9];',
           '  edge [fontname="Helvetica", fontsize=8, color="#555555"];']
    for c in model.clusters:
        out.append(f"  subgraph cluster_{c.key} {{")
        out.append(f"    label={quote(c.label)}; style=rounded; color=\"#333333\";")
        grouped = set()
        for k, (label, members) in enumerate(c.groups):
            out.append(f"    subgraph cluster_{c.key}_g{k} {{")
            out.append(f"      label={quote(label)}; style=dashed; color=\"#4a7ebb\"; "
                       f"fontcolor=\"#4a7ebb\"; fontsize=9;")
            out.append("      " + " ".join(f"{m};" for m in members))
            out.append("    }")
            grouped.update(members)
        for nid, lines, kind in c.nodes:
            out.append(f"    {nid} [label={_label(lines)}, {_STYLE[kind]}];")
        for src, dst, label in c.edges:
            attr = f" [label={quote(label)}]" if label else ""
            out.append(f"    {src} -> {dst}{attr};")
        out.append("  }")
    for src, dst, label in model.cross:
        out.append(f"  {src} -> {dst} [style=dotted, color=\"#b08800\", constraint=false, "
                   f"label={quote('saved ' + label)}];")
    out.append("}")
    return "\n".join(out) + "\n"


def entry_dot(entry):
    return to_dot(entry_model(entry))


# ---- SVG ----------------------------------------------------------------------------------------
def dot_program():
    return shutil.which("dot")


def render_svg(entry_or_model):
    """(SVG text, how): through Graphviz's dot where installed, else svg.py's layout."""
    model = entry_or_model if isinstance(entry_or_model, Model) else entry_model(entry_or_model)
    prog = dot_program()
    if prog:
        res = subprocess.run([prog, "-Tsvg"], input=to_dot(model), capture_output=True,
                             text=True, timeout=120)
        if res.returncode == 0:
            return res.stdout, "graphviz dot"
    return draw(model), "llgrad's built-in layout (Graphviz `dot` is not installed)"
