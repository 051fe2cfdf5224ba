"""nn.RNN, nn.LSTM and nn.GRU: PyTorch's constructor arguments, parameter names and order
(weight_ih_l{k}[_reverse], weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}, weight_hr_l{k}),
initialisation, checks, messages and results (output, h_n[, c_n]), so a torch state_dict loads
with load_state_dict and gives torch's numbers.

Each layer and direction projects its whole input sequence at once (one matrix product, the
recurrent bias folded in where the formula allows), then runs its time loop in Python: under
llgrad.compile the loop is unrolled into the trace, so every step is native code. Eagerly, an
LSTM layer and direction without projections is one op instead (lstm_layer, PyTorch's
MkldnnRnnLayerBackward0 node: ir/ops_rnn_layer.py), the loop in its implementation. Dropout
(training only) falls between layers, as in PyTorch. PackedSequence inputs run on their
padded form with each sequence's steps masked (layers_rnn_packed.py). The recurrence
itself (projections, time loops, the one-op LSTM layer) is layers_rnn_recurrence.py's."""
import numbers
import warnings

from ..runtime import autocast_cast
from ..runtime.creation import empty
from ..runtime.functions import stack
from ..runtime.node_names import rename
from ..runtime.tensor import Tensor
from .factory import factory_kwargs
from .layers_rnn_cell import reset_uniform
from .layers_rnn_packed import pack_output, unpack_input
from .layers_rnn_recurrence import RNNRecurrence
from .utils.rnn import PackedSequence
from .module import Module, Parameter

__all__ = ["RNNBase", "RNN", "LSTM", "GRU"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


class RNNBase(Module, RNNRecurrence):
    """What RNN, LSTM and GRU share, as torch.nn.RNNBase: PyTorch's parameter names and
    order, initialisation and checks; PackedSequence inputs; compiled, the time loop is
    unrolled into the trace."""
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        kw = factory_kwargs(device, dtype)
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        num_directions = 2 if bidirectional else 1
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or \
                isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=2)
        for name, value, typ in (("bias", bias, bool), ("batch_first", batch_first, bool),
                                 ("input_size", input_size, int)):
            if not isinstance(value, typ):
                raise TypeError(f"{name} should be of type {typ.__name__}, got: "
                                f"{type(value).__name__}")
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input = input_size if layer == 0 else real_hidden * num_directions
                shapes = [("weight_ih_l{}{}", (gate_size, layer_input)),
                          ("weight_hh_l{}{}", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih_l{}{}", (gate_size,)), ("bias_hh_l{}{}", (gate_size,))]
                if proj_size > 0:
                    shapes += [("weight_hr_l{}{}", (proj_size, hidden_size))]
                suffix = "_reverse" if direction == 1 else ""
                names = []
                for fmt, shape in shapes:
                    name = fmt.format(layer, suffix)
                    setattr(self, name, Parameter(empty(shape, **kw)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self):
        """Re-initialise the parameters as PyTorch does (random values from llgrad's
        generator)."""
        reset_uniform(self, self.hidden_size)

    def flatten_parameters(self):
        """A no-op, as in PyTorch on the CPU (cuDNN's weight layout)."""

    @property
    def _flat_weights(self):
        return [getattr(self, n, None) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        """The parameters per layer and direction, as torch.nn.RNNBase.all_weights."""
        return [[getattr(self, w) for w in weights] for weights in self._all_weights]

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    # ---- checks (PyTorch's order and messages) ----------------------------------------------
    def check_input(self, input, batch_sizes=None):
        """Check the input's rank and feature size (PyTorch's messages)."""
        w = self._flat_weights[0]
        if input.dtype != w.dtype and autocast_cast.state.dtype is None:    # (as PyTorch)
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype "
                             f"({w.dtype}). Convert input: input.to({w.dtype}), or convert "
                             f"model: model.to({input.dtype})")
        if input.dim() != 3:
            raise RuntimeError(f"input must have 3 dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.size(-1)}")

    def get_expected_hidden_size(self, input, batch_sizes=None):
        """The hidden state's expected shape for input."""
        mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        size = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (self.num_layers * num_directions, mini_batch, size)

    def check_hidden_size(self, hx, expected, msg="Expected hidden size {}, got {}"):
        """Raise (msg) unless hx has the expected shape."""
        if tuple(hx.size()) != tuple(expected):
            raise RuntimeError(msg.format(tuple(expected), list(hx.size())))

    def check_forward_args(self, input, hidden, batch_sizes=None):
        """Check input and hidden state (PyTorch's messages)."""
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def _batch_input(self, input, hx, n_states):
        """(input batched, hx batched or None, is_batched, batch_dim) with PyTorch's checks of
        the ranks."""
        if not isinstance(input, Tensor):
            raise TypeError(f"{type(self).__name__}: expected a Tensor or a PackedSequence as "
                            f"input, got {type(input).__name__}")
        name = "RNN" if self.mode.startswith("RNN") else self.mode
        if input.dim() not in (2, 3):
            got = f"{input.dim()}D tensor instead" if name == "RNN" else f"{input.dim()}D instead"
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {got}")
        is_batched = input.dim() == 3
        batch_dim = 0 if self.batch_first else 1
        if not is_batched:
            input = input.unsqueeze(batch_dim)
        if hx is not None and n_states == 1:
            want = 3 if is_batched else 2
            if hx.dim() != want:
                kind = "batched 3-D" if is_batched else "unbatched 2-D"
                raise RuntimeError(f"For {kind} input, hx should also be {want}-D but got "
                                   f"{hx.dim()}-D tensor")
            if not is_batched:
                hx = hx.unsqueeze(1)
        elif hx is not None:
            want = 3 if is_batched else 2
            if hx[0].dim() != want or hx[1].dim() != want:
                kind = "batched 3-D" if is_batched else "unbatched 2-D"
                raise RuntimeError(f"For {kind} input, hx and cx should also be {want}-D but got "
                                   f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
            if not is_batched:
                hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
        return input, hx, is_batched, batch_dim

    def _forward_packed(self, packed, hx, n_states):
        """(packed output, h_n, c_n or None) of a PackedSequence input, hx as given."""
        padded, lengths = unpack_input(packed)
        if padded.dim() != 3:
            raise RuntimeError(f"input must have 2 dimensions, got {padded.dim() - 1}")
        self.check_input(padded)
        saved, self.batch_first = self.batch_first, False      # (the checks' batch dim)
        try:
            if hx is not None:
                self.check_forward_args(padded, hx)
        finally:
            self.batch_first = saved
        h0, c0 = (None, None) if hx is None else ((hx, None) if n_states == 1 else hx)
        output, h_n, c_n = self._run(padded, h0, c0, lengths, packed)
        h_n, c_n = stack(h_n), (stack(c_n) if n_states == 2 else None)
        if packed.unsorted_indices is not None:     # (PyTorch's index_select back to order)
            rename((h_n, c_n) if c_n is not None else h_n, "IndexSelectBackward0")
        return pack_output(output, packed), h_n, c_n

    def _forward_h(self, input, hx):
        """RNN's and GRU's forward: (output, h_n)."""
        if isinstance(input, PackedSequence):
            output, hidden, _ = self._forward_packed(input, hx, 1)
            return output, hidden
        input, hx, is_batched, batch_dim = self._batch_input(input, hx, 1)
        if hx is None:
            self.check_input(input)
        else:
            self.check_forward_args(input, hx)
        output, h_n, _ = self._run(input, hx, None)
        hidden = stack(h_n)
        if not is_batched:
            output, hidden = output.squeeze(batch_dim), hidden.squeeze(1)
        return output, hidden


class RNN(RNNBase):
    """As torch.nn.RNN (tanh or relu)."""
    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' "
                             "or 'relu'.")
        super().__init__(mode, *args, **kwargs)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        return self._forward_h(input, hx)


class GRU(RNNBase):
    """As torch.nn.GRU (gate order r, z, n)."""
    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward_h(input, hx)


class LSTM(RNNBase):
    """As torch.nn.LSTM (gate order i, f, g, o; proj_size)."""
    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input, batch_sizes=None):
        """The cell state's expected shape for input."""
        mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        return (self.num_layers * num_directions, mini_batch, self.hidden_size)

    def check_forward_args(self, input, hidden, batch_sizes=None):
        """Check input and the (h, c) state (PyTorch's messages)."""
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            output, h, c = self._forward_packed(input, hx, 2)
            return output, (h, c)
        input, hx, is_batched, batch_dim = self._batch_input(input, hx, 2)
        if hx is None:
            self.check_input(input)
            output, h_n, c_n = self._run(input, None, None)
        else:
            self.check_forward_args(input, hx)
            output, h_n, c_n = self._run(input, hx[0], hx[1])
        h, c = stack(h_n), stack(c_n)
        if not is_batched:
            output, h, c = output.squeeze(batch_dim), h.squeeze(1), c.squeeze(1)
        return output, (h, c)
