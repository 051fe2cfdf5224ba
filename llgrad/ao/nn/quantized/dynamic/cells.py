"""torch.ao.nn.quantized.dynamic.LSTMCell, GRUCell and RNNCell (DynamicQuantized*Cell):
one step, both projections as quantized::linear_dynamic (reduce_range, each its own
activation range), the gates as ATen's cells. State dict: _packed_weight_ih /
_packed_weight_hh, each the (weight, bias) pair."""
import numpy as np

from .....nn.module import Module
from .....quantized_tensor import qint8
from .....runtime.dtypes import float16
from .....runtime.tensor import Tensor
from .linear import as_float32, run_eagerly
from .rnn import CellParams, gru_cell, lstm_cell, tanh
from .weights import quantize_weight, weight_observer

__all__ = ["LSTMCell", "GRUCell", "RNNCell"]


class _CellBase(Module):
    """What the dynamic quantized cells share."""
    _chunks = 4
    _name = "LSTMCell"

    def __init__(self, input_size, hidden_size, bias=True, dtype=qint8):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_dtype = dtype
        self.__dict__["_params"] = None

    def _get_name(self):
        return "DynamicQuantized" + self._name

    def __repr__(self):
        return f"{self._get_name()}({self.extra_repr()})"

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The dynamic quantized cell of a float one (PyTorch's RNNCellBase.from_float)."""
        observer = weight_observer(mod)
        dtype = observer.dtype
        if dtype not in (qint8, float16):
            raise RuntimeError(f"Unsupported dtype for dynamic RNN quantization: {dtype}")
        if not mod.bias:
            raise AssertionError("mod.bias must be True")
        extra = {"nonlinearity": mod.nonlinearity} if cls is RNNCell else {}
        q = cls(mod.input_size, mod.hidden_size, mod.bias, dtype=dtype, **extra)
        ws = [quantize_weight(getattr(mod, f"weight_{k}"), mod.qconfig.weight())
              for k in ("ih", "hh")]
        bs = [getattr(mod, f"bias_{k}").detach().clone() for k in ("ih", "hh")]
        q.__dict__["_params"] = CellParams(dtype, *ws, *bs)
        return q

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        p = self._params
        destination[prefix + "_packed_weight_ih"] = (p.w_ih, p.b_ih)
        destination[prefix + "_packed_weight_hh"] = (p.w_hh, p.b_hh)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        keys = (prefix + "_packed_weight_ih", prefix + "_packed_weight_hh")
        if all(k in state_dict for k in keys):
            (w_ih, b_ih), (w_hh, b_hh) = (state_dict.pop(k) for k in keys)
            self.__dict__["_params"] = CellParams(self.weight_dtype, w_ih, w_hh, b_ih, b_hh)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys,
                                      unexpected_keys, error_msgs)

    def _prepare(self, input, hx, n_states):
        run_eagerly(f"torch.ao.nn.quantized.dynamic.{self._name}")
        x = as_float32(input, self._get_name())
        if x.ndim < 2:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{x.ndim or 1}"
                             f", {max(x.ndim - 1, 0)}], but got 1)")
        if x.ndim != 2 or x.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {x.shape[1]}, "
                               f"expected {self.input_size}")
        if hx is None:
            return x, (np.zeros((x.shape[0], self.hidden_size), np.float32),) * n_states
        hx = (hx,) if isinstance(hx, Tensor) else tuple(hx)
        return x, tuple(as_float32(h, self._get_name()) for h in hx)


class LSTMCell(_CellBase):
    """forward(input, (h, c)) -> (h', c')."""
    _name = "LSTMCell"

    def forward(self, input, hx=None):
        x, state = self._prepare(input, hx, 2)
        p = self._params
        h, c = lstm_cell(p.linear(state[0], "hh") + p.linear(x, "ih"), state)
        return Tensor._from_array(h), Tensor._from_array(c)


class GRUCell(_CellBase):
    """forward(input, h) -> h'."""
    _chunks = 3
    _name = "GRUCell"

    def forward(self, input, hx=None):
        x, (h,) = self._prepare(input, hx, 1)
        p = self._params
        return Tensor._from_array(gru_cell(p.linear(x, "ih"), p.linear(h, "hh"), h))


class RNNCell(_CellBase):
    """forward(input, h) -> tanh or relu of the two projections' sum."""
    _chunks = 1
    _name = "RNNCell"

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", dtype=qint8):
        super().__init__(input_size, hidden_size, bias, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, (h,) = self._prepare(input, hx, 1)
        p = self._params
        pre = p.linear(h, "hh") + p.linear(x, "ih")
        if self.nonlinearity == "tanh":
            out = tanh(pre)
        elif self.nonlinearity == "relu":
            out = np.maximum(pre, np.float32(0))
        else:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return Tensor._from_array(out)
