"""A repeated subgraph compiles once (codegen/schedule/dedupe.py): groups with the same structure
share one function, groups that differ in anything their code depends on do not, and the
shared code computes what the interpreter computes. (The whole suite also runs with
LLGRAD_CHECK_DEDUPE=1: every shared function is emitted twice and compared.)"""
import numpy as np

import llgrad
from llgrad.codegen.schedule import dedupe
from llgrad.codegen.lower import lower
from llgrad.ir import Builder, TensorType
from llgrad.ir.interpret import evaluate


def _defined(k):
    """The module's functions (a table entry, codegen/entry_table.py, calls the shared ones
    through a table of their addresses: no function of its own per shared function)."""
    return sum(1 for line in k.ir_before.split("\n") if line.startswith("define"))


def _run(g, arrays, clusters=True):
    k = lower(g, clusters=clusters)
    got = k(arrays)
    want, _ = evaluate(g, arrays)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    return k


def test_check_is_on_in_the_test_suite():
    assert dedupe.CHECK


def test_a_layer_applied_many_times_is_compiled_once():
    def f(x, w):
        h = x
        for _ in range(60):
            h = (h @ w).tanh() * 0.5 + x
        return h.sum()

    x, w = llgrad.randn(8, 16), llgrad.randn(16, 16) * 0.1
    g = llgrad.trace(f, x, w)
    k = _run(g, [x.numpy(), w.numpy()])
    assert len(k.plan.groups) >= 120
    assert _defined(k) <= 6          # the entry, mm, the elementwise step, the sum, helpers


def _stack_backward_functions(depth):
    import llgrad.nn as nn
    llgrad.manual_seed(0)
    model = nn.Sequential(*[nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
                            for _ in range(depth)])
    params = list(model.parameters())
    x = llgrad.randn(2, 5, 16)

    def loss(x, *ps):
        y = model(x)
        return (y * y).mean()

    f = llgrad.compile(loss)
    for _ in range(2):
        f(x, *params).backward()
    f.wait()                # (LLGRAD_COMPILE=background: the kernels are built by now)
    want = loss(x, *params)
    got = f(x, *params)
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    entry = f.entries[-1]
    kernel = entry.kernels["backward"]
    # the lines of code of every function but the entry (which calls them, once per block)
    functions = kernel.compiled.ir_before.split("\ndefine ")[1:]
    return sum(f.count("\n") for f in functions if not f.split("(")[0].endswith(
        f'@"{kernel.entry_name}"'))


def test_identical_blocks_share_their_backward_functions_at_any_depth():
    """Independent loops of one shape from different blocks do not fuse into one loop per
    depth (cluster.py's rule (4)): the functions the backward of 8 identical blocks defines
    are as long as those of 2 (before: 1,980 lines against 1,902, the depth-wide clusters'
    code; 2,000 more at the benchmark's width, and twice the LLVM time)."""
    assert _stack_backward_functions(8) == _stack_backward_functions(2)


def test_different_shapes_constants_and_layouts_get_their_own_functions():
    bld = Builder("variants")
    x = bld.input(TensorType("float32", (6, 5)), "x")
    y = bld.input(TensorType("float32", (5, 6)), "y")               # read transposed
    z = bld.input(TensorType("float32", (5, 6), (1, 5)), "z")       # its t() is x's layout
    outs = [bld.add("tanh", [bld.add("mul", [x, 2.0])]),
            bld.add("tanh", [bld.add("mul", [x, 3.0])]),       # another constant
            bld.add("tanh", [bld.add("mul", [bld.add("t", [y], {}, view_of=y), 2.0])]),
            bld.add("tanh", [bld.add("mul", [bld.add("view", [x], {"shape": (30,)},
                                                     view_of=x), 2.0])]),   # another shape
            bld.add("tanh", [bld.add("mul", [bld.add("t", [z], {}, view_of=z), 2.0])])]
    g = bld.ret(*outs)
    rng = np.random.default_rng(0)
    k = _run(g, [rng.standard_normal((6, 5)).astype("float32"),
                 rng.standard_normal((5, 6)).astype("float32"),
                 rng.standard_normal((6, 5)).astype("float32").T], clusters=False)
    keys = [dedupe.group_key(k.plan, grp, k.plan.group_buffers(grp)) for grp in k.plan.groups]
    assert len(keys) == 5 and len(set(keys[:4])) == 4
    # (what the code reads of a buffer is the layout it reads it in: z's transpose is read
    # as x is, and shares x's function)
    assert keys[4] == keys[0]


def test_the_same_buffer_twice_is_not_two_buffers():
    """x * x and x * y have the same ops, but one reads one parameter twice."""
    bld = Builder("alias")
    x = bld.input(TensorType("float32", (64,)), "x")
    y = bld.input(TensorType("float32", (64,)), "y")
    g = bld.ret(bld.add("mul", [x, x]), bld.add("mul", [x, y]))
    rng = np.random.default_rng(1)
    k = _run(g, [rng.standard_normal(64).astype("float32"),
                 rng.standard_normal(64).astype("float32")], clusters=False)
    keys = [dedupe.group_key(k.plan, grp, k.plan.group_buffers(grp)) for grp in k.plan.groups]
    assert keys[0] != keys[1]


def test_a_key_collision_is_caught(monkeypatch):
    """The suite's check fails loudly when two groups share a key but not code."""
    monkeypatch.setattr(dedupe, "group_key", lambda plan, grp, bufs, bases=None: "same")
    bld = Builder("collide")
    x = bld.input(TensorType("float32", (64,)), "x")
    g = bld.ret(bld.add("tanh", [x]), bld.add("exp", [x]))
    import llgrad.codegen.build as build_mod
    monkeypatch.setattr(build_mod, "group_key", dedupe.group_key)
    try:
        lower(g, clusters=False)
    except AssertionError as e:
        assert "group key collision" in str(e)
    else:
        raise AssertionError("the collision went unnoticed")


def test_body_text_reads_metadata_by_content_not_number():
    """Loop hints are numbered in the order the module made them: a group emitted again
    refers to other numbers for the same hints (a false collision the suite's check found),
    while other hints are other code."""
    from llvmlite import ir as llir

    from llgrad.codegen.schedule.dedupe import body_text
    from llgrad.codegen.lowerings.loops import for_range, loop_hints

    mod = llir.Module()

    def make(name, width):
        fn = llir.Function(mod, llir.FunctionType(llir.VoidType(), []), name)
        b = llir.IRBuilder(fn.append_basic_block())
        with for_range(b, 0, 10, hints=loop_hints(mod, vectorize_width=width)):
            pass
        b.ret_void()
        return fn

    first, again, other = make("hinted0", 8), make("hinted1", 8), make("hinted2", 4)
    assert str(first).split("!llvm.loop")[1] != str(again).split("!llvm.loop")[1]
    assert body_text(first) == body_text(again)
    assert body_text(first) != body_text(other)


def test_steps_reading_rows_of_one_buffer_share_a_function():
    """A time loop's steps read row t of one input projection (a view at offset t * H): the
    step's function takes the buffer from that row on (dedupe.read_bases), so every step
    is one function, and the number of functions does not grow with the steps."""
    def f(xs, w):
        h = xs[0] * 0.0
        for t in range(xs.shape[0]):
            h = (xs[t] + h @ w).tanh() * (1 + xs[t])
        return h.sum()

    counts = []
    for steps in (4, 12):
        xs, w = llgrad.randn(steps, 8, 16), llgrad.randn(16, 16) * 0.3
        g = llgrad.trace(f, xs, w)
        k = _run(g, [xs.numpy(), w.numpy()])
        counts.append(_defined(k))
    assert counts[0] == counts[1], counts


def test_rows_read_at_other_distances_do_not_share():
    """Steps that read rows t and t + 1, but one in the middle reading rows t and t + 2:
    its relative offsets differ, so it is a function of its own (sharing the others' would
    read row t + 1), and every step computes what the interpreter computes."""
    def f(xs, w):
        h = xs[0] @ w
        for t in range(xs.shape[0] - 2):
            other = xs[t + 2] if t == 2 else xs[t + 1]
            h = ((xs[t] * 2 + other).tanh() + h) @ w     # (a product ends each step's loop)
        return h.sum()

    xs, w = llgrad.randn(7, 4, 32), llgrad.randn(32, 32) * 0.2
    g = llgrad.trace(f, xs, w)
    k = _run(g, [xs.numpy(), w.numpy()])
    assert _defined(k) < 10             # (the other steps share one function)


def test_a_buffer_the_group_writes_keeps_its_start():
    """read_bases rebases only buffers a group reads from outside: a group that stores y
    and reads it back through y[1:] keeps y's buffer at its start (a lowering may write
    partials through the parameter itself), while an input read from row 2 on is rebased."""
    from types import SimpleNamespace

    def f(xs):
        y = (xs[2] * 3).exp()
        return y, y[1:] * 2 + xs[3][1:]

    xs = llgrad.randn(5, 8, 64)
    g = llgrad.trace(f, xs)
    plan = _run(g, [xs.numpy()]).plan
    exp = next(n for n in g.nodes if n.op == "exp")
    scale = exp.inputs[0].node                              # xs[2] * 3
    y = exp.outputs[0]
    reader = next(n for n in g.nodes if n.op == "mul" and n.inputs[0].node is not None
                  and n.inputs[0].node.view_of is y)        # y[1:] * 2
    grp = SimpleNamespace(members=[scale, exp, reader], root=reader, results=[y], temps=[])
    bases = dedupe.read_bases(plan, grp, True)
    assert id(plan.buffers[y]) not in bases
    xs_buf = plan.buffers[g.inputs[0]]
    assert bases.get(id(xs_buf)) == 2 * 8 * 64
