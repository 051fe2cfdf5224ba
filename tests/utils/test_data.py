"""llgrad.utils.data: datasets, samplers, DataLoader and default_collate with PyTorch's
semantics. Orders that do not depend on random draws are compared with torch.utils.data
(when installed) batch by batch; seeded shuffles are checked for determinism and for being
permutations (llgrad's generator is not PyTorch's, so the orders themselves differ)."""
import collections
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.utils.data import (BatchSampler, ChainDataset, ConcatDataset, DataLoader, Dataset,
                               IterableDataset, RandomSampler, SequentialSampler, StackDataset,
                               Subset, SubsetRandomSampler, TensorDataset,
                               WeightedRandomSampler, default_collate, default_convert,
                               random_split)


def _torch():
    return pytest.importorskip("torch")


def plain(x):
    """Batches as plain Python values (with dtype names), to compare across libraries."""
    if hasattr(x, "detach"):
        return ("tensor", str(x.dtype).split(".")[-1], x.detach().numpy().tolist())
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return (type(x).__name__,) + tuple(plain(v) for v in x)
    if isinstance(x, (list, tuple)):
        return type(x)(plain(v) for v in x)
    return x


def both(make):
    """make(lib, data_module) in llgrad and torch, each result made plain."""
    torch = _torch()
    import torch.utils.data as tdata
    import llgrad.utils.data as ldata
    return plain(make(llgrad, ldata)), plain(make(torch, tdata))


X = np.arange(30, dtype=np.float32).reshape(10, 3)
Y = np.arange(10, dtype=np.int64) % 3


@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (4, True),
                                                  (10, False), (12, False), (12, True)])
def test_tensor_dataset_batches_match_torch(batch_size, drop_last):
    def make(lib, data):
        ds = data.TensorDataset(lib.tensor(X), lib.tensor(Y))
        loader = data.DataLoader(ds, batch_size=batch_size, drop_last=drop_last)
        return [len(loader), [b for b in loader]]
    ours, theirs = both(make)
    assert ours == theirs


class Samples:
    """A map-style dataset of mixed samples (not a Dataset subclass: any __getitem__)."""
    Point = collections.namedtuple("Point", "x y")

    def __init__(self, lib):
        self.lib = lib

    def __len__(self):
        return 7

    def __getitem__(self, i):
        if i >= 7:
            raise IndexError(i)
        return {"t": self.lib.tensor([i, i + 0.5]), "f": i / 2, "i": i, "b": i % 2 == 0,
                "s": f"s{i}", "np": np.full((2,), i, dtype=np.int32),
                "npf": np.float64(i) / 4, "nested": (i, [i * 2, "x"]),
                "pt": self.Point(i, np.float32(i))}


def test_default_collate_matches_torch():
    def make(lib, data):
        return list(data.DataLoader(Samples(lib), batch_size=3))
    ours, theirs = both(make)
    assert ours == theirs


def test_no_batching_and_custom_collate_match_torch():
    def make(lib, data):
        ds = Samples(lib)
        no_batch = list(data.DataLoader(ds, batch_size=None))[:2]
        custom = list(data.DataLoader(ds, batch_size=2, collate_fn=lambda b: [s["i"] for s in b]))
        converted = data.default_convert([np.arange(3), (np.float32(1), "a")])
        return [no_batch, custom, converted]
    ours, theirs = both(make)
    assert ours == theirs


def test_samplers_and_batch_samplers_match_torch():
    def make(lib, data):
        ds = data.TensorDataset(lib.tensor(X))
        order = [9, 0, 3, 3, 5]
        out = [list(data.DataLoader(ds, sampler=order, batch_size=2)),
               list(data.DataLoader(ds, batch_sampler=[[1, 2], [0], [9, 8, 7]])),
               list(data.BatchSampler(data.SequentialSampler(range(7)), 3, False)),
               list(data.BatchSampler(range(7), 3, True)),
               len(data.BatchSampler(range(7), 3, False)),
               len(data.DataLoader(ds, batch_size=4)),
               len(data.DataLoader(ds, batch_size=4, drop_last=True))]
        return out
    ours, theirs = both(make)
    assert ours == theirs


class Stream(IterableDataset):
    def __init__(self, n, lib):
        self.n, self.lib = n, lib

    def __iter__(self):
        return iter(self.lib.tensor([float(i)]) for i in range(self.n))

    def __len__(self):
        return self.n


def test_iterable_dataset_matches_torch():
    def make(lib, data):
        cls = type("S", (data.IterableDataset,), {"__iter__": Stream.__iter__,
                                                  "__len__": Stream.__len__,
                                                  "__init__": Stream.__init__})
        out = []
        for bs, drop in ((2, False), (2, True), (None, False)):
            loader = data.DataLoader(cls(5, lib), batch_size=bs, drop_last=drop)
            out.append((len(loader), list(loader)))
        chained = data.ChainDataset([cls(2, lib), cls(3, lib)])
        out.append([x for x in chained])
        return out
    ours, theirs = both(make)
    assert ours == theirs


def test_dataset_classes_match_torch():
    def make(lib, data):
        a = data.TensorDataset(lib.arange(4))
        b = data.TensorDataset(lib.arange(10, 13))
        cat = data.ConcatDataset([a, b])
        sub = data.Subset(cat, [6, 0, 2])
        stack = data.StackDataset(a, lib.arange(4) * 2)
        kw = data.StackDataset(x=a, y=list("abcd"))
        return [len(cat), [cat[i] for i in range(-7, 7)], cat.cumulative_sizes,
                len(sub), [sub[i] for i in range(3)],
                [stack[i] for i in range(4)], kw[1], len(a + b),
                list(data.DataLoader(sub, batch_size=2))]
    ours, theirs = both(make)
    assert ours == theirs


def test_argument_errors_match_torch():
    torch = _torch()
    import torch.utils.data as tdata
    import llgrad.utils.data as ldata
    cases = [dict(sampler=[0], shuffle=True), dict(batch_sampler=[[0]], batch_size=2),
             dict(batch_sampler=[[0]], drop_last=True), dict(batch_size=None, drop_last=True),
             dict(num_workers=-1), dict(timeout=-1), dict(prefetch_factor=2),
             dict(persistent_workers=True), dict(batch_size=0)]
    for kwargs in cases:
        msgs = []
        for lib, data in ((llgrad, ldata), (torch, tdata)):
            with pytest.raises(ValueError) as info:
                data.DataLoader(data.TensorDataset(lib.tensor(X)), **kwargs)
            msgs.append(str(info.value))
        assert msgs[0] == msgs[1], kwargs
    for lib, data in ((llgrad, ldata), (torch, tdata)):
        with pytest.raises(ValueError, match="expected unspecified shuffle option"):
            data.DataLoader(Stream(3, lib) if lib is llgrad else
                            type("S", (data.IterableDataset,), {"__iter__": Stream.__iter__})(),
                            shuffle=True)
        with pytest.raises(RuntimeError, match="each element in list of batch should be of "
                                               "equal size"):
            data.default_collate([[1, 2], [1]])
        with pytest.raises(TypeError, match="default_collate: batch must contain tensors, "
                                            "numpy arrays, numbers, dicts or lists; found"):
            data.default_collate([object()])
        loader = data.DataLoader(data.TensorDataset(lib.tensor(X)))
        with pytest.raises(ValueError, match="batch_size attribute should not be set after "
                                             "DataLoader is initialized"):
            loader.batch_size = 3


def test_shuffle_with_a_generator_is_a_deterministic_permutation():
    ds = TensorDataset(llgrad.tensor(X), llgrad.tensor(Y))

    def epochs(seed, n=3, batch_size=3, drop_last=False):
        loader = DataLoader(ds, batch_size=batch_size, shuffle=True, drop_last=drop_last,
                            generator=llgrad.Generator().manual_seed(seed))
        return [[xb[:, 0].long().tolist() for xb, yb in loader] for _ in range(n)]

    a, b = epochs(0), epochs(0)
    assert a == b                                   # the same seed, the same batches
    assert epochs(1) != a
    for ep in a:
        flat = [i // 3 for batch in ep for i in batch]
        assert sorted(flat) == list(range(10))      # every sample once per epoch
        assert [len(batch) for batch in ep] == [3, 3, 3, 1]
    assert a[0] != a[1]                             # a new order each epoch
    dropped = epochs(5, n=1, batch_size=4, drop_last=True)[0]
    assert [len(b) for b in dropped] == [4, 4]
    # batches carry matching x and y
    for xb, yb in DataLoader(ds, batch_size=4, shuffle=True,
                             generator=llgrad.Generator().manual_seed(3)):
        np.testing.assert_array_equal((xb[:, 0] / 3).long().numpy() % 3, yb.numpy())


def test_shuffle_without_a_generator_follows_manual_seed():
    ds = list(range(20))
    runs = []
    for _ in range(2):
        llgrad.manual_seed(123)
        loader = DataLoader(ds, batch_size=5, shuffle=True)
        runs.append([b.tolist() for _ in range(2) for b in loader])
    assert runs[0] == runs[1]
    assert sorted(sum(runs[0][:4], [])) == ds
    llgrad.manual_seed(124)
    assert [b.tolist() for b in DataLoader(ds, batch_size=5, shuffle=True)] != runs[0][:4]


def test_random_sampler_forms():
    g = llgrad.Generator().manual_seed(7)
    s = RandomSampler(range(5), replacement=True, num_samples=70, generator=g)
    draws = list(s)
    assert len(draws) == len(s) == 70 and set(draws) <= set(range(5))
    s = RandomSampler(range(5), num_samples=12, generator=g)
    draws = list(s)
    assert len(draws) == 12 and sorted(draws[:5]) == list(range(5)) and \
        sorted(draws[5:10]) == list(range(5))
    with pytest.raises(ValueError, match="num_samples should be a positive integer value"):
        RandomSampler(range(5), num_samples=0)
    with pytest.raises(TypeError, match="replacement should be a boolean value"):
        RandomSampler(range(5), replacement=1)
    sub = list(SubsetRandomSampler([10, 20, 30], generator=llgrad.Generator().manual_seed(1)))
    assert sorted(sub) == [10, 20, 30]
    w = list(WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 50,
                                   generator=llgrad.Generator().manual_seed(2)))
    assert set(w) <= {1, 3} and len(w) == 50
    w = list(WeightedRandomSampler([1.0, 1.0, 1.0], 3, replacement=False))
    assert sorted(w) == [0, 1, 2]


@pytest.mark.parametrize("lengths", [[3, 7], [0.3, 0.7], [0.25, 0.25, 0.5], [0.33, 0.33, 0.34],
                                     [1 / 3] * 3, [0.1] * 10, [10, 0]])
def test_random_split_lengths_match_torch(lengths):
    torch = _torch()
    import torch.utils.data as tdata
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = random_split(range(10), lengths, generator=llgrad.Generator().manual_seed(0))
        theirs = tdata.random_split(range(10), lengths,
                                    generator=torch.Generator().manual_seed(0))
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    assert sorted(i for s in ours for i in s) == list(range(10))


def test_random_split_is_deterministic_and_checks_lengths():
    def split(seed):
        return [list(s) for s in random_split(list(range(10)), [0.5, 0.5],
                                              generator=llgrad.Generator().manual_seed(seed))]
    assert split(4) == split(4) != split(5)
    llgrad.manual_seed(9)
    a = [list(s) for s in random_split(range(6), [2, 4])]
    llgrad.manual_seed(9)
    assert a == [list(s) for s in random_split(range(6), [2, 4])]
    with pytest.raises(ValueError, match="Sum of input lengths does not equal the length of "
                                         "the input dataset!"):
        random_split(range(10), [3, 3])
    with pytest.raises(ValueError, match="Fraction at index 0 is not between 0 and 1"):
        random_split(range(10), [-0.5, 1.5])
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        random_split(range(3), [1.0, 0.0])


def test_loader_with_a_generator_draws_from_it():
    """As in PyTorch, each epoch's iterator draws from the loader's generator (its base
    seed, then the sampler's permutation): two loaders sharing one generator do not repeat
    each other."""
    g = llgrad.Generator().manual_seed(0)
    ds = list(range(8))
    first = [b.tolist() for b in DataLoader(ds, batch_size=8, shuffle=True, generator=g)]
    second = [b.tolist() for b in DataLoader(ds, batch_size=8, shuffle=True, generator=g)]
    assert first != second and sorted(first[0]) == sorted(second[0]) == ds


def test_num_workers_loads_in_process():
    """Workers are kept in this process without a word (as PyTorch's: each runs its own copy
    of an iterable dataset, worker_init_fn is called; tests/nn/test_api_sweep11_data.py
    compares them with torch's)."""
    ds = TensorDataset(llgrad.tensor(X))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batches = list(DataLoader(ds, batch_size=5, num_workers=2, persistent_workers=True))
        assert len(batches) == 2

        class Stream(IterableDataset):
            def __iter__(self):
                return iter(range(4))
        called = []
        assert len(list(DataLoader(Stream(), batch_size=2, num_workers=2))) == 4
        list(DataLoader(ds, batch_size=2, num_workers=2, worker_init_fn=called.append))
        assert called == [0, 1]


def test_dataset_base_classes():
    with pytest.raises(NotImplementedError, match="Subclasses of Dataset should implement "
                                                  "__getitem__."):
        Dataset()[0]
    assert isinstance(TensorDataset(llgrad.ones(2)) + TensorDataset(llgrad.ones(3)), ConcatDataset)
    assert isinstance(Stream(1, llgrad) + Stream(1, llgrad), ChainDataset)
    assert list(SequentialSampler(range(3))) == [0, 1, 2]
    assert len(StackDataset(x=[1, 2])) == 2 and Subset([5, 6, 7], [2])[0] == 7
    assert default_collate([llgrad.tensor(1.0), llgrad.tensor(2.0)]).tolist() == [1.0, 2.0]
    assert default_convert(np.float32(2)).dtype == llgrad.float32
    b = BatchSampler(range(5), 2, False)
    with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
        BatchSampler(range(5), 0, False)
    assert list(b) == [[0, 1], [2, 3], [4]]


def test_a_training_loop_over_a_loader():
    """The loop PyTorch users write: a TensorDataset, shuffled batches, cross-entropy."""
    llgrad.manual_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 2)).astype(np.float32)
    y = (x[:, 0] > x[:, 1]).astype(np.int64)
    loader = DataLoader(TensorDataset(llgrad.from_numpy(x), llgrad.from_numpy(y)),
                        batch_size=16, shuffle=True)
    model = llgrad.nn.Linear(2, 2)
    opt = llgrad.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(10):
        for xb, yb in loader:
            opt.zero_grad()
            llgrad.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    with llgrad.no_grad():
        acc = (model(llgrad.from_numpy(x)).argmax(1) == llgrad.from_numpy(y)).float().mean()
    assert acc.item() > 0.9
