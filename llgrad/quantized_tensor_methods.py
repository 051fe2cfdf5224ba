"""The methods a QuantizedTensor shares with PyTorch's quantized tensors beyond its values and
parameters: comparisons (on the dequantized values, as ATen's quantized eq), torch.equal's
exact check, item, and the shape views (a copy here: a QuantizedTensor keeps its integers
contiguous). Views of a per-channel tensor are refused (PyTorch's permute refuses them too)."""
import numpy as np


def _values(other):
    if isinstance(other, QuantizedMethods):
        return other.dequantize()
    return other


class QuantizedMethods:
    """Mixed into QuantizedTensor (which provides _ints, _axis, dequantize and _like)."""
    __slots__ = ()

    def __eq__(self, other):
        return self.dequantize() == _values(other)

    def __ne__(self, other):
        return self.dequantize() != _values(other)

    __hash__ = object.__hash__

    def equal(self, other):
        """As torch.equal of two quantized tensors: the same dtype, scheme, parameters,
        shape and integers."""
        if not isinstance(other, QuantizedMethods):
            raise RuntimeError("Quantized Tensor equal only supports comparing quantized "
                               "tensors")
        if (self.dtype is not other.dtype or self.qscheme() is not other.qscheme()
                or self._ints.shape != other._ints.shape or self._axis != other._axis):
            return False
        if not (np.array_equal(self._scale, other._scale)
                and np.array_equal(self._zero_point, other._zero_point)):
            return False
        return bool(np.array_equal(self._ints, other._ints))

    def item(self):
        """The one element's dequantized value (a Python float)."""
        return self.dequantize().item()

    def __float__(self):
        return float(self.item())

    def cpu(self):
        """self (quantized tensors live on the CPU)."""
        return self

    def _view(self, ints, axis=None):
        if self._axis is not None and axis is None:
            raise NotImplementedError("llgrad: reshaping a per-channel quantized tensor")
        return self._like(np.ascontiguousarray(ints), axis)

    def view(self, *shape):
        """As Tensor.view (of a per-tensor quantized tensor)."""
        shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return self._view(self._ints.reshape(tuple(shape)))

    reshape = view

    def flatten(self, start_dim=0, end_dim=-1):
        """As Tensor.flatten (of a per-tensor quantized tensor)."""
        shape = self._ints.shape
        if not shape:
            return self._view(self._ints.reshape(1))
        s, e = start_dim % len(shape), end_dim % len(shape)
        new = shape[:s] + (int(np.prod(shape[s:e + 1])),) + shape[e + 1:]
        return self._view(self._ints.reshape(new))

    def permute(self, *dims):
        """As Tensor.permute (PyTorch refuses it of a per-channel quantized tensor)."""
        dims = tuple(dims[0]) if len(dims) == 1 and not isinstance(dims[0], int) else dims
        if self._axis is not None:
            raise RuntimeError("Setting strides is possible only on uniformly quantized tensor")
        return self._view(self._ints.transpose(dims))

    def transpose(self, dim0, dim1):
        """As Tensor.transpose."""
        nd = max(self._ints.ndim, 1)
        order = list(range(self._ints.ndim))
        if order:
            a, b = dim0 % nd, dim1 % nd
            order[a], order[b] = order[b], order[a]
        return self.permute(order)

    def t(self):
        """As Tensor.t (at most 2 dimensions)."""
        if self._ints.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                               f"{self._ints.ndim}D")
        return self.transpose(0, 1) if self._ints.ndim == 2 else self

    def contiguous(self, memory_format=None):
        """self (its integers are contiguous)."""
        return self

    def squeeze(self, dim=None):
        """As Tensor.squeeze (of a per-tensor quantized tensor)."""
        ints = self._ints.squeeze() if dim is None else (
            self._ints.squeeze(dim) if self._ints.ndim and self._ints.shape[dim] == 1
            else self._ints)
        return self._view(ints)

    def unsqueeze(self, dim):
        """As Tensor.unsqueeze (of a per-tensor quantized tensor)."""
        return self._view(np.expand_dims(self._ints, dim % (self._ints.ndim + 1)))


def dequantize(tensors):
    """As torch.dequantize: a quantized tensor's float32 values (a list of them for a list);
    a float tensor is returned as it is."""
    if isinstance(tensors, (list, tuple)):
        return [dequantize(t) for t in tensors]
    if isinstance(tensors, QuantizedMethods):
        return tensors.dequantize()
    return tensors
