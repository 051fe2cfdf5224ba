"""bench/untuned_models_twentysecond.py's six models (a Reformer's LSH attention: rotations
drawn each call, argmax buckets, sort and undo sort, chunks looking one back; Wide & Deep's
sparse embeddings under SparseAdam beside Adam; a VQ-VAE whose EMA codebook is a buffer moved
by .data.mul_().add_() and copy_ in forward; a Neural CDE's rk4 over f(z) @ dX/dt; SuperGlue's
attentional GNN and log-space Sinkhorn with dustbins; Growing NCA's Sobel perception, fire and
alive masks), at small sizes, train a few steps in torch, llgrad eager and llgrad compiled,
seeded alike: losses and every parameter and buffer against torch's, compiled against eager.
Unmarked: LSH bucketing with its sort, gather and undo sort, rotations drawn inside the
compiled function, traced once, against torch."""
import os
import sys

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from untuned_steps import close, run_steps  # noqa: E402
import untuned_models_twentysecond as models     # noqa: E402

pytestmark = pytest.mark.torch

STEPS = 3
# (SuperGlue: the biases ahead of BatchNorm1d and the key projections' biases (softmax is
# shift-invariant) get rounding-noise gradients that Adam makes whole steps, in torch as in
# llgrad; float64 agrees to 1e-8)
DTYPE = {"superglue": "float64"}
# (Wide & Deep: embedding(sparse=True) gives sparse COO gradients, which compiled code does
# not make: the compiled step runs eagerly, with its warning)
EAGER_STEP = {"widedeep"}


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
    close(e_state, t_state, rtol, "eager vs torch")
    np.testing.assert_allclose(c_loss, e_loss, rtol=rtol)
    close(c_state, e_state, rtol, "compiled vs eager")
    if name not in EAGER_STEP:
        assert not c_notes, c_notes


def _lsh_step(lib, compiled):
    # (reformer_pytorch's hash_vectors and the sort / gather / undo sort of LSHAttention's
    # forward, a shared-QK projection trained by hand-written SGD on the undone output)
    lib.manual_seed(0)
    proj = lib.nn.Linear(4, 4, bias=False)
    with lib.no_grad():
        proj.weight.copy_(lib.tensor(np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)))
    x = lib.tensor(np.sin(np.arange(2 * 8 * 4, dtype=np.float32)).reshape(2, 8, 4))
    n_buckets, n_hashes, seqlen = 4, 2, 8

    def step():
        qk = proj(x)
        rot = lib.randn((1, 4, n_hashes, n_buckets // 2)).expand(2, -1, -1, -1)
        r = lib.einsum("btf,bfhi->bhti", qk, rot)
        buckets = lib.argmax(lib.cat([r, -r], dim=-1), dim=-1)
        buckets = (buckets + lib.arange(n_hashes).reshape(1, -1, 1) * n_buckets).reshape(2, -1)
        ticker = lib.arange(n_hashes * seqlen).unsqueeze(0).expand_as(buckets)
        _, sticker = (seqlen * buckets + ticker % seqlen).detach().sort(dim=-1)
        sticker = ticker.gather(-1, sticker)
        _, undo_sort = sticker.sort(dim=-1)
        st = sticker % seqlen
        sqk = qk.gather(1, st[:, :, None].expand(-1, -1, 4))
        chunks = sqk.reshape(2, n_hashes * n_buckets, -1, 4)
        out = (chunks * chunks.softmax(dim=2)).reshape(2, -1, 4)
        out = out.gather(1, undo_sort[:, :, None].expand(-1, -1, 4))
        loss = (out.reshape(2, n_hashes, seqlen, 4).sum(1) - x).pow(2).mean()
        loss.backward()
        with lib.no_grad():
            proj.weight -= 0.5 * proj.weight.grad
            proj.weight.grad = None
        return loss, buckets
    fn = llgrad.compile(step, backend="interpret") if compiled else step   # (no LLVM build)
    got = [fn() for _ in range(4)]
    losses = [l.item() for l, _ in got]
    picks = [b.tolist() for _, b in got]
    return losses, picks, proj.weight.detach().numpy().copy(), fn.n_traces if compiled else 1


def test_lsh_buckets_sort_and_undo_sort_trace_once():
    t_loss, t_b, t_w, _ = _lsh_step(torch, False)
    e_loss, e_b, e_w, _ = _lsh_step(llgrad, False)
    c_loss, c_b, c_w, traces = _lsh_step(llgrad, True)
    assert len({str(b) for b in t_b}) > 1      # (the buckets change between steps)
    assert e_b == t_b and c_b == t_b
    np.testing.assert_allclose(e_loss, t_loss, rtol=1e-5)
    np.testing.assert_allclose(e_w, t_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c_loss, e_loss, rtol=1e-5)
    np.testing.assert_allclose(c_w, e_w, rtol=1e-5, atol=1e-6)
    assert traces == 1
