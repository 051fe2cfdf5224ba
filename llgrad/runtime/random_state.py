"""llgrad's default random generator and manual_seed: PyTorch's CPU generator (its Mersenne
Twister, ir/torch_random.py), so a seed gives PyTorch's numbers; the state a draw advances."""
import numpy as np

from ..ir import torch_random
from . import trace_state

DEFAULT_SEED = 67280421310721      # PyTorch's default seed


class _Generator:
    def __init__(self):
        self.manual_seed(DEFAULT_SEED)

    def manual_seed(self, seed):
        _reseed_in_trace(self, "manual_seed()")
        seed = int(seed)
        if not -2 ** 63 <= seed < 2 ** 64:
            raise ValueError("Overflow when unpacking long long")
        self._seed = seed % 2 ** 64         # (PyTorch keeps a negative seed as its uint64)
        self._state = None
        return self

    # made on first use: seeding the twister is a 624-step loop
    @property
    def state(self):
        """The generator's state: PyTorch's Mersenne Twister and its cached normal value, as
        the int64 array of ir/torch_random.py (draws advance it in place)."""
        if self._state is None:
            self._state = torch_random.seeded(self._seed)
        return self._state

    @state.setter
    def state(self, value):
        _reseed_in_trace(self, "set_rng_state()")
        self._state = value

    def initial_seed(self):
        _reseed_in_trace(self, "initial_seed()")
        return self._seed


def _reseed_in_trace(gen, what):
    """A trace reads the default generator's state once, at its start (an input of the
    graph): reseeding it or reading its state inside the traced function cannot be
    replayed, so the call runs eagerly (graph break)."""
    tracer = trace_state.state.tracer
    if tracer is not None and gen is globals().get("default_generator"):
        tracer.graph_break(f"{what} of the default random generator inside the compiled "
                           "function")


def _value_dependent_draw(what, generator):
    """A traced draw of a generator object (one made inside the function: a call's snapshot
    stops at one it reaches) whose values depend on the input's, as poisson's: a trace would
    bake eager's draws in as constants, so the call runs eagerly."""
    tracer = trace_state.state.tracer
    if generator is not None and tracer is not None:
        tracer.untraceable(f"{what} with a generator")


default_generator = _Generator()


def manual_seed(seed: int) -> _Generator:
    """Seed the default generator (returns it), as torch.manual_seed: the same seed gives
    PyTorch's numbers (ir/torch_random.py)."""
    return default_generator.manual_seed(seed)


def initial_seed() -> int:
    """The seed of the default generator, as torch.initial_seed."""
    return default_generator.initial_seed()


# called before every draw while a vmap is active (llgrad.func: randomness="error" raises)
random_hook = None


def _state(generator):
    """The state array a draw advances (the default generator's, or `generator`'s)."""
    if random_hook is not None:
        random_hook()
    if generator is not None and not isinstance(generator, _Generator):
        raise TypeError(f"expected a torch.Generator for the argument 'generator', got "
                        f"{type(generator).__name__}")      # (PyTorch's argument parser)
    return (generator or default_generator).state


def numpy_rng(generator=None):
    """A NumPy generator for the draws with no PyTorch counterpart here (poisson, binomial),
    seeded by one 64-bit draw of llgrad's generator: reproducible from manual_seed."""
    s = torch_random.Stream(_state(generator))
    seed = int(s.u64(1)[0])
    s.close()
    return np.random.default_rng(seed)


def random_int64(generator=None):
    """One `torch.empty((), dtype=torch.int64).random_()` draw: how PyTorch's samplers and
    loaders seed what they make."""
    return int(torch_random.random_full(_state(generator), 1, "int64")[0])
