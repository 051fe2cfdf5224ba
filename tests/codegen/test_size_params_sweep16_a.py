"""Code shared between batch sizes (codegen/size_params.py) against torch: a size whose
module matches no template builds its own code from a plan emitted only once, and a table
holds the float constants a module prints (inf past float32's range), a child forked
while another thread runs shared code can run it, and a convolution's weight gradient is
the same code for every chunk count."""
import os
import signal

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    from llgrad.codegen.native import cache, jit
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(tmp_path))
    jit._reset()
    cache._reset()
    yield monkeypatch
    monkeypatch.undo()
    jit._reset()
    cache._reset()


def _halve_until_small(lib):
    def f(x):
        y = x * 2 if x.sum() > 0 else x - 1
        i = 0
        while (y.abs().max() > 0.5) and i < 10:
            y = y * 0.5
            i += 1
        return y
    return f


def test_a_size_outside_the_template_after_a_while_loop(fresh_cache):
    # a size whose shared-form module matches no template is built specialised: from a
    # fresh plan (a region's function, made by the first emission, is the other module's)
    step = llgrad.compile(_halve_until_small(llgrad), recompile_limit=16)
    want_fn = _halve_until_small(torch)
    rng = np.random.default_rng(0)
    for b in [8, 3, 16, 2, 33, 64, 5]:
        x = rng.standard_normal((b, 4)).astype(np.float32)
        for _ in range(2):
            got = step(llgrad.from_numpy(x.copy()))
            np.testing.assert_allclose(got.numpy(), want_fn(torch.from_numpy(x)).numpy(),
                                       rtol=1e-6)
    assert step.n_llvm_compiles < 7


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_a_float_constant_past_float32_range(fresh_cache):
    # x * (B * 1e37) in float32: the constant is inf from B = 35 on, which the table holds
    def f(x):
        return (x * (x.shape[0] * 1e37)).sum(0)
    step = llgrad.compile(f, recompile_limit=16)
    rng = np.random.default_rng(1)
    for b in [2, 3, 4, 40, 50]:
        x = (rng.standard_normal((b, 3)) * 1e-30).astype(np.float32)
        for _ in range(2):
            got = step(llgrad.from_numpy(x))
            want = f(torch.from_numpy(x)).numpy()
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)
    shared = [k for e in step.entries for k in e.kernels.values()
              if getattr(k, "shares_sizes", False)]
    assert shared


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_shared_code_runs_can_call_it(fresh_cache):
    # another thread of the parent holds the template's lock (mid-call) at the fork: the
    # child gets it unlocked, not held for good
    from llgrad.codegen.native import jit
    step = llgrad.compile(lambda x: (x * 2).softmax(1), recompile_limit=8)
    rng = np.random.default_rng(2)
    xs = {b: rng.standard_normal((b, 5)).astype(np.float32) for b in (4, 7, 9)}
    for x in xs.values():
        step(llgrad.from_numpy(x))
        step(llgrad.from_numpy(x))
    templates = [t for ts in jit.jit().size_families._templates.values() for t in ts]
    assert templates
    want = (torch.from_numpy(xs[9]) * 2).softmax(1).numpy()
    with templates[0].lock:
        pid = os.fork()
        if pid == 0:                    # (the child: never back into pytest)
            code = 1
            try:
                signal.alarm(30)        # (a hang fails the test rather than the run)
                got = step(llgrad.from_numpy(xs[9])).numpy()
                code = 0 if np.allclose(got, want, rtol=1e-5) else 2
            finally:
                os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def _conv_net(lib):
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),     # (unfolded)
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),    # (shifted products)
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 8 * 8, 4))


def _conv_grads(lib, model, x, y):
    loss = lib.nn.functional.cross_entropy(model(x), y)
    grads = lib.autograd.grad(loss, [model[0].weight, model[2].weight])
    return (loss.detach(), *grads)


def test_a_convolution_shares_code_between_chunk_counts(fresh_cache):
    # the images are cut into min(8, N) chunks, 8 at batch 16 and 64, 7 at 33: the weight
    # gradient's sum over the chunks is one loop for all of them
    from llgrad.codegen.build import blas_available
    if not blas_available():
        pytest.skip("the convolution runs in one chunk without a BLAS")
    llgrad.manual_seed(0)
    model = _conv_net(llgrad)
    ref = _conv_net(torch)
    with torch.no_grad():
        for p, q in zip(model.parameters(), ref.parameters()):
            q.copy_(torch.from_numpy(p.detach().numpy()))
    step = llgrad.compile(_conv_grads, recompile_limit=16)
    rng = np.random.default_rng(3)
    for b in [16, 33, 64]:
        x = rng.standard_normal((b, 3, 16, 16)).astype(np.float32)
        y = rng.integers(0, 4, b)
        want = _conv_grads(torch, ref, torch.from_numpy(x), torch.from_numpy(y))
        for _ in range(2):
            got = step(llgrad, model, llgrad.from_numpy(x), llgrad.from_numpy(y))
            for g, w in zip(got, want):
                np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-5)
    assert step.n_llvm_compiles == 2
