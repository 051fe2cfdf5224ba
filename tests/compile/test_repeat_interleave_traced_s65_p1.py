"""repeat_interleave with a tensor of repeats inside llgrad.compile (a graph batch's node ->
graph vector, arange(B).repeat_interleave(nodes_per_graph)): traced by searchsorted over
the repeats' running total, their sum a value guard, not a fallback to eager; values and
the gradient equal PyTorch's when later calls' repeats (and their sum) change, and a
negative repeat raises PyTorch's error at a later call. The indices of int32 repeats are
int32, as PyTorch's (eager gave int64)."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _f(lib, x, r):
    rows = x.repeat_interleave(r, dim=0)
    return (rows, lib.arange(r.numel()).repeat_interleave(r), lib.repeat_interleave(r),
            x.repeat_interleave(r[:1], dim=1))


def test_tensor_repeats_compile_and_equal_torch():
    cf = llgrad.compile(lambda x, r: _f(llgrad, x, r))
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for r in ([1, 2, 0, 3], [2, 2, 1, 1], [0, 0, 0, 4], [1, 2, 0, 3]):
            x = rng.standard_normal((4, 2)).astype(np.float32)
            tx, lx = torch.tensor(x, requires_grad=True), llgrad.tensor(x, requires_grad=True)
            want, got = _f(torch, tx, torch.tensor(r)), cf(lx, llgrad.tensor(r))
            for a, b in zip(want, got):
                np.testing.assert_array_equal(b.detach().numpy(), a.detach().numpy())
            w = torch.arange(want[0].numel()).reshape(want[0].shape)
            (want[0] * w).sum().backward()
            (got[0] * llgrad.tensor(w.numpy())).sum().backward()
            np.testing.assert_array_equal(lx.grad.numpy(), tx.grad.numpy())
    assert cf.entries and not cf.graph_breaks
    with pytest.raises(RuntimeError, match="repeats can not be negative"):
        cf(llgrad.zeros(4, 2), llgrad.tensor([1, -1, 2, 0]))


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_the_indices_keep_the_repeats_dtype_eagerly_and_compiled(dtype):
    r = np.array([1, 0, 2], dtype)
    want = torch.repeat_interleave(torch.tensor(r))
    cf = llgrad.compile(lambda r: llgrad.repeat_interleave(r))
    for got in (llgrad.repeat_interleave(llgrad.tensor(r)), cf(llgrad.tensor(r))):
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1] == dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())
