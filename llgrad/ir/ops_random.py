"""Random ops as pure functions of an explicit generator state.

The state is PCG64's 128-bit state and increment as int64[4] (bits reinterpreted), so a
traced `randn` is `%values, %state1 = rng_normal %state0`: given the eager generator's state
at the start, the interpreter draws exactly the numbers eager mode drew."""
import numpy as np

from .optable import defop

_MASK = (1 << 64) - 1


def state_to_array(bit_generator):
    st = bit_generator.state["state"]
    words = [st["state"] >> 64, st["state"] & _MASK, st["inc"] >> 64, st["inc"] & _MASK]
    return np.array(words, dtype=np.uint64).view(np.int64)


def generator_from_array(arr, buffered=(0, 0)):
    """A generator at the state arr holds. buffered: PCG64's (has_uint32, uinteger), the
    half of a 64-bit draw a 32-bit draw (randint, randperm) left for the next one: the
    graphs draw 64 bits at a time and leave it where it was."""
    w = [int(x) for x in np.asarray(arr, dtype=np.int64).view(np.uint64)]
    bg = np.random.PCG64()
    bg.state = {"bit_generator": "PCG64", "state": {"state": (w[0] << 64) | w[1],
                                                     "inc": (w[2] << 64) | w[3]},
                "has_uint32": buffered[0], "uinteger": buffered[1]}
    return np.random.Generator(bg)


def _draw(method):
    def impl(state, shape, dtype):
        g = generator_from_array(state)
        values = getattr(g, method)(tuple(shape), dtype=np.float64).astype(dtype)
        return values, state_to_array(g.bit_generator)
    return impl


# The eager creation functions draw the same way (float64, then cast), so both agree.
defop("rng_normal", _draw("standard_normal"), args=("state",), nout=2, kind="random")
defop("rng_uniform", _draw("random"), args=("state",), nout=2, kind="random")
