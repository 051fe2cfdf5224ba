"""llgrad.Generator: PyTorch's torch.Generator for the CPU (a seeded source of random
numbers for the `generator=` arguments of randn, rand, randint, randperm, DataLoader,
RandomSampler and random_split). Its stream is NumPy's PCG64, not PyTorch's Mersenne
Twister: a seed gives the same numbers on every run, not the numbers PyTorch gives."""
from __future__ import annotations
import numpy as np

from .creation import _Generator, _reseed_in_trace, default_generator, tensor
from .device import CPU, check
from .tensor import Tensor

__all__ = ["Generator", "get_rng_state", "set_rng_state", "seed"]


def _get_state(gen):
    """The generator's state as a uint8 tensor (seed, then PCG64's state, increment and
    buffered 32-bit draw)."""
    _reseed_in_trace(gen, "get_rng_state()")
    st = gen.rng.bit_generator.state
    s = st["state"]
    words = (gen._seed & (2**64 - 1), s["state"], s["inc"], st["has_uint32"], st["uinteger"])
    raw = b"".join(int(w).to_bytes(n, "little") for w, n in zip(words, (8, 16, 16, 1, 4)))
    return tensor(np.frombuffer(raw, dtype=np.uint8).copy())


def _set_state(gen, new_state):
    if not isinstance(new_state, Tensor) or new_state.dtype.name != "uint8":
        raise TypeError("expected a torch.ByteTensor-like state (an llgrad uint8 tensor), "
                        f"but got {type(new_state).__name__}")
    raw = bytes(new_state.detach().numpy().tobytes())
    if len(raw) != 45:
        raise RuntimeError(f"Expected a state of 45 bytes (llgrad's PCG64 generator), got "
                           f"{len(raw)}")
    seed = int.from_bytes(raw[0:8], "little")
    bitgen = np.random.PCG64()
    bitgen.state = {"bit_generator": "PCG64",
                    "state": {"state": int.from_bytes(raw[8:24], "little"),
                              "inc": int.from_bytes(raw[24:40], "little")},
                    "has_uint32": raw[40], "uinteger": int.from_bytes(raw[41:45], "little")}
    gen._seed = seed
    gen.rng = np.random.Generator(bitgen)
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
        """The generator's state as a uint8 tensor (45 bytes: llgrad's PCG64 state, not
        PyTorch's), as torch.Generator.get_state."""
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
