"""llgrad.Generator: PyTorch's torch.Generator for the CPU (a seeded source of random
numbers for the `generator=` arguments of randn, rand, randint, randperm, DataLoader,
RandomSampler and random_split). Its stream is PyTorch's Mersenne Twister
(ir/torch_random.py): a seed gives PyTorch's numbers."""
from __future__ import annotations
import numpy as np

from ..ir import torch_random
from .creation import _Generator, _reseed_in_trace, default_generator, tensor
from .device import CPU, check
from .tensor import Tensor

__all__ = ["Generator", "get_rng_state", "set_rng_state", "seed"]

_STATE_BYTES = torch_random.WORDS * 8


def _get_state(gen):
    """The generator's state as a uint8 tensor (the twister's words, its position, the
    cached normal value and the seed)."""
    _reseed_in_trace(gen, "get_rng_state()")
    return tensor(gen.state.view(np.uint8).copy())


def _set_state(gen, new_state):
    if not isinstance(new_state, Tensor) or new_state.dtype.name != "uint8":
        raise TypeError("expected a torch.ByteTensor-like state (an llgrad uint8 tensor), "
                        f"but got {type(new_state).__name__}")
    raw = np.ascontiguousarray(new_state.detach().numpy()).reshape(-1)
    if raw.size != _STATE_BYTES:
        raise RuntimeError(f"Expected a state of {_STATE_BYTES} bytes (llgrad's generator), "
                           f"got {raw.size}")
    state = raw.view(np.int64).copy()
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
        """The generator's state as a uint8 tensor, as torch.Generator.get_state (llgrad's
        layout: PyTorch's twister words, not its byte format)."""
        return _get_state(self)

    def set_state(self, new_state):
        """Restore a state from get_state(), as torch.Generator.set_state."""
        return _set_state(self, new_state)

    def seed(self):
        """Seed from a fresh non-deterministic seed and return it, as torch.Generator.seed."""
        s = int(np.random.SeedSequence().entropy) & (2**63 - 1)
        self.manual_seed(s)
        return s

    def __repr__(self):
        return f"<llgrad.Generator object at {hex(id(self))}>"


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
