"""DataLoader's workers (torch.utils.data._utils.worker), kept in the calling process.

PyTorch's workers are processes, each with its own copy of the dataset and its own random
generators, seeded from the iterator's base seed: llgrad's (PyTorch's) generator and Python's
`random` with base_seed + id, NumPy's global one with _generate_state(base_seed, id). Draws a
dataset makes there (random augmentations) therefore neither come from nor advance the main
process's generators. A Worker here is that world without the process: its own shallow copy
of the dataset (what worker_init_fn configures through get_worker_info().dataset) and the
three generator states, swapped in while it loads (`with worker:`) and out after, so a loader
with num_workers > 0 gives PyTorch's batches and leaves the generators as PyTorch leaves
them."""
import copy
import random
import traceback
from dataclasses import dataclass

import numpy as np

from ....runtime.random_state import default_generator

__all__ = ["WorkerInfo", "get_worker_info"]

_worker_info = None


@dataclass(frozen=True)
class WorkerInfo:
    """As torch.utils.data.get_worker_info()'s: the worker's id, the number of workers, its
    seed and its copy of the dataset."""
    id: int
    num_workers: int
    seed: int
    dataset: object
    rng: object = None
    worker_method: str = "multiprocessing"


def get_worker_info():
    """The WorkerInfo of the worker loading now (inside a dataset's __getitem__ / __iter__
    or a worker_init_fn of a loader with num_workers > 0), None elsewhere, as PyTorch's."""
    return _worker_info


class _KeyErrorMessage(str):
    """A KeyError's message shown as it is (KeyError shows its argument's repr)."""
    __slots__ = ()

    def __repr__(self):
        return self


def reraise(exc, worker_id):
    """Raise exc as PyTorch's main process raises a worker's error: its type again, the
    message 'Caught <type> in DataLoader worker process <id>.' and the original traceback
    (a RuntimeError where the type takes other arguments)."""
    msg = (f"Caught {type(exc).__name__} in DataLoader worker process {worker_id}.\nOriginal "
           + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    if type(exc) is KeyError:
        msg = _KeyErrorMessage(msg)
    elif getattr(type(exc), "message", None):
        raise type(exc)(message=msg) from None
    try:
        new = type(exc)(msg)
    except Exception:       # noqa: BLE001  (PyTorch's fallback)
        raise RuntimeError(msg) from None
    raise new from None


def _generate_state(base_seed, worker_id):
    """PyTorch's NumPy seed of a worker (four 32-bit words, a SeedSequence-like hash)."""
    mask = 0xFFFFFFFF
    entropy = [worker_id, base_seed & mask, base_seed >> 32, 0]
    const_a = [0x43B0D7E5]

    def hash_(value):
        value = (value ^ const_a[0]) & mask
        const_a[0] = (const_a[0] * 0x931E8875) & mask
        value = (value * const_a[0]) & mask
        return (value ^ (value >> 16)) & mask

    def mix(x, y):
        r = (((0xCA01F9DD * x) & mask) - ((0x4973F715 * y) & mask)) & mask
        return (r ^ (r >> 16)) & mask

    pool = [hash_(e) for e in entropy]
    for i_src in range(4):
        for i_dst in range(4):
            if i_src != i_dst:
                pool[i_dst] = mix(pool[i_dst], hash_(pool[i_src]))
    const_b, state = 0x8B51F9DD, []
    for v in pool:
        v = (v ^ const_b) & mask
        const_b = (const_b * 0x58F38DED) & mask
        v = (v * const_b) & mask
        state.append((v ^ (v >> 16)) & mask)
    return state


class Worker:
    """One worker: `with worker:` runs the body as in that worker's process (its generator
    states and get_worker_info()); .dataset is its copy, .it its dataset iterator (an
    iterable dataset's), .ended whether that ran out this epoch."""

    def __init__(self, worker_id, num_workers, base_seed, dataset):
        seed = base_seed + worker_id
        try:                    # (a process's copy: what the worker sets stays its own)
            self.dataset = copy.copy(dataset)
        except Exception:       # noqa: BLE001  (an object that cannot be copied: shared)
            self.dataset = dataset
        self.info = WorkerInfo(worker_id, num_workers, seed, self.dataset)
        self.it, self.ended = None, False
        # the worker process's states as it starts: manual_seed, random.seed, np.random.seed
        self._states = ((seed % 2 ** 64, None), random.Random(seed).getstate(),
                        np.random.RandomState(_generate_state(base_seed, worker_id)).get_state())
        self._outer = None

    def __enter__(self):
        global _worker_info
        g = default_generator
        self._outer = ((g._seed, g._state), random.getstate(), np.random.get_state(),
                       _worker_info)
        (g._seed, g._state), py, npy = self._states
        random.setstate(py)
        np.random.set_state(npy)
        _worker_info = self.info
        return self

    def __exit__(self, *exc):
        global _worker_info
        g = default_generator
        self._states = ((g._seed, g._state), random.getstate(), np.random.get_state())
        (g._seed, g._state), py, npy, _worker_info = self._outer
        random.setstate(py)
        np.random.set_state(npy)
        self._outer = None
        return False
