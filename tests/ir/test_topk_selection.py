"""topk of few values by selection (ir/ops_sort._topk_selected: argpartition, then an order
of the k taken; slices with ties replayed as PyTorch picks): equal, indices and values, to
the sort-every-slice path it stands in for, over random shapes, dims, k, float/int data with
ties and NaNs, largest and smallest, sorted or not; and the selection path is the one taken
(no full sort) where k * 4 <= n."""
import numpy as np
import pytest

from llgrad.ir import ops_sort as S


def _by_sort(x, k, dim, largest, sorted_):
    idx = S._argsort(x, dim, largest).astype(np.int64)
    idx = np.array(np.take(idx, np.arange(k), axis=dim))
    n = x.shape[dim]
    redo = S._ties(x, dim) if sorted_ or k * 64 <= n else \
        np.ones(idx.shape[:dim] + idx.shape[dim + 1:], bool)
    S._replay(x, idx, dim, redo, lambda row: S.topk_positions(row, k, largest, sorted_))
    return np.take_along_axis(x, idx, axis=dim), idx


def _cases(seed, count):
    rng = np.random.default_rng(seed)
    while count:
        shape = tuple(int(v) for v in rng.integers(1, 5, rng.integers(1, 4)))
        dim = int(rng.integers(0, len(shape)))
        n = int(rng.integers(4, 200))
        shape = shape[:dim] + (n,) + shape[dim + 1:]
        kind = int(rng.integers(0, 4))
        if kind == 0:
            x = rng.standard_normal(shape).astype(np.float32)
        elif kind == 1:
            x = rng.integers(0, 6, shape).astype(np.float32)        # (many ties)
        elif kind == 2:
            x = rng.integers(-3, 3, shape).astype(np.int64)
        else:
            x = rng.standard_normal(shape)
            x[rng.random(shape) < 0.1] = np.nan
        k = int(rng.integers(1, n // 4 + 1))
        largest, sorted_ = bool(rng.integers(0, 2)), bool(rng.integers(0, 2))
        if sorted_ or k * 64 <= n:
            count -= 1
            yield x, k, dim, largest, sorted_


@pytest.mark.parametrize("seed", [0, 1])
def test_selection_equals_sorting(seed):
    for x, k, dim, largest, sorted_ in _cases(seed, 400):
        got, want = S._topk(x, k, dim, largest, sorted_), _by_sort(x, k, dim, largest, sorted_)
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[0], want[0])
        assert got[1].flags.c_contiguous


def test_few_values_take_no_full_sort(monkeypatch):
    def refuse(*a, **kw):
        raise AssertionError("sorted every slice")
    monkeypatch.setattr(S, "_argsort", refuse)
    x = np.random.default_rng(2).standard_normal((8, 1000)).astype(np.float32)
    values, idx = S._topk(x, 5, 1, True, True)
    np.testing.assert_array_equal(values, -np.sort(-x, axis=1)[:, :5])
