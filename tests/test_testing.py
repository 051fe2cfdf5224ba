"""llgrad.testing.assert_close against torch.testing.assert_close: the same verdict and the same
message (the library's name aside) over tensors, numbers, sequences and mappings, with the
default tolerances per dtype, NaN, infinities, dtype / shape / stride checks and msg."""
import numpy as np
import pytest

import llgrad
from llgrad.testing import assert_close, make_tensor

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _cases(L):
    return [
        ((L.tensor([1., 2., 3.]), L.tensor([1., 2.5, 3.])), {}),
        ((L.tensor([1., 2.]), L.tensor([1., 2., 3.])), {}),
        ((L.tensor([1., 2.]), L.tensor([1., 2.], dtype=L.float64)), {}),
        ((L.tensor([1., 2.]), L.tensor([1., 2.], dtype=L.float64)), {"check_dtype": False}),
        ((L.tensor([1, 2]), L.tensor([1, 3])), {}),
        ((1.0, 1.0 + 1e-9), {}), ((1.0, 1.5), {}), ((2, 3), {}),
        (([L.ones(2)], [L.zeros(2)]), {}),
        (({"a": L.ones(2)}, {"a": L.zeros(2)}), {}),
        (([L.ones(1), [L.ones(1)]], [L.ones(1), [L.zeros(1)]]), {}),
        ((L.tensor([float("nan")]), L.tensor([float("nan")])), {}),
        ((L.tensor([float("nan")]), L.tensor([float("nan")])), {"equal_nan": True}),
        ((L.tensor([float("inf")]), L.tensor([float("inf")])), {}),
        ((L.tensor([1.0, 2.0]), L.tensor([1.0, 2.0 + 1e-6])), {}),
        ((L.ones(2), L.ones(2) * 1.1), {"msg": "custom"}),
        ((L.ones(2, 2), L.ones(2, 2).t().contiguous().t()), {"check_stride": True}),
        ((L.ones(2), L.ones(2)), {"rtol": 1e-3}),
        ((L.ones(2), L.ones(2) * 1.01), {"rtol": 0.1, "atol": 0.0}),
        ((L.tensor(3.), L.tensor(4.)), {}),
        ((L.ones(2, 2), L.zeros(2, 2)), {}),
        ((L.tensor([True, False]), L.tensor([True, True])), {}),
        ((np.ones(2), np.zeros(2)), {}),
    ]


def _outcome(lib, args, kw):
    try:
        lib.testing.assert_close(*args, **kw)
        return "passed"
    except (AssertionError, TypeError, ValueError) as e:
        return type(e).__name__, str(e).replace("torch.", "LIB.").replace("llgrad.", "LIB.") \
            .replace("LIB.runtime.tensor.", "LIB.")


@pytest.mark.parametrize("k", range(len(_cases(llgrad))))
def test_assert_close_as_torch(k):
    (a_t, kw), (a_l, _) = _cases(torch)[k], _cases(llgrad)[k]
    assert _outcome(llgrad, a_l, kw) == _outcome(torch, a_t, kw)


def test_make_tensor():
    t = make_tensor(3, 4, dtype=llgrad.float32, low=-1, high=1, requires_grad=True)
    assert t.shape == (3, 4) and t.requires_grad and t.dtype == llgrad.float32
    assert float(t.abs().max()) <= 1
    i = make_tensor((5,), dtype=llgrad.int64, low=0, high=3, exclude_zero=True)
    assert set(i.tolist()) <= {1, 2}
    n = make_tensor(4, 6, dtype=llgrad.float64, noncontiguous=True)
    assert not n.is_contiguous() and n.shape == (4, 6)
    assert_close(n, n.clone())
