"""batch_norm_backward's own kernel (codegen/lowerings/ops_batch_norm_backward.py) against the
NumPy implementation, its independent reference: the fast formula where the sums are finite,
the decomposition's order (the same NaN and inf positions) where they are not; both dtypes,
with and without a weight, strided operands, an empty batch; and in a compiled training step
of BatchNorm2d on a permuted input, against eager and torch. And the native loop of an eager
training forward's batch statistics (codegen/eager_bn_stats.py) against NumPy's."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen import lower
from llgrad.ir import ops_batch_norm as OB
from llgrad.ir.builder import Builder
from llgrad.ir.graph import TensorType


def _kernel(shape, dtype, weight):
    b = Builder("bnb")
    g, x = (b.input(TensorType(dtype, shape), n) for n in ("g", "x"))
    w = b.input(TensorType(dtype, (shape[1],)), "w") if weight else None
    k = lower.lower(b.ret(*b.add("batch_norm_backward", [g, x, w], {"eps": 1e-5})))
    assert k.plan.describe().startswith("group 0: [batch_norm_backward]")    # (one kernel)
    return k


def _close(got, want, rtol):
    for a, b in zip(got, want):
        assert np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(np.isinf(a), np.isinf(b))
        f = np.isfinite(b)
        scale = np.abs(b[f]).max() if f.any() else 1.0
        np.testing.assert_allclose(a[f], b[f], rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(8, 6, 9, 10), (64, 1, 33), (300, 3), (2, 3, 4, 5, 6)])
@pytest.mark.parametrize("weight", [True, False])
@pytest.mark.parametrize("special", [None, "nan_x", "inf_g", "huge", "nan_w"])
def test_kernel_matches_numpy(dtype, shape, weight, special):
    if special == "nan_w" and not weight:
        pytest.skip("no weight")
    rng = np.random.default_rng(abs(hash((dtype, shape, weight, special))) % 2**32)
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(shape[1]).astype(dtype) if weight else None
    if special == "nan_x":
        x.flat[5] = np.nan
    elif special == "inf_g":
        g.flat[7] = np.inf
    elif special == "huge":             # (the squared deviations overflow: not finite)
        x[:, 0] *= 1e30 if dtype == "float64" else 1e19
    elif special == "nan_w":
        w[0] = np.nan
    k = _kernel(shape, dtype, weight)
    got = k([g, x] + ([w] if weight else []))
    want = OB._batch_norm_backward(g, x, w, 1e-5)
    _close(got, want, 2e-5 if dtype == "float32" else 1e-11)


def test_empty_batch_gives_zero_sums():
    k = _kernel((0, 3, 4), "float32", True)
    gx, gw, gb = k([np.zeros((0, 3, 4), np.float32)] * 2 + [np.ones(3, np.float32)])
    assert gx.shape == (0, 3, 4) and not gw.any() and not gb.any()


def test_compiled_step_on_permuted_input_matches_eager_and_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((8, 10, 12, 6)).astype(np.float32)     # (N, H, W, C)
    ga = rng.standard_normal((8, 6, 10, 12)).astype(np.float32)
    outs = {}
    for name, lib, wrap in (("torch", torch, None), ("eager", llgrad, None),
                            ("compiled", llgrad, llgrad.compile)):
        lib.manual_seed(0)
        bn = lib.nn.BatchNorm2d(6)
        with lib.no_grad():
            bn.weight.copy_(lib.linspace(0.5, 2, 6))

        def step(x, g):
            y = bn(x.permute(0, 3, 1, 2))
            (y * g).sum().backward()
            return y.detach()
        step = wrap(step) if wrap else step
        for _ in range(2):
            x = lib.tensor(xa, requires_grad=True)
            bn.zero_grad()
            y = step(x, lib.tensor(ga))
        outs[name] = [t.detach().numpy() for t in (y, x.grad, bn.weight.grad, bn.bias.grad,
                                                    bn.running_mean, bn.running_var)]
    for name in ("eager", "compiled"):
        for a, b in zip(outs[name], outs["torch"]):
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(16, 8, 9, 10), (5, 1, 7), (300, 3), (1, 4, 1), (2, 3, 4, 5, 6)])
def test_native_batch_stats_match_numpy(dtype, shape, monkeypatch):
    from llgrad.compile import eager_bn_stats
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    x = (np.random.default_rng(3).standard_normal(shape) * 5 + 100).astype(dtype)
    before = eager_bn_stats.stats["native_stats"]
    mean, ss, count = OB.batch_stats(x)
    assert eager_bn_stats.stats["native_stats"] == before + 1       # (the loop ran)
    prev = OB.set_native_stats(None)
    try:
        want = OB.batch_stats(x)
    finally:
        OB.set_native_stats(prev)
    assert count == want[2]
    np.testing.assert_allclose(mean, want[0], rtol=1e-13)
    np.testing.assert_allclose(ss, want[1], rtol=1e-9)


@pytest.mark.parametrize("threads", [2, 3])
def test_backward_threads_give_the_one_thread_bits(threads):
    """The channels are split among the threads: the one-thread run's results, bit for bit."""
    rng = np.random.default_rng(12)
    g, x = (rng.standard_normal((32, 24, 16, 16)).astype(np.float32) for _ in range(2))
    w = rng.standard_normal(24).astype(np.float32)
    old = llgrad.get_num_threads()
    try:
        results = []
        for t in (1, threads):
            llgrad.set_num_threads(t)
            results.append(_kernel(x.shape, "float32", True)([g, x, w]))
    finally:
        llgrad.set_num_threads(old)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
