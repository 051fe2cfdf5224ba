"""Parameter: a tensor that a Module registers as a parameter (torch.nn.parameter)."""
from ..runtime.creation import empty
from ..runtime.tensor import Tensor


class Parameter(Tensor):
    """A tensor that a Module registers as a parameter (requires grad by default)."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = empty(0)
        p = cls._from_array(data.detach()._data, data._storage)
        p._requires_grad = False
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __reduce_ex__(self, proto):
        return (Parameter, (Tensor._from_array(self._data.copy()), self.requires_grad))
