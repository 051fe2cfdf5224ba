"""A repeated subgraph compiles once: groups with the same structure share one function.

A network applies the same layer many times; each application is a group (or a few) whose
code differs from the others' only in which buffers it reads and writes, and those are the
function's parameters. `group_key` describes everything a group's emitted code depends on,
without emitting it: its kind, its nodes (ops, attributes, constants and which operand
comes from which node or parameter), the layouts it reads and writes (types, and the dtype
and offset of the buffer a view reads through), which of its values it stores, its parameters' kinds,
dtypes and sizes, and the plan's options. Groups with equal keys emit identical functions up
to their parameters' names (`body_text` says what "identical" means; a test checks it over
the op table), so `emit_plan` emits the first and calls it for the others.

Emitting a 2,000-op chain of 500 identical layers went from 1,000 functions (28 s in LLVM's
optimiser when inlined, 7 s as separate functions) to 4.

A time loop's steps read rows t of one buffer (an RNN's input projection, computed for all
steps at once): views at offsets that differ from step to step. A fused loop's function
(`read_bases`) takes such a buffer from the lowest offset it reads on, and its key holds
the offsets from there, so the steps share one function; a step reading at other
distances has another key. The GRU of bench/real_models.py went from 114 functions in its
forward module and 153 in its backward to 20 and 36, its LLVM time from 2.2 to 0.4 s."""
import os
import re

from ...ir.graph import TensorType, Value
from ...ir.ops_control import CONTROL
from ...ir.printer import literal
from .plan import root_of

# LLGRAD_CHECK_DEDUPE=1 (set by the test suite): emit every group anyway and check that its
# code is the code of the function its key selected
CHECK = os.environ.get("LLGRAD_CHECK_DEDUPE", "") == "1"


def check_same(mod, fn, emit):
    """Emit a group again (emit(name) -> function) and compare it with fn; then drop it and
    whatever it added to the module (outlined parallel bodies)."""
    before = set(mod.globals)
    mod.twins = getattr(mod, "twins", 0) + 1       # (names stay taken after a delete)
    twin = emit(f"{fn.name}.twin{mod.twins}")
    same = body_text(twin) == body_text(fn)
    for name in [n for n in mod.globals if n not in before]:
        del mod.globals[name]
    if not same:
        raise AssertionError(f"codegen.schedule.dedupe: group key collision: {fn.name} and {twin.name} "
                             "have the same key but different code")


def read_bases(plan, grp, rebased):
    """{id(buffer): base} for the buffers grp reads from outside itself, only at offsets
    above 0, where rebased (its emission addresses every operand through FuncGen.address):
    the group's function then takes buffer + base as that parameter and reads at offsets
    relative to it, so the steps of a time loop, reading rows t of one input projection,
    emit one function. A buffer the group writes keeps its start (a lowering may write
    partial results through the parameter itself)."""
    if not rebased:
        return {}
    members = grp.members or [grp.root]
    made = {o for n in members for o in n.outputs}
    written = {id(plan.buffers.get(v)) for v in grp.results} | {id(b) for b in grp.temps}
    low = {}
    for n in members:
        for x in list(n.inputs) + ([n.view_of] if n.view_of is not None else []):
            if isinstance(x, Value) and root_of(x) not in made:
                root = root_of(x)
                buf = plan.buffers.get(root)
                if buf is not None and id(buf) not in written:
                    # (offsets count elements of the value's dtype: a view of another
                    # width, a bitcast, leaves the buffer at its start)
                    off = x.type.offset - root.type.offset if x.type.dtype == buf.dtype \
                        else 0
                    low[id(buf)] = min(low.get(id(buf), off), off)
    return {k: v for k, v in low.items() if v > 0}


def group_key(plan, grp, bufs, bases=None):
    """A hashable description of the code grp emits with parameters bufs (None: unique);
    bases: read_bases' (offsets into those buffers count from there)."""
    members = grp.members or [grp.root]
    if any(n.op in CONTROL for n in members):
        return None                     # (regions: compiled as functions of their own)
    param = {id(b): k for k, b in enumerate(bufs)}
    bases = bases or {}
    local = {}

    def ref(x):
        if not isinstance(x, Value):
            return ("c", literal(x))
        if x in local:
            return ("v", local[x], x.type)
        root = root_of(x)
        if root in local:               # a view of a value of this group
            return ("view", local[root], x.type, root.type)
        buf = plan.buffers.get(root)
        base = bases.get(id(buf), 0)
        t = x.type if not base else TensorType(x.type.dtype, x.type.shape, x.type.strides,
                                               x.type.offset - base)
        # (of the buffer's own value, the code reads only where x starts in it and its
        # dtype, plan.access: the shapes a layer's buffers come in do not split its key)
        return ("p", param.get(id(buf)), t, root.type.dtype, root.type.offset)

    nodes = []
    for n in members:
        ins = tuple(ref(x) for x in n.inputs)
        view = ref(n.view_of) if n.view_of is not None else None
        try:
            attrs = literal(tuple(sorted(n.attrs.items())))
        except Exception:               # noqa: BLE001 - an attribute without a literal form
            return None
        for o in n.outputs:
            local[o] = len(local)
        nodes.append((n.op, attrs, ins, view, tuple(o.type for o in n.outputs)))
    results = tuple(ref(v) + (param.get(id(plan.buffers.get(v))),) for v in grp.results)
    leaves = tuple(ref(v) for v in grp.leaves)
    # (a buffer's role changes no code: the first step's state, scratch, and the others',
    # outputs, are one function's parameter alike)
    params = tuple((b.role == "constant", b.dtype, b.numel, b.strides) for b in bufs)
    options = tuple(sorted(getattr(plan, "options", {}).items()))
    # (a lowering's choice that the group's own ops and buffers do not decide: a product on
    # llgrad's GEMM because other products of the graph read its weight too)
    choice = getattr(grp, "state", {}).get("choice")
    return (grp.loop, tuple(nodes), results, leaves, params, options, choice)


_PARAM = re.compile(r'%"?(b[0-9x]+)"?(?![0-9A-Za-z_.])')


def body_text(fn):
    """fn's LLVM text without its name, its parameters renamed by position and its metadata
    references (loop hints, numbered in the order the module made them) replaced by what
    they say: two functions with equal body_text compute the same thing given the same
    arguments."""
    text = str(fn)
    text = text[text.index("("):].replace(fn.name, "SELF")   # (its outlined bodies' names)
    pos = {a.name: k for k, a in enumerate(fn.args)}
    text = _PARAM.sub(lambda m: f"%p{pos.get(m.group(1), m.group(1))}", text)
    metadata = {md.name: md for md in getattr(fn.module, "metadata", ())}
    return _MD.sub(lambda m: _metadata_text(metadata, m.group(1), ()), text)


_MD = re.compile(r"!(\d+)\b")


def _metadata_text(metadata, name, inside):
    """Metadata node !name as its operands, nested nodes expanded (a node referring to
    itself, as a loop ID does, says "self")."""
    md = metadata.get(name)
    if md is None:
        return f"!{name}"
    if name in inside:
        return "self"
    body = str(md).split(" = ", 1)[1]
    return _MD.sub(lambda m: _metadata_text(metadata, m.group(1), inside + (name,)), body)
