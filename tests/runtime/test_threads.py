"""Threads: one compiled function called from several threads at once (one trace, kernels
entered concurrently without the GIL), eager autograd on separate graphs in parallel, and
grad modes that stay in their own thread. Every result is checked against NumPy."""
import threading

import numpy as np
import pytest

import llgrad

N_THREADS, N_CALLS = 4, 200


def _reference(x, w):
    h = np.tanh(x @ w)
    loss = (h * h).sum() + x.sum()
    dh = 2 * h
    return loss, x.T @ (dh * (1 - h * h))


@pytest.mark.parametrize("backend", ["llvm", "interpret"])
def test_compiled_function_from_four_threads(backend, run_on_threads):
    @llgrad.compile(backend=backend)
    def loss_fn(x, w):
        h = (x @ w).tanh()
        return (h * h).sum() + x.sum()

    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((64, 256)) for _ in range(N_THREADS)]
    checked = [0] * N_THREADS

    def work(k):
        for i in range(N_CALLS):
            w_np = rng_for(k, i)
            x = llgrad.tensor(xs[k])
            w = llgrad.tensor(w_np, requires_grad=True)
            loss = loss_fn(x, w)
            loss.backward()
            want_loss, want_grad = _reference(xs[k], w_np)
            np.testing.assert_allclose(loss.item(), want_loss, rtol=1e-10)
            np.testing.assert_allclose(w.grad.numpy(), want_grad, rtol=1e-9, atol=1e-12)
            checked[k] += 1

    run_on_threads(work, N_THREADS)
    assert checked == [N_CALLS] * N_THREADS
    assert loss_fn.n_traces == 1                  # traced once, under the compile lock


def rng_for(k, i):
    return np.random.default_rng(1000 * k + i).standard_normal((256, 32))


def test_eager_autograd_on_separate_graphs_in_parallel(run_on_threads):
    def work(k):
        for i in range(N_CALLS // 2):
            a_np = rng_for(k, i)
            a = llgrad.tensor(a_np, requires_grad=True)
            y = (a.sin() * a).sum()
            y.backward()
            np.testing.assert_allclose(a.grad.numpy(), np.cos(a_np) * a_np + np.sin(a_np),
                                       rtol=1e-12)

    run_on_threads(work, N_THREADS)


def test_grad_mode_is_per_thread():
    inside, release = threading.Event(), threading.Event()
    seen = {}

    def holder():
        with llgrad.no_grad():
            inside.set()
            release.wait(timeout=30)
            seen["holder"] = llgrad.is_grad_enabled()

    t = threading.Thread(target=holder)
    t.start()
    inside.wait(timeout=30)
    x = llgrad.ones(3, requires_grad=True)
    seen["main"] = (x * 2).requires_grad         # the other thread's no_grad is its own
    release.set()
    t.join(timeout=30)
    assert seen == {"holder": False, "main": True}
