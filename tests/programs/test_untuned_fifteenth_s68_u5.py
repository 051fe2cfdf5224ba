"""bench/untuned_models_fifteenth.py's five models (a TextCNN, a GraphSAGE and a GIN
aggregating by index_add_, a PPO update through torch.distributions.Categorical with Python-
list returns and load_state_dict of its old policy, a DeepLabV3 with ASPP and bilinear
interpolation under CrossEntropyLoss(ignore_index=255) and a poly LambdaLR), at small sizes,
train a few steps in torch, llgrad eager and llgrad compiled, seeded alike: losses and every
parameter and buffer against torch's, compiled against eager, one graph, no retrace once warm.

And the two lowerings the set made faster (each a speed bug, not a wrong number): a dilated
convolution whose padding makes most of ops_conv_shifted.py's wide grid (DeepLab's ASPP:
dilation 36 on a 12x12 map, 23 ms a step against the unfold's 4.2) takes the unfold, and a
log_softmax over C of (N, C, H, W) scores with H*W above MAX_INNER (DeepLab's 96x96 output:
33.7 ms against 1.4, strided rows) takes ops_norm_columns.py's column passes in tiles."""
import os
import sys

import numpy as np
import pytest

import llgrad
from llgrad.codegen.lowerings import ops_conv_shifted, ops_norm_columns
from llgrad.codegen.lowerings.conv_common import Geometry
from llgrad.codegen.lowerings.loops import Access

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from untuned_steps import close, run_steps  # noqa: E402
import untuned_models_fifteenth as models     # noqa: E402

STEPS = 4      # (the first may run eagerly (a fresh optimiser), the second traces)
# (every small version takes 2-8 s, mostly building kernels: the fixes' own tests below are
# the default run's)
# (GIN's first Linear feeds BatchNorm1d: its bias's gradient is rounding noise around zero
# that Adam turns into whole steps of lr, in torch too; float64 keeps it at 1e-17)
DTYPE = {"gin": "float64"}


def _run(lib, name, compiled, small, dtype):
    old = lib.get_default_dtype()
    lib.set_default_dtype(getattr(lib, dtype))
    try:
        return run_steps(models.build, lib, name, compiled, STEPS, small)
    finally:
        lib.set_default_dtype(old)


def _check(name, small=True, rtol=2e-5):
    dtype = DTYPE.get(name, "float32")
    rtol = 1e-9 if dtype == "float64" else rtol
    t_loss, t_state, _ = _run(torch, name, False, small, dtype)
    e_loss, e_state, e_notes = _run(llgrad, name, False, small, dtype)
    c_loss, c_state, c_notes = _run(llgrad, name, True, small, dtype)
    assert not e_notes, e_notes
    np.testing.assert_allclose(e_loss, t_loss, rtol=rtol)
    close(e_state, t_state, 50 * rtol, "eager vs torch")
    np.testing.assert_allclose(c_loss, e_loss, rtol=rtol)
    close(c_state, e_state, 50 * rtol, "compiled vs eager")
    assert not c_notes, c_notes


@pytest.mark.slow
@pytest.mark.parametrize("name", models.NAMES)
def test_small_trains_as_torch_eager_and_compiled(name):
    _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", models.NAMES)
def test_whole_model_trains_as_torch_eager_and_compiled(name):
    _check(name, small=False, rtol=2e-4)


def _geometry(xs, ws, padding, dilation):
    return Geometry(xs, ws, {"stride": (1, 1), "padding": (padding,) * 2,
                             "dilation": (dilation,) * 2, "groups": 1})


def test_mostly_padded_dilated_convolutions_take_the_unfold(monkeypatch):
    # (the geometry's rule, on a host whose BLAS runs thin products well: AVX2 hosts unfold)
    monkeypatch.setattr(ops_conv_shifted, "_thin_products_pay", lambda: True)
    assert ops_conv_shifted.applies(_geometry((8, 64, 16, 16), (64, 64, 3, 3), 1, 1))
    for d in (6, 12, 36):       # (ASPP's rates on a 12x12 map; and 8 on 32x32: 1.5x wide)
        assert not ops_conv_shifted.applies(_geometry((8, 64, 12, 12), (64, 64, 3, 3), d, d))
    assert not ops_conv_shifted.applies(_geometry((4, 32, 32, 32), (32, 32, 3, 3), 8, 8))


@pytest.mark.parametrize("dilation", [2, 12])       # (taps partly, and wholly, in the padding)
def test_aspp_convolution_and_its_gradients_match_torch(dilation):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 16, 12, 12)).astype(np.float32)
    w = (rng.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32)
    g = rng.standard_normal((2, 16, 12, 12)).astype(np.float32)
    out = {}
    for lib, wrap in ((torch, None), (llgrad, None), (llgrad, llgrad.compile)):
        X, W = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        G = lib.tensor(g)

        def step():
            y = lib.nn.functional.conv2d(X, W, padding=dilation, dilation=dilation)
            (y * G).sum().backward()
            return y.detach()
        f = wrap(step) if wrap else step
        for _ in range(2):
            X.grad = W.grad = None
            y = f()
        out[(lib.__name__, wrap is None)] = [t.numpy() for t in (y, X.grad, W.grad)]
    want = out[("torch", True)]
    for k in (("llgrad", True), ("llgrad", False)):
        for a, b in zip(out[k], want):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.abs(b).max())


def test_long_inner_columns_take_the_column_form():
    shape, red = (8, 21, 96 * 96), (1,)         # (coalesced (N, C, H*W), reduced over C)
    src = Access(None, "float32", 0, (21 * 9216, 9216, 1))
    node = type("Node", (), {"op": "log_softmax"})()
    assert ops_norm_columns.fits(node, shape, red, src, src)
    prime = (2, 3, 1031)        # (no divisor up to MAX_INNER but 1: the rows' form still)
    src = Access(None, "float32", 0, (3 * 1031, 1031, 1))
    assert not ops_norm_columns.fits(node, prime, red, src, src)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,dim", [((2, 5, 48, 48), 1), ((3, 4, 2, 1100), 1),
                                       ((2, 3, 97, 97), 1)])
def test_tiled_columns_match_torch(op, shape, dim):
    x = (np.random.default_rng(1).standard_normal(shape) * 4).astype(np.float32)
    x[0, 1, 0, :7] = -np.inf        # (a column whose entry is -inf: exp 0, log_softmax -inf)
    want = getattr(torch.tensor(x), op)(dim).numpy()
    f = llgrad.compile(lambda t: getattr(t * 1, op)(dim))
    got = f(llgrad.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert f.n_traces == 1


def test_segmentation_cross_entropy_and_its_gradient_match_torch():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 5, 40, 40)).astype(np.float32)
    y = rng.integers(0, 5, (2, 40, 40))
    y[:, :, :6] = 255
    out = {}
    for lib, wrap in ((torch, None), (llgrad, llgrad.compile)):
        X, Y = lib.tensor(x, requires_grad=True), lib.tensor(y)

        def step():
            loss = lib.nn.functional.cross_entropy(X, Y, ignore_index=255)
            loss.backward()
            return loss.detach()
        f = wrap(step) if wrap else step
        for _ in range(2):
            X.grad = None
            loss = f()
        out[lib.__name__] = (loss.numpy(), X.grad.numpy())
    np.testing.assert_allclose(out["llgrad"][0], out["torch"][0], rtol=1e-6)
    np.testing.assert_allclose(out["llgrad"][1], out["torch"][1], rtol=1e-5, atol=1e-9)


def _accumulate(lib, rows, w):
    w.add_(lib.stack(rows).sum(0))
    return w * 2


def test_overlap_check_sweeps_only_inputs_sharing_a_written_ones_array(monkeypatch):
    # (a PPO update reads thousands of rollout tensors, each a view of the array it was cut
    # from: the check that a written input overlaps no other sorted all their byte spans,
    # 6 ms of a 12 ms step; views of arrays no written input shares cannot overlap one)
    from llgrad.compile import run
    spans = []
    byte_span = run._byte_span
    monkeypatch.setattr(run, "_byte_span", lambda a: spans.append(1) or byte_span(a))
    data = np.random.default_rng(3).standard_normal((60, 4)).astype(np.float32)
    cf = llgrad.compile(lambda rows, w: _accumulate(llgrad, rows, w))
    big, w = llgrad.tensor(data), llgrad.zeros(4)
    rows = [big[i] for i in range(60)]
    t_big, t_w = torch.tensor(data), torch.zeros(4)
    t_rows = [t_big[i] for i in range(60)]
    for _ in range(3):
        spans.clear()
        got = cf(rows, w)
        cf.wait()       # (LLGRAD_COMPILE=background: the next call runs the entry)
        want = _accumulate(torch, t_rows, t_w)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)
    np.testing.assert_allclose(w.numpy(), t_w.numpy(), rtol=1e-5)
    assert 1 <= len(spans) <= 2, len(spans)     # (the written input's own span)


def test_a_written_input_over_a_read_ones_memory_still_runs_eagerly():
    data = np.random.default_rng(4).standard_normal((6, 4)).astype(np.float32)
    big, t_big = llgrad.tensor(data), torch.tensor(data)
    cf = llgrad.compile(lambda rows, w: _accumulate(llgrad, rows, w))
    cf([big[i] for i in range(6)], llgrad.zeros(4))         # (traced apart)
    cf.wait()           # (LLGRAD_COMPILE=background: the next call runs the entry)
    with pytest.warns(UserWarning, match="running eagerly: .*share"):
        got = cf([big[i] for i in range(6)], big.view(-1)[5:9])   # (over rows it reads)
    want = _accumulate(torch, [t_big[i] for i in range(6)], t_big.view(-1)[5:9])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)
    np.testing.assert_allclose(big.numpy(), t_big.numpy(), rtol=1e-5)
