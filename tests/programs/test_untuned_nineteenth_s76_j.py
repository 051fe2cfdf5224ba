"""bench/untuned_models_nineteenth.py's six models (FiLM's GRU-conditioned residual blocks over
coordinate maps, ConvMixer's 'same' depthwise convolutions and its np.interp learning rate
written into the param group, gated-attention MIL over bags, a DARTS search network with its
first-order architect step, a Pointer Network's masked-attention decoder loop, SchNet's
index_add filters with forces by autograd.grad(create_graph=True)), at small sizes, train a few
steps in torch, llgrad eager and llgrad compiled, seeded alike: losses and every parameter and
buffer against torch's, compiled against eager. Unmarked: a NumPy float64 written into a
param group's lr inside a compiled step (ConvMixer's schedule) is replayed, not a graph break."""
import os
import sys
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from untuned_steps import close, run_steps  # noqa: E402
import untuned_models_nineteenth as models     # noqa: E402

STEPS = 3
# (ConvMixer's lr comes from a step counter through np.interp: every call's value is guarded,
# so the compiled step traces anew each call until the recompile limit, as torch.compile
# recompiles on the counter; the other five are one graph)
RETRACES = {"convmixer"}
# (FiLM's conv1 biases sit ahead of BatchNorm(affine=False): their float32 gradients are
# rounding noise that Adam makes whole steps, in torch as in llgrad; float64 agrees)
DTYPE = {"film": "float64"}


def _noise(k):
    return k.endswith("_inf")       # (the Pointer Network's -inf constant: inf - inf is nan)


def _run(lib, name, compiled, dtype):
    old = lib.get_default_dtype()
    lib.set_default_dtype(getattr(lib, dtype))
    try:
        return run_steps(models.build, lib, name, compiled, STEPS, True)
    finally:
        lib.set_default_dtype(old)


@pytest.mark.slow
@pytest.mark.parametrize("name", models.NAMES)
def test_small_trains_as_torch_eager_and_compiled(name):
    dtype = DTYPE.get(name, "float32")
    rtol = 1e-7 if dtype == "float64" else 1e-4
    t_loss, t_state, _ = _run(torch, name, False, dtype)
    e_loss, e_state, e_notes = _run(llgrad, name, False, dtype)
    c_loss, c_state, c_notes = _run(llgrad, name, True, dtype)
    assert not e_notes, e_notes
    np.testing.assert_allclose(e_loss, t_loss, rtol=rtol)
    close(e_state, t_state, rtol, "eager vs torch", _noise)
    np.testing.assert_allclose(c_loss, e_loss, rtol=rtol)
    close(c_state, e_state, rtol, "compiled vs eager", _noise)
    if name in RETRACES:
        c_notes = [n for n in c_notes if not n.startswith("retraced")]
    assert not c_notes, c_notes


def _lr_step(lib, compiled):
    lib.manual_seed(0)
    model = lib.nn.Linear(4, 3)
    opt = lib.optim.AdamW(model.parameters(), lr=0.01)
    x = lib.tensor(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))

    def step():
        opt.param_groups[0].update(lr=np.interp([0.5], [0, 1], [0, 0.02])[0])   # np.float64
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss
    fn = llgrad.compile(step, backend="interpret") if compiled else step   # (no LLVM build)
    return model, opt, fn


def test_numpy_float64_lr_written_in_compiled_step_is_replayed():
    model, opt, fn = _lr_step(llgrad, True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = [fn().item() for _ in range(3)]
    assert not [w for w in caught if "running eagerly" in str(w.message)]
    assert fn.n_traces == 1 and not fn.graph_breaks
    assert opt.param_groups[0]["lr"] == pytest.approx(0.01)
    e_model, _, e_fn = _lr_step(llgrad, False)      # (eager's, checked against torch's by
    e_losses = [e_fn().item() for _ in range(3)]    # the optimiser tests; torch's AdamW
    np.testing.assert_allclose(losses, e_losses, rtol=1e-6)    # imports dynamo: ~10 s)
    np.testing.assert_allclose(model.weight.detach().numpy(), e_model.weight.detach().numpy(),
                               rtol=1e-6)


@pytest.mark.parametrize("k, pad, dil, stride", [(5, 2, 1, 1)])
def test_small_depthwise_convolution_runs_native_as_torch(k, pad, dil, stride):
    """A depthwise convolution of (8, 8, 16, 16) (a DARTS cell's sep_conv_5x5),
    under eager_shaped.MIN_ELEMENTS, runs its three products on native kernels (NumPy's
    im2col ran them at 2-4x torch's time), with torch's values and gradients."""
    from llgrad.compile import eager_builds, eager_shaped
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((8, 8, 16, 16)).astype(np.float32)
    wa = rng.standard_normal((8, 1, k, k)).astype(np.float32)
    ga = rng.standard_normal((8, 8, 16 // stride, 16 // stride)).astype(np.float32)
    outs = []
    for i, lib in enumerate((llgrad, llgrad, torch)):     # (the first builds the kernels)
        if i == 1:
            eager_builds.wait()
            before = eager_shaped.stats["calls"]
        x, w = lib.tensor(xa, requires_grad=True), lib.tensor(wa, requires_grad=True)
        y = lib.nn.functional.conv2d(x, w, None, stride, pad, dil, 8)
        y.backward(lib.tensor(ga))
        outs.append([t.detach().numpy() for t in (y, x.grad, w.grad)])
        if i == 1:
            assert eager_shaped.stats["calls"] == before + 3, "the shaped kernels did not run"
    for a, b in zip(outs[1], outs[2]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(b).max())
