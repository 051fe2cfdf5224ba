"""DataLoader (torch.utils.data.DataLoader): batches of a dataset, in the order of a
sampler, collated by collate_fn. Loading runs in the calling process: num_workers > 0 loads
batch k in worker k % num_workers as PyTorch does, each worker kept in this process
(_utils/worker.py: its copy of the dataset, get_worker_info(), worker_init_fn, its own
seeded generators; an iterable dataset runs once per worker, their batches taken in turn),
so the batches and the generators' states are PyTorch's; pin_memory has nothing to pin (the
CPU is the only device)."""
from __future__ import annotations
import collections
import math
import os
import warnings
from typing import TYPE_CHECKING


from ...runtime.creation import random_int64
from ...runtime.generator import Generator
from ._utils.collate import default_collate, default_convert
from ._utils.worker import Worker, get_worker_info, reraise
from .dataset import Dataset, IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["DataLoader", "get_worker_info", "default_collate", "default_convert"]


class _InfiniteConstantSampler(Sampler):
    """The sampler of an iterable-style dataset: None forever."""

    def __iter__(self):
        while True:
            yield None


class _DatasetKind:
    Map = 0
    Iterable = 1


class DataLoader:
    """DataLoader(dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
    num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
    worker_init_fn=None, multiprocessing_context=None, generator=None, *,
    prefetch_factor=None, persistent_workers=False, pin_memory_device='', in_order=True)

    shuffle=True draws a new permutation each epoch from `generator` (an llgrad.Generator;
    by default a seed drawn from llgrad's default generator, so llgrad.manual_seed makes
    the order reproducible)."""
    __initialized = False

    def __init__(self, dataset: Dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler | Iterable | None = None,
                 batch_sampler: Sampler | Iterable | None = None, num_workers: int = 0,
                 collate_fn: Callable | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable | None = None, multiprocessing_context: object = None,
                 generator: Generator | None = None, *, prefetch_factor: int | None = None,
                 persistent_workers: bool = False, pin_memory_device: str = "",
                 in_order: bool = True) -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing.let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        elif num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if multiprocessing_context is not None and num_workers == 0:
            raise ValueError("multiprocessing_context can only be used with multi-process "
                             f"loading (num_workers > 0), but got num_workers={num_workers}")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order

        if isinstance(dataset, IterableDataset):
            self._dataset_kind = _DatasetKind.Iterable
            if shuffle not in {False, None}:
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
            self._dataset_kind = _DatasetKind.Map

        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None:
            if drop_last:
                raise ValueError("batch_size=None option disables auto-batching and is "
                                 "mutually exclusive with drop_last")

        if sampler is None:
            if self._dataset_kind == _DatasetKind.Iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._iterator = None           # (persistent workers: the one iterator, reset)
        self.__initialized = True
        self._IterableDataset_len_called = None
        self.check_worker_number_rationality()

    def __setattr__(self, attr, val):
        if self.__initialized and attr in ("batch_size", "batch_sampler", "sampler",
                                           "drop_last", "dataset", "persistent_workers"):
            raise ValueError(f"{attr} attribute should not be set after "
                             f"{self.__class__.__name__} is initialized")
        super().__setattr__(attr, val)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self):
        if self.num_workers > 0:
            self.check_worker_number_rationality()
            if self.persistent_workers:     # (no new base seed: the workers live on)
                if self._iterator is None:
                    self._iterator = _SingleProcessDataLoaderIter(self)
                else:
                    self._iterator._reset(self)
                return self._iterator
        return _SingleProcessDataLoaderIter(self)

    def check_worker_number_rationality(self):
        """PyTorch's warning for more workers than the process may run on."""
        if not self.num_workers:
            return
        checked = hasattr(os, "sched_getaffinity")
        suggest = len(os.sched_getaffinity(0)) if checked else os.cpu_count()
        if suggest is None or self.num_workers > suggest:
            advice = ("DataLoader is not able to compute a suggested max number of worker in "
                      "current system." if suggest is None else
                      f"Our suggested max number of worker in current system is {suggest}"
                      f"{'' if checked else ' (`cpuset` is not taken into account)'}, which is "
                      "smaller than what this DataLoader is going to create.")
            warnings.warn(f"This DataLoader will create {self.num_workers} worker processes in "
                          f"total. {advice} Please be aware that excessive worker creation "
                          "might get DataLoader running slow or even freeze, lower the worker "
                          "number to avoid potential slowness/freeze if necessary.",
                          stacklevel=2)

    def __len__(self):
        if self._dataset_kind == _DatasetKind.Iterable:
            length = self._IterableDataset_len_called = len(self.dataset)
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last else \
                    math.ceil(length / self.batch_size)
            return length
        return len(self._index_sampler)


class _SingleProcessDataLoaderIter:
    def __init__(self, loader):
        self._dataset = loader.dataset
        self._dataset_kind = loader._dataset_kind
        self._IterableDataset_len_called = loader._IterableDataset_len_called
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        self._collate_fn = loader.collate_fn
        # PyTorch's warnings as an iterator starts (no accelerator here: nothing is pinned)
        if loader.pin_memory and loader.pin_memory_device:
            warnings.warn("pin_memory_device is deprecated, the current accelerator will be used "
                          f"as the device,ignore pin_memory_device='{loader.pin_memory_device}'.",
                          stacklevel=2)
        if loader.pin_memory:
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, then "
                          "device pinned memory won't be used.", stacklevel=2)
        # PyTorch's base iterator takes the sampler's iterator, then draws a base seed (for
        # the workers' seeds) from the loader's generator: the same order here keeps the
        # generators' sequences of draws alike (a sampler whose __iter__ draws at once)
        self._sampler_iter = iter(self._index_sampler)
        self._base_seed = random_int64(loader.generator)
        self._num_yielded = 0
        self._turn = 0
        self._workers = []
        if loader.num_workers == 0:
            if self._dataset_kind == _DatasetKind.Iterable:
                self._dataset_iter, self._ended = iter(self._dataset), False
            return
        if loader.prefetch_factor <= 0:
            raise AssertionError("prefetch_factor must be greater than 0 for "
                                 "MultiProcessingDataLoaderIter")
        self._prefetch = loader.prefetch_factor * loader.num_workers
        # the workers start (worker_init_fn, an iterable dataset's iterator) in turn
        self._workers = [Worker(k, loader.num_workers, self._base_seed, self._dataset)
                         for k in range(loader.num_workers)]
        self._init_fn = loader.worker_init_fn
        for w in self._workers:
            with w:
                if self._init_fn is not None:
                    self._init_fn(w.info.id)
        self._reset(loader)

    def _reset(self, loader):
        """A new epoch of the workers (PyTorch's multi-process iterator's _reset, at its
        start and at each epoch of persistent workers): the sampler's iterator afresh,
        each worker's dataset iterator afresh, and prefetch_factor * num_workers indices
        taken from the sampler at once (as PyTorch sends them to its workers ahead)."""
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._IterableDataset_len_called = loader._IterableDataset_len_called
        self._turn = 0
        for w in self._workers:
            w.ended = False
            if self._dataset_kind == _DatasetKind.Iterable:
                with w:
                    w.it = iter(w.dataset)
        self._sent = collections.deque()
        if self._dataset_kind == _DatasetKind.Map:
            for _ in range(self._prefetch):
                self._put_index()

    def _put_index(self):
        """The sampler's next index into the queue of sent ones (none when it has run out)."""
        try:
            self._sent.append(next(self._sampler_iter))
        except StopIteration:
            pass

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._index_sampler)

    def _fetch(self, index, src):
        """The batch of index from src (this iterator, or a worker: .dataset, .it, .ended)."""
        if self._dataset_kind == _DatasetKind.Iterable:
            if src.ended:
                raise StopIteration
            if self._auto_collation:
                data = []
                for _ in index:
                    try:
                        data.append(next(src.it))
                    except StopIteration:
                        src.ended = True
                        break
                if len(data) == 0 or (self._drop_last and len(data) < len(index)):
                    raise StopIteration
            else:
                data = next(src.it)
            return self._collate_fn(data)
        if self._auto_collation:
            getitems = getattr(src.dataset, "__getitems__", None)
            if getitems:
                data = getitems(index)
            else:
                data = [src.dataset[i] for i in index]
        else:
            data = src.dataset[index]
        return self._collate_fn(data)

    # (the single-process source's fields, as _fetch reads a worker's)
    dataset = property(lambda self: self._dataset)
    it = property(lambda self: self._dataset_iter)
    ended = property(lambda self: self._ended,
                     lambda self, v: setattr(self, "_ended", v))

    def _from_workers(self):
        """The next batch as PyTorch's workers give it: worker k % n loads the k-th; of an
        iterable dataset, the workers not yet run out, in turn."""
        n = len(self._workers)
        while True:
            for _ in range(n):      # the next worker in the cycle that has not run out
                w = self._workers[self._turn % n]
                self._turn += 1
                if not w.ended:
                    break
            else:
                raise StopIteration
            if self._dataset_kind == _DatasetKind.Map:     # (the indices sent ahead)
                if not self._sent:
                    raise StopIteration
                index = self._sent.popleft()
                self._put_index()
            else:
                index = next(self._sampler_iter)     # may raise StopIteration
            with w:
                try:
                    return self._fetch(index, w)
                except StopIteration:
                    if self._dataset_kind != _DatasetKind.Iterable:
                        raise
                    w.ended = True                   # (the next live worker takes the turn)
                except Exception as e:              # noqa: BLE001  (as PyTorch re-raises)
                    reraise(e, w.info.id)

    def __next__(self):
        if self._workers:
            data = self._from_workers()
        else:
            index = next(self._sampler_iter)         # may raise StopIteration
            data = self._fetch(index, self)
        self._num_yielded += 1
        if self._dataset_kind == _DatasetKind.Iterable and \
                self._IterableDataset_len_called is not None and \
                self._num_yielded > self._IterableDataset_len_called:
            warnings.warn(f"Length of IterableDataset {self._dataset} was reported to be "
                          f"{self._IterableDataset_len_called}(when accessing len(dataloader)), "
                          f"but {self._num_yielded} samples have been fetched. " + (
                              "For multiprocessing data-loading, this could be caused by not "
                              "properly configuring the IterableDataset replica at each worker. "
                              "Please see https://pytorch.org/docs/stable/data.html#torch.utils."
                              "data.IterableDataset for examples." if self._workers else ""),
                          stacklevel=2)
        return data
