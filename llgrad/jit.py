"""llgrad.jit: torch.jit's names, without TorchScript.

llgrad does not compile TorchScript (llgrad.compile is its compiler). Here:

  script(obj)       a module comes back as a RecursiveScriptModule that runs the original's
                    Python forward and shares its parameters, buffers and submodules (a
                    shallow copy whose class is also a ScriptModule); a function as a
                    ScriptFunction calling it; a class as it is. Nothing is type-checked.
  trace(f, inputs)  runs f once on the example inputs (as PyTorch's tracing run; its
                    check_trace runs are not repeated), then returns a TopLevelTracedModule
                    (a module; parameters shared with the original) or a ScriptFunction
                    that calls f: later calls run the Python code, so data-dependent control
                    flow is NOT frozen to the traced path as in PyTorch.
  trace_module      trace of a module's forward (other methods are left as they are).
  freeze            a ScriptModule in eval mode back as a ScriptModule (parameters stay
                    parameters: nothing is inlined as constants).
  save / load       llgrad.save / llgrad.load of the object itself (pickled: its class must
                    be importable); a TorchScript archive written by torch.jit.save cannot
                    be loaded, and an object pickle cannot store raises NotImplementedError.
  .code / .graph    NotImplementedError (there is no TorchScript IR; llgrad.compile's
                    dump() shows llgrad's).
  ignore / unused / export / interface / annotate / Final / is_scripting (always False) /
  is_tracing (True only during trace's run) behave as in eager PyTorch."""
import builtins
import copy
import functools
import os
import pickle
import typing
import warnings
import zipfile

from .nn.module import Module
from .serialization import load as _load, save as _save

Final = typing.Final

__all__ = ["Attribute", "Error", "Future", "ScriptFunction", "ScriptModule", "annotate",
           "export", "fork", "freeze", "interface", "ignore", "isinstance", "load",
           "optimize_for_inference", "save", "script", "script_if_tracing", "trace",
           "trace_module", "unused", "wait", "is_scripting", "is_tracing", "Final"]

_NO_TS = ("llgrad.jit does not compile TorchScript, so a {what} has no {attr}; "
          "llgrad.compile(fn).dump(*args) shows llgrad's own IR")
_state = {"tracing": 0}


def _deprecated(name, instead="`torch.compile` or `torch.export`", verb="switch to"):
    """PyTorch 2.13's DeprecationWarning of torch.jit.<name> (from this module, as PyTorch's
    is from its own: hidden by Python's default filters)."""
    tail = " instead" if verb == "use" else ""
    warnings.warn(f"`torch.jit.{name}` is deprecated. Please {verb} {instead}{tail}.",
                  DeprecationWarning)


class Error(RuntimeError):
    """torch.jit.Error."""


def _no_torchscript(attr):
    def get(self):
        raise NotImplementedError(_NO_TS.format(what=type(self).__name__, attr=attr))
    return property(get)


class ScriptModule(Module):
    """torch.jit.ScriptModule: here a module running its original class's Python code."""
    code = _no_torchscript("code")
    graph = _no_torchscript("graph")
    inlined_graph = _no_torchscript("inlined_graph")
    code_with_constants = _no_torchscript("code_with_constants")

    @property
    def original_name(self):
        return getattr(type(self), "_llgrad_original", type(self)).__name__

    def save(self, f, _extra_files=None):
        """As llgrad.jit.save(self, f)."""
        save(self, f, _extra_files)

    def __reduce_ex__(self, protocol):
        orig = getattr(type(self), "_llgrad_original", None)
        if orig is None:
            return super().__reduce_ex__(protocol)
        return (_rebuild, (type(self)._llgrad_kind, orig), self.__dict__.copy())


class RecursiveScriptModule(ScriptModule):
    """What script(module) returns."""


class TracedModule(ScriptModule):
    """What trace(module) returns (as TopLevelTracedModule)."""


class TopLevelTracedModule(TracedModule):
    pass


_KINDS = {c.__name__: c for c in (RecursiveScriptModule, TopLevelTracedModule)}
_classes = {}


def _script_class(kind, cls):
    """The class that is both `kind` and cls (made once per pair)."""
    sub = _classes.get((kind, cls))
    if sub is None:
        sub = _classes[(kind, cls)] = type(kind.__name__, (kind, cls), {
            "__module__": __name__, "_llgrad_original": cls, "_llgrad_kind": kind.__name__,
            "__qualname__": kind.__name__})
    return sub


def _rebuild(kind_name, cls):
    obj = cls.__new__(cls)
    object.__setattr__(obj, "__class__", _script_class(_KINDS[kind_name], cls))
    return obj


def _as_script_module(module, kind):
    out = copy.copy(module)         # (a shallow copy: parameters, buffers, submodules shared)
    object.__setattr__(out, "__class__", _script_class(
        kind, getattr(type(module), "_llgrad_original", type(module))))
    return out


class ScriptFunction:
    """torch.jit.ScriptFunction: here a callable running the Python function."""
    code = _no_torchscript("code")
    graph = _no_torchscript("graph")
    inlined_graph = _no_torchscript("inlined_graph")

    def __init__(self, fn):
        self._fn = fn
        self.name = getattr(fn, "__name__", type(fn).__name__)
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def save(self, f, _extra_files=None):
        save(self, f, _extra_files)

    def __repr__(self):
        return f"<llgrad.jit.ScriptFunction {self.name}>"


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """torch.jit.script: a module as a RecursiveScriptModule sharing its parameters, a
    function as a ScriptFunction, a class (or anything else callable) as it is."""
    _deprecated("script")
    if builtins.isinstance(obj, (ScriptModule, ScriptFunction)):
        return obj
    if builtins.isinstance(obj, Module):
        return _as_script_module(obj, RecursiveScriptModule)
    if builtins.isinstance(obj, type):
        return obj
    if callable(obj):
        return ScriptFunction(obj)
    raise RuntimeError(f"llgrad.jit.script: cannot script a {type(obj).__name__}")


def _run_example(fn, example_inputs, example_kwarg_inputs):
    if example_inputs is None and example_kwarg_inputs is None:
        raise RuntimeError("example_kwarg_inputs or example_inputs must be provided")
    args = example_inputs if builtins.isinstance(example_inputs, tuple) else \
        (() if example_inputs is None else (example_inputs,))
    _state["tracing"] += 1
    try:
        return fn(*args, **(example_kwarg_inputs or {}))
    finally:
        _state["tracing"] -= 1


def trace(func, example_inputs=None, optimize=None, check_trace=True, check_inputs=None,
          check_tolerance=1e-5, strict=True, _force_outplace=False, _module_class=None,
          _compilation_unit=None, example_kwarg_inputs=None, _store_inputs=True):
    """torch.jit.trace: func is run once on the example inputs; a module comes back as a
    TopLevelTracedModule sharing its parameters, a function as a ScriptFunction. Later
    calls run the Python code (not a recorded graph)."""
    _deprecated("trace")
    if builtins.isinstance(func, (ScriptModule, ScriptFunction)):
        warnings.warn("The input to trace is already a ScriptModule, tracing it is a no-op. "
                      "Returning the object as is.", stacklevel=2)
        return func
    if builtins.isinstance(func, Module):       # (PyTorch traces it by trace_module, again
        for _ in range(2 if check_trace else 1):     # to check the trace)
            _deprecated("trace_method")
    _run_example(func, example_inputs, example_kwarg_inputs)
    if builtins.isinstance(func, Module):
        return _as_script_module(func, TopLevelTracedModule)
    return ScriptFunction(func)


def trace_module(mod, inputs, optimize=None, check_trace=True, check_inputs=None,
                 check_tolerance=1e-5, strict=True, _force_outplace=False,
                 _module_class=None, _compilation_unit=None, example_inputs_is_kwarg=False,
                 _store_inputs=True):
    """torch.jit.trace_module: each method named in inputs ({'forward': example}) is run
    once on its example; the module comes back as a TopLevelTracedModule."""
    _deprecated("trace_method")
    if not builtins.isinstance(mod, Module):
        raise AttributeError("expected torch.nn.Module as the first argument")
    if not builtins.isinstance(inputs, dict):
        raise AttributeError("expected a dictionary of (method_name, input) pairs")
    for name, example in inputs.items():
        method = getattr(mod, name)
        if example_inputs_is_kwarg:
            _run_example(method, None, example)
        else:
            _run_example(method, example, None)
    return _as_script_module(mod, TopLevelTracedModule)


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    """torch.jit.freeze: a ScriptModule in eval mode, returned as a new ScriptModule (its
    parameters stay shared parameters)."""
    _deprecated("freeze", "`torch.compile`", "use")
    if not builtins.isinstance(mod, ScriptModule):
        raise RuntimeError("Freezing expects a ScriptModule as input. Please use "
                           "torch.jit.script or torch.jit.trace to script your 'nn.Module'.")
    if mod.training:
        raise RuntimeError("Freezing is currently only implemented for modules in eval mode. "
                           "Please call .eval() on your module before freezing.")
    return _as_script_module(mod, RecursiveScriptModule)


def optimize_for_inference(mod, other_methods=None):
    """torch.jit.optimize_for_inference: freeze (a module is scripted and put in eval
    mode first); nothing is rewritten."""
    _deprecated("optimize_for_inference", "`torch.compile`", "use")
    if not builtins.isinstance(mod, ScriptModule):
        mod = script(mod)
    return freeze(mod.eval())


_JIT_KEY = "llgrad.jit"


def save(m, f, _extra_files=None):
    """torch.jit.save: llgrad.save of the object itself (not TorchScript's archive), with
    _extra_files ({name: contents}) stored beside it."""
    _deprecated("save", "`torch.export`")
    try:
        _save({_JIT_KEY: m, "extra_files": dict(_extra_files or {})}, f)
    except (pickle.PicklingError, AttributeError, TypeError) as e:
        raise NotImplementedError(
            f"llgrad.jit.save pickles the {type(m).__name__} with llgrad.save (TorchScript's "
            f"archive is not emulated), and this object cannot be pickled: {e}") from None


def _torchscript_archive(f):
    """Whether f (a path or a seekable file) is a TorchScript archive (torch.jit.save's)."""
    try:
        if builtins.isinstance(f, (str, os.PathLike)):
            with zipfile.ZipFile(f) as zf:
                names = zf.namelist()
        elif hasattr(f, "seek"):
            start = f.tell()
            try:
                with zipfile.ZipFile(f) as zf:
                    names = zf.namelist()
            finally:
                f.seek(start)
        else:
            return False
    except (zipfile.BadZipFile, OSError):
        return False
    return any(n.endswith("/constants.pkl") or "/code/" in n for n in names)


def load(f, map_location=None, _extra_files=None, _restore_shapes=False):
    """torch.jit.load of a file llgrad.jit.save wrote (it runs the pickle machinery: load
    only files you trust); _extra_files (a dict of names) gets the stored contents."""
    _deprecated("load", "`torch.export`")
    if _torchscript_archive(f):
        raise NotImplementedError("llgrad.jit.load: this is a TorchScript archive written by "
                                  "torch.jit.save; llgrad does not run TorchScript. Save the "
                                  "module's state_dict with torch.save and load it into the "
                                  "llgrad module instead")
    obj = _load(f, map_location=map_location, weights_only=False)
    if not builtins.isinstance(obj, dict) or _JIT_KEY not in obj:
        return obj
    if _extra_files is not None:
        for name in _extra_files:
            _extra_files[name] = obj["extra_files"].get(name, _extra_files[name])
    return obj[_JIT_KEY]


def is_scripting():
    """False: llgrad never runs code as TorchScript."""
    return False


def is_tracing():
    """True only while trace / trace_module run the example inputs."""
    return _state["tracing"] > 0


def ignore(drop=False, **kwargs):
    """torch.jit.ignore: the function is left as it is (decorator, with or without drop=)."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn):
    """torch.jit.unused: the function (or property) is left as it is."""
    return fn


def export(fn):
    """torch.jit.export: the method is left as it is."""
    return fn


def interface(obj):
    _deprecated("interface", "`torch.compile`", "use")
    return obj


def script_if_tracing(fn):
    return fn


def annotate(the_type, the_value):
    """torch.jit.annotate: the value (the type is for TorchScript only)."""
    return the_value


def Attribute(value, type):      # noqa: A002 (PyTorch's parameter name)
    """torch.jit.Attribute outside TorchScript: the value."""
    return value


def isinstance(obj, target_type):      # noqa: A001 (torch.jit.isinstance)
    """torch.jit.isinstance: builtins.isinstance, with typing's List/Dict/Tuple/Optional
    checked element by element."""
    origin = typing.get_origin(target_type)
    if origin is None:
        return builtins.isinstance(obj, target_type)
    args = typing.get_args(target_type)
    if origin is typing.Union:
        return any(isinstance(obj, a) for a in args)
    if not builtins.isinstance(obj, origin):
        return False
    if origin is list:
        return all(isinstance(x, args[0]) for x in obj)
    if origin is dict:
        return all(isinstance(k, args[0]) and isinstance(v, args[1]) for k, v in obj.items())
    if origin is tuple:
        return len(obj) == len(args) and all(isinstance(x, a) for x, a in zip(obj, args))
    return True


class Future:
    """torch.jit.Future as fork gives it: the result, computed already."""

    def __init__(self, value):
        self._value = value

    def wait(self):
        return self._value

    def done(self):
        return True


def fork(func, *args, **kwargs):
    """torch.jit.fork: func runs now (llgrad has no inter-op thread pool); wait() gives its
    result."""
    _deprecated("fork", "`torch.compile`", "use")
    return Future(func(*args, **kwargs))


def wait(future):
    _deprecated("wait", "`torch.compile`", "use")
    return future.wait()
