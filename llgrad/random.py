"""llgrad.random: torch.random's functions over llgrad's default generator, and fork_rng."""
import contextlib

from .runtime.creation import default_generator, initial_seed, manual_seed  # noqa: F401
from .runtime.generator import Generator, get_rng_state, seed, set_rng_state  # noqa: F401

__all__ = ["Generator", "default_generator", "fork_rng", "get_rng_state", "initial_seed",
           "manual_seed", "seed", "set_rng_state"]


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices",
             device_type=None):
    """Run the block with the default generator's state put back afterwards, as
    torch.random.fork_rng (llgrad has the CPU generator only: devices are ignored)."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
