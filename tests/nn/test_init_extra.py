"""nn.init.sparse_ and the deprecated init names (FutureWarning, then the `_` function)."""
import numpy as np
import pytest

import llgrad
import llgrad.nn.init as init


def test_sparse_zeros_per_column_and_std():
    llgrad.manual_seed(0)
    w = init.sparse_(llgrad.empty(200, 30), sparsity=0.25, std=0.5)
    zeros = (w.numpy() == 0).sum(0)
    assert (zeros == 50).all()
    nonzero = w.numpy()[w.numpy() != 0]
    assert abs(nonzero.std() - 0.5) < 0.03
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.sparse_(llgrad.empty(3), 0.1)


@pytest.mark.parametrize("name", ["uniform", "normal", "xavier_uniform", "xavier_normal",
                                  "kaiming_uniform", "kaiming_normal", "orthogonal", "eye"])
def test_deprecated_names_warn_and_fill(name):
    w = llgrad.zeros(4, 5)
    with pytest.warns(FutureWarning, match=f"`nn.init.{name}` is now deprecated in favor of "
                                           f"`nn.init.{name}_`"):
        out = getattr(init, name)(w)
    assert out is w and np.abs(w.numpy()).sum() > 0
    with pytest.warns(FutureWarning):
        init.constant(w, 3.0)
    assert (w.numpy() == 3.0).all()
