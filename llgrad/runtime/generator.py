"""llgrad.Generator: PyTorch's torch.Generator for the CPU (a seeded source of random
numbers for the `generator=` arguments of randn, rand, randint, randperm, DataLoader,
RandomSampler and random_split). Its stream is PyTorch's Mersenne Twister
(ir/torch_random.py): a seed gives PyTorch's numbers."""
from __future__ import annotations
import numpy as np

from ..ir import torch_random
from . import trace_state
from .creation import _Generator, _reseed_in_trace, default_generator, tensor
from .device import CPU, check
from .tensor import Tensor

__all__ = ["Generator", "get_rng_state", "set_rng_state", "seed"]

_OLD_BYTES = torch_random.WORDS * 8     # (llgrad's former layout: its state array's bytes)
# PyTorch's CPUGeneratorImplState (5056 bytes, little-endian): the seed (uint64), left and
# seeded (int32), next (uint64), the 624 words (uint64 each), normal_x, normal_y, normal_rho
# (double: y the cached normal), normal_is_valid (int32), 4 bytes of padding, the cached
# float normal (float32; never drawn on the CPU) and its flag (bool), 3 bytes of padding
_STATE_BYTES, _WORDS_AT, _NORMAL_AT, _VALID_AT = 5056, 24, 5024, 5040


def _get_state(gen):
    """The generator's state as a uint8 tensor, in PyTorch's byte layout (a state saved by
    torch.get_rng_state loads here, and the other way round)."""
    _reseed_in_trace(gen, "get_rng_state()")
    st = gen.state
    raw = np.zeros(_STATE_BYTES, np.uint8)
    pos = int(st[torch_random.POS])
    # PyTorch counts `left` down to a twist (left = 625 - next); a freshly seeded twister
    # has next 0, one that used up its block next 624 (both twist at the next draw)
    fresh = pos == 624 and int(st[1]) == (1812433253 * (int(st[0]) ^ (int(st[0]) >> 30))
                                          + 1) & 0xFFFFFFFF
    raw[0:8].view(np.int64)[0] = st[torch_random.SEED]
    raw[8:16].view(np.int32)[:] = (625 - pos, 1)
    raw[16:24].view(np.uint64)[0] = 0 if fresh else pos
    raw[_WORDS_AT:_WORDS_AT + 624 * 8].view(np.int64)[:] = st[:624]
    if st[torch_random.HAS_NORMAL]:
        raw[_NORMAL_AT:_NORMAL_AT + 8].view(np.int64)[0] = st[torch_random.NORMAL]
        raw[_VALID_AT:_VALID_AT + 4].view(np.int32)[0] = 1
    return tensor(raw)


def _from_torch_bytes(raw):
    state = np.zeros(torch_random.WORDS, np.int64)
    state[:624] = raw[_WORDS_AT:_WORDS_AT + 624 * 8].view(np.uint64) & np.uint64(0xFFFFFFFF)
    left = int(raw[8:12].view(np.int32)[0])
    state[torch_random.POS] = 624 if left <= 1 else min(int(raw[16:24].view(np.uint64)[0]), 624)
    if raw[_VALID_AT:_VALID_AT + 4].view(np.int32)[0]:
        state[torch_random.HAS_NORMAL] = 1
        state[torch_random.NORMAL] = raw[_NORMAL_AT:_NORMAL_AT + 8].view(np.int64)[0]
    state[torch_random.SEED] = raw[0:8].view(np.int64)[0]
    return state


def _set_state(gen, new_state):
    # (before reading the state's values: a traced state tensor would otherwise name
    # .numpy() as the reason for running eagerly)
    _reseed_in_trace(gen, "set_rng_state()")
    if not isinstance(new_state, Tensor) or new_state.dtype.name != "uint8":
        raise TypeError("expected a torch.ByteTensor-like state (an llgrad uint8 tensor), "
                        f"but got {type(new_state).__name__}")
    raw = np.ascontiguousarray(new_state.detach().numpy()).reshape(-1)
    if raw.size == _OLD_BYTES:
        state = raw.view(np.int64).copy()
    elif raw.size == _STATE_BYTES:
        state = _from_torch_bytes(raw)
    else:
        raise RuntimeError(f"Expected a CPUGeneratorImplState of size {_STATE_BYTES} but found "
                           f"the input RNG state size to be {raw.size}")
    gen.state = state
    gen._seed = int(state[torch_random.SEED]) % 2 ** 64
    return gen


class Generator(_Generator):
    """Generator(device='cpu'): manual_seed(seed) (returns the generator), initial_seed(),
    seed() (a fresh non-deterministic seed), get_state() / set_state(state), device."""

    def __init__(self, device="cpu"):
        check(device, "make a generator on")
        super().__init__()

    @property
    def device(self):
        """Always llgrad.device('cpu')."""
        return CPU

    def get_state(self):
        """The generator's state as a uint8 tensor, as torch.Generator.get_state (PyTorch's
        byte layout)."""
        return _get_state(self)

    def set_state(self, new_state):
        """Restore a state from get_state(), as torch.Generator.set_state."""
        return _set_state(self, new_state)

    def seed(self):
        """Seed from a fresh non-deterministic seed and return it, as torch.Generator.seed."""
        if trace_state.state.tracer is not None:    # (a fresh seed at each call, not a constant)
            trace_state.state.tracer.untraceable("Generator.seed()")
        s = int(np.random.SeedSequence().entropy) & (2**63 - 1)
        self.manual_seed(s)
        return s

    def __repr__(self):
        return f"<llgrad.Generator object at {hex(id(self))}>"


# torch.default_generator is a torch.Generator (get_state, set_state, seed, device); the
# default generator is made before this class exists (random_state.py), so it takes it here
default_generator.__class__ = Generator


def get_rng_state() -> Tensor:
    """The default generator's state (a uint8 tensor), as torch.get_rng_state."""
    return _get_state(default_generator)


def set_rng_state(new_state: Tensor) -> None:
    """Restore the default generator's state from get_rng_state()."""
    _set_state(default_generator, new_state)


def seed() -> int:
    """Seed the default generator non-deterministically; returns the seed."""
    s = int(np.random.SeedSequence().entropy) & (2**63 - 1)
    default_generator.manual_seed(s)
    return s
