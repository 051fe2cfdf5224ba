"""The lowerings of the data-movement and index ops: stack, gather, index_add, embedding,
index and index_put (NumPy's advanced indexing, bool masks), against the reference
interpreter over every layout, with negative and out-of-range indices (clamp-and-flag:
IndexError after the call, nothing read or written outside a buffer; nll_loss's targets
too).

Graphs are built with the IR Builder and compiled with llgrad.codegen.lower, as in
test_lower.py; each test builds one graph holding many cases, so it compiles once."""
import numpy as np
import pytest

from llgrad.codegen.lower import lower, supports, unsupported
from llgrad.ir import Builder, TensorType
from llgrad.ir.interpret import evaluate
from test_lower import FLOATS, check, layouts, rand, run_both
from test_lower_ops import inputs, some_layouts


# ---- stack, gather, index_add, embedding --------------------------------------------------------

@pytest.mark.parametrize("dt", FLOATS + ("int64",))
def test_stack_gather_index_add_embedding(dt):
    rng = np.random.default_rng(5)
    bld = Builder("data")
    arrays, outs = [], []
    xs = inputs(bld, arrays, *layouts(rng, dt).values())
    R, C = arrays[0].shape
    i32 = rng.integers(0, C, (R, 9)).astype(np.int32)
    gi0, gi1, ii, emb = inputs(bld, arrays, rng.integers(0, R, (4, C)), i32,
                                rng.integers(0, C, 20), rng.integers(0, R, (2, 3, 4)))
    for k, x in enumerate(xs):
        other = xs[(k + 1) % len(xs)]
        src = inputs(bld, arrays, rand(rng, (20, R), dt))[0]
        outs += [bld.add("stack", [x, other, x], {"dim": k % 3 - 1}),
                 bld.add("gather", [x, gi0], {"dim": 0}),
                 bld.add("gather", [x, gi1], {"dim": 1}),
                 bld.add("index_add", [x, ii, bld.add("t", [src], {}, view_of=src)],
                         {"dim": 1, "alpha": 2 if dt == "int64" else 0.5}),
                 bld.add("embedding", [x, emb], {"padding_idx": None})]
    # promotion in stack, a broadcast source in index_add, a 0-d embedding index
    f32 = inputs(bld, arrays, rand(rng, (R, C), "float32"))[0]
    outs.append(bld.add("stack", [xs[0], f32], {"dim": 2}))
    row = inputs(bld, arrays, rand(rng, (C,), dt))[0]
    outs.append(bld.add("index_add", [xs[1], inputs(bld, arrays, np.array([2, 2, R - 1]))[0],
                                      bld.add("expand", [row], {"size": (3, C)}, view_of=row)],
                        {"dim": 0, "alpha": 1}))
    outs.append(bld.add("embedding", [xs[0], inputs(bld, arrays, np.array(R - 2))[0]],
                        {"padding_idx": 1}))
    g = bld.ret(*outs)
    assert supports(g) == (True, None)
    _, got, want = run_both(g, arrays)
    check(got, want)                         # index_add accumulates in np.add.at's order


def _raises_both(g, arrays):
    k = lower(g)
    with pytest.raises(IndexError):
        k([np.array(a) for a in arrays])
    with pytest.raises(IndexError):
        evaluate(g, [np.array(a) for a in arrays])
    return k


def _oob_cases():
    """(op, build(bld, x, index) -> Value, a bad index) for x of shape (5, 4)."""
    def gather(b, v, i):
        return b.add("gather", [v, i], {"dim": 1})

    def index_add(b, v, i):
        return b.add("index_add", [v, i, v], {"dim": 1, "alpha": 1})

    def embedding(b, v, i):
        return b.add("embedding", [v, i], {"padding_idx": None})

    def index(spec):
        return lambda b, v, i: b.add("index", [v, i], {"spec": spec})

    def index_put(b, v, i):
        total = b.add("sum", [v], {"dim": None, "keepdim": False})
        return b.add("index_put", [v, total, i], {"spec": ("T",), "accumulate": True})

    def nll(ignore, red):
        return lambda b, v, i: b.add("nll_loss", [v, i, None], {"ignore_index": ignore,
                                                                 "reduction": red})
    return [("gather", gather, np.array([[1], [0], [4], [0], [0]])),
            ("gather", gather, np.full((5, 1), -5)),
            ("index_add", index_add, np.array([0, 1, 4, 2])),
            ("embedding", embedding, np.array([[1, 5]])),
            ("embedding", embedding, np.array([-6])),
            ("index", index(("T",)), np.array([1, 1 << 40])),
            ("index", index((("slice", 1, None, 2), "T")), np.array([[0, -5]])),
            ("index_put", index_put, np.array([0, 5])),
            ("nll_loss", nll(-100, "mean"), np.array([0, 1, 4, 2, 3])),
            ("nll_loss", nll(9, "none"), np.array([0, 1, -5, 2, 9])),
            ("nll_loss", nll(-100, "sum"), np.array([0, -1, 2, 1, 3]))]   # (no wrapping)


def test_index_ops_out_of_range():
    """Every index op clamps-and-flags: a bad index raises IndexError after the call (as
    the reference does) and never touches memory outside a buffer."""
    x = np.arange(20.0).reshape(5, 4)
    for op, make, bad in _oob_cases():
        bld = Builder(f"oob_{op}")
        v = bld.input(TensorType("float64", x.shape))
        i = bld.input(TensorType("int64", bad.shape))
        g = bld.ret(make(bld, v, i))
        k = _raises_both(g, [x, bad])
        good = np.zeros_like(bad)
        got = k([x, good])
        check(got, evaluate(g, [x, good])[0], what=op)      # later calls are unaffected


# ---- index / index_put --------------------------------------------------------------------------

SPECS = [(("T",), [(3,)]), (("T", ("slice", 1, None, 2)), [(2, 2)]),
         ((("slice", None, None, None), "T"), [(4,)]), (("T", "T"), [(3,), (2, 1)]),
         ((("slice", None, None, -1), "T", None), [(2,)]), ((None, "T"), [(2, 2)]),
         ((2, "T"), [(3,)]), (("T", 1), [(3,)]), (("T", None, 2), [(2,)])]


@pytest.mark.parametrize("dt", ("float64", "int64"))
def test_index_and_index_put(dt):
    """NumPy's advanced indexing over every layout: int tensors (negative ones wrap),
    slices, None, ints (advanced beside a tensor: the result's B block moves first when
    the advanced entries are not adjacent); index_put assigns (duplicates: the last wins)
    or accumulates (duplicates add up in order), with broadcast values."""
    rng = np.random.default_rng(6)
    bld = Builder("adv")
    arrays, outs = [], []
    xs = inputs(bld, arrays, *some_layouts(rng, dt, shape=(5, 7)))
    for n, (spec, shapes) in enumerate(SPECS):
        idx = inputs(bld, arrays, *[rng.integers(-5, 5, s) for s in shapes])
        for k, x in enumerate(xs):
            y = bld.add("index", [x] + idx, {"spec": spec})
            outs.append(y)
            vals = inputs(bld, arrays, rand(rng, y.type.shape, dt))[0]
            outs.append(bld.add("index_put", [x, vals] + idx,
                                {"spec": spec, "accumulate": (n + k) % 2 == 1}))
        last = inputs(bld, arrays, rand(rng, y.type.shape[-1:], dt))[0]      # broadcast
        outs.append(bld.add("index_put", [xs[0], last] + idx, {"spec": spec, "accumulate": True}))
    dup = inputs(bld, arrays, np.array([1, 1, -4, 3, 1]), rand(rng, (5, 7), dt))
    for acc in (False, True):
        outs.append(bld.add("index_put", [xs[1], dup[1], dup[0]],
                            {"spec": ("T",), "accumulate": acc}))
    g = bld.ret(*outs)
    assert supports(g) == (True, None)
    _, got, want = run_both(g, arrays)
    check(got, want)


def test_index_put_bool_mask():
    """A bool mask as index_put's only advanced index: written where true; x[mask] itself
    (a data-dependent length) is refused."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 6))
    m = rng.random((4, 6)) > 0.5
    m1 = np.array([True, False, True, True])
    bld = Builder("mask")
    arrays = []
    vx, vm, vm1 = inputs(bld, arrays, x, m, m1)
    v0, vrow = inputs(bld, arrays, np.array(2.5), rng.standard_normal(5))
    outs = [bld.add("index_put", [vx, v0, vm], {"spec": ("T",), "accumulate": False}),
            bld.add("index_put", [vx, v0, vm], {"spec": ("T",), "accumulate": True}),
            bld.add("index_put", [vx, vrow, vm1], {"spec": ("T", ("slice", 1, None, None)),
                                                   "accumulate": True}),
            bld.add("index_put", [vx, v0, vm1], {"spec": ((None), "T"), "accumulate": False})]
    g = bld.ret(*outs)
    assert supports(g) == (True, None)
    _, got, want = run_both(g, arrays)
    check(got, want)
    bld = Builder("mask_index")
    vx = bld.input(TensorType("float64", x.shape))
    vm = bld.input(TensorType("bool", m.shape))
    node, reason = unsupported(bld.ret(bld.add("index", [vx, vm], {"spec": ("T",)})))
    assert node.op == "index" and "mask" in reason
