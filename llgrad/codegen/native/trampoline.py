"""A native trampoline: the cheap way for Python to call a kernel's entry point.

A ctypes call of `void entry(void *ptrs)` converts its argument through the function's
argtypes, saves and restores errno and goes through CFuncPtr's generic call path: 0.3-0.5
us a call here, against under 0.1 us for a builtin function, on a compiled call that can
take 5 us in all. So a kernel is called through a builtin instead: one small LLVM module
per process (built on first need) holds

    PyObject *llgrad_trampoline(PyObject *self, PyObject *arg)    -- METH_O
        fn = PyLong_AsVoidPtr(self); ctx = PyLong_AsVoidPtr(arg)
        (either NULL: return NULL with an exception set)
        save = PyEval_SaveThread()
        llgrad_active_threads += 1; fn(ctx); llgrad_active_threads -= 1    (atomic)
        PyEval_RestoreThread(save)
        Py_IncRef(Py_None); return Py_None

and `caller(address)` makes a builtin of it (PyCFunction_NewEx) whose `self` is the entry's
address, so `caller(address)(ctx_address)` does what `CFUNCTYPE(None, c_void_p)(address)`
did, the GIL released around the native call exactly as ctypes releases it (kernels run for
milliseconds and start threads of their own). It counts the caller in and out of the
threads running llgrad code (native/cpus.py), which the thread pool reads to keep them
within the CPUs; a builtin holds what its address holds (jit.CodeAddress: the code's
Compiled), so the code it calls stays loaded for as long as the builtin lives.

The module calls the C API through symbols of its own, each given this process's address
with add_symbol before the code is linked, so its object file holds no address and goes to
the disk cache like a kernel's: building it (at -O0) takes ~7 ms, loading it ~1.5 ms, once
per process. Anything failing while it is built
or self-tested (an unusual Python build) leaves `caller` returning None, and kernels keep
the ctypes call; LLGRAD_TRAMPOLINE=0 forces that too."""
import copy
import ctypes
import os
import sys
import threading
import time

from llvmlite import ir

from . import cpus, jit, keys

METH_O = 0x0008
_NAME = "llgrad_trampoline"
_PROBE = "llgrad_trampoline_probe"
_PREFIX = "llgrad_tramp."      # our names for C-API symbols (no clash with anyone's)
_API = {  # name: (return type, argument types), in LLVM terms
    "PyLong_AsVoidPtr": ("ptr", ["ptr"]),
    "PyEval_SaveThread": ("ptr", []),
    "PyEval_RestoreThread": ("void", ["ptr"]),
    "Py_IncRef": ("void", ["ptr"]),
    "PyErr_Occurred": ("ptr", []),
    "PyErr_SetString": ("void", ["ptr", "ptr"]),
    "PyGILState_Check": ("i32", []),       # (the probe's: is the GIL held in the call?)
}
_MESSAGE = b"llgrad trampoline: a null function or context address\0"

_lock = threading.Lock()
_state = None           # the built _Trampoline, or False once building it failed
build_seconds = None    # how long building it took (start-up cost, for reports)
failure = None          # why building it failed ("Type: message"), when it did
origin = None           # "built" or "disk cache": where its code came from


class _MethodDef(ctypes.Structure):
    """CPython's PyMethodDef (stable layout in every supported version)."""
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


class _Address(int):
    """A builtin's `self`: the entry's address (an int, for PyLong_AsVoidPtr) that also
    keeps the trampoline alive (its `owner`), since the builtin points at its PyMethodDef
    and its code: a builtin outlives `_reset()` safely."""


def _lltype(name):
    return {"ptr": ir.PointerType(), "void": ir.VoidType(), "i32": ir.IntType(32)}[name]


def _callee(value, fnty):
    """`value` (an opaque ptr) as something llvmlite will call with type fnty: a copy of
    it typed as a pointer to fnty, only ever printed as its name (`call void %.4(...)`);
    the value itself stays `ptr` where it is defined and compared (llvmlite would print a
    typed pointer as `void (ptr)*`, which LLVM only still parses for compatibility)."""
    fn = copy.copy(value)
    fn.type = ir.PointerType(fnty)
    return fn


def _module():
    """The trampoline and its probe as llvmlite IR. The probe, a stand-in kernel for the
    self-test: `void probe(int64 *p) { p[0] += 1; p[1] = PyGILState_Check(); }`."""
    mod = jit.new_module("llgrad_trampoline")
    ptr = ir.PointerType()
    api = {}
    for name, (ret, args) in _API.items():
        fty = ir.FunctionType(_lltype(ret), [_lltype(a) for a in args])
        api[name] = ir.Function(mod, fty, name=_PREFIX + name)
    none = ir.GlobalVariable(mod, ir.IntType(8), _PREFIX + "_Py_NoneStruct")
    exc_slot = ir.GlobalVariable(mod, ptr, _PREFIX + "PyExc_ValueError")
    none.type = exc_slot.type = ptr     # (llvmlite types a global's address: print `ptr`)
    msg_ty = ir.ArrayType(ir.IntType(8), len(_MESSAGE))
    msg = ir.GlobalVariable(mod, msg_ty, "llgrad_tramp_message")
    msg.global_constant, msg.linkage = True, "private"
    msg.initializer = ir.Constant(msg_ty, bytearray(_MESSAGE))
    msg.type = ptr

    fn = ir.Function(mod, ir.FunctionType(ptr, [ptr, ptr]), name=_NAME)
    self_, arg = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    target = b.call(api["PyLong_AsVoidPtr"], [self_])
    ctx = b.call(api["PyLong_AsVoidPtr"], [arg])
    null = ir.Constant(ptr, None)
    bad = b.or_(b.icmp_unsigned("==", target, null), b.icmp_unsigned("==", ctx, null))
    go, fail = fn.append_basic_block("go"), fn.append_basic_block("fail")
    b.cbranch(bad, fail, go)
    b.position_at_end(go)
    save = b.call(api["PyEval_SaveThread"], [])
    active, _ = cpus.declare(mod)
    one = ir.Constant(ir.IntType(64), 1)
    b.atomic_rmw("add", active, one, "monotonic")
    b.call(_callee(target, ir.FunctionType(ir.VoidType(), [ptr])), [ctx])   # the kernel
    b.atomic_rmw("sub", active, one, "monotonic")
    b.call(api["PyEval_RestoreThread"], [save])
    b.call(api["Py_IncRef"], [none])
    b.ret(none)
    b.position_at_end(fail)    # (a non-int sets TypeError; a zero sets nothing: say so)
    set_already, set_now = fn.append_basic_block("raised"), fn.append_basic_block("raise")
    b.cbranch(b.icmp_unsigned("==", b.call(api["PyErr_Occurred"], []), null),
              set_now, set_already)
    b.position_at_end(set_now)
    b.call(api["PyErr_SetString"], [b.load(exc_slot, typ=ptr), msg])
    b.branch(set_already)
    b.position_at_end(set_already)
    b.ret(null)

    probe = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ptr]), name=_PROBE)
    b = ir.IRBuilder(probe.append_basic_block("entry"))
    i64 = ir.IntType(64)
    count, held = probe.args[0], b.gep(probe.args[0], [ir.Constant(i64, 1)], source_etype=i64)
    b.store(b.add(b.load(count, typ=i64), ir.Constant(i64, 1)), count)
    b.store(b.sext(b.call(api["PyGILState_Check"], []), i64), held)
    b.ret_void()
    return mod


def _function_maker():
    """(PyMethodDef address, self) -> a new builtin, through the C API. (Prototypes of our
    own: setting argtypes on ctypes.pythonapi's shared functions would change them for
    everyone else in the process.)"""
    api, obj, ptr = ctypes.pythonapi, ctypes.py_object, ctypes.c_void_p
    try:
        new = ctypes.PYFUNCTYPE(obj, ptr, obj, ptr)(("PyCFunction_NewEx", api))
        return lambda method, self: new(method, self, None)
    except AttributeError:      # (a build exporting only the 3.9+ name, with a class arg)
        new = ctypes.PYFUNCTYPE(obj, ptr, obj, ptr, ptr)(("PyCMethod_New", api))
        return lambda method, self: new(method, self, None, None)


class _Trampoline:
    """The compiled module, its PyMethodDef, and the maker of builtins over it."""

    def __init__(self, compiled):
        self.compiled = compiled        # (keeps its engine, so the code, alive)
        self.method = _MethodDef(b"llgrad_kernel", compiled.address(_NAME), METH_O,
                                 b"kernel(context address): run the native kernel")
        self._new = _function_maker()

    def caller(self, address):
        me = _Address(address)
        me.owner = self
        me.code = getattr(address, "code", None)    # (keeps the entry's code loaded)
        return self._new(ctypes.addressof(self.method), me)

    def self_test(self):
        """Call the probe through a builtin: it must run once, without the GIL, and return
        None; a null context must raise ValueError (and run nothing)."""
        words = (ctypes.c_int64 * 2)(41, -1)
        probe = self.caller(self.compiled.address(_PROBE))
        if probe(ctypes.addressof(words)) is not None or list(words) != [42, 0]:
            raise RuntimeError(f"llgrad trampoline: the probe gave {list(words)}, "
                               "not [42, 0] (ran once, GIL released)")
        try:
            probe(0)
        except ValueError:
            return
        raise RuntimeError("llgrad trampoline: a null context did not raise")


def _build():
    api = ctypes.pythonapi
    for name in _API:
        jit.add_symbol(_PREFIX + name, ctypes.cast(getattr(api, name), ctypes.c_void_p).value)
    jit.add_symbol(_PREFIX + "_Py_NoneStruct", id(None))       # (CPython: id is the address)
    jit.add_symbol(_PREFIX + "PyExc_ValueError",
                   ctypes.addressof(ctypes.c_void_p.in_dll(api, "PyExc_ValueError")))
    key = keys.key_for("llgrad trampoline", "python %d.%d" % sys.version_info[:2])
    global origin
    compiled = jit.load_private(key, [_NAME, _PROBE])
    origin = "disk cache"
    if compiled is None:
        compiled, origin = jit.compile_private(_module(), [_NAME, _PROBE], key=key), "built"
    tramp = _Trampoline(compiled)
    tramp.self_test()
    return tramp


def enabled():
    """Whether kernels are called through the trampoline (LLGRAD_TRAMPOLINE=0: never)."""
    return os.environ.get("LLGRAD_TRAMPOLINE", "1") != "0" and _get() is not None


def _get():
    global _state, build_seconds, failure
    if _state is None:
        with _lock:
            if _state is None:
                t0 = time.perf_counter()
                try:
                    _state = _build()
                except Exception as e:      # noqa: BLE001 (any failure: keep ctypes calls)
                    failure, _state = f"{type(e).__name__}: {e}", False
                build_seconds = time.perf_counter() - t0
    return _state or None


def caller(address):
    """A builtin `f` such that `f(ctx_address)` calls `void entry(void *ctx)` at `address`
    with the GIL released and returns None; None when the trampoline is off or could not
    be built (then call the entry through ctypes)."""
    if os.environ.get("LLGRAD_TRAMPOLINE", "1") == "0":
        return None
    tramp = _get()
    return None if tramp is None else tramp.caller(address)


def _reset():
    """Forget the trampoline (the next caller() builds a new one; builtins made before
    keep theirs alive)."""
    global _state, build_seconds, failure, origin
    with _lock:
        _state = build_seconds = failure = origin = None


def _after_fork_in_child():
    _lock._at_fork_reinit()         # (a thread of the parent may have been building it)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
