"""torch.utils.data as tutorial programs use it, against PyTorch: the order a seeded shuffle,
sampler or random_split gives (torch's generator draws reproduced), what default_collate and
default_convert build from dicts, tuples, namedtuples and NumPy values, ConcatDataset /
Subset / StackDataset / ChainDataset, and an IterableDataset's worker_info."""
import collections

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

Point = collections.namedtuple("Point", "x y")


def _desc(x):
    """A library-free description of a collated value: containers by type, tensors by
    dtype, shape and values (so a float64 where torch gives float32 shows)."""
    if hasattr(x, "dtype") and hasattr(x, "shape"):
        return ("T", str(x.dtype).split(".")[-1], tuple(x.shape), x.tolist())
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return ("namedtuple", type(x).__name__, [_desc(i) for i in x])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_desc(i) for i in x])
    if isinstance(x, dict):
        return ("dict", {k: _desc(v) for k, v in x.items()})
    return (type(x).__name__, x)


def _same(fn):
    assert fn(llgrad) == fn(torch)


def _order_shuffle_generator(L):
    ds = L.utils.data.TensorDataset(L.arange(23))
    g = L.Generator().manual_seed(7)
    return [b[0].tolist() for b in L.utils.data.DataLoader(ds, batch_size=5, shuffle=True,
                                                           generator=g)]


def _order_shuffle_global_drop_last(L):
    L.manual_seed(3)
    ds = L.utils.data.TensorDataset(L.arange(23))
    epochs = [[b[0].tolist() for b in L.utils.data.DataLoader(ds, batch_size=5, shuffle=True,
                                                              drop_last=True)]
              for _ in range(2)]
    return epochs, L.rand(2).tolist()       # the loaders' draws from the global generator


def _order_epochs_one_generator(L):
    g = L.Generator().manual_seed(11)
    dl = L.utils.data.DataLoader(list(range(10)), batch_size=4, shuffle=True, generator=g)
    return [[b.tolist() for b in dl] for _ in range(3)], len(dl)


def _random_sampler_replacement(L):
    g = L.Generator().manual_seed(5)
    s = L.utils.data.RandomSampler(range(10), replacement=True, num_samples=40, generator=g)
    s2 = L.utils.data.RandomSampler(range(7), num_samples=17, generator=g)
    return list(s), list(s), list(s2), len(s2)


def _weighted_sampler(L):
    g = L.Generator().manual_seed(5)
    w = [0.1, 0.5, 2.0, 0.3, 1.0]
    a = list(L.utils.data.WeightedRandomSampler(w, 30, replacement=True, generator=g))
    b = list(L.utils.data.WeightedRandomSampler(w, 4, replacement=False, generator=g))
    L.manual_seed(9)
    c = list(L.utils.data.WeightedRandomSampler(L.tensor(w, dtype=L.float64), 30))
    return a, b, c


def _subset_random_sampler(L):
    g = L.Generator().manual_seed(5)
    s = L.utils.data.SubsetRandomSampler([3, 9, 1, 7, 100], generator=g)
    return list(s), list(s), [type(i).__name__ for i in s]


def _batch_sampler_and_sampler_loaders(L):
    bs = L.utils.data.BatchSampler(L.utils.data.SequentialSampler(range(10)), 3, False)
    dl = L.utils.data.DataLoader(L.arange(10) * 2, batch_sampler=bs)
    g = L.Generator().manual_seed(5)
    s = L.utils.data.WeightedRandomSampler([1.0, 2.0, 3.0], 8, generator=g)
    dl2 = L.utils.data.DataLoader(L.tensor([10., 20., 30.]), sampler=s, batch_size=3)
    return [b.tolist() for b in dl], len(dl), len(bs), [b.tolist() for b in dl2]


def _random_split(L):
    g = L.Generator().manual_seed(42)
    parts = L.utils.data.random_split(range(10), [0.3, 0.3, 0.4], generator=g)
    parts2 = L.utils.data.random_split(range(11), [0.5, 0.5], generator=g)     # remainder
    L.manual_seed(1)
    parts3 = L.utils.data.random_split(range(10), [3, 7])
    return [list(p) for p in parts], [list(p.indices) for p in parts2], [list(p) for p in parts3]


@pytest.mark.parametrize("case", [
    _order_shuffle_generator, _order_shuffle_global_drop_last, _order_epochs_one_generator,
    _random_sampler_replacement, _weighted_sampler, _subset_random_sampler,
    _batch_sampler_and_sampler_loaders, _random_split], ids=lambda f: f.__name__[1:])
def test_orders_equal_torch(case):
    _same(case)


def test_pin_memory_flag_accepted():
    with pytest.warns(UserWarning, match="pin_memory"):
        out = [b.tolist() for b in llgrad.utils.data.DataLoader(llgrad.arange(4.), batch_size=2,
                                                                pin_memory=True)]
    assert out == [[0.0, 1.0], [2.0, 3.0]]


def _collate_dicts(L):
    ds = [{"a": np.array([1.0, 2.0]), "b": i, "c": "s%d" % i, "d": (float(i), L.tensor([i]))}
          for i in range(3)]
    return _desc(next(iter(L.utils.data.DataLoader(ds, batch_size=3))))


def _collate_namedtuple_numpy(L):
    c = L.utils.data.default_collate
    return (_desc(c([Point(np.float32(i), np.array(i)) for i in range(3)])),
            _desc(c([np.int32(1), np.int32(2)])), _desc(c([True, False])),
            _desc(c([1.5, 2])), _desc(c([[1, 2], [3, 4]])), _desc(c([("a", 1), ("b", 2)])))


def _default_convert(L):
    c = L.utils.data.default_convert
    return (_desc(c(np.array([1, 2], dtype=np.int16))),
            _desc(c({"a": np.zeros(2), "b": [np.ones(1)]})),
            _desc(c(Point(np.array(1.0), 3))), _desc(c(np.float64(2.5))), _desc(c("str")),
            _desc(list(L.utils.data.DataLoader([np.array([1, 2]), np.array([3, 4])],
                                               batch_size=None))))


def _tensor_and_stack_datasets(L):
    ds = L.utils.data.TensorDataset(L.arange(6).reshape(3, 2), L.tensor([1, 2, 3]))
    sd = L.utils.data.StackDataset(a=L.arange(3), b=[5, 6, 7])
    return (_desc(ds[1]), len(ds), _desc(next(iter(L.utils.data.DataLoader(ds, batch_size=2)))),
            _desc(sd[2]), _desc(next(iter(L.utils.data.DataLoader(sd, batch_size=2)))))


def _concat_subset(L):
    a = L.utils.data.TensorDataset(L.arange(4))
    b = L.utils.data.TensorDataset(L.arange(10, 13))
    c = L.utils.data.ConcatDataset([a, b])
    s = L.utils.data.Subset(c, [6, 0, 4, -1])
    return (len(c), c.cumulative_sizes, [x[0].item() for x in s], c[-1][0].item(),
            (a + b)[5][0].item(), _desc(s.__getitems__([0, 1])))


def _iterable_worker_info_none(L):
    class Counting(L.utils.data.IterableDataset):
        def __iter__(self):
            return iter([L.utils.data.get_worker_info() is None] + list(range(1, 7)))

    class Upto(L.utils.data.IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n))
    return ([_desc(b) for b in L.utils.data.DataLoader(Counting(), batch_size=3)],
            list(L.utils.data.ChainDataset([Upto(2), Upto(3)])), list(Upto(2) + Upto(1)))


@pytest.mark.parametrize("case", [
    _collate_dicts, _collate_namedtuple_numpy, _default_convert, _tensor_and_stack_datasets,
    _concat_subset, _iterable_worker_info_none], ids=lambda f: f.__name__[1:])
def test_collate_and_datasets_equal_torch(case):
    _same(case)


def test_ragged_collate_error_matches():
    msgs = []
    for L in (llgrad, torch):
        with pytest.raises(RuntimeError) as e:
            L.utils.data.default_collate([[1, 2], [3]])
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


def test_weighted_sampler_bad_weights_errors_match():
    """WeightedRandomSampler draws with replacement through multinomial's with-replacement
    kernel, whose messages differ from the fast path's (regression: llgrad gave the fast
    path's for every draw)."""
    def errors(L):
        out = []
        for w in ([1.0, -1.0], [1.0, float("nan")], [1.0, float("inf")], [0.0, 0.0]):
            with pytest.raises(RuntimeError) as e:
                list(L.utils.data.WeightedRandomSampler(w, 3))
            out.append(str(e.value))
        for p in ([[0.0, 0.0], [1.0, -1.0]], [[1.0, 0.0], [float("inf"), -1.0]]):
            for kw in ({"replacement": True}, {}):
                with pytest.raises(RuntimeError) as e:
                    L.multinomial(L.tensor(p), 2, **kw)
                out.append(str(e.value))
        return out
    assert errors(llgrad) == errors(torch)
