"""torch.ao.nn.quantized.dynamic: modules whose weights are quantized ahead of time and
whose activations are quantized at each call (what quantize_dynamic swaps in)."""
from .cells import GRUCell, LSTMCell, RNNCell
from .linear import Linear
from .rnn import GRU, LSTM

__all__ = ["Linear", "LSTM", "GRU", "LSTMCell", "GRUCell", "RNNCell"]
