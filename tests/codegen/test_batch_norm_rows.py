"""batch_norm of an (N, C) batch along the rows (codegen/lowerings/ops_batch_norm_rows.py):
against the NumPy implementation, its independent reference, in training and evaluation,
with and without weight and bias, in both dtypes, with NaN and inf in a channel, beside and
past the channel limit (the general emit), and with the threads splitting the channels (the
one-thread bits); BatchNorm1d's eager training forward and running statistics against torch."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen import lower
from llgrad.codegen.lowerings.ops_batch_norm_rows import MAX_CHANNELS
from llgrad.ir import ops_batch_norm as OB
from llgrad.ir.builder import Builder
from llgrad.ir.graph import TensorType


def _kernel(shape, dtype, weight, bias, training, eps=1e-5):
    b = Builder("bn")
    x = b.input(TensorType(dtype, shape), "x")
    c = (shape[1],)
    w = b.input(TensorType(dtype, c), "w") if weight else None
    bb = b.input(TensorType(dtype, c), "b") if bias else None
    stats = [None, None] if training else [b.input(TensorType(dtype, c), n) for n in "mv"]
    return lower.lower(b.ret(b.add("batch_norm", [x, w, bb] + stats,
                                   {"training": training, "eps": eps})))


def _inputs(shape, dtype, weight, bias, training, special=None):
    rng = np.random.default_rng(abs(hash((shape, dtype, weight, bias, training))) % 2**32)
    x = (rng.standard_normal(shape) * 3 + 2).astype(dtype)
    if special == "nan":
        x[3, 1] = np.nan
    elif special == "inf":
        x[0, 0] = np.inf
    c = shape[1]
    arrays = [x]
    arrays += [rng.standard_normal(c).astype(dtype)] if weight else []
    arrays += [rng.standard_normal(c).astype(dtype)] if bias else []
    arrays += [] if training else [rng.standard_normal(c).astype(dtype),
                                   rng.uniform(0.5, 2, c).astype(dtype)]
    return arrays


def _want(arrays, weight, bias, training, eps=1e-5):
    x, rest = arrays[0], list(arrays[1:])
    w = rest.pop(0) if weight else None
    b = rest.pop(0) if bias else None
    m, v = (rest if not training else (None, None))
    return OB._batch_norm(x, w, b, m, v, training=training, eps=eps)


@pytest.mark.parametrize("dtype", ["float32", pytest.param("float64", marks=pytest.mark.slow)])
@pytest.mark.parametrize("shape", [(300, 7), (64, MAX_CHANNELS),
                                   pytest.param((5, MAX_CHANNELS + 1), marks=pytest.mark.slow)])
@pytest.mark.parametrize("weight,bias", [(True, True), (False, False),
                                         pytest.param(False, True, marks=pytest.mark.slow)])
@pytest.mark.parametrize("training", [True, False])
def test_kernel_matches_numpy(dtype, shape, weight, bias, training):
    arrays = _inputs(shape, dtype, weight, bias, training)
    got = _kernel(shape, dtype, weight, bias, training)(arrays)[0]
    want = _want(arrays, weight, bias, training)
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12,
                               atol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("special", ["nan", "inf"])
def test_special_values_stay_in_their_channel(special):
    arrays = _inputs((40, 6), "float32", True, True, True, special)
    got = _kernel((40, 6), "float32", True, True, True)(arrays)[0]
    want = _want(arrays, True, True, True)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    f = np.isfinite(want)
    np.testing.assert_allclose(got[f], want[f], rtol=1e-5, atol=1e-5)


def test_threads_give_the_one_thread_bits():
    arrays = _inputs((256, 512), "float32", True, True, True)
    old = llgrad.get_num_threads()
    try:
        results = []
        for t in (1, 2, 3):
            llgrad.set_num_threads(t)
            results.append(_kernel((256, 512), "float32", True, True, True)(arrays)[0])
    finally:
        llgrad.set_num_threads(old)
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


def test_batchnorm1d_training_steps_match_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(5).standard_normal((256, 128)).astype(np.float32) * 2 + 1
    lm, tm = llgrad.nn.BatchNorm1d(128), torch.nn.BatchNorm1d(128)
    for k in range(6):      # (the shaped kernel and the statistics loop take over)
        ly = lm(llgrad.tensor(x * (k + 1)))
        ty = tm(torch.tensor(x * (k + 1)))
    np.testing.assert_allclose(ly.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(getattr(lm, name).numpy(), getattr(tm, name).numpy(),
                                   rtol=1e-5, atol=1e-6)
    assert lm.num_batches_tracked.item() == 6
    # (mul_ and add_ per step, as the tensor calls count them, after reset's zero_)
    assert lm.running_mean._version == 13 and lm.num_batches_tracked._version == 7


@pytest.mark.parametrize("dtype", [llgrad.float32, llgrad.float64])
@pytest.mark.parametrize("momentum", [0.1, 1, 0.0, 1e-30, 0.7])
def test_buffer_updates_give_the_tensor_calls_bits(dtype, momentum):
    from llgrad.runtime import buffer_update
    rng = np.random.default_rng(4)
    start = rng.standard_normal(257) * 1e3
    start[:3] = [np.nan, np.inf, -0.0]
    stat = rng.standard_normal(257).astype(dtype.name)
    fast, slow = (llgrad.tensor(start, dtype=dtype) for _ in range(2))
    assert buffer_update.blend(fast, stat, momentum)
    with llgrad.no_grad():
        slow.mul_(1 - momentum).add_(llgrad.tensor(stat, dtype=dtype), alpha=momentum)
    np.testing.assert_array_equal(fast.numpy(), slow.numpy())
    assert fast._version == slow._version
    count = llgrad.tensor(2**63 - 1)            # (wraps, as the tensor call does)
    twin = llgrad.tensor(2**63 - 1)
    assert buffer_update.increment(count)
    twin.add_(1)
    assert count.item() == twin.item() and count._version == twin._version


def test_buffer_updates_leave_other_cases_to_the_tensor_calls():
    from llgrad.runtime import buffer_update
    p = llgrad.zeros(3, requires_grad=True)
    assert not buffer_update.blend(p, np.zeros(3, np.float32), 0.1)
    b = llgrad.zeros(3)
    assert not buffer_update.blend(b, np.zeros(3, np.float64), 0.1)    # (another dtype)
    assert not buffer_update.blend(b, np.zeros(3, np.float32), 1e39)   # (add_'s error)
    assert not buffer_update.increment(llgrad.zeros((), dtype=llgrad.int32))
    assert b._version == 0


def _backward_kernel(shape, dtype, weight):
    b = Builder("bnb")
    g, x = (b.input(TensorType(dtype, shape), n) for n in ("g", "x"))
    w = b.input(TensorType(dtype, (shape[1],)), "w") if weight else None
    return lower.lower(b.ret(*b.add("batch_norm_backward", [g, x, w], {"eps": 1e-5})))


@pytest.mark.parametrize("dtype", ["float32", pytest.param("float64", marks=pytest.mark.slow)])
@pytest.mark.parametrize("weight", [True, False])
@pytest.mark.parametrize("special", [None, "nan_x", "inf_g", "huge", "nan_w"])
def test_backward_matches_numpy(dtype, weight, special):
    """The rows' backward (ops_batch_norm_backward._rows) against the NumPy implementation:
    a channel with a special value takes the exact path, its neighbours the fast one."""
    shape = (70, 40)
    rng = np.random.default_rng(abs(hash((dtype, weight, special))) % 2**32)
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(40).astype(dtype) if weight else None
    if special == "nan_x":
        x[5, 7] = np.nan
    elif special == "inf_g":
        g[0, 3] = np.inf
    elif special == "huge":
        x[:, 9] *= np.finfo(dtype).max / 8
    elif special == "nan_w" and weight:
        w[2] = np.nan
    got = _backward_kernel(shape, dtype, weight)([g, x] + ([w] if weight else []))
    with np.errstate(all="ignore"):
        want = OB._batch_norm_backward(g, x, w, 1e-5)
    for a, b in zip(got, want):
        assert np.array_equal(np.isnan(a), np.isnan(b)) and \
            np.array_equal(np.isinf(a), np.isinf(b))
        f = np.isfinite(b)
        scale = np.abs(b[f]).max() if f.any() else 1.0
        rtol = 1e-4 if dtype == "float32" else 1e-10
        np.testing.assert_allclose(a[f], b[f], rtol=rtol, atol=rtol * scale)


def test_backward_threads_give_the_one_thread_bits():
    rng = np.random.default_rng(12)
    g, x = (rng.standard_normal((256, 300)).astype(np.float32) for _ in range(2))
    w = rng.standard_normal(300).astype(np.float32)
    old = llgrad.get_num_threads()
    try:
        results = []
        for t in (1, 3):
            llgrad.set_num_threads(t)
            results.append(_backward_kernel(x.shape, "float32", True)([g, x, w]))
    finally:
        llgrad.set_num_threads(old)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
