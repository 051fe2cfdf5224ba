"""llgrad.save / llgrad.load in PyTorch's own checkpoint format, without PyTorch.

A file is what `torch.save` writes: a zip archive (records stored, not compressed, each
record's data aligned to 64 bytes) holding

    archive/data.pkl              the object, pickled with protocol 2
    archive/.format_version       "1"
    archive/.storage_alignment    "64"
    archive/byteorder             "little" (the machine's byte order)
    archive/data/<key>            the bytes of each storage, one record per storage
    archive/version               "3"
    archive/.data/serialization_id

In data.pkl a tensor is `torch._utils._rebuild_tensor_v2(storage, storage_offset, size,
stride, requires_grad, OrderedDict())`, its storage a persistent id `('storage',
torch.FloatStorage, key, 'cpu', numel)`; a Parameter is `torch._utils._rebuild_parameter(
tensor, requires_grad, OrderedDict())`. llgrad writes those names without importing torch
(so torch.load, `weights_only=True` included, reads llgrad's files) and maps them back to
llgrad tensors when loading (so files torch.save wrote load without torch installed).
Tensors that share a storage share one in the file and share memory again after loading;
strides and storage offsets are kept.

Loading is safe by default (`weights_only=True`, as in PyTorch 2.6 and later): a restricted
unpickler accepts only tensors, storages, Parameters, dtypes, devices, sizes, containers
(dict, list, tuple, set, OrderedDict, Counter) and plain values (numbers, strings, bytes,
None, bool), and refuses every other global with an error naming it, before anything is
called. `weights_only=False` runs the full pickle machinery: it can execute arbitrary code
and must only be used on files from a trusted source. `add_safe_globals` / `safe_globals`
allow more classes and functions, as in PyTorch.

Modules: torch_names (PyTorch's names and dtype tables), writer (save), reader (load),
torch_globals (what those names load as), unpickler (the restricted and the full
unpickler), allowlist (the user's safe globals)."""
from .allowlist import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals
from .reader import get_unsafe_globals_in_checkpoint, load
from .writer import DEFAULT_PROTOCOL, save

__all__ = ["save", "load", "add_safe_globals", "safe_globals", "get_safe_globals",
           "clear_safe_globals", "get_unsafe_globals_in_checkpoint", "DEFAULT_PROTOCOL",
           "SourceChangeWarning"]


class SourceChangeWarning(Warning):
    """torch.serialization.SourceChangeWarning (a pickled module's source changed since it
    was saved); programs name it to filter it."""
