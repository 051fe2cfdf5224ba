"""Tensor.view(dtype): the same memory read as another dtype (PyTorch's checks and
messages). No autograd history: PyTorch's result never requires grad."""
from . import trace_state
from .dispatch import scalar_type_name
from .tensor import Tensor


def view_dtype(self, dtype):
    """self's memory as dtype: the last dimension scales by the ratio of element sizes."""
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.untraceable("Tensor.view(dtype)")
    a = self._data
    if dtype is not self._dtype and "bfloat16" in (dtype.name, self._dtype.name):
        raise NotImplementedError(
            f"llgrad: Tensor.view({scalar_type_name(dtype)}) of a {scalar_type_name(self._dtype)} "
            f"tensor: llgrad keeps a bfloat16 tensor's values in 32-bit words, so no other dtype "
            f"can view its memory; use .to() for a converted copy")
    old, new = a.itemsize, dtype.np.itemsize
    if old != new:
        what = (f"to view {scalar_type_name(self._dtype)} as {scalar_type_name(dtype)} "
                "(different element sizes)")
        if a.ndim == 0:
            raise RuntimeError(f"self.dim() cannot be 0 {what}")
        strides = self.stride()
        if strides[-1] != 1:
            raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got {strides[-1]}")
        if new > old:
            k = new // old
            checks = [("self.size(-1)", a.shape[-1]),
                      ("self.storage_offset()", self._storage_offset())]
            checks += [(f"self.stride({d})", s) for d, s in enumerate(strides[:-1])]
            for name, n in checks:
                if n % k:
                    raise RuntimeError(f"{name} must be divisible by {k} {what}, but got {n}")
    t = Tensor._from_array(a.view(dtype.np), self._storage)
    t._inference = self._inference
    return t
