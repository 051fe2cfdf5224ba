"""The gradients a backward starts from: the given grad_tensors checked against their outputs,
or the implicit ones of a scalar output (PyTorch's errors otherwise)."""
import numpy as np

from .meta_tensor import is_meta, meta_tensor, root_grad_to
from .tensor import Tensor


_ONES = {}      # (shape, dtype) -> a ones array of size 1, copied for each implicit root grad


def make_root_grads(tensors, grad_tensors):
    out, edges = [], {i for i, t in enumerate(tensors) if isinstance(t, tuple)}
    for i, (t, g) in enumerate(zip(tensors, grad_tensors)):
        if isinstance(t, tuple):        # a GradientEdge: its tensor's or node's metadata
            meta = getattr(t[0], "_out_meta", None)
            m = getattr(t, "meta", None) or (meta[t[1]] if meta else (None, None))
            t = None if m[1] is None else \
                Tensor._from_array(np.broadcast_to(np.zeros((), m[1].np), m[0]))
            if t is None:
                if g is None:
                    raise RuntimeError("grad can be implicitly created for a GradientEdge "
                                       "output only where its node keeps its outputs' shapes"
                                       " (llgrad): pass grad_outputs")
                out.append(g)
                continue
        if g is None:
            d = t._data
            one = _ONES.get((d.shape, d.dtype))
            if one is None:         # (only a real scalar's ones are ever cached)
                if not t.requires_grad and i not in edges:  # (PyTorch: the engine's error)
                    out.append(Tensor._from_array(np.ones(d.shape, dtype=d.dtype)))
                    continue
                if d.size != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar "
                                       "outputs")
                if not t._dtype.is_floating_point:
                    raise RuntimeError("grad can be implicitly created only for real scalar "
                                       f"outputs but got {t._dtype!r}")
                one = _ONES[(d.shape, d.dtype)] = np.ones(d.shape, dtype=d.dtype)
            g = Tensor._from_array(one.copy()) if not is_meta(t) else meta_tensor(d.shape, t._dtype)
        elif not isinstance(g, Tensor):     # (PyTorch's error, word for word)
            raise TypeError("gradients can be either Tensors or None, but got "
                            f"{type(g).__name__}")
        elif g._data.shape != t._data.shape:
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of "
                               f"llgrad.Size({list(g._data.shape)}) and output[{i}] has a shape "
                               f"of llgrad.Size({list(t._data.shape)}).")
        out.append(g if i in edges or is_meta(g) is is_meta(t) else root_grad_to(t, g, i))
    return out
