"""bfloat16 log_softmax over the last dim, and nll_loss / cross_entropy reduced over a batch,
give PyTorch's bits. log_softmax: its CPU kernel
(LogSoftmaxKernelImpl.h, the lastdim one) keeps the sum of exponentials and that sum's log
in bfloat16 on the way, so x - max - log(sum) rounds three times. llgrad rounded once
(about one element in eight a bfloat16 ulp off); other dims round once in PyTorch too."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


@pytest.mark.parametrize("shape,dim", [((8, 13), -1), ((4, 3, 33), 2), ((7,), 0),
                                       ((8, 13), 0), ((3, 5, 6), 1)], ids=str)
def test_bfloat16_log_softmax_bits(shape, dim):
    x = (np.random.default_rng(len(shape) + dim).standard_normal((20,) + shape) * 3).astype(
        np.float32)
    dim = dim if dim < 0 else dim + 1       # (past the leading batch of 20)
    want = torch.log_softmax(torch.tensor(x).bfloat16(), dim)
    got = llgrad.log_softmax(llgrad.tensor(x).bfloat16(), dim)
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


def test_bfloat16_log_softmax_module_and_gradient():
    x = (np.random.default_rng(0).standard_normal((16, 10)) * 3).astype(np.float32)
    g = np.random.default_rng(1).standard_normal((16, 10)).astype(np.float32)
    res = []
    for lib in (torch, llgrad):
        xi = lib.tensor(x).bfloat16().requires_grad_()
        out = lib.nn.LogSoftmax(dim=1)(xi)
        out.backward(lib.tensor(g).bfloat16())
        res.append((out.float().detach().numpy(), xi.grad.float().numpy()))
    np.testing.assert_array_equal(res[1][0], res[0][0])
    np.testing.assert_array_equal(res[1][1], res[0][1])


# nll_loss (and so cross_entropy) of bfloat16 (N, C) input, summed or averaged: PyTorch's
# kernel adds the losses in bfloat16, cascaded in levels of 16 samples (LossNLL.cpp); llgrad
# summed in float32 and rounded once (the loss a bfloat16 ulp off in a third of the cases)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_bfloat16_cross_entropy_loss_bits(reduction):
    rng = np.random.default_rng(7)
    for case in range(12):
        n = int(rng.integers(2, 70))
        x = (rng.standard_normal((n, 13)) * 3).astype(np.float32)
        y = rng.integers(0, 13, n)
        if case % 3 == 0:
            y[rng.random(n) < 0.3] = -100
        res = []
        for lib in (torch, llgrad):
            xi = lib.tensor(x).bfloat16().requires_grad_()
            loss = lib.nn.functional.cross_entropy(xi, lib.tensor(y), reduction=reduction)
            loss.backward()
            res.append((loss.float().item(), xi.grad.float().numpy()))
        assert res[1][0] == res[0][0], (case, n)
        np.testing.assert_array_equal(res[1][1], res[0][1])
