"""The two unpicklers of llgrad.load. The restricted one (weights_only=True) resolves
globals only from the default table and the user's allowlist, calls and builds only
allowed objects, and refuses protocol 0/1 instances and extension codes; its errors carry
PyTorch's wording. The full one (weights_only=False) resolves any global, mapping PyTorch's
names to llgrad's first."""
import _compat_pickle
import pickle
from collections import Counter, OrderedDict

from ..runtime import dtypes
from ..runtime.tensor import Tensor
from .allowlist import user_globals
from .torch_globals import _set_state
from .torch_names import _OtherDtype, _StorageType


_UNSAFE_MESSAGE = (
    "Re-running `llgrad.load` with `weights_only` set to `False` will likely succeed, but it "
    "can result in arbitrary code execution. Do it only if you got the file from a trusted "
    "source.")
_DOCS = ("\n\nCheck the documentation of llgrad.load (help(llgrad.load)) to learn more about "
         "types accepted by default with weights_only.")


class _WeightsOnlyError(pickle.UnpicklingError):
    pass


def _fix_name(module, name, proto):
    if proto < 3:         # Python 2 names (as pickle's fix_imports)
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
    return module, name


class _SafeUnpickler(pickle._Unpickler):
    """A restricted unpickler (the pure-Python one, whose opcodes can be overridden):
    globals only from the allowlist; reduce / newobj / build only on allowed objects;
    persistent ids only storages of the archive."""
    dispatch = pickle._Unpickler.dispatch.copy()

    def __init__(self, file, loader, allowed, **kwargs):
        super().__init__(file, **kwargs)
        self._loader = loader
        self._allowed = allowed
        self._user = user_globals()
        self._callables = {id(v) for k, v in allowed.items() if k != "torch.Tensor"} | \
            {id(v) for v in self._user.values()}

    def persistent_load(self, pid):
        return self._loader.persistent_load(pid)

    def find_class(self, module, name):
        module, name = _fix_name(module, name, self.proto)
        full = f"{module}.{name}"
        if full in self._allowed:
            return self._allowed[full]
        if full in self._user:
            return self._user[full]
        shown = full
        if shown.startswith("builtins."):
            shown = shown[len("builtins."):]
        raise _WeightsOnlyError(
            f"Unsupported global: GLOBAL {shown} was not an allowed global by default. Please "
            f"use `llgrad.serialization.add_safe_globals([{name}])` or the "
            f"`llgrad.serialization.safe_globals([{name}])` context manager to allowlist this "
            "global if you trust this class/function.")

    def _check_callable(self, func, what):
        if id(func) not in self._callables or isinstance(func, (_StorageType, _OtherDtype)) \
                or isinstance(func, dtypes.dtype):
            raise _WeightsOnlyError(f"Trying to call {what} for unrecognized function {func!r}")

    def _load_reduce(self):
        stack = self.stack
        args = stack.pop()
        func = stack[-1]
        self._check_callable(func, "reduce")
        if not isinstance(args, tuple):
            raise _WeightsOnlyError("reduce arguments must be a tuple")
        stack[-1] = func(*args)

    def _load_newobj(self):
        args = self.stack.pop()
        cls = self.stack.pop()
        self._check_callable(cls, "new object")
        if not isinstance(args, tuple):
            raise _WeightsOnlyError("NEWOBJ arguments must be a tuple")
        if cls is self._allowed["torch.nn.parameter.Parameter"]:
            self.append(cls(*args))
        elif isinstance(cls, type):
            self.append(cls.__new__(cls, *args))
        else:
            raise _WeightsOnlyError(f"Can only create new object for classes, got {cls!r}")

    def _load_newobj_ex(self):
        kwargs = self.stack.pop()
        args = self.stack.pop()
        cls = self.stack.pop()
        self._check_callable(cls, "new object")
        if not isinstance(cls, type) or not isinstance(args, tuple) or \
                not isinstance(kwargs, dict):
            raise _WeightsOnlyError(f"Can only create new object for classes, got {cls!r}")
        self.append(cls.__new__(cls, *args, **kwargs))

    def _load_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        t = type(inst)
        if isinstance(inst, Tensor):
            _set_state(inst, state)
        elif t is OrderedDict or t is Counter:
            if state:
                if not isinstance(state, dict):
                    raise _WeightsOnlyError("BUILD of an OrderedDict takes a dict")
                inst.__dict__.update(state)
        elif id(t) in {id(v) for v in self._user.values()}:
            setstate = getattr(inst, "__setstate__", None)
            if setstate is not None:
                setstate(state)
                return
            slotstate = None
            if isinstance(state, tuple) and len(state) == 2:
                state, slotstate = state
            if state:
                inst.__dict__.update(state)
            if slotstate:
                for k, v in slotstate.items():
                    setattr(inst, k, v)
        else:
            raise _WeightsOnlyError("Can only build Tensor, Parameter, OrderedDict or types "
                                    f"allowlisted via `add_safe_globals`, but got {t}")

    def _load_inst(self):
        raise _WeightsOnlyError("the INST and OBJ opcodes (pickle protocols 0 and 1 class "
                                "instances) are not allowed with weights_only")

    def _load_ext(self):
        raise _WeightsOnlyError("pickle extension codes are not allowed with weights_only")

    dispatch[pickle.REDUCE[0]] = _load_reduce
    dispatch[pickle.NEWOBJ[0]] = _load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = _load_newobj_ex
    dispatch[pickle.BUILD[0]] = _load_build
    dispatch[pickle.INST[0]] = _load_inst
    dispatch[pickle.OBJ[0]] = _load_inst
    for _op in (pickle.EXT1, pickle.EXT2, pickle.EXT4):
        dispatch[_op[0]] = _load_ext
    del _op


class _FullUnpickler(pickle.Unpickler):
    """weights_only=False: every global (PyTorch's names still map to llgrad's)."""

    def __init__(self, file, loader, allowed, **kwargs):
        super().__init__(file, **kwargs)
        self._loader, self._allowed = loader, allowed

    def persistent_load(self, pid):
        return self._loader.persistent_load(pid)

    def find_class(self, module, name):
        full = f"{module}.{name}"
        if full in self._allowed:
            return self._allowed[full]
        return super().find_class(module, name)


def _weights_only_message(message):
    if "Unsupported global" in message:
        return ("Weights only load failed. This file can still be loaded, to do so you have "
                "two options, \033[1mdo those steps only if you trust the source of the "
                "checkpoint\033[0m. "
                f"\n\t(1) {_UNSAFE_MESSAGE}\n\t(2) Alternatively, to load with "
                "`weights_only=True` please check the recommended steps in the following error "
                f"message.\n\tWeightsUnpickler error: {message}{_DOCS}")
    return f"Weights only load failed. {_UNSAFE_MESSAGE}\n\n{message}{_DOCS}"
