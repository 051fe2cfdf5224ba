"""torch.ao.nn.quantized.dynamic.Linear (DynamicQuantizedLinear): a Linear whose weight is
stored quantized (qint8, per tensor or per channel) or rounded to float16, its activation
quantized afresh at each call (kernels.linear_dynamic). The state dict is PyTorch's:
scale, zero_point, _packed_params.dtype, _packed_params._packed_params = (weight, bias)."""
import numpy as np

from .....nn.module import Module
from .....nn.parameter import Parameter
from .....quantized_tensor import QuantizedTensor, per_tensor_affine, qint8
from .....runtime import trace_state
from .....runtime.creation import tensor
from .....runtime.dtypes import float16, float32
from .....runtime.tensor import Tensor
from . import kernels
from .weights import from_float_linear

__all__ = ["Linear", "LinearPackedParams"]


_SCALAR_NAMES = {"float64": "Double", "float16": "Half", "int64": "Long", "int32": "Int",
                 "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def run_eagerly(what):
    """Inside llgrad.compile: the quantized kernel reads its input's values (its min and
    max choose the scale), so the call runs eagerly, with the warning naming it."""
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.graph_break(f"{what} (a dynamic quantized kernel: the activation's scale comes "
                           "from its values at each call) runs eagerly")


def as_float32(x, what):
    """x's values as a float32 NumPy array (x must be a tensor)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{what}: expected a Tensor input, got {type(x).__name__}")
    return x.detach().numpy().astype(np.float32, copy=False)


class LinearPackedParams(Module):
    """The packed weight and bias of a dynamic quantized Linear (PyTorch's
    LinearPackedParams): dtype qint8 (a QuantizedTensor weight) or float16 (a float weight
    whose values are float16's)."""
    _version = 3

    def __init__(self, dtype=qint8):
        super().__init__()
        self.dtype = dtype
        self.__dict__["_weight"] = self.__dict__["_bias"] = None

    def set_weight_bias(self, weight, bias):
        """Store the weight (QuantizedTensor for qint8, float tensor for float16) and bias."""
        if self.dtype is float16:
            w16 = weight.detach().numpy().astype(np.float16)
            weight = Tensor._from_array(w16.astype(np.float32))
        elif not isinstance(weight, QuantizedTensor):
            raise RuntimeError("Unsupported dtype on dynamic quantized linear!")
        if bias is not None and not isinstance(bias, Parameter):
            bias = Parameter(bias.detach().clone())
        # (plain attributes, not registered: the state dict holds them as one tuple)
        self.__dict__["_weight"], self.__dict__["_bias"] = weight, bias

    def _weight_bias(self):
        return self._weight, self._bias

    @property
    def _packed_params(self):
        return self._weight_bias()

    def forward(self, x):
        return x

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "dtype"] = self.dtype
        destination[prefix + "_packed_params"] = self._weight_bias()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        if prefix + "dtype" in state_dict:
            self.dtype = state_dict.pop(prefix + "dtype")
        if prefix + "_packed_params" in state_dict:
            self.set_weight_bias(*state_dict.pop(prefix + "_packed_params"))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys,
                                      unexpected_keys, error_msgs)

    def __repr__(self):
        return repr(self._weight_bias())


class Linear(Module):
    """A dynamic quantized Linear (torch.ao.nn.quantized.dynamic.Linear): float input and
    output; weight() / bias() give the stored weight and bias."""
    _version = 4

    def __init__(self, in_features, out_features, bias_=True, dtype=qint8):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.scale, self.zero_point = 1.0, 0
        self._packed_params = LinearPackedParams(dtype)
        if dtype is float16:
            w = Tensor._from_array(np.zeros((out_features, in_features), np.float32))
        else:
            w = QuantizedTensor(np.zeros((out_features, in_features), np.int8), qint8,
                                per_tensor_affine, 1.0, 0)
        b = Tensor._from_array(np.zeros(out_features, np.float32)) if bias_ else None
        self._packed_params.set_weight_bias(w, b)

    def _get_name(self):
        return "DynamicQuantizedLinear"

    def __repr__(self):
        return f"{self._get_name()}({self.extra_repr()})"

    def extra_repr(self):
        s = (f"in_features={self.in_features}, out_features={self.out_features}, "
             f"dtype={self._packed_params.dtype!r}")
        if self._packed_params.dtype is qint8:
            s += f", qscheme={self.weight().qscheme()!r}"
        return s

    def weight(self):
        """The stored weight (a QuantizedTensor, or float32 with float16's values)."""
        return self._packed_params._weight

    def bias(self):
        """The float bias (a Parameter) or None."""
        return self._packed_params._bias

    def set_weight_bias(self, w, b):
        """Replace the weight and bias."""
        self._packed_params.set_weight_bias(w, b)

    def forward(self, x):
        run_eagerly("torch.ao.nn.quantized.dynamic.Linear")
        if not isinstance(x, Tensor):
            raise TypeError(f"DynamicQuantizedLinear: expected a Tensor input, got "
                            f"{type(x).__name__}")
        if x.dtype is not float32:      # (PyTorch's checks, in its order)
            raise RuntimeError(f"expected scalar type Float but found "
                               f"{_SCALAR_NAMES.get(x.dtype.name, x.dtype.name)}")
        if x.dim() < 2:
            raise RuntimeError("The dimension of input tensor should be larger than or equal "
                               "to 2")
        if x.shape[-1] != self.in_features:
            raise RuntimeError(f"The number of rows in the packB should be equal to K: "
                               f"{x.shape[-1]}")
        xa = as_float32(x, "DynamicQuantizedLinear")
        w, b = self._packed_params._weight_bias()
        bias = None if b is None else b.detach().numpy()
        if self._packed_params.dtype is float16:
            out = kernels.linear_fp16(xa, w.numpy(), bias)
        else:
            out = kernels.linear_dynamic(xa, w, bias, reduce_range=True)
        return Tensor._from_array(np.ascontiguousarray(out, dtype=np.float32))

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "scale"] = tensor(self.scale)
        destination[prefix + "zero_point"] = tensor(self.zero_point)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        if prefix + "scale" in state_dict:
            self.scale = float(state_dict.pop(prefix + "scale"))
        if prefix + "zero_point" in state_dict:
            self.zero_point = int(state_dict.pop(prefix + "zero_point"))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys,
                                      unexpected_keys, error_msgs)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The dynamic quantized Linear of a float nn.Linear, its weight quantized by the
        weight observer of mod.qconfig (default_dynamic_qconfig's when it has none)."""
        return from_float_linear(cls, mod)

