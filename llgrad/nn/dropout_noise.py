"""The uniforms behind a dropout mask, in PyTorch's order.

ATen's dropout draws `at::empty_like(input).bernoulli_(1 - p)`: empty_like keeps the
input's layout (runtime/memory_layout.py), and bernoulli_ fills that buffer in memory
order, one double uniform per element. A transposed input (nn.MultiheadAttention's
batch_first output, which TransformerEncoderLayer drops out) so gets its mask drawn along
its memory, not its logical row-major order."""
from ..runtime.creation import rand
from ..runtime.dtypes import float64
from ..runtime.memory_layout import in_layout_of

__all__ = ["uniform_noise_like"]


def uniform_noise_like(x):
    """Float64 uniforms of x's shape, drawn in the memory order of empty_like(x)."""
    return in_layout_of(x, lambda shape: rand(shape, dtype=float64, device=x.device))
