"""The lowerings of sin/cos, prod/all/any, the positional ops (argmax, argmin, max_dim,
min_dim, cumsum), dot/mv, batch_norm, the losses and the random ops, against the reference
interpreter on special values and every layout (the index ops: test_lower_index.py).

Graphs are built with the IR Builder and compiled with llgrad.codegen.lower, as in
test_lower.py (whose helpers these tests share); each test builds one graph holding many
cases, so it compiles once."""
import math

import numpy as np
import pytest

from llgrad.codegen.lower import lower, supports
from llgrad.ir import Builder, TensorType
from llgrad.ir.interpret import evaluate
from test_lower import FLOATS, check, eps, layouts, rand, run_both, tensor_type

DTYPES = FLOATS + ("int64", "bool")
# (float64 beside float32 in the lowering tests below: in the slow run, for the suite's time)
F64_SLOW = pytest.param("float64", marks=pytest.mark.slow)
FLOATS_F64_SLOW = ["float32", F64_SLOW]
DTYPES_F64_SLOW = ["float32", F64_SLOW, "int64", "bool"]
SOME = ("contiguous", "transposed", "stepped", "broadcast_rows")


def some_layouts(rng, dt, shape=None, names=SOME):
    """A few of test_lower.layouts (fewer groups to compile where the op's loops are the
    same for every layout)."""
    every = layouts(rng, dt) if shape is None else layouts(rng, dt, shape=shape)
    return [every[n] for n in names]


def inputs(bld, arrays, *new):
    """Graph inputs for the arrays new (appended to arrays), typed by their layouts."""
    vals = []
    for a in new:
        arrays.append(a)
        vals.append(bld.input(tensor_type(a)))
    return vals


# ---- sin / cos ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", FLOATS)
def test_sin_cos_special_values(dt):
    big = 3.4e38 if dt == "float32" else 1.7e308
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-300, 2.0 ** -27, math.pi,
                  -math.pi / 2, 1e22, big, -big, 1e15 + 0.5, 6381956970095103.0 * 2.0 ** 797],
                 np.float64)
    with np.errstate(all="ignore"):
        x = x.astype(dt)
    bld = Builder("trig")
    v = bld.input(TensorType(dt, x.shape))
    k = lower(bld.ret(bld.add("sin", [v]), bld.add("cos", [v])))
    s, c = k([x])
    hi = np.float64 if dt == "float32" else np.longdouble
    with np.errstate(all="ignore"):
        for got, f in ((s, np.sin), (c, np.cos)):
            ref = f(x.astype(hi)).astype(dt)
            np.testing.assert_allclose(got, ref, rtol=2 * eps(dt), atol=0, equal_nan=True)
    assert np.isnan(s[2:5]).all() and np.isnan(c[2:5]).all()         # inf, -inf, nan
    assert np.signbit(s[1]) and s[1] == 0 and c[1] == 1                # sin(-0) = -0
    assert s[5] == x[5] and s[7] == x[7]                               # sin(tiny) = tiny


def test_sin_cos_are_inline_and_vectorise():
    for dt in FLOATS:
        bld = Builder("trig")
        v = bld.input(TensorType(dt, (256,)))
        k = lower(bld.ret(bld.add("cos", [bld.add("sin", [v])])))
        calls = [ln for ln in k.ir_after.splitlines() if " call " in ln and "@llvm." not in ln
                 and f"@{k.entry_name}." not in ln]       # (not the kernel's own groups)
        assert not calls, calls
        assert "x double>" in k.ir_after                                # a vector loop


# ---- prod / all / any ---------------------------------------------------------------------------

@pytest.mark.parametrize("dt", DTYPES_F64_SLOW)
def test_prod_all_any(dt):
    rng = np.random.default_rng(1)
    bld = Builder("pa")
    arrays, outs = [], []
    xs = inputs(bld, arrays, *some_layouts(rng, dt))
    if dt in FLOATS:                      # values near 1, so products stay finite
        special = np.array([[1.5, np.nan, 2.0], [0.0, -0.0, np.inf], [1.0, 1.0, 1.0]], dt)
        xs += inputs(bld, arrays, special)
    for x in xs:
        nd = len(x.type.shape)
        for d, keep in ((None, False), ((0,), True), ((nd - 1,), False)):
            a = {"dim": d, "keepdim": keep}
            if dt in FLOATS and nd == 2 and x.type.shape[0] != 3:    # (a fused prologue)
                y = bld.add("mul", [x, 0.05])
                outs.append(bld.add("prod", [bld.add("add", [y, 1.0], {"alpha": 1})], a))
            else:
                outs.append(bld.add("prod", [x], a))
            outs += [bld.add("all", [x], a), bld.add("any", [x], a)]
    empty = inputs(bld, arrays, np.zeros((3, 0), dt))[0]
    for op in ("prod", "all", "any"):
        outs += [bld.add(op, [empty], {"dim": (1,), "keepdim": False}),
                 bld.add(op, [empty], {"dim": None, "keepdim": True})]
    g = bld.ret(*outs)
    assert supports(g) == (True, None)
    _, got, want = run_both(g, arrays)
    # (a product rounds at each factor: the kernel's vector lanes multiply in another
    # order than NumPy's, a lane count that depends on the host: 1.1e-6 apart on AVX2)
    check(got, want, rtol=4e-6 if dt == "float32" else 1e-13 if dt == "float64" else 0)


# ---- argmax / argmin / max_dim / min_dim --------------------------------------------------------

@pytest.mark.parametrize("dt", DTYPES_F64_SLOW)
def test_arg_reductions(dt):
    rng = np.random.default_rng(2)
    bld = Builder("arg")
    arrays, outs = [], []
    xs = inputs(bld, arrays, *layouts(rng, dt).values())
    if dt in FLOATS:
        special = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 2.0, -1.0, -1.0],
                            [-np.inf, -np.inf, -np.inf, -np.inf], [np.inf, 0.0, -0.0, np.inf],
                            [0.0, -0.0, 0.0, -0.0]], dt)
        xs += inputs(bld, arrays, special, special.T.copy())
    elif dt == "int64":
        ext = np.iinfo(np.int64)
        xs += inputs(bld, arrays, np.array([[ext.min, ext.min], [ext.max, ext.max], [3, 3]]))
    for x in xs:
        for op in ("argmax", "argmin"):
            for d in (None, 0, 1):
                for keep in (False, True):
                    outs.append(bld.add(op, [x], {"dim": d, "keepdim": keep}))
        for op in ("max_dim", "min_dim"):
            for d in (0, 1):
                outs += list(bld.add(op, [x], {"dim": d, "keepdim": d == 1}))
    zero_d = inputs(bld, arrays, np.array(5, dt))[0]
    outs += [bld.add("argmax", [zero_d], {"dim": None, "keepdim": False})]
    g = bld.ret(*outs)
    _, got, want = run_both(g, arrays)
    check(got, want)                         # indices and the values at them: exact


def test_multi_result_buffers():
    """max_dim's two results: each its own buffer, whichever of them is used or returned
    (as such, through a view, or only feeding another node)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 5))
    bld = Builder("mr")
    v = bld.input(TensorType("float64", x.shape))
    vals, idx = bld.add("max_dim", [v], {"dim": 1, "keepdim": False})
    _, idx_only = bld.add("min_dim", [v], {"dim": 0, "keepdim": True})
    vals_only, _ = bld.add("max_dim", [v], {"dim": 0, "keepdim": False})
    neg = bld.add("neg", [vals_only])
    tail = bld.add("slice", [idx], {"dim": 0, "start": 1, "end": 6, "step": 2}, view_of=idx)
    g = bld.ret(vals, idx, idx_only, neg, tail)
    k, got, want = run_both(g, [x])
    check(got, want)
    assert len(k.plan.outputs) == 4 and np.shares_memory(got[1], got[4])


# ---- cumsum -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", DTYPES)
def test_cumsum_is_exact(dt):
    """Sequential sums in the result's dtype: equal to np.cumsum bit for bit."""
    rng = np.random.default_rng(4)
    bld = Builder("cs")
    arrays, outs = [], []
    xs = inputs(bld, arrays, *layouts(rng, dt).values(),
                 rand(rng, (3, 4, 70), dt), np.zeros((0, 3), dt))
    for x in xs:
        for d in range(-1, len(x.type.shape)):
            outs.append(bld.add("cumsum", [x], {"dim": d}))
    _, got, want = run_both(bld.ret(*outs), arrays)
    check(got, want)


# ---- dot / mv -----------------------------------------------------------------------------------

@pytest.mark.parametrize("blas", [True, False])
def test_dot_mv(blas):
    rng = np.random.default_rng(8)
    bld = Builder("dotmv")
    arrays, outs = [], []
    for dt in FLOATS + ("int64",):
        a = rand(rng, (40,), dt)
        big = rand(rng, (130,), dt)
        m = rand(rng, (19, 40), dt)
        va, vs, vm, vt = inputs(bld, arrays, a, big[3::3][:40], m, rand(rng, (40, 19), dt).T)
        vb = inputs(bld, arrays, np.broadcast_to(rand(rng, (1,), dt), (40,)))[0]
        outs += [bld.add("dot", [va, vs]), bld.add("dot", [vs, vb]),
                 bld.add("mv", [vm, va]), bld.add("mv", [vt, vs]), bld.add("mv", [vm, vb])]
    _, got, want = run_both(bld.ret(*outs), arrays, blas=blas)
    check(got, want, rtol=1e-5, atol=1e-5)


# ---- batch_norm and the losses ------------------------------------------------------------------

@pytest.mark.parametrize("dt", FLOATS_F64_SLOW)
def test_batch_norm(dt):
    rng = np.random.default_rng(9)
    bld = Builder("bn")
    arrays, outs = [], []
    x3 = rand(rng, (6, 5, 7), dt)
    xs = inputs(bld, arrays, *layouts(rng, dt, shape=(9, 5)).values(), x3,
                 rand(rng, (7, 5, 6), dt).transpose(2, 1, 0))
    w, b, mean = inputs(bld, arrays, rand(rng, (5,), dt), rand(rng, (5,), dt),
                         rand(rng, (5,), "float64"))
    var = inputs(bld, arrays, rand(rng, (5,), dt, "pos"))[0]
    for x in xs:
        outs += [bld.add("batch_norm", [x, w, b, None, None], {"training": True, "eps": 1e-5}),
                 bld.add("batch_norm", [x, None, None, None, None],
                         {"training": True, "eps": 1e-3}),
                 bld.add("batch_norm", [x, w, None, mean, var], {"training": False, "eps": 1e-5}),
                 bld.add("batch_norm", [x, None, b, mean, var], {"training": False, "eps": 0.1})]
    _, got, want = run_both(bld.ret(*outs), arrays)
    # broadcast rows: a channel of equal values has variance ~0 (the reference's own
    # float32 rounding of the mean is then amplified by 1/sqrt(eps))
    check(got, want, rtol=1e-5 if dt == "float32" else 1e-12,
          atol=2e-3 if dt == "float32" else 1e-9)


@pytest.mark.parametrize("dt", FLOATS_F64_SLOW)
def test_losses(dt):
    rng = np.random.default_rng(10)
    bld = Builder("loss")
    arrays, outs = [], []
    xs = inputs(bld, arrays, *some_layouts(rng, dt, names=("contiguous", "stepped",
                                                              "broadcast_cols")))
    R, C = arrays[0].shape
    t, tp, w, pw = inputs(bld, arrays, rand(rng, (R, C), dt),
                           rng.uniform(0, 1, (R, C)).astype(dt), rand(rng, (C,), dt, "pos"),
                           rand(rng, (C,), "float64", "pos"))
    big = inputs(bld, arrays, np.array([[-40.0, 3.0, 800.0], [0.0, -800.0, np.inf]], dt),
                  np.array([[0.0, 0.5, 1.0], [1.0, 0.2, 0.0]], dt))
    target = inputs(bld, arrays, rng.integers(0, C, R))[0]     # (a negative one raises)
    for x in xs:
        for red in ("none", "sum", "mean"):
            outs += [bld.add("mse_loss", [x, t], {"reduction": red}),
                     bld.add("binary_cross_entropy_with_logits", [x, tp, None, None],
                             {"reduction": red}),
                     bld.add("binary_cross_entropy_with_logits", [x, tp, w, pw],
                             {"reduction": red}),
                     bld.add("nll_loss", [x, target, None], {"ignore_index": 3,
                                                            "reduction": red}),
                     bld.add("nll_loss", [x, target, w], {"ignore_index": -100,
                                                         "reduction": red})]
    outs.append(bld.add("binary_cross_entropy_with_logits", big + [None, None],
                        {"reduction": "none"}))
    x3 = inputs(bld, arrays, rand(rng, (3, 4, 5, 2), dt))[0]
    t3 = inputs(bld, arrays, rng.integers(0, 4, (3, 5, 2)))[0]
    outs += [bld.add("nll_loss", [x3, t3, None], {"ignore_index": 1, "reduction": r})
             for r in ("none", "mean")]
    allign = inputs(bld, arrays, np.full(R, 2))[0]                 # every target ignored
    outs.append(bld.add("nll_loss", [xs[0], allign, None], {"ignore_index": 2,
                                                             "reduction": "mean"}))
    _, got, want = run_both(bld.ret(*outs), arrays)
    tol = 1e-5 if dt == "float32" else 1e-12
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, equal_nan=True, err_msg=str(i))


# ---- random -------------------------------------------------------------------------------------

def test_random_is_bit_exact():
    """rng_uniform and rng_normal (PyTorch's generator, through the callback): the draws
    and the new state equal the interpreter's exactly, chained, from a strided state, of
    every size including none, with a Box-Muller value cached between draws."""
    from llgrad.ir import torch_random
    state = torch_random.seeded(2024)
    held = np.zeros(2 * state.size + 1, np.int64)
    held[1::2] = state                                   # a stepped state input
    bld = Builder("rng")
    s0 = bld.input(TensorType("int64", state.shape))
    s1 = bld.input(tensor_type(held[1::2]))
    outs = []
    cur = s0
    for op, shape, dt in (("rng_uniform", (3, 1000), "float64"), ("rng_normal", (7,), "float32"),
                          ("rng_uniform", (), "float32"), ("rng_normal", (0,), "float64"),
                          ("rng_normal", (257, 3), "float64"), ("rng_uniform", (5,), "float32"),
                          ("rng_integers", (9,), "int64"), ("rng_randperm", (6,), "int64"),
                          ("rng_randperm", (1,), "int64"), ("rng_normal", (3,), "float64")):
        attrs = {"shape": shape, "dtype": dt}
        if op == "rng_integers":
            attrs.update(of="int64", low=-2 ** 63, high=2 ** 63)
        vals, cur = bld.add(op, [cur], attrs)
        outs.append(vals)
    outs.append(cur)
    outs += list(bld.add("rng_normal", [s1], {"shape": (4,), "dtype": "float64"}))
    g = bld.ret(*outs)
    arrays = [state.copy(), held[1::2]]
    _, got, want = run_both(g, arrays)
    check(got, want)                                     # bit for bit
    assert not np.array_equal(got[-3], state)            # the state moved


def test_call_writes_back_mutatedinputs():
    """Kernel.__call__ writes a mutated input back and returns only the graph's outputs,
    also when every escaping value has a buffer of its own (a random op's new state)."""
    from llgrad.ir import torch_random
    state = torch_random.seeded(7)
    bld = Builder("wb")
    s = bld.input(TensorType("int64", state.shape))
    vals, new = bld.add("rng_uniform", [s], {"shape": (3,), "dtype": "float64"})
    g = bld.ret(vals)
    g.mutated = {0: new}
    k = lower(g)
    mine, ref = state.copy(), state.copy()
    got = k([mine])
    want, env = evaluate(g, [ref])
    assert len(got) == 1
    check(got, want)
    np.testing.assert_array_equal(mine, env[new])
