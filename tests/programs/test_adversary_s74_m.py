"""Session 74 (m), torch.utils.data against PyTorch under the same seeds (1/2): the exact
batches (indices, values, types, dtypes) and their order from DataLoader with shuffle,
generator=, drop_last, custom samplers and batch samplers, num_workers 0 and 2 (worker
seeds, worker_init_fn, persistent workers, prefetching), iterating twice, and the global
generator where an epoch leaves it (the next rand equal). Regressions: with workers PyTorch
takes prefetch_factor * num_workers indices from the sampler as the iterator starts;
it takes the sampler's iterator before drawing the base seed; prefetch_factor=0 with
workers is an AssertionError as the iterator starts."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def desc(x):
    """A library-free description: tensors by dtype, shape, values; containers by type."""
    if hasattr(x, "dtype") and hasattr(x, "tolist") and not isinstance(x, np.ndarray):
        return ("T", str(x.dtype).split(".")[-1], tuple(x.shape), x.tolist())
    if isinstance(x, np.ndarray):
        return ("np", str(x.dtype), x.tolist())
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return ("nt", type(x).__name__, [desc(i) for i in x])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [desc(i) for i in x])
    if isinstance(x, dict):
        return ("dict", type(x).__name__, {k: desc(v) for k, v in x.items()})
    return (type(x).__name__, x)


def run(fn, L):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = desc(fn(L))
        except Exception as e:      # noqa: BLE001  (the type is compared)
            out = ("raises", type(e).__name__)
    return out, [str(w.message) for w in caught if "llgrad" not in str(w.message)]


def same(fn, warns=False):
    want, got = run(fn, torch), run(fn, llgrad)
    assert got[0] == want[0]
    if warns:
        assert got[1] == want[1]


def D(L):
    return L.utils.data


def ds(L, n=10):
    return D(L).TensorDataset(L.arange(n) * 10, L.arange(n, dtype=L.float32) / 4)


def epochs_then_rand(L, make, epochs=2):
    """Seed, build a loader, run the epochs, then the next global draw."""
    L.manual_seed(123)
    dl = make(L)
    return [list(dl) for _ in range(epochs)], L.rand(3)


class Aug:
    """A map-style dataset drawing from llgrad's / torch's, Python's and NumPy's generators
    (a random augmentation): in a worker these are the worker's, seeded from the base seed."""
    def __init__(self, L, n=8):
        self.L, self.n, self.tag = L, n, None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import random
        info = D(self.L).get_worker_info()
        return (i, self.L.rand(2), random.random(), float(np.random.rand()), self.tag,
                -1 if info is None else info.id, None if info is None else info.seed,
                self.L.initial_seed())


def perm_sampler(L):
    class Perm(D(L).Sampler):       # draws its order as iter() is called (not lazily)
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(L.randperm(self.n).tolist())

        def __len__(self):
            return self.n
    return Perm


def perm_batches(L):
    class PermBatches(D(L).Sampler):
        def __iter__(self):
            return iter(L.randperm(6).reshape(3, 2).tolist())

        def __len__(self):
            return 3
    return PermBatches()


def lazy_sampler(L):
    class Lazy(D(L).Sampler):       # one global draw per index, as it is asked for
        def __iter__(self):
            for _ in range(6):
                yield int(L.randint(0, 10, (1,)))

        def __len__(self):
            return 6
    return Lazy()


CASES = {
    "shuffle_global": lambda L: epochs_then_rand(
        L, lambda L: D(L).DataLoader(ds(L, 11), batch_size=3, shuffle=True)),
    "shuffle_generator_drop_last": lambda L: (lambda g: (epochs_then_rand(
        L, lambda L: D(L).DataLoader(ds(L), batch_size=4, shuffle=True, generator=g,
                                     drop_last=True)), L.rand(2, generator=g)))(
        L.Generator().manual_seed(3)),
    "no_shuffle_draws_base_seed": lambda L: epochs_then_rand(
        L, lambda L: D(L).DataLoader(ds(L), batch_size=4), 1),
    "workers2_shuffle": lambda L: epochs_then_rand(
        L, lambda L: D(L).DataLoader(ds(L, 11), batch_size=2, shuffle=True, num_workers=2)),
    "workers2_generator": lambda L: (lambda g: (epochs_then_rand(
        L, lambda L: D(L).DataLoader(ds(L, 11), batch_size=2, shuffle=True, num_workers=2,
                                     generator=g)), L.rand(2, generator=g)))(
        L.Generator().manual_seed(5)),
    "workers_augment": lambda L: epochs_then_rand(
        L, lambda L: D(L).DataLoader(Aug(L), batch_size=3, num_workers=2)),
    "workers_persistent_augment": lambda L: epochs_then_rand(
        L, lambda L: D(L).DataLoader(Aug(L), batch_size=3, num_workers=2, shuffle=True,
                                     persistent_workers=True), 3),
    "workers3_no_batching": lambda L: epochs_then_rand(
        L, lambda L: D(L).DataLoader(Aug(L, 5), batch_size=None, num_workers=3)),
    "custom_sampler_and_list": lambda L: epochs_then_rand(
        L, lambda L: D(L).DataLoader(ds(L, 7), sampler=[6, 0, 3, 3, 1], batch_size=2)),
    "batch_sampler_list_workers": lambda L: epochs_then_rand(
        L, lambda L: D(L).DataLoader(ds(L, 6), batch_sampler=[[0, 5], [1, 2, 3], [4]],
                                     num_workers=2)),
    "collate_fn_sorted": lambda L: epochs_then_rand(
        L, lambda L: D(L).DataLoader(list(range(9)), batch_size=4, shuffle=True,
                                     collate_fn=lambda b: (sorted(b), len(b)))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_loader_epochs_equal_torch(name):
    same(CASES[name])


def test_worker_init_fn_configures_the_workers_copy():
    def case(L):
        def init(wid):
            info = D(L).get_worker_info()
            info.dataset.tag = (wid, info.num_workers)
            L.manual_seed(1000 + wid)
            np.random.seed(wid)
        L.manual_seed(5)
        data = Aug(L, 6)
        out = list(D(L).DataLoader(data, batch_size=2, num_workers=2, worker_init_fn=init))
        return out, data.tag, L.rand(1)
    same(case)


def test_iterating_twice_and_a_second_iterator_midway():
    def case(L):
        L.manual_seed(0)
        dl = D(L).DataLoader(ds(L, 8), batch_size=3, shuffle=True)
        it = iter(dl)
        a = next(it)
        return a, list(dl), list(it), len(dl), L.rand(2)
    same(case)


def test_a_second_iterator_midway_with_workers():
    def case(L):
        L.manual_seed(1)
        dl = D(L).DataLoader(ds(L, 8), batch_size=3, shuffle=True, num_workers=2)
        it1 = iter(dl)
        a = next(it1)
        return a, list(iter(dl)), list(it1), L.rand(1)
    same(case)


def test_pin_memory_on_cpu_warns_as_torch():
    same(lambda L: list(D(L).DataLoader(ds(L, 4), batch_size=2, pin_memory=True)), warns=True)


def test_loader_argument_errors():
    def case(L):
        out = []
        for kw in [dict(prefetch_factor=2), dict(num_workers=2, prefetch_factor=-1),
                   dict(persistent_workers=True), dict(num_workers=-1), dict(timeout=-1),
                   dict(batch_size=0), dict(batch_size=2, batch_sampler=[[0]]),
                   dict(shuffle=True, sampler=[0]), dict(batch_size=None, drop_last=True)]:
            try:
                out.append(len(list(D(L).DataLoader(ds(L, 4), **kw))))
            except Exception as e:      # noqa: BLE001
                out.append(type(e).__name__)
        return out
    same(case)


# --- regressions (each failed before its fix) ---

@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_prefetch_factor_zero_with_workers_raises_as_the_iterator_starts():
    def case(L):
        dl = D(L).DataLoader(ds(L, 4), num_workers=2, prefetch_factor=0)
        made = dl.prefetch_factor
        try:
            iter(dl)
        except AssertionError:
            return made, "AssertionError"
        return made, "no error"
    same(case)


def test_workers_take_the_shuffled_order_as_the_iterator_starts():
    """PyTorch sends prefetch_factor * num_workers indices ahead as iter() is called, so
    RandomSampler's seed is drawn before a draw made between iter() and next()."""
    def case(L):
        L.manual_seed(0)
        it = iter(D(L).DataLoader(ds(L, 6), shuffle=True, batch_size=2, num_workers=2))
        x = L.rand(1)
        return x, list(it), L.rand(1)
    same(case)


def test_a_lazy_sampler_runs_ahead_of_the_loop_with_workers():
    def case(L):
        L.manual_seed(0)
        dl = D(L).DataLoader(ds(L), sampler=lazy_sampler(L), batch_size=1, num_workers=2)
        return [(b, L.rand(1)) for b in dl]
    same(case)


def test_an_eager_sampler_draws_before_the_base_seed():
    same(lambda L: epochs_then_rand(
        L, lambda L: D(L).DataLoader(ds(L, 6), sampler=perm_sampler(L)(6), batch_size=None)))


@pytest.mark.parametrize("kw", [{}, {"num_workers": 2},
                                {"num_workers": 2, "persistent_workers": True}],
                         ids=["main", "workers", "persistent"])
def test_an_eager_batch_sampler_draws_as_torch(kw):
    """(With workers PyTorch takes the sampler's iterator twice at the first epoch: in the
    base iterator and again in the multi-process one's _reset.)"""
    same(lambda L: epochs_then_rand(
        L, lambda L: D(L).DataLoader(ds(L, 6), batch_sampler=perm_batches(L), **kw), 3))
