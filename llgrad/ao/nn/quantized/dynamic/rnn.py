"""torch.ao.nn.quantized.dynamic.LSTM and GRU (DynamicQuantizedLSTM / GRU): each layer's
input projection runs once over the whole sequence (one activation range for all steps, as
ATen's FullLayer on the CPU), the hidden projection once per step, both as
quantized::linear_dynamic (reduce_range) or its float16 form; the gates in float32 as
ATen's cells. The per layer and direction weights are PackedParameter modules in
_all_weight_values, as PyTorch's state dict names them."""
import numpy as np

from .....nn.layers_container import ModuleList
from .....nn.module import Module
from .....quantized_tensor import qint8
from .....runtime.dtypes import float16
from .....runtime.tensor import Tensor
from . import kernels
from .linear import as_float32, run_eagerly
from .weights import quantize_weight, weight_observer

__all__ = ["CellParams", "PackedParameter", "LSTM", "GRU"]


class CellParams:
    """One layer and direction's weights (w_ih, w_hh: QuantizedTensor, or float32 tensors
    with float16's values) and float biases."""

    def __init__(self, dtype, w_ih, w_hh, b_ih, b_hh):
        self.dtype, self.w_ih, self.w_hh, self.b_ih, self.b_hh = dtype, w_ih, w_hh, b_ih, b_hh

    def linear(self, x, which):
        w, b = (self.w_ih, self.b_ih) if which == "ih" else (self.w_hh, self.b_hh)
        bias = None if b is None else b.detach().numpy()
        if self.dtype is float16:
            return kernels.linear_fp16(x, w.numpy(), bias)
        return kernels.linear_dynamic(x, w, bias, reduce_range=True)

    def __repr__(self):
        return f"CellParams(dtype={self.dtype!r})"


class PackedParameter(Module):
    """Holds one CellParams as `param` (a state dict entry of its own)."""

    def __init__(self, param):
        super().__init__()
        self.param = param

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "param"] = self.param

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        if prefix + "param" in state_dict:
            self.param = state_dict.pop(prefix + "param")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys,
                                      unexpected_keys, error_msgs)


def sigmoid(x):
    """float32 sigmoid as ATen's."""
    # 1 / (1 + exp(-x)) in float32 with exp correctly rounded, as ATen's vectorised sigmoid
    # (SLEEF's exp): NumPy's float32 exp is off by an ulp now and then
    e = np.exp(-x.astype(np.float64)).astype(np.float32)
    return (np.float32(1) / (np.float32(1) + e)).astype(np.float32)


def tanh(x):
    """float32 tanh correctly rounded (as SLEEF's in ATen)."""
    return np.tanh(x.astype(np.float64)).astype(np.float32)


def lstm_cell(gates, state):
    """ATen's LSTM cell on the summed gate projections: (h, c)."""
    c = state[1]
    i, f, g, o = np.split(gates, 4, axis=1)
    i, f, g, o = sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)
    c = f * c + i * g
    return o * tanh(c), c


def gru_cell(ih, hh, h):
    """ATen's GRU cell on the two projections: the new h."""
    r_i, z_i, n_i = np.split(ih, 3, axis=1)
    r_h, z_h, n_h = np.split(hh, 3, axis=1)
    r = sigmoid(r_h + r_i)
    z = sigmoid(z_h + z_i)
    n = tanh(n_i + n_h * r)
    return (h - n) * z + n


class _RNNBase(Module):
    """What the dynamic quantized LSTM and GRU share."""
    _version = 2
    _mode = "LSTM"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, dtype=qint8):
        super().__init__()
        self.mode = self._mode
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.dtype = bidirectional, dtype
        self.version = 2
        self.training = False
        self._all_weight_values = ModuleList()

    def _get_name(self):
        return "DynamicQuantized" + self._mode

    def __repr__(self):
        return f"{self._get_name()}({self.extra_repr()})"

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The dynamic quantized LSTM / GRU of a float one (weights by mod.qconfig's
        observer, as PyTorch's RNNBase.from_float)."""
        observer = weight_observer(mod)
        dtype = observer.dtype
        if dtype not in (qint8, float16):
            raise RuntimeError(f"Unsupported dtype for dynamic RNN quantization: {dtype}")
        if not mod.bias:
            raise AssertionError("mod.bias must be True")
        if getattr(mod, "proj_size", 0):
            raise NotImplementedError("llgrad: dynamic quantization of an LSTM with proj_size")
        q = cls(mod.input_size, mod.hidden_size, mod.num_layers, mod.bias, mod.batch_first,
                mod.dropout, mod.bidirectional, dtype)
        for layer in range(mod.num_layers):
            for suffix in ("", "_reverse") if mod.bidirectional else ("",):
                ws = [quantize_weight(getattr(mod, f"weight_{k}_l{layer}{suffix}"),
                                      mod.qconfig.weight()) for k in ("ih", "hh")]
                bs = [getattr(mod, f"bias_{k}_l{layer}{suffix}").detach().clone()
                      for k in ("ih", "hh")]
                q._all_weight_values.append(PackedParameter(CellParams(dtype, *ws, *bs)))
        return q

    def _run(self, x, hx):
        if self.batch_first:
            x = x.transpose(1, 0, 2)
        steps, dirs = x.shape[0], 2 if self.bidirectional else 1
        params = [m.param for m in self._all_weight_values]
        h_out, c_out = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                p = params[layer * dirs + d]
                state = tuple(s[layer * dirs + d] for s in hx)
                ih = p.linear(x, "ih")
                seq = np.empty(ih.shape[:2] + (self.hidden_size,), np.float32)
                for t in (range(steps) if d == 0 else reversed(range(steps))):
                    state = self._step(p, ih[t], state)
                    seq[t] = state[0]
                outs.append(seq)
                h_out.append(state[0])
                if len(state) > 1:
                    c_out.append(state[1])
            x = outs[0] if dirs == 1 else np.concatenate(outs, axis=2)
        if self.batch_first:
            x = x.transpose(1, 0, 2)
        return np.ascontiguousarray(x), np.stack(h_out), (np.stack(c_out) if c_out else None)

    def _input(self, input, hx, n_states):
        run_eagerly(f"torch.ao.nn.quantized.dynamic.{self._mode}")
        if isinstance(input, tuple):
            raise NotImplementedError("llgrad: PackedSequence input to a dynamic quantized "
                                      f"{self._mode}")
        x = as_float32(input, self._get_name())
        if x.ndim < 2:      # (PyTorch reads the batch size as input.size(1) first)
            raise IndexError(f"Dimension out of range (expected to be in range of [-{x.ndim or 1}"
                             f", {max(x.ndim - 1, 0)}], but got 1)")
        if x.ndim != 3:
            raise RuntimeError(f"input must have 3 dimensions, got {x.ndim}")
        if x.shape[1 if self.batch_first else 0] == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        batch = x.shape[0] if self.batch_first else x.shape[1]
        size = (self.num_layers * (2 if self.bidirectional else 1), batch, self.hidden_size)
        if hx is None:
            return x, (np.zeros(size, np.float32),) * n_states
        hx = (hx,) if isinstance(hx, Tensor) else tuple(hx)
        for h in hx:
            if tuple(h.shape) != size:
                raise RuntimeError(f"Expected hidden size {size}, got {list(h.shape)}")
        return x, tuple(as_float32(h, self._get_name()) for h in hx)


class LSTM(_RNNBase):
    """A dynamic quantized LSTM: forward(input, (h_0, c_0)) -> (output, (h_n, c_n))."""
    _mode = "LSTM"

    def _step(self, p, ih_t, state):
        return lstm_cell(p.linear(state[0], "hh") + ih_t, state)

    def forward(self, input, hx=None):
        x, hx = self._input(input, hx, 2)
        out, h, c = self._run(x, hx)
        wrap = Tensor._from_array
        return wrap(out), (wrap(h), wrap(c))


class GRU(_RNNBase):
    """A dynamic quantized GRU: forward(input, h_0) -> (output, h_n)."""
    _mode = "GRU"

    def _step(self, p, ih_t, state):
        return (gru_cell(ih_t, p.linear(state[0], "hh"), state[0]),)

    def forward(self, input, hx=None):
        x, hx = self._input(input, hx, 1)
        out, h, _ = self._run(x, hx)
        return Tensor._from_array(out), Tensor._from_array(h)
