"""Tensor names a dense CPU tensor answers as PyTorch's does: the removed methods (solve,
lstsq, eig, symeig, reinforce) raising PyTorch's messages, the sparse queries (dense_dim,
sparse_dim, to_dense; indices / values / coalesce / is_coalesced raise for a strided
tensor), name (None: no named tensors), module_load, as_subclass, and the
device moves for devices llgrad has not (xpu, ipu, mtia)."""
from .node_names import rename
from .tensor import Tensor

_REMOVED = "This function was deprecated since version 1.9 and is now removed. "
_REMOVED_MESSAGES = {
    "solve": "`torch.solve` is deprecated in favor of `torch.linalg.solve`. `torch.linalg.solve` "
             "has its arguments reversed and does not return the LU factorization.",
    "lstsq": "`torch.lstsq` is deprecated in favor of `torch.linalg.lstsq`.",
    "eig": "`torch.linalg.eig` returns complex tensors of dtype `cfloat` or `cdouble` rather "
           "than real tensors mimicking complex tensors.\n\nL, _ = torch.eig(A) should be "
           "replaced with:\nL_complex = torch.linalg.eigvals(A)\n\nand\n\nL, V = torch.eig(A, "
           "eigenvectors=True) should be replaced with:\nL_complex, V_complex = "
           "torch.linalg.eig(A)",
    "symeig": "The default behavior has changed from using the upper triangular portion of the "
              "matrix by default to using the lower triangular portion.\n\nL, _ = "
              "torch.symeig(A, upper=upper) should be replaced with:\nL = "
              "torch.linalg.eigvalsh(A, UPLO='U' if upper else 'L')\n\nand\n\nL, V = "
              "torch.symeig(A, eigenvectors=True) should be replaced with:\nL, V = "
              "torch.linalg.eigh(A, UPLO='U' if upper else 'L')",
}


def _removed(name):
    def method(self, *args, **kwargs):
        raise RuntimeError(_REMOVED + _REMOVED_MESSAGES[name])
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"Removed from PyTorch (1.9): raises its RuntimeError, as torch.Tensor.{name}."
    return method


def reinforce(self, reward):
    """Removed from PyTorch: raises its RuntimeError, as torch.Tensor.reinforce."""
    raise RuntimeError("reinforce() was removed.")


def dense_dim(self):
    """As torch.Tensor.dense_dim: every dim of a strided tensor is dense."""
    return self._data.ndim


def sparse_dim(self):
    """As torch.Tensor.sparse_dim: 0 for a strided tensor."""
    return 0


def to_dense(self, dtype=None, *, masked_grad=None):
    """As torch.Tensor.to_dense: self (or self in dtype): a strided tensor is dense."""
    return self if dtype is None else self.to(dtype)


def _sparse_only(name, what):
    def method(self, *args, **kwargs):
        raise RuntimeError(f"{name} expected sparse {what} layout but got Strided")
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"As torch.Tensor.{name}: raises for a strided tensor (no sparse layouts)."
    return method


def module_load(self, other, assign=False):
    """As torch.Tensor.module_load (load_state_dict's swap path): the value other, to replace
    self with."""
    return other


def as_subclass(self, cls):
    """As torch.Tensor.as_subclass: self's data as an instance of cls (a Tensor subclass),
    sharing memory and attached to the autograd graph (AliasBackward0)."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError("Creating a Tensor subclass from a class that does not inherit from "
                        "Tensor is not possible. Make sure your class inherits from Tensor.")
    out = rename(self.view_as(self), "AliasBackward0")
    out.__class__ = cls
    return out


def xpu(self, device=None, non_blocking=False, memory_format=None):
    """As torch.Tensor.xpu without XPU: PyTorch's AssertionError."""
    raise AssertionError("Torch not compiled with XPU enabled")


def ipu(self, device=None, non_blocking=False, memory_format=None):
    """As torch.Tensor.ipu without IPU support: PyTorch's RuntimeError."""
    raise RuntimeError("PyTorch is not linked with support for ipu devices")


def mtia(self, device=None, non_blocking=False, memory_format=None):
    """As torch.Tensor.mtia without MTIA: PyTorch's AssertionError."""
    raise AssertionError("Torch not compiled with MTIA enabled. Ensure you have `import "
                         "mtia.host_runtime.torch_mtia.dynamic_library` in your python src "
                         "file and include `//mtia/host_runtime/torch_mtia:torch_mtia` as your "
                         "target dependency!")


for _name in _REMOVED_MESSAGES:
    setattr(Tensor, _name, _removed(_name))
for _name, _what in (("indices", "coordinate tensor"), ("values", "tensor"),
                     ("coalesce", "coordinate tensor"), ("is_coalesced", "coordinate tensor")):
    setattr(Tensor, _name, _sparse_only(_name, _what))
for _f in (reinforce, dense_dim, sparse_dim, to_dense, module_load, as_subclass, xpu, ipu, mtia):
    setattr(Tensor, _f.__name__, _f)
Tensor.name = property(lambda self: None, doc="None, as torch.Tensor.name of an unnamed tensor.")
