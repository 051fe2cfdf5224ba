"""The eager world: Tensor, storage and views, grad modes, the autograd engine,
autograd.Function, gradcheck."""
from . import methods, methods_reduce, methods_views, methods_getitem, methods_setitem  # noqa: F401
from . import methods_index  # noqa: F401
from . import tensor_autograd  # noqa: F401  (grad_fn, .grad, hooks, backward)
from . import methods_tensor, methods_sort, methods_scatter, methods_random, linalg  # noqa: F401
from . import functions_tensor  # noqa: F401
from . import legacy_types, inplace_views  # noqa: F401  (llgrad.Tensor(data), x.unsqueeze_(d))
from . import methods_layout  # noqa: F401  (storage_offset(), data_ptr(), _version)
from . import functions_division  # noqa: F401  (fmod, remainder, floor_divide, rsub)
from . import (functions_math, functions_predicates, functions_reduce,  # noqa: F401
               functions_shape, functions_rearrange, functions_linalg, functions_stats,
               functions_misc, functions_search, functions_index_writes,
               functions_bitwise, functions_special,
               functions_config, methods_random_more,
               functions_matrix, functions_counts,
               functions_windows, tensor_resize)  # (compositions of the table's ops)
from . import functions_scatter_views  # noqa: F401,E402  (*_scatter, *_copy, index_reduce)
from . import functions_numeric_more  # noqa: F401,E402  (frexp, nextafter, i0, igamma)
from . import functions_histogram  # noqa: F401,E402  (histogram, gradient, poisson, ...)
from . import functions_settings, tensor_memory  # noqa: F401,E402  (global settings; asarray)
from . import functions_lowrank  # noqa: F401,E402  (svd_lowrank, pca_lowrank)
from . import functions_sparse  # noqa: F401,E402  (sparse COO tensors)
from . import functions_complex  # noqa: F401,E402  (view_as_real, complex, polar)
from . import tensor_storage_api  # noqa: F401,E402  (storage(), set_, apply_, FloatStorage)
from . import tensor_deepcopy  # noqa: F401,E402  (copy.deepcopy: shared storages, .grad)
from . import storage_bytes  # noqa: F401,E402  (untyped_storage()'s nbytes, fill_, ...)
from . import tensor_small_names  # noqa: F401,E402  (as_strided_, dim_order, cond, ...)
from . import tensor_legacy_names  # noqa: F401,E402  (removed and sparse-only methods)
from . import bool_kernels  # noqa: F401,E402  (PyTorch's errors where it has no bool kernel)
from .tensor import Size, Storage, Tensor  # noqa: F401
from .numpy_scalars import wrap_operators
from .tensor_args import wrap_tensor_args
from .numpy_names import wrap_numpy_names
from .out_args import wrap_out_args
from .creation_args import wrap_factory_args
from .meta_factories import wrap_meta_factories
from .tensor_stand_ins import wrap_tensor_stand_ins
from . import meta_dispatch, meta_methods, meta_values  # noqa: F401,E402  (the meta device)
wrap_operators()     # (after every operator is defined: it wraps them)
wrap_tensor_args()   # (likewise: the functions and methods that take only tensors)
wrap_numpy_names()   # (and those with dim / keepdim: axis= / keepdims= as well)
wrap_tensor_stand_ins()  # (torch.tensor of a compiled function's changing numbers)
wrap_meta_factories()  # (device="meta", before layout= / memory_format= wrap them)
wrap_factory_args()  # (the factories' layout= / pin_memory=, before out= wraps them)
wrap_out_args()      # (and every function: out=, last, so that it sees the others' names)

# As torch's (torch.Tensor.__module__ == "torch"): print(type(x)) shows <class 'llgrad.Tensor'>
from .dtypes import dtype as _dtype  # noqa: E402
from .device import device as _device  # noqa: E402
from .dtype_info import finfo as _finfo, iinfo as _iinfo  # noqa: E402
from .functions_config import layout as _layout, memory_format as _memory_format  # noqa: E402
for _cls in (Tensor, Size, _dtype, _device, _finfo, _iinfo, _layout, _memory_format):
    _cls.__module__ = "llgrad"
