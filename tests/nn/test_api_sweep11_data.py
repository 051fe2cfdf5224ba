"""Sweep 11: DataLoader with num_workers > 0 against torch's worker processes. llgrad keeps
its workers in the calling process (llgrad/utils/data/_utils/worker.py), each with its own
dataset copy, get_worker_info(), worker_init_fn call and generators seeded as PyTorch seeds
a worker's: the batches, the draws datasets make in them, and the main process's generators
afterwards are PyTorch's (was: get_worker_info() None, an iterable dataset read once by the
main process, the datasets' draws taken from the main generator)."""
import math
import random

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def flat(v):
    """Nested batches as plain values (tensors as lists)."""
    if isinstance(v, (torch.Tensor, llgrad.Tensor)):
        return ("T", str(v.dtype).split(".")[-1], v.tolist())
    if isinstance(v, (list, tuple)):
        return [flat(x) for x in v]
    return v


def both(fn):
    got, ref = fn(llgrad), fn(torch)
    assert flat(got) == flat(ref)


class RandomItems:
    """A map-style dataset whose items draw from the three generators (augmentations)."""

    def __init__(self, lib):
        self.lib = lib

    def __len__(self):
        return 5

    def __getitem__(self, i):
        info = self.lib.utils.data.get_worker_info()
        return (i, self.lib.randn(2), float(np.random.rand()), random.random(),
                self.lib.initial_seed(), info.id, info.num_workers, info.seed)


# (torch starts worker processes: ~0.3 s a loader; the larger cases in the slow run)
@pytest.mark.parametrize("workers,persistent", [
    (2, False), pytest.param(3, False, marks=pytest.mark.slow),
    pytest.param(2, True, marks=pytest.mark.slow), pytest.param(3, True, marks=pytest.mark.slow)])
def test_map_dataset_draws_in_seeded_workers(workers, persistent):
    def run(lib):
        lib.manual_seed(7)
        np.random.seed(1)
        random.seed(2)
        dl = lib.utils.data.DataLoader(RandomItems(lib), batch_size=2, shuffle=True,
                                       num_workers=workers, persistent_workers=persistent)
        epochs = [list(dl), list(dl)]
        return epochs, lib.rand(2), float(np.random.rand()), random.random()
    both(run)


@pytest.mark.slow
def test_loader_generator_seeds_the_workers():
    def run(lib):
        g = lib.Generator().manual_seed(3)
        dl = lib.utils.data.DataLoader(RandomItems(lib), batch_size=2, num_workers=2,
                                       generator=g)
        return list(dl), lib.rand(1, generator=g)
    both(run)


def _range_dataset(lib):
    class Range(lib.utils.data.IterableDataset):
        def __init__(self, start, end):
            self.start, self.end = start, end

        def __iter__(self):
            return iter(range(self.start, self.end))
    return Range


def _split_in_init(lib):
    """PyTorch's documented worker_init_fn: each worker configures its own dataset copy."""
    def init(worker_id):
        info = lib.utils.data.get_worker_info()
        ds = info.dataset
        per = int(math.ceil((ds.end - ds.start) / float(info.num_workers)))
        ds.start = ds.start + worker_id * per
        ds.end = min(ds.start + per, ds.end)
    return init


@pytest.mark.parametrize("workers,batch", [(2, 1), pytest.param(3, 2, marks=pytest.mark.slow)])
def test_iterable_dataset_split_by_worker_init_fn(workers, batch):
    def run(lib):
        ds = _range_dataset(lib)(3, 10)
        dl = lib.utils.data.DataLoader(ds, batch_size=batch, num_workers=workers,
                                       worker_init_fn=_split_in_init(lib))
        return list(dl), (ds.start, ds.end)
    both(run)


@pytest.mark.slow
def test_iterable_dataset_runs_once_per_worker_in_turn():
    """Unsplit, each worker yields it all; uneven ones leave the turn as they run out."""
    def run(lib):
        class Uneven(lib.utils.data.IterableDataset):
            def __iter__(self):
                w = lib.utils.data.get_worker_info()
                return iter(range(10 * w.id, 10 * w.id + (1, 5, 3)[w.id]))
        out = [list(lib.utils.data.DataLoader(_range_dataset(lib)(3, 7), num_workers=2))]
        for drop_last in (False, True):
            out.append(list(lib.utils.data.DataLoader(Uneven(), batch_size=2, num_workers=3,
                                                      drop_last=drop_last)))
        return out
    both(run)


@pytest.mark.slow
def test_persistent_workers_keep_their_generators_across_epochs():
    def run(lib):
        class Draws(lib.utils.data.IterableDataset):
            def __iter__(self):
                return iter([lib.utils.data.get_worker_info().id, lib.rand(1).item()])
        lib.manual_seed(0)
        dl = lib.utils.data.DataLoader(Draws(), batch_size=None, num_workers=2,
                                       persistent_workers=True)
        return list(dl), list(dl), lib.rand(1)
    both(run)


def test_worker_info_outside_and_inside():
    def run(lib):
        class Items:
            def __len__(self):
                return 2

            def __getitem__(self, i):
                w = lib.utils.data.get_worker_info()
                return w.id, w.num_workers, w.dataset is self, type(w.dataset).__name__
        return lib.utils.data.get_worker_info(), list(lib.utils.data.DataLoader(
            Items(), batch_size=None, num_workers=2))
    both(run)


@pytest.mark.slow
def test_worker_error_message():
    """PyTorch's re-raise: the type again, 'Caught KeyError in DataLoader worker process 0.'
    (was: the error as it is)."""
    msgs = []
    for lib in (torch, llgrad):
        class Failing:
            def __len__(self):
                return 4

            def __getitem__(self, i):
                if i == 2:
                    raise KeyError("boom")
                return i
        with pytest.raises(KeyError) as e:
            list(lib.utils.data.DataLoader(Failing(), num_workers=2))
        msgs.append(str(e.value).split("\n")[:2])
    assert msgs[1] == msgs[0]
