"""The keywords PyTorch programs pass to factories: layout= (strided; zeros in sparse_coo is
an empty sparse tensor), pin_memory= (True raises on a machine without an accelerator, as
torch's CPU build does) and empty's memory_format=, each against torch, eagerly and inside
llgrad.compile."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

CALLS = {
    "zeros layout": lambda L: L.zeros(2, 3, layout=L.strided),
    "ones pin_memory": lambda L: L.ones(2, layout=L.strided, pin_memory=False),
    "full": lambda L: L.full((2,), 1.5, layout=L.strided, pin_memory=False),
    "arange": lambda L: L.arange(4, layout=L.strided),
    "linspace": lambda L: L.linspace(0, 1, 5, layout=L.strided),
    "eye": lambda L: L.eye(3, layout=L.strided, pin_memory=False),
    "randn": lambda L: (L.manual_seed(0), L.randn(3, layout=L.strided))[1],
    "randint": lambda L: (L.manual_seed(0), L.randint(0, 9, (4,), pin_memory=False))[1],
    "randperm": lambda L: (L.manual_seed(0), L.randperm(5, layout=L.strided))[1],
    "empty channels_last": lambda L: L.empty(2, 3, 4, 5, memory_format=L.channels_last).stride(),
    "empty channels_last_3d": lambda L: L.empty(1, 2, 3, 4, 5,
                                                memory_format=L.channels_last_3d).stride(),
    "empty contiguous": lambda L: L.empty(2, 3, memory_format=L.contiguous_format).stride(),
    "empty leaf": lambda L: L.empty(2, 3, 4, 5, memory_format=L.channels_last,
                                    requires_grad=True).is_leaf,
    "sparse zeros": lambda L: L.zeros(2, 3, layout=L.sparse_coo).to_dense(),
}


@pytest.mark.parametrize("name", CALLS)
def test_as_torch(name):
    mine, theirs = CALLS[name](llgrad), CALLS[name](torch)
    if isinstance(theirs, torch.Tensor):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
        assert str(mine.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    else:
        assert mine == theirs


@pytest.mark.parametrize("call, error", [
    (lambda L: L.zeros(2, pin_memory=True), RuntimeError),
    (lambda L: L.empty(2, 3, memory_format=L.channels_last), RuntimeError),
    (lambda L: L.empty(2, 3, 4, 5, memory_format=L.preserve_format), RuntimeError),
    (lambda L: L.zeros(2, memory_format=L.contiguous_format), TypeError),
    (lambda L: L.randn(2, layout=L.sparse_coo), NotImplementedError),
])
def test_errors_as_torchs(call, error):
    for lib in (llgrad, torch):
        with pytest.raises(error):
            call(lib)


def test_inside_compile():
    def f(x):
        return x + llgrad.zeros(x.shape, layout=llgrad.strided, pin_memory=False) + \
            llgrad.ones(x.shape[0], layout=llgrad.strided)
    g = llgrad.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            x = llgrad.randn(3)
            np.testing.assert_array_equal(g(x).numpy(), f(x).numpy())
