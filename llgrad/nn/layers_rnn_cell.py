"""RNNCell, LSTMCell and GRUCell (PyTorch's parameters, initialisation, checks and messages),
and the one step of each recurrence, which nn.RNN, nn.LSTM and nn.GRU reuse.

A step takes the input's projection already made (`gx = x @ W_ih^T + b_ih`, for a whole
sequence at once in the full layers, as PyTorch does on the CPU), so each time step costs one
matrix product with W_hh and the gates' elementwise work: one op of the table (PyTorch's fused
cells, llgrad/ir/ops_rnn.py), one fused loop when compiled.
Gate order is PyTorch's: LSTM i, f, g, o; GRU r, z, n with n = tanh(W_in x + b_in +
r * (W_hn h + b_hn))."""
import math

from ..runtime.creation import empty, zeros
from ..runtime.node_names import rename
from . import functional as F
from . import init
from .factory import factory_kwargs
from .module import Module, Parameter

__all__ = ["RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


# ---- the steps (gx: the input's projection for this step, (B, G); w_hh_t: W_hh transposed) ------
# The full layers pass W_hh^T made contiguous once per call, so that the per-step gradients of
# the weight are contiguous matrices (their sum over the steps reads memory in order).
def rnn_step(gx, h, w_hh_t, b_hh, nonlinearity):
    """h' = act(gx + h @ W_hh^T + b_hh) (b_hh may be folded into gx already: None)."""
    pre = gx.addmm(h, w_hh_t) if b_hh is None else gx + b_hh.addmm(h, w_hh_t)
    return pre.tanh() if nonlinearity == "tanh" else pre.relu()


def lstm_step(gx, h, c, w_hh_t, b_hh, w_hr_t=None):
    """(h', c') of one LSTM step; w_hr_t (W_hr transposed) projects h' (proj_size). The gates'
    elementwise work is one op, forward and backward (fused_lstm_cell, llgrad/ir/ops_rnn.py)."""
    gates = gx.addmm(h, w_hh_t) if b_hh is None else gx + b_hh.addmm(h, w_hh_t)
    h, c = gates._op("fused_lstm_cell", c)
    if w_hr_t is not None:
        h = h.mm(w_hr_t)
    return h, c


def gru_step(gx, h, w_hh_t, b_hh):
    """h' of one GRU step: PyTorch's (h - n) * z + n, one op forward and backward
    (fused_gru_cell, llgrad/ir/ops_rnn.py)."""
    gh = h.mm(w_hh_t) if b_hh is None else b_hh.addmm(h, w_hh_t)
    return gx._op("fused_gru_cell", gh, h)


def step_slots(steps):
    """A list to hold each step's h, after PyTorch's error for an input of no steps (which
    the full layers' stack of the outputs would otherwise meet in words of its own)."""
    if not steps:
        raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
    return [None] * len(steps)


def reset_uniform(module, hidden_size):
    """PyTorch's recurrent initialisation: every parameter ~ U(-1/sqrt(hidden), 1/sqrt(hidden))."""
    stdv = 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0
    for weight in module.parameters():
        init.uniform_(weight, -stdv, stdv)


# ---- the cells -----------------------------------------------------------------------------------
class RNNCellBase(Module):
    """What RNNCell, LSTMCell and GRUCell share, as torch.nn.RNNCellBase."""
    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        kw = factory_kwargs(device, dtype)
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(empty((num_chunks * hidden_size, input_size), **kw))
        self.weight_hh = Parameter(empty((num_chunks * hidden_size, hidden_size), **kw))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, **kw))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, **kw))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self):
        """Re-initialise the parameters as PyTorch does (random values from llgrad's
        generator)."""
        reset_uniform(self, self.hidden_size)

    def _batched(self, name, input, hx, n_states):
        """(input as a batch, hx as batches or None, whether the input was batched), with
        PyTorch's dimension checks."""
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None:
            for idx, value in enumerate(hx if n_states == 2 else (hx,)):
                if value.dim() not in (1, 2):
                    what = f"hx[{idx}]" if n_states == 2 else "hidden"
                    raise ValueError(f"{name}: Expected {what} to be 1D or 2D, got "
                                     f"{value.dim()}D instead")
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
            if hx is not None:
                hx = tuple(h.unsqueeze(0) for h in hx) if n_states == 2 else hx.unsqueeze(0)
        if input.size(1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} "
                               f"expected {self.input_size}")
        if hx is not None:
            for k, h in enumerate(hx if n_states == 2 else (hx,)):
                if h.size(0) != input.size(0):
                    raise RuntimeError(f"Input batch size {input.size(0)} doesn't match "
                                       f"hidden{k} batch size {h.size(0)}")
                if h.dim() != 2 or h.size(1) != self.hidden_size:
                    raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got "
                                       f"{h.size(min(1, h.dim() - 1))}, expected "
                                       f"{self.hidden_size}")
        return input, hx, is_batched

    def _zeros(self, input):
        return zeros(input.size(0), self.hidden_size, dtype=input.dtype, device=input.device)

    def _gx(self, input):
        return F.linear(input, self.weight_ih, self.bias_ih)


class RNNCell(RNNCellBase):
    """As torch.nn.RNNCell."""
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        input, hx, is_batched = self._batched("RNNCell", input, hx, 1)
        if hx is None:
            hx = self._zeros(input)
        ret = rnn_step(self._gx(input), hx, self.weight_hh.t(), self.bias_hh,
                       self.nonlinearity)
        return ret if is_batched else ret.squeeze(0)


class LSTMCell(RNNCellBase):
    """As torch.nn.LSTMCell."""
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        input, hx, is_batched = self._batched("LSTMCell", input, hx, 2)
        if hx is None:
            z = self._zeros(input)
            hx = (z, z)
        h, c = lstm_step(self._gx(input), hx[0], hx[1], self.weight_hh.t(), self.bias_hh)
        return (h, c) if is_batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """As torch.nn.GRUCell."""
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        input, hx, is_batched = self._batched("GRUCell", input, hx, 1)
        if hx is None:
            hx = self._zeros(input)
        # (PyTorch's CPU gru_cell is a composition whose last op is an add)
        ret = rename(gru_step(self._gx(input), hx, self.weight_hh.t(), self.bias_hh),
                     "AddBackward0")
        return ret if is_batched else ret.squeeze(0)
