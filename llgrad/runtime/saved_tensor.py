"""Tensors saved for backward, with the version of their storage at save time (the check
that raises PyTorch's "modified by an inplace operation" error), the numbers PyTorch saves
as wrapped tensors, and where in the user's code an op ran (nodes and errors name it)."""
import contextlib
import copy
import copyreg
import functools
import os
import sys
import sysconfig

import numpy as np

from . import grad_mode, saved_hooks
from .dispatch_bf16 import state as bf16_state
from .dtypes import bfloat16
from .tensor import Tensor

_hooks = saved_hooks.state
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FREED = ("Trying to backward through the graph a second time (or directly access saved "
         "tensors after they have already been freed). Saved intermediate values of the graph "
         "are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if "
         "you need to backward through the graph a second time or if you need to access saved "
         "tensors after calling backward.")


class Location(tuple):
    """(filename, line) of user code; formatted only when shown (it is on the hot path)."""
    __slots__ = ()

    def __str__(self):
        return _location_text(self[0], self[1])


@functools.lru_cache(maxsize=4096)      # (a trace names each node: the same few lines)
def _location_text(filename, line):
    return f"{os.path.basename(filename)}:{line}"


_NOWHERE = Location(("?", 0))


class _Internal(dict):
    """filename -> whether it is one of llgrad's own files: a dict lookup per frame on the
    walk up the stack, not a str.startswith call (it runs for every recorded node)."""
    __slots__ = ()

    def __missing__(self, filename):
        # (normalised: llgrad imported through a path with `..` names its frames so)
        internal = self[filename] = os.path.abspath(filename).startswith(_PKG_DIR + os.sep) \
            or filename in _PLUMBING
        return internal


# the standard library's copying, between the user's copy.deepcopy(t) and the tensor, and
# its context managers, between the user's `with` and what its __enter__ / __exit__ run
_PLUMBING = frozenset(m.__file__ for m in (copy, copyreg, contextlib))


_internal = _Internal()


def user_location():
    """The innermost frame outside llgrad: the user's code that caused the op."""
    f = sys._getframe(2)        # our caller is inside llgrad: start above it
    internal = _internal
    while f is not None and internal[f.f_code.co_filename]:
        f = f.f_back
    return Location((f.f_code.co_filename, f.f_lineno)) if f is not None else _NOWHERE


def user_position():
    """user_location as (code, instruction offset), made into "file.py:line" by where_str
    only when shown. The dispatcher takes one for every node that saves tensors (for the
    in-place error), and only an error shows it: the line number (a scan of the code's line
    table) and the Location object would cost more than the walk up the stack."""
    f = sys._getframe(2)
    internal = _internal
    while f is not None and internal[f.f_code.co_filename]:
        f = f.f_back
    return (f.f_code, f.f_lasti) if f is not None else _NOWHERE


@functools.lru_cache(maxsize=1024)
def users_file(filename):
    """Whether code from filename is the user's, not the standard library's or an installed
    package's (whose objects the walk meets too: a logger, a progress bar). The standard
    library's frozen modules ("<frozen os>", "<frozen importlib._bootstrap>") are not."""
    if filename.startswith("<frozen "):
        return False
    path = os.path.realpath(filename)
    return not any(path.startswith(d + os.sep) for d in library_dirs())


@functools.lru_cache(maxsize=1)
def library_dirs():
    paths = sysconfig.get_paths()
    return tuple({os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib", "purelib",
                                                         "platlib") if k in paths})


def where_str(where):
    """A node's or a storage's recorded place as text: a user_position pair, a Location, or
    the text a tracer gave."""
    if type(where) is tuple:
        code, lasti = where
        line = code.co_firstlineno
        for start, end, ln in code.co_lines():     # (what frame.f_lineno computes)
            if start <= lasti < end:
                line = ln
                break
        return f"{os.path.basename(code.co_filename)}:{line}"
    return str(where)


def _short_name(node):
    """A node's name as PyTorch's version-counter error gives it: Exp for ExpBackward0,
    Sum1 for SumBackward1, torch::autograd::CopySlices."""
    name = type(node).__name__
    if name == "CopySlices":
        return "torch::autograd::CopySlices"
    head, sep, tail = name.rpartition("Backward")
    if not sep or not (tail == "" or tail.isdigit()):
        return name
    return head + ("" if tail in ("", "0") else tail)


def tensor_type_str(t):
    # (PyTorch names only the legacy tensor types so: a bool tensor is CPUBoolType)
    name = "CPUBoolType" if t._dtype._tensor_type == "BoolTensor" else \
        f"llgrad.{t._dtype._tensor_type}"
    return f"[{name} [{', '.join(map(str, t._data.shape))}]]"


class SavedNumber:
    """A Python number an op saved where PyTorch wraps it into a tensor (x * 2: other is a
    wrapped number, MulBackward0._saved_other is tensor(2)): freed with the rest of the
    graph as PyTorch's saved variable is (node.py), so a second backward through the node
    raises there as in PyTorch instead of computing again. VJP rules read the number."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def wrapped(self):
        """The 0-d tensor PyTorch shows for it (int64, float64, bool or complex128)."""
        v = self.value
        dt = np.bool_ if isinstance(v, bool) else np.int64 if isinstance(v, int) else \
            np.complex128 if isinstance(v, complex) else np.float64
        return Tensor._from_array(np.array(v, dtype=dt))


# forward AD (llgrad/autograd/forward_ad.py installs it): an op's output saved with its
# tangent, as (data, storage, tangent, level), unpacks through it as a dual tensor
unpack_dual_output = None

# while llgrad.compile traces a backward: the ids of the saved tensors it unpacked (eager's
# rules unpack only what they read: x * 2 saves x but never reads it), else None
unpacked = None


class SavedTensor:
    """A tensor saved for backward, with the version of its storage at save time. An op's
    own output is kept as a detached alias (no reference cycle) and re-attached to the
    node when unpacked."""
    __slots__ = ("tensor", "version", "is_output", "output_nr", "had_history")

    def __init__(self, t, is_output=False, output_nr=0):
        if t._inference:
            raise RuntimeError("Inference tensors cannot be saved for backward. Please do not "
                               "use Tensors created in inference mode in computation tracked "
                               "by autograd. To work around this, you can make a clone to get "
                               "a normal tensor and use it in autograd, or use "
                               "`torch.no_grad()` instead of `torch.inference_mode()`.")
        self.is_output = is_output
        self.output_nr = output_nr
        # (an input with a grad_fn: detach_() on it later makes unpack raise, as PyTorch's)
        self.had_history = not is_output and t._grad_fn is not None
        if _hooks.stack:
            self._pack(t)
            return
        self.version = t._storage.version
        # an output is kept as (data, storage): no tensor object, no reference cycle
        self.tensor = (t._data, t._storage) if is_output else t

    def _pack(self, t, hooks=None):
        """Keep pack_hook(t) (saved_tensors_hooks, or the pair `hooks` given) and where t's
        gradient goes, in place of t. The hook runs with grad mode off and must not write t;
        the unpacked value has no version to check (PyTorch's saved variable with hooks
        neither)."""
        pack, unpack = hooks or saved_hooks.state.stack[-1]
        version, grads = t._storage.version, grad_mode.state
        prev, grads.grad_enabled = grads.grad_enabled, False
        try:
            packed = pack(t)
        finally:
            grads.grad_enabled = prev
        if t._storage.version != version:
            raise RuntimeError(
                "A saved tensor pack hook is modifying its input in place. Tensors provided as "
                "input to pack hook cannot be modified by in-place operations as this can lead "
                "to unexpected side-effects. Please open an issue if you need to perform "
                "in-place operations on the input to a pack hook.")
        if self.is_output or not t._requires_grad:
            edge = None
        elif t._base is None and t._grad_fn is None:
            edge = (None, t)        # a leaf: its AccumulateGrad, when unpacked
        else:                       # (a view's grad_fn may be regenerated: node.gradient_edge)
            edge = (t._grad_fn if t._base is None else t.grad_fn, t._output_nr)
        self.version = None
        self.tensor = _Packed(packed, unpack, edge)

    def _unpack_hooked(self, packed, node):
        # (the user's hook runs as eager code: a checkpoint's recomputed bfloat16 ops round,
        # though a bfloat16 node's rule, running in float32, reads the tensor)
        depth, bf16_state.unrounded = bf16_state.unrounded, 0
        try:
            t = packed.unpack_hook(packed.value)
        finally:
            bf16_state.unrounded = depth
        if not isinstance(t, Tensor):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but got "
                            f"result of type {type(t).__name__}")
        edge = packed.edge
        if not self.is_output and edge is None:
            return t
        # the unpacked value stands where the saved tensor stood in the graph: a double
        # backward through it reaches what the saved tensor's gradient reached
        out = Tensor._from_array(t._data, t._storage)
        if self.is_output:
            if out._dtype._cat >= 2:
                out._grad_fn, out._output_nr, out._requires_grad = node, self.output_nr, True
        elif edge[0] is None:
            acc = edge[1]._acc      # (made when the op's node took its edge to the leaf)
            if acc is None:
                return t
            out._acc, out._requires_grad = acc, True
        else:
            out._grad_fn, out._output_nr, out._requires_grad = edge[0], edge[1], True
        return out

    def unpack(self, node):
        t = self.tensor
        if unpacked is not None:
            unpacked.add(id(self))
        if t is None:
            raise RuntimeError(FREED)
        if type(t) is _Packed:
            return self._unpack_hooked(t, node)
        if self.is_output:
            t = Tensor._from_array(t[0], t[1]) if len(t) == 2 else unpack_dual_output(t)
        elif self.had_history and t._grad_fn is None and t._base is None:
            raise RuntimeError("Trying to use a saved tensor that has been detached in-place, "
                               "i.e. with .detach_().This is not supported, please use "
                               "out-of-place `.detach()` instead")     # (PyTorch's words)
        if t._storage.version != self.version:
            # (PyTorch names the node that made the saved output, or the saved input's
            # grad_fn now, in its own short form: Exp for ExpBackward0)
            fn = node if self.is_output else t.grad_fn
            out = (f", which is output {self.output_nr if self.is_output else t._output_nr} of "
                   f"{_short_name(fn)}," if fn is not None else "")
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: {tensor_type_str(t)}{out} is at version "
                f"{t._storage.version}; expected version {self.version} instead. Hint: the "
                f"tensor was saved for backward by {type(node).__name__} at "
                f"{where_str(getattr(node, '_where', '?'))}"
                + (f" and modified in place at {where_str(t._storage.write_loc)}."
                   if t._storage.write_loc is not None else
                   "; an in-place operation changed it after that."))
        if self.is_output and t._dtype._cat >= 2:     # (an integer output has no history:
            t._grad_fn = node                           # max's indices, as record leaves it)
            t._output_nr = self.output_nr
            t._requires_grad = True
        return t


class _Packed:
    """What a pack hook returned, the unpack hook to apply to it, and the saved tensor's
    gradient edge (node, output_nr), or None."""
    __slots__ = ("value", "unpack_hook", "edge")

    def __init__(self, value, unpack_hook, edge):
        self.value, self.unpack_hook, self.edge = value, unpack_hook, edge


class RawSavedTensor:
    """grad_fn._raw_saved_<name>: the saved value itself (torch._C._autograd.SavedTensor),
    whose register_hooks(pack_hook, unpack_hook) packs it now and unpacks it at each read,
    as saved_tensors_hooks would have when it was saved."""
    __slots__ = ("node", "key")

    def __init__(self, node, key):
        self.node, self.key = node, key

    def _saved(self):
        v = self.node._saved.get(self.key)
        if isinstance(v, SavedTensor) or v is None:
            return v
        if isinstance(v, (SavedNumber, list)):
            raise TypeError(f"_raw_saved_{self.key} is not a single saved tensor")
        raise RuntimeError(  # (the node's marker of a freed slot)
            "Calling register_hooks on a saved tensor after it has been freed. "
            + FREED[FREED.index("Saved intermediate"):].replace("saved tensors", "saved variables"))

    def register_hooks(self, pack_hook, unpack_hook):
        """Pack the saved tensor with pack_hook now; unpack_hook(packed) is what backward reads."""
        if not (callable(pack_hook) and callable(unpack_hook)):
            raise TypeError("register_hooks(): incompatible function arguments: pack_hook and "
                            "unpack_hook must be callables")
        saved = self._saved()
        if saved is None:
            raise RuntimeError("Calling register_hooks on a saved tensor with value None is "
                               "forbidden")
        if type(saved.tensor) is _Packed:
            raise RuntimeError("Calling register_hooks on a saved tensor whose hooks have already "
                               "been set. Hint: only one pair of hooks is allowed at a time.")
        saved._pack(saved.unpack(self.node), (pack_hook, unpack_hook))

    def unpack(self):
        """The saved tensor, as grad_fn._saved_<name> reads it."""
        saved = self._saved()
        return None if saved is None else saved.unpack(self.node)


# (PyTorch's class is torch._C._autograd.SavedTensor: type(...).__name__ as a user prints it)
RawSavedTensor.__name__ = RawSavedTensor.__qualname__ = "SavedTensor"


class RawSavedField:
    """The descriptor of a node's `_raw_saved_<key>` (node.define_fields)."""
    __slots__ = ("key",)

    def __init__(self, key):
        self.key = key

    def __get__(self, node, cls=None):
        return self if node is None else RawSavedTensor(node, self.key)


FREED_SLOT = object()        # what a released saved slot holds (OpNode.release)
_MISSING = object()


class SavedField:
    """OpNode's `name` and `_saved_<name>`: what the node saved under that name (unpacked; a
    SavedNumber as PyTorch's 0-d tensor in _saved_<name>), else its attribute, else raise."""
    __slots__ = ("key", "public")

    def __init__(self, key, public=False):
        self.key, self.public = key, public

    def __get__(self, node, cls=None):
        if node is None:
            return self
        v = node._saved.get(self.key, _MISSING)
        if v is _MISSING:
            try:
                return node.attrs[self.key]
            except KeyError:
                raise AttributeError(f"'{type(node).__name__}' object has no attribute "
                                     f"'{self.key}'") from None
        if v is FREED_SLOT:
            raise RuntimeError(FREED)
        if type(v) is SavedTensor:     # (in_float32 inlined: every VJP rule's read)
            t = v.unpack(node)
            return t if t._dtype is not bfloat16 or not bf16_state.unrounded else t.float()
        if isinstance(v, SavedTensor):
            return in_float32(v.unpack(node))
        if isinstance(v, SavedNumber):
            return v.wrapped() if self.public else v.value
        if isinstance(v, list):
            return [in_float32(s.unpack(node)) if isinstance(s, SavedTensor) else s for s in v]
        return v


def in_float32(t):
    """A saved tensor as a VJP rule reads it: a bfloat16 one as float32 while its node's rule
    runs in float32 (dispatch_bf16.vjp_in_float32), so that the rule's ops see one dtype."""
    if isinstance(t, Tensor) and t._dtype is bfloat16 and bf16_state.unrounded:
        return t.float()
    return t
