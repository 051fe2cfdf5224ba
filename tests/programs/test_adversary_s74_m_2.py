"""Session 74 (m), torch.utils.data against PyTorch under the same seeds (2/2): samplers
(RandomSampler with replacement / num_samples, SubsetRandomSampler, WeightedRandomSampler,
BatchSampler, SequentialSampler, DistributedSampler with set_epoch), random_split by
counts and fractions, Subset / ConcatDataset / ChainDataset / StackDataset /
TensorDataset in loaders, iterable datasets with and without worker sharding,
default_collate and default_convert (types and dtypes), len() of loaders and samplers.
Regressions: WeightedRandomSampler(replacement=False) with more samples than weights is
made (PyTorch raises as it is iterated); an iterable dataset's length warning with
workers carries PyTorch's advice."""
import collections
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from test_adversary_s74_m import D, desc, ds, same  # noqa: E402
pytestmark = pytest.mark.torch

Pair = collections.namedtuple("Pair", "a b")


def sharded(L):
    class Sharded(D(L).IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            info = D(L).get_worker_info()
            if info is None:
                return iter(range(self.n))
            return iter(range(info.id, self.n, info.num_workers))
    return Sharded


def _random_sampler(L):
    L.manual_seed(2)
    s = D(L).RandomSampler(range(6), replacement=True, num_samples=70)
    s2 = D(L).RandomSampler(range(6), num_samples=14)
    return list(s), list(s2), len(s), len(s2), L.rand(2)


def _subset_random(L):
    L.manual_seed(2)
    s = D(L).SubsetRandomSampler(range(0, 10, 2))
    dl = D(L).DataLoader(ds(L), sampler=s, batch_size=2)
    return list(D(L).SubsetRandomSampler([5, 2, 8, 1])), list(dl), list(dl), L.rand(2)


def _weighted(L):
    L.manual_seed(2)
    s = D(L).WeightedRandomSampler([0.2, 3, 1, 0.5, 0.0, 2], 5, replacement=False)
    s2 = D(L).WeightedRandomSampler(L.tensor([0.2, 3, 1, 0.5]), 9)
    dl = D(L).DataLoader(ds(L, 4), sampler=D(L).WeightedRandomSampler(np.array([1.0, 2, 3, 4]),
                                                                     7), batch_size=3)
    return (list(s), list(s), list(s2), [type(i).__name__ for i in s], list(dl), len(dl),
            L.rand(2))


def _batch_sampler(L):
    g = L.Generator().manual_seed(1)
    bs = D(L).BatchSampler(D(L).RandomSampler(range(10), generator=g), 4, drop_last=False)
    bs2 = D(L).BatchSampler(D(L).SequentialSampler(range(10)), 4, drop_last=True)
    dl = D(L).DataLoader(ds(L), batch_sampler=bs)
    return list(bs), len(bs), list(dl), len(dl), list(bs2), len(bs2), L.rand(1, generator=g)


def _distributed(L):
    out = []
    for n, reps, shuffle, drop in [(10, 3, True, False), (10, 3, True, True),
                                   (11, 4, False, False), (2, 5, True, False),
                                   (10, 2, True, False), (7, 3, False, True)]:
        for r in range(reps):
            s = D(L).DistributedSampler(range(n), num_replicas=reps, rank=r, shuffle=shuffle,
                                        seed=7, drop_last=drop)
            e0 = list(s)
            s.set_epoch(3)
            out.append((len(s), e0, list(s), s.total_size))
    return out


def _distributed_loader(L):
    L.manual_seed(1)
    s = D(L).DistributedSampler(ds(L, 9), num_replicas=2, rank=1)
    dl = D(L).DataLoader(ds(L, 9), batch_size=2, sampler=s)
    out = []
    for ep in range(2):
        s.set_epoch(ep)
        out.append(list(dl))
    return out, len(dl), L.rand(2)


def _random_split(L):
    L.manual_seed(4)
    a = D(L).random_split(range(10), [0.25, 0.25, 0.5])
    b = D(L).random_split(range(7), [2, 5])
    g = L.Generator().manual_seed(9)
    c = D(L).random_split(list(range(13)), [0.1, 0.2, 0.3, 0.4], generator=g)
    return ([list(x.indices) for x in a], [list(x) for x in b], [list(x.indices) for x in c],
            L.rand(2), L.rand(2, generator=g))


def _random_split_then_loaders(L):
    L.manual_seed(8)
    tr, te = D(L).random_split(ds(L, 12), [0.75, 0.25])
    return (list(D(L).DataLoader(tr, batch_size=4, shuffle=True)),
            list(D(L).DataLoader(te, batch_size=4)), L.rand(1))


def _datasets(L):
    cd = D(L).ConcatDataset([ds(L, 3), ds(L, 4)])
    ch = D(L).ChainDataset([sharded(L)(3), sharded(L)(2)])
    st = D(L).StackDataset(ds(L, 5), np.arange(5.0))
    st2 = D(L).StackDataset(x=L.arange(4), y=["a", "b", "c", "d"])
    L.manual_seed(3)
    return (list(D(L).DataLoader(cd, batch_size=3, shuffle=True)),
            list(D(L).DataLoader(ch, batch_size=2)), list(D(L).DataLoader(st, batch_size=2)),
            list(D(L).DataLoader(st2, batch_size=3, shuffle=True)),
            list(D(L).DataLoader(ch, batch_size=2, num_workers=2)),
            list(D(L).DataLoader(D(L).Subset(cd, [6, 0, 4]), batch_size=2)), L.rand(1))


def _iterable_workers(L):
    class Whole(D(L).IterableDataset):     # not sharded: each worker gives it all
        def __iter__(self):
            return iter(range(5))

    class Uneven(D(L).IterableDataset):
        def __iter__(self):
            info = D(L).get_worker_info()
            return iter([(info.id, k) for k in range(1 if info.id == 0 else 7)])
    S = sharded(L)
    return (list(D(L).DataLoader(S(11), batch_size=2, num_workers=2)),
            list(D(L).DataLoader(S(11), batch_size=3, num_workers=2, drop_last=True)),
            list(D(L).DataLoader(Whole(), batch_size=2, num_workers=2)),
            list(D(L).DataLoader(Whole(), batch_size=None, num_workers=2)),
            list(D(L).DataLoader(Uneven(), batch_size=2, num_workers=3)),
            list(D(L).DataLoader(Uneven(), batch_size=None, num_workers=2, prefetch_factor=1)))


def _collate(L):
    c = D(L).default_collate
    return (c([{"x": np.array([1, 2], dtype=np.uint8), "y": 1.5, "z": [1, 2]},
               {"x": np.array([3, 4], dtype=np.uint8), "y": 2.5, "z": [3, 4]}]),
            c([Pair(np.float16(1), "a"), Pair(np.float16(2), "b")]),
            c([np.array(1.5), np.array(2.5)]), c([b"ab", b"cd"]), c([True, False]),
            c([np.bool_(True), np.bool_(False)]), c([(1, [2.0, 3]), (4, [5.0, 6])]),
            c([np.int64(3), np.int64(4)]), c([L.tensor(1), L.tensor(2)]),
            c([{"a": {"b": (1, 2)}}, {"a": {"b": (3, 4)}}]),
            c([collections.OrderedDict(k=np.float32(1)), collections.OrderedDict(k=np.float32(2))]))


def _collate_errors(L):
    out = []
    for b in ([object(), object()], [np.array(["a"]), np.array(["b"])], [None, None],
              [{1, 2}, {3, 4}], [1 + 2j, 3j], [np.array([1, 2]), np.array([1])]):
        try:
            out.append(desc(D(L).default_collate(b)))
        except Exception as e:      # noqa: BLE001
            out.append(type(e).__name__)
    return out


def _convert(L):
    c = D(L).default_convert
    return (c([np.int8(3), 4.0, "s", (np.array([1.0], dtype=np.float32),)]),
            c(np.array(["a", "b"])), c(np.bool_(True)),
            c(Pair(np.zeros(2, dtype=np.int32), [np.float32(1)])), c(b"x"), c(np.arange(4)[::2]),
            list(D(L).DataLoader([np.int32(3), (1, np.float32(2))], batch_size=None)),
            list(D(L).DataLoader(ds(L, 3), batch_size=None, shuffle=True,
                                 generator=L.Generator().manual_seed(2))))


def _lens(L):
    class It(D(L).IterableDataset):
        def __iter__(self):
            return iter(range(7))

        def __len__(self):
            return 7
    return (len(D(L).DataLoader(ds(L, 10), batch_size=3)),
            len(D(L).DataLoader(ds(L, 10), batch_size=3, drop_last=True)),
            len(D(L).DataLoader(It(), batch_size=3)),
            len(D(L).DataLoader(It(), batch_size=3, drop_last=True)),
            len(D(L).DataLoader(It(), batch_size=None)),
            len(D(L).RandomSampler(range(4), num_samples=9)),
            len(D(L).BatchSampler(range(10), 4, True)), len(D(L).SequentialSampler(range(3))),
            len(D(L).DataLoader(ds(L, 10), batch_size=3, num_workers=2)),
            len(D(L).DistributedSampler(range(10), num_replicas=4, rank=0, drop_last=True)))


def _sampler_errors(L):
    out = []
    for f in [lambda: D(L).RandomSampler(range(3), num_samples=0),
              lambda: D(L).RandomSampler(range(3), replacement=1),
              lambda: D(L).BatchSampler(range(3), 0, False),
              lambda: list(D(L).RandomSampler([])),
              lambda: D(L).DistributedSampler(range(3), num_replicas=2, rank=2),
              lambda: D(L).random_split(range(4), [2, 3]),
              lambda: D(L).random_split(range(4), [0.5, 0.6])]:
        try:
            f()
            out.append("ok")
        except Exception as e:      # noqa: BLE001
            out.append(type(e).__name__)
    return out


CASES = [_random_sampler, _subset_random, _weighted, _batch_sampler, _distributed,
         _distributed_loader, _random_split, _random_split_then_loaders, _datasets,
         _iterable_workers, _collate, _collate_errors, _convert, _lens, _sampler_errors]


@pytest.mark.parametrize("case", CASES, ids=lambda f: f.__name__[1:])
def test_equal_torch(case):
    same(case)


# --- regressions (each failed before its fix) ---

def test_weighted_sampler_without_replacement_raises_only_as_it_is_iterated():
    def case(L):
        s = D(L).WeightedRandomSampler([1.0, 2.0], 3, replacement=False)
        try:
            list(s)
        except RuntimeError:
            return len(s), "RuntimeError"
        return len(s), "no error"
    same(case)


def test_iterable_length_warning_with_workers_has_torchs_advice():
    def case(L):
        class It(D(L).IterableDataset):     # not sharded: each worker gives it all
            def __iter__(self):
                return iter(range(5))

            def __len__(self):
                return 5
        dl = D(L).DataLoader(It(), batch_size=2, num_workers=2)
        n = len(dl)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = list(dl)
        return n, out, [str(w.message).split("have been fetched.")[1] for w in caught]
    same(case)
