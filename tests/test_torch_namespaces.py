"""Namespaces PyTorch programs import from: llgrad.functional holds torch.functional's names
(but stft / istft: no complex tensors) and computes as torch's; llgrad.to_dlpack hands a
tensor to torch without a copy."""
import numpy as np
import pytest

import llgrad
import llgrad.functional

torch = pytest.importorskip("torch")


def test_functional_names_as_torchs():
    assert set(llgrad.functional.__all__) == set(torch.functional.__all__) - {"stft", "istft"}
    x = [[1., 2., 2.], [3., 1., 1.]]
    mine = llgrad.functional.unique(llgrad.tensor(x), return_counts=True)
    theirs = torch.functional.unique(torch.tensor(x), return_counts=True)
    for a, b in zip(mine, theirs):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    a = llgrad.functional.einsum("ij,kj->ik", llgrad.tensor(x), llgrad.tensor(x))
    b = torch.functional.einsum("ij,kj->ik", torch.tensor(x), torch.tensor(x))
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_to_dlpack_shares_memory_with_torch():
    x = llgrad.arange(6.).view(2, 3)
    t = torch.from_dlpack(llgrad.to_dlpack(x))
    x.add_(1)
    np.testing.assert_array_equal(t.numpy(), x.numpy())
