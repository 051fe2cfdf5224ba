"""The JIT: code generation for the host CPU, and the engines that hold the loaded code.

`compile_module(irmod, entry_names)` takes an llvmlite `ir.Module`, parses its text (into
an LLVM context of its own), verifies it, optimises it at O3 with the new pass manager
(loop and SLP vectorisation on), generates an object file and loads that. The result, a
Compiled, keeps the LLVM IR before and after optimisation (compressed) for dumps.

Going through an object file is what makes caching cheap: `lookup(key)` finds the code of
a key (keys.py) in memory or in the disk cache (cache.py), where loading it skips
optimisation and code generation. Objects are loaded by llgrad's own loader (elf.py: mapped,
relocated, made executable) where it handles them, else by MCJIT; LLVM itself is imported
only when something needs it (code generation, an MCJIT load, assembly for a dump), and the
host's description is remembered (host.py), so a process whose kernels all come from the
disk cache never loads LLVM.

Where code lives, and when it goes. An object the own loader mapped is unmapped when its
Compiled is collected. MCJIT cannot unload one object, but disposing an
engine frees all of its code, so objects are loaded into engines of at most ENGINE_OBJECTS
objects (ENGINE_BYTES bytes) each: a Compiled keeps its engine alive, and an engine none
of whose Compileds is alive is disposed with its code. A Compiled is kept by the Kernels
made from it and by every address it hands out (`address()` returns an int that holds the
Compiled: a function pointer made from it keeps the code), and by the in-memory cache
(memory_lru.py: the most recently used modules, up to LLGRAD_KERNEL_CACHE_MB).

Threads and fork. Every call into LLVM is made under one lock (`_lock`). Before os.fork the
forking thread takes it (waiting for a code generation in another thread to finish, at
most FORK_WAIT_SECONDS), so a child never inherits LLVM in the middle of a call, whose own
mutexes would stay locked in the child; the child re-initialises the lock. Were the wait
to time out, the child starts a fresh engine instead of touching the inherited one."""
import os
import threading
import weakref

from llvmlite import ir

from . import cache, disk_only, elf, host, timeline, worker, worker_main
from .mcjit import _Engine, _binding, _engines, _llvm  # noqa: F401
from .memory_lru import _cache_limit, _Memory
from .size_families import Families

_lock = threading.RLock()
_jit = None
# what the JIT did in this process (tests count these: a warm disk cache means no codegen)
stats = {"optimized": 0, "codegen": 0, "loaded": 0, "memory_hits": 0}
# how the objects were put into memory: by llgrad's loader (elf.py) or by MCJIT
loader_stats = {"own": 0, "mcjit": 0}

# objects are loaded by llgrad's own loader (elf.py) where it handles them; LLGRAD_ELF=0 (or
# another platform) loads every object with MCJIT
OWN_LOADER = os.environ.get("LLGRAD_ELF", "1") != "0" and elf.supported()
ENGINE_OBJECTS = 32             # objects per engine (~1 ms to make one: its target machine)
ENGINE_BYTES = 16 << 20
FORK_WAIT_SECONDS = 60.0

_compiled = weakref.WeakSet()   # Compileds alive
# add_symbol's symbols, for the process (as LLVM's own table, which they are given once
# LLVM is loaded: _Jit.llvm), so that a JIT made after _reset resolves them too
_symbols = {}
_llvm_told = {}


class _Jit:
    """The host (host.py: CPU, features, triple, data layout, without LLVM where it is
    remembered); LLVM's target machines, made on first need; the engine objects go into;
    the symbols given to add_symbol; the in-memory cache."""

    def __init__(self):
        info = host.describe(_llvm)
        self.cpu, self.features = info["cpu"], info["features"]
        self.vector_bits, self.llvm_version = info["vector_bits"], info["llvm_version"]
        self.triple, self.data_layout = info["triple"], info["data_layout"]
        self.symbols = _symbols
        self.engine = None              # where the next object goes (made on first need)
        self.memory = _Memory(_cache_limit())
        self.size_families = Families()     # code shared between sizes (size_params.py)
        self._tm = self._quick_tm = self._target = None

    def llvm(self):
        """llvmlite.binding, with every add_symbol so far made known to it."""
        llvm = _llvm()
        with _lock:
            for name, address in list(_symbols.items()):
                if _llvm_told.get(name) != address:
                    llvm.add_symbol(name, address)
                    _llvm_told[name] = address
        return llvm

    @property
    def target(self):
        if self._target is None:
            self._target = self.llvm().Target.from_default_triple()
        return self._target

    @property
    def tm(self):
        """The target machine of optimisation and code generation (never given to an
        engine, which owns its own)."""
        if self._tm is None:
            self._tm = self.target.create_target_machine(cpu=self.cpu, features=self.features,
                                                         opt=3, jit=True)
        return self._tm

    def quick_tm(self):
        """A target machine at -O0, made on first use: code generation of a tiny module
        takes a third of the time -O3's takes (compile_private)."""
        if self._quick_tm is None:
            self._quick_tm = self.target.create_target_machine(
                cpu=self.cpu, features=self.features, opt=0, jit=True)
        return self._quick_tm

    def resolve(self, name):
        """The address of an external symbol of an object: one given to add_symbol, else
        the process's own (libc, libm), or None."""
        a = self.symbols.get(name)
        return a if a else elf.process_symbol(name)

    def engine_for(self, nbytes, names):
        """(under _lock) The engine the next object goes into: a new one when the current
        is full, or already defines one of its names (a module loaded again while the
        engine of its first load lives on)."""
        e = self.engine
        if e is None or e.objects >= ENGINE_OBJECTS or \
                (e.objects and e.nbytes + nbytes > ENGINE_BYTES) or not e.names.isdisjoint(names):
            e = self.engine = _Engine(self)
        return e


def made():
    """Whether the process's JIT exists (the host is described: a key costs no LLVM)."""
    return _jit is not None


def jit():
    """The process's JIT (created on first use)."""
    global _jit
    if _jit is None:
        if disk_only.probing() and not host.known():
            raise disk_only.NotCached   # (an undescribed host has nothing on disk: no LLVM)
        with disk_only.held(_lock):
            if _jit is None:
                _jit = _Jit()
    return _jit


def _reset():
    """Forget the JIT: the next compile makes a new one. Kernels compiled before keep their
    engines (and their code) alive for as long as they live."""
    global _jit
    with _lock:
        _jit = None
        for k in stats:
            stats[k] = 0
        for k in loader_stats:
            loader_stats[k] = 0


def live():
    """How many engines and compiled modules are alive (tests: memory is bounded)."""
    import gc
    gc.collect()
    return {"engines": len(_engines), "compiled": len(_compiled)}


# ---- fork -------------------------------------------------------------------------------
_fork_held = False


def _before_fork():
    global _fork_held
    _fork_held = _lock.acquire(timeout=FORK_WAIT_SECONDS)


def _after_fork_in_parent():
    if _fork_held:
        _lock.release()


def _after_fork_in_child():
    global _jit
    _lock._at_fork_reinit()
    if not _fork_held:          # LLVM may have been mid-call in a thread that is gone
        _jit = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


# ---- symbols and modules ----------------------------------------------------------------
def add_symbol(name, address):
    """Make an external symbol (a BLAS routine found with ctypes) resolvable by JIT code."""
    with _lock:
        _symbols[name] = address
        if _binding:
            _binding[0].add_symbol(name, address)
            _llvm_told[name] = address


def new_module(name):
    """An empty llvmlite module for the host's triple and data layout."""
    j = jit()
    mod = ir.Module(name=name)
    mod.triple = j.triple
    mod.data_layout = j.data_layout
    return mod


class CodeAddress(int):
    """The address of a function in JIT code; it keeps the code (its `code`, a Compiled)
    alive for as long as it is kept itself."""


class MissingSymbol(RuntimeError):
    pass


class Compiled:
    """Code living in an engine: function addresses, and the IR text for dumps."""

    def __init__(self, jit_, engine, blobs, addresses, nbytes):
        self._jit = jit_                # the JIT it was loaded under (gemm.py checks)
        self._engine = engine           # keeps the code alive
        self._blobs = blobs             # the IR before and after optimisation, compressed
        self.addresses = addresses      # name -> int
        self.nbytes = nbytes
        _compiled.add(self)

    @property
    def ir_before(self):
        return cache.decompress(self._blobs[0])

    @property
    def ir_after(self):
        return cache.decompress(self._blobs[1])

    def address(self, name):
        """The address of an entry, or of another external function of the same object
        (asked of the engine: a disk-cache record names one entry). The int returned keeps
        this code alive."""
        a = self.addresses.get(name)
        if a is None:
            with disk_only.held(_lock):
                a = self._engine.address_of(name) if isinstance(self._engine, elf.Image) \
                    else self._engine.ee.get_function_address(name)
            if not a:
                raise KeyError(f"JIT: no function {name!r} in this code")
            self.addresses[name] = a
        addr = CodeAddress(a)
        addr.code = self
        return addr


def _load(j, obj, blobs, entry_names, key=None):
    """Put an object file into an engine; a Compiled with its entries' addresses (and in
    the in-memory cache under key). MissingSymbol if the object lacks an entry."""
    names = set(entry_names)
    if not all(n.encode() in obj for n in names):      # (cannot define it: never loaded)
        raise MissingSymbol(f"JIT: no address for function {sorted(names)[0]!r}")
    image = elf.load(obj, j.resolve) if OWN_LOADER else None
    if image is not None:
        addresses = {n: image.address_of(n) for n in entry_names}
        missing = [n for n, a in addresses.items() if not a]
        if missing:
            raise MissingSymbol(f"JIT: no address for function {missing[0]!r}")
        compiled = Compiled(j, image, blobs, addresses, image.nbytes)
        loader_stats["own"] += 1
        if key is not None:
            with disk_only.held(_lock):
                j.memory.put(key, compiled)
        return compiled
    nbytes = 2 * len(obj) + sum(len(b) for b in blobs)
    with disk_only.held(_lock):
        e = j.engine_for(nbytes, names)
        loader_stats["mcjit"] += 1
        e.ee.add_object_file(j.llvm().ObjectFileRef.from_data(obj))
        e.ee.finalize_object()
        addresses = {n: e.ee.get_function_address(n) for n in entry_names}
        e.objects += 1
        e.nbytes += nbytes
        e.names |= names
        j.memory.grew(e, nbytes)
        missing = [n for n, a in addresses.items() if not a]
        if missing:
            raise MissingSymbol(f"JIT: no address for function {missing[0]!r}")
        compiled = Compiled(j, e, blobs, addresses, nbytes)
        if key is not None:
            j.memory.put(key, compiled)
    return compiled


def lookup(key, entry_name, before_load=None, also=()):
    """The Compiled for key from memory, else from a verified disk-cache entry, else None
    (an entry that lacks entry_name or a name in `also` is treated as missing: rebuilt).
    before_load(object_bytes) runs before a cached object is loaded (linked)."""
    j = jit()
    with disk_only.held(_lock):
        hit = j.memory.get(key)
    if hit is not None:
        stats["memory_hits"] += 1
        return hit
    rec = cache.load(key)
    if rec is None or rec[0] != entry_name:
        disk_only.no_build()
        return None
    _, obj, before, after = rec
    if before_load is not None:
        before_load(obj)
    try:
        compiled = _load(j, obj, (before, after), [entry_name, *also], key)
    except MissingSymbol:
        disk_only.no_build()
        return None
    stats["loaded"] += 1
    return compiled


def _generate(irmod, mode, keep_ir):
    """(IR text, object bytes, IR text after optimisation or "") of an llvmlite module; mode
    "O3" (optimised), "O3-noopt" or "O0" (code generation only). By the compile worker
    (worker.py) where it serves, else by LLVM in this process: the same functions."""
    disk_only.no_build()
    j = jit()
    text = str(irmod)
    host = {"cpu": j.cpu, "features": j.features, "triple": j.triple,
            "data_layout": j.data_layout}
    timeline.mark(f"generate {irmod.name}")
    done = worker.generate(text, host, mode, keep_ir)
    if done is not None:
        return text, done[0], done[1]
    with _lock:
        llvm = j.llvm()
        tm = j.quick_tm() if mode == "O0" else j.tm
        obj, after = worker_main.generate(llvm, tm, text, j.triple, j.data_layout,
                                          mode == "O3", keep_ir)
    return text, obj, after


def compile_module(irmod, entry_names, opt=True, key=None):
    """Compile an llvmlite module (optimise, generate an object file, load it); return a
    Compiled with the addresses of entry_names. With a key, the result is remembered in
    memory and written to the disk cache."""
    j = jit()
    before, obj, after = _generate(irmod, "O3" if opt else "O3-noopt", True)
    stats["optimized"] += bool(opt)
    stats["codegen"] += 1
    blobs = (cache.compress(before), cache.compress(after))
    compiled = _load(j, obj, blobs, entry_names, key)
    if key is not None:
        cache.store(key, entry_names[0], obj, *blobs)
    return compiled


def compile_private(irmod, entry_names, key=None, opt=False):
    """Compile a small module of llgrad's own plumbing (trampoline.py, the thread pool, the
    BLAS shims) outside the in-memory table and the stats (which count kernels' code
    generation only), at -O0 unless opt: True, optimised at O3; "codegen", O3's code
    generation without the IR passes (for code already in the form they would leave it,
    where they cost more than half its LLVM time and buy nothing measurable). No IR text is
    kept. With a key the object also goes to the disk cache (load_private)."""
    j = jit()
    mode = "O3-noopt" if opt == "codegen" else "O3" if opt else "O0"
    _, obj, _ = _generate(irmod, mode, False)
    compiled = _load(j, obj, (b"", b""), entry_names)
    if key is not None:
        cache.store(key, entry_names[0], obj, b"", b"")
    return compiled


def load_private(key, entry_names):
    """What compile_private stored under key, loaded from the disk cache (its external
    symbols must be resolvable first: add_symbol), or None."""
    rec = cache.load(key)
    if rec is None or rec[0] != entry_names[0]:
        return None
    try:
        return _load(jit(), rec[1], (b"", b""), entry_names)
    except MissingSymbol:
        return None


def assembly(compiled):
    """The host assembly of a compiled module (for dumps and for checking vectorisation)."""
    text = compiled.ir_after
    with _lock:
        llvm = jit().llvm()
        mod = llvm.parse_assembly(text, context=llvm.create_context())
        out = jit().tm.emit_assembly(mod)
        del mod
    return out
