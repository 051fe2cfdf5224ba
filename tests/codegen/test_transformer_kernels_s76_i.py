"""A linear layer on a stack of rows (view -> addmm -> view, F.linear on a 3-D input) adds its
bias in the readers' shape (ir/decompose.py, _reshaped_addmm): the bias joins the GELU, the
residual add and layer norm, or the loss that reads it instead of storing the biased product
in a pass of its own (a transformer block's forward: 17 kernel groups -> 14). The kernels
compute what the interpreter and eager compute, at strided and broadcast layouts; an addmm
whose 2-D result is read as such (or returned) keeps its 2-D add."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen.lower import lower
from llgrad.ir import Builder, TensorType
from llgrad.ir.decompose import expand_composites
from llgrad.ir.interpret import evaluate


def _graph(bias_shape, alpha=1, view_shape=(2, 3, 5), extra_2d_use=False, strides=None):
    """gelu(view(addmm(bias, a, b))) and its sum; a (6, 4) @ b (4, 5)."""
    bld = Builder("lin")
    a = bld.input(TensorType("float32", (6, 4), strides), "a")
    b = bld.input(TensorType("float32", (4, 5)), "b")
    bias = bld.input(TensorType("float32", bias_shape), "bias")
    y = bld.add("addmm", [bias, a, b], {"alpha": alpha} if alpha != 1 else {})
    v = bld.add("view", [y], {"shape": view_shape}, view_of=y)
    g = bld.add("gelu", [v], {"approximate": "none"})
    outs = [g, bld.add("sum", [v], {"dim": None, "keepdim": False})]
    if extra_2d_use:
        outs.append(bld.add("mul", [y, 2.0], {}))
    return bld.ret(*outs)


def _arrays(bias_shape, strides=None):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 4)).astype(np.float32)
    if strides is not None:                 # the same values, column-major in memory
        a = np.asfortranarray(a)
    return [a, rng.standard_normal((4, 5)).astype(np.float32),
            rng.standard_normal(bias_shape).astype(np.float32)]


def _ops(g):
    return [n.op for n in g.nodes]


@pytest.mark.parametrize("bias_shape, alpha", [((5,), 1), ((1, 5), 0.5), ((), 1), ((1,), 0.5)])
def test_bias_added_after_the_view_equals_the_interpreter(bias_shape, alpha):
    g = _graph(bias_shape, alpha)
    e = expand_composites(g)
    ops = _ops(e)
    assert "addmm" not in ops and ops.index("view") < ops.index("add")
    arrays = _arrays(bias_shape)
    want, _ = evaluate(g, arrays)
    for got in (lower(g)(arrays), evaluate(e, arrays)[0]):
        for x, y in zip(got, want):
            np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6)


def test_strided_operand():
    g = _graph((5,), strides=(1, 6))
    arrays = _arrays((5,), strides=(1, 6))
    want, _ = evaluate(g, arrays)
    for x, y in zip(lower(g)(arrays), want):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", ["2-D use", "full bias", "same shape"])
def test_kept_as_a_2d_add(case):
    if case == "2-D use":
        g, bias_shape = _graph((5,), extra_2d_use=True), (5,)
    elif case == "full bias":
        g, bias_shape = _graph((6, 5)), (6, 5)
    else:
        g, bias_shape = _graph((5,), view_shape=(6, 5)), (5,)
    ops = _ops(expand_composites(g))
    assert "add" in ops and ("view" not in ops or ops.index("add") < ops.index("view"))
    arrays = _arrays(bias_shape)
    want, _ = evaluate(g, arrays)
    for x, y in zip(lower(g)(arrays), want):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6)


def _mlp(m, x, w1, b1, w2, b2, t):
    F = m.nn.functional
    h = F.gelu(F.linear(x, w1, b1))
    return ((F.linear(h, w2, b2) + x - t) ** 2).mean()


@pytest.mark.slow
def test_compiled_mlp_llvm_interpret_eager_torch_agree():
    """The block's MLP on (2, 8, 16) rows, x read through a transpose (strided); the
    forward has no lone bias add left."""
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((8, 2, 16)).astype(np.float32),
              rng.standard_normal((32, 16)).astype(np.float32) * 0.3,
              rng.standard_normal(32).astype(np.float32),
              rng.standard_normal((16, 32)).astype(np.float32) * 0.3,
              rng.standard_normal(16).astype(np.float32),
              rng.standard_normal((2, 8, 16)).astype(np.float32)]

    def run(m, wrap):
        ts = [m.tensor(a) for a in arrays]
        ts[0] = ts[0].transpose(0, 1)
        for t in ts[:5]:
            t.requires_grad_(True)
        fn = wrap(lambda *a: _mlp(m, *a))
        loss = fn(*ts)
        loss = fn(*ts)                       # (the second call runs the built kernels)
        grads = m.autograd.grad(loss, ts[:5])
        return [loss.detach().numpy()] + [g.numpy() for g in grads]

    want = run(llgrad, lambda f: f)
    results = {"llvm": run(llgrad, lambda f: llgrad.compile(f, backend="llvm")),
               "interpret": run(llgrad, lambda f: llgrad.compile(f, backend="interpret"))}
    torch = pytest.importorskip("torch")
    results["torch"] = run(torch, lambda f: f)
    for name, got in results.items():
        for x, y in zip(got, want):
            np.testing.assert_allclose(x, y, rtol=2e-5, atol=2e-6, err_msg=name)


def test_block_mlp_forward_has_no_lone_bias_add():
    """fc1's bias joins GELU, fc2's the residual add and the loss (regression: each was an
    `add` group of its own, a pass storing the biased product)."""
    rng = np.random.default_rng(2)
    shapes = [(2, 4, 8), (16, 8), (16,), (8, 16), (8,), (2, 4, 8)]
    ts = [llgrad.tensor(rng.standard_normal(s).astype(np.float32)) for s in shapes]
    e = str(llgrad.explain(lambda *a: _mlp(llgrad, *a), *ts))
    groups = [ln.split()[1] for ln in e.split("native:")[1].splitlines()[1:] if
              ln.startswith("    g")]
    assert groups and "add" not in groups, e
