"""llgrad.types: the type aliases torch.types names, for annotations in PyTorch programs."""
import os
from typing import IO, Sequence, Union

from .runtime.device import device as _device  # noqa: F401
from .runtime.dtypes import dtype as _dtype  # noqa: F401
from .runtime.tensor import Size as _size, Tensor  # noqa: F401

_int, _float, _bool, _complex = int, float, bool, complex
Number = Union[int, float, bool]
py_sym_types = (int, float, bool)
Device = Union[_device, str, int, None]
_TensorOrTensors = Union[Tensor, Sequence[Tensor]]
FileLike = Union[str, os.PathLike[str], IO[bytes]]
