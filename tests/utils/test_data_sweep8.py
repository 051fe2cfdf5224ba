"""Sweep 8: torch.utils.data with the generator seeded alike: DataLoader over batch sizes,
shuffle, drop_last, samplers (random with replacement, weighted, subset, batch),
random_split by fractions and counts, default_collate of nested samples, ConcatDataset,
Subset and iterable datasets, against torch: the same script run with each library."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _batches(dl):
    return [[t.tolist() for t in b] if isinstance(b, (list, tuple)) else b for b in dl]


def _script(lib):
    out = []
    D = lib.utils.data
    ds = D.TensorDataset(lib.arange(10.).reshape(10, 1), lib.arange(10))
    for kw in [dict(batch_size=3), dict(batch_size=3, shuffle=True),
               dict(batch_size=3, drop_last=True, shuffle=True), dict(batch_size=None),
               dict(batch_size=4, sampler=D.RandomSampler(ds, replacement=True, num_samples=7)),
               dict(batch_sampler=D.BatchSampler(D.SequentialSampler(ds), 4, False)),
               dict(batch_size=2, sampler=D.WeightedRandomSampler([0.1] * 5 + [1.0] * 5, 6)),
               dict(batch_size=2, sampler=D.SubsetRandomSampler([1, 3, 5, 7]))]:
        lib.manual_seed(1)
        dl = D.DataLoader(ds, **kw)
        out += [len(dl), _batches(dl), _batches(dl)]
    lib.manual_seed(2)
    a, b = D.random_split(ds, [0.3, 0.7])
    out.append((list(a.indices), list(b.indices)))
    out.append([list(s) for s in D.random_split(range(10), [3, 3, 4],
                                                generator=lib.Generator().manual_seed(5))])
    out.append(list(D.RandomSampler(range(5), generator=lib.Generator().manual_seed(3))))
    col = D.default_collate([
        {"a": lib.tensor([1., 2.]), "b": 3, "c": "s", "d": (1.5, np.float32(2))},
        {"a": lib.tensor([3., 4.]), "b": 4, "c": "t", "d": (2.5, np.float32(3))}])
    out.append({k: [(x.tolist(), str(x.dtype)) if hasattr(x, "dtype") else x for x in v]
                if isinstance(v, list) else (v.tolist(), str(v.dtype)) for k, v in col.items()})
    out.append(D.default_collate([np.array([1, 2]), np.array([3, 4])]).dtype)
    cc = D.ConcatDataset([range(3), range(5)])
    out.append((len(cc), cc[4], cc.cumulative_sizes, list(D.Subset(range(10), [2, 4]))))

    class Numbers(D.IterableDataset):
        def __iter__(self):
            return iter(range(7))
    out.append([b.tolist() for b in D.DataLoader(Numbers(), batch_size=3)])
    out.append(list(D.BatchSampler(range(7), 3, True)))
    return out


def test_data_against_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want, got = _script(torch), _script(llgrad)
    assert str(got).replace("llgrad", "torch") == str(want)
