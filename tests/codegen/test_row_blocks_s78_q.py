"""Rows several at a time (issue 20): the exp kernels (softmax, log_softmax, logsumexp:
lowerings/ops_norm.py) run blocks of 8, 4 or 2 rows phase by phase in one loop (each row its
own max and sum). Row counts that fill blocks of each size or none, NaN / inf / all -inf
rows inside a block, rows split over threads: native code == eager == the IR interpreter
== torch, values and gradients, one trace."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen.lowerings.ops_norm import interleave
from llgrad.ir.interpret import interpret

torch = pytest.importorskip("torch")


def test_block_sizes():
    assert interleave([2048], 64) == 8          # the block's attention rows
    assert interleave([8, 6], 64) == 2
    assert interleave([7], 64) == 1             # (no remainder rows in the exp kernels)
    assert interleave([8], 4096) == 1           # long rows: one at a time (L1)
    assert interleave([], 64) == 1


def _close(got, want, what, dt):
    tol = dict(rtol=2e-5, atol=1e-6) if dt == np.float32 else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got, want, equal_nan=True, err_msg=what, **tol)


def _compare(fn, arrays, dt, grads=True):
    """fn(lib, *tensors) -> tuple of outputs: compiled (after its build) == eager ==
    interpreter == torch; with grads, the gradients of the sum of the finite outputs
    weighted by a fixed array too."""
    def run(lib, compiled):
        ts = [lib.tensor(a.copy(), requires_grad=grads) for a in arrays]
        f = llgrad.compile(lambda *t: fn(lib, *t)) if compiled else (lambda *t: fn(lib, *t))
        outs = f(*ts)
        if compiled:
            f.wait()                    # (LLGRAD_COMPILE=background: native code from here)
            ts = [lib.tensor(a.copy(), requires_grad=grads) for a in arrays]
            outs = f(*ts)
            assert f.n_traces == 1
        res = [o.detach().numpy() for o in outs]
        if grads:
            rng = np.random.default_rng(1)
            loss = sum((o.masked_fill(~lib.isfinite(o), 0.0) *
                        lib.tensor(rng.standard_normal(o.shape).astype(dt))).sum()
                       for o in outs)
            res += [g.numpy() for g in lib.autograd.grad(loss, ts)]
        return res

    got = run(llgrad, True)
    for name, want in (("eager", run(llgrad, False)), ("torch", run(torch, False))):
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            _close(g, w, f"result {k} vs {name}", dt)
    ts = [llgrad.tensor(a) for a in arrays]
    interp = interpret(llgrad.trace(lambda *t: fn(llgrad, *t), *ts), *arrays)
    for k, i in enumerate(interp):
        _close(got[k], np.asarray(i), f"result {k} vs interpreter", dt)


def _rows(shape, dt, seed=0):
    """Normal rows, with a NaN row, a +inf, an all -inf row and -inf beside values."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3).astype(dt)
    flat = x.reshape(-1, shape[-1])
    if flat.shape[0] >= 4:
        flat[1, 0] = np.nan
        flat[2, -1] = np.inf
        flat[3, :] = -np.inf
        flat[-1, : shape[-1] // 2] = -np.inf
    return x


@pytest.mark.parametrize("shape", [(6, 33), pytest.param((16, 17), marks=pytest.mark.slow),
                                   pytest.param((5, 7, 9), marks=pytest.mark.slow)])
def test_exp_kernels_in_blocks(shape):
    x = _rows(shape, np.float32)
    _compare(lambda lib, t: (lib.softmax(t, dim=-1), lib.log_softmax(t, dim=-1),
                             lib.logsumexp(t, dim=-1)), [x], np.float32, grads=False)


@pytest.mark.parametrize("dt", [np.float32, pytest.param(np.float64, marks=pytest.mark.slow)])
def test_causal_softmax_forward_and_backward(dt):
    """The transformer block's attention rows, smaller (blocks of 4 of the 12 rows): a
    masked softmax and its backward through a product."""
    rng = np.random.default_rng(2)
    s = rng.standard_normal((2, 2, 12, 12)).astype(dt)
    v = rng.standard_normal((2, 2, 12, 5)).astype(dt)
    mask = np.triu(np.ones((12, 12), bool), 1)

    def fn(lib, s, v):
        a = lib.nn.functional.softmax(s.masked_fill(lib.tensor(mask), float("-inf")), dim=-1)
        return a, a @ v
    _compare(fn, [s, v], dt)


@pytest.fixture
def two_threads():
    before = llgrad.get_num_threads()
    llgrad.set_num_threads(2)
    yield
    llgrad.set_num_threads(before)


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(7, 64, 200), (3, 12, 40)])
def test_blocks_split_over_threads(two_threads, shape):
    """(7, 64) rows: blocks of 8 of the 64, the 7 or the blocks split over 2 threads."""
    x = _rows(shape, np.float32, seed=4)
    _compare(lambda lib, t: (lib.softmax(t, dim=-1), lib.log_softmax(t, dim=-1)), [x],
             np.float32, grads=False)


def test_sizes_sharing_code_take_rows_one_at_a_time(monkeypatch, tmp_path):
    """Batch sizes whose row blocks differ (16: 8 rows, 12: 4, 9: 1) still share one module
    (codegen/size_params.py): code shared between sizes takes its rows one at a time, so its
    structure does not change with them. Two LLVM builds, the first size's and the family's
    (cross_entropy's log_softmax rows; test_size_params's step)."""
    import copy
    import sys
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    import test_size_params as sp
    from llgrad.codegen.native import cache, jit
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(tmp_path))
    jit._reset()
    cache._reset()
    try:
        llgrad.manual_seed(0)
        model = sp.Net()
        reference = copy.deepcopy(model)
        step = llgrad.compile(sp.train_step, recompile_limit=16, dynamic=False)
        sizes = [16, 12, 9, 24]
        losses, params = sp._run(step, model, sizes)
        assert step.n_llvm_compiles == 2
        e_losses, e_params = sp._run(sp.train_step, reference, sizes)
        np.testing.assert_allclose(losses, e_losses, rtol=1e-5, atol=1e-6)
        for a, b in zip(params, e_params):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    finally:
        monkeypatch.undo()
        jit._reset()
        cache._reset()
