"""The JIT: one MCJIT engine per process, created on first use, targeting the host CPU.

`compile_module(irmod)` takes an llvmlite `ir.Module`, parses its text, verifies it,
optimises it at O3 with the new pass manager (loop and SLP vectorisation on), generates an
object file and loads that into the engine. The result keeps the LLVM IR text before and
after optimisation for dumps, and the engine it lives in (a Compiled keeps its engine
alive, so `_reset()` never frees code that a kernel still points at).

Going through an object file is what makes caching cheap: `lookup(key)` finds the code of
a key in this engine (memory) or in the disk cache (cache.py), where loading it skips
optimisation and code generation. Object code is never unloaded (MCJIT has no way to), so
the in-memory table lives as long as its engine; each kernel's code is a few KB."""
import hashlib
import os
import threading

import llvmlite.binding as llvm
from llvmlite import ir

from ...version import __version__
from . import cache

_lock = threading.RLock()
_jit = None
# what the JIT did in this process (tests count these: a warm disk cache means no codegen)
stats = {"optimized": 0, "codegen": 0, "loaded": 0, "memory_hits": 0}


class _Jit:
    """The engine, its target machine and the host's triple/data layout."""

    def __init__(self):
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_default_triple()
        self.cpu = llvm.get_host_cpu_name()
        feats = llvm.get_host_cpu_features()
        self.features = feats.flatten()
        # LLVM's x86 tuning caps vectors at 256 bits even where AVX-512 exists; the fused
        # math loops run ~1.5x faster at 512 (LLGRAD_AVX512=0 keeps 256)
        self.vector_bits = 128
        if feats.get("avx2"):
            self.vector_bits = 256
        if feats.get("avx512f") and feats.get("avx512vl") and feats.get("avx512dq") \
                and os.environ.get("LLGRAD_AVX512", "1") != "0":
            self.features += ",-prefer-256-bit"
            self.vector_bits = 512
        self.tm = target.create_target_machine(cpu=self.cpu, features=self.features, opt=3,
                                               jit=True)
        self.triple = self.tm.triple
        self.data_layout = str(self.tm.target_data)
        backing = llvm.parse_assembly("")
        backing.triple = self.triple
        self.engine = llvm.create_mcjit_compiler(backing, self.tm)
        self.symbols = {}
        self.memory = {}            # cache key -> Compiled (code loaded in this engine)
        self._target, self._quick_tm = target, None

    def quick_tm(self):
        """A target machine at -O0, made on first use: code generation of a tiny module
        takes a third of the time -O3's takes (compile_private)."""
        if self._quick_tm is None:
            self._quick_tm = self._target.create_target_machine(
                cpu=self.cpu, features=self.features, opt=0, jit=True)
        return self._quick_tm


def jit():
    """The process's engine (created on first use)."""
    global _jit
    if _jit is None:
        with _lock:
            if _jit is None:
                _jit = _Jit()
    return _jit


def _reset():
    """Forget the engine: the next compile creates a new one. Kernels compiled before keep
    the old engine (and their code) alive for as long as they live."""
    global _jit
    with _lock:
        _jit = None
        for k in stats:
            stats[k] = 0


def add_symbol(name, address):
    """Make an external symbol (a BLAS routine found with ctypes) resolvable by JIT code."""
    llvm.add_symbol(name, address)
    jit().symbols[name] = address


def new_module(name):
    """An empty llvmlite module for the host's triple and data layout."""
    j = jit()
    mod = ir.Module(name=name)
    mod.triple = j.triple
    mod.data_layout = j.data_layout
    return mod


class Compiled:
    """Code living in the engine: function addresses and the IR text for dumps."""

    def __init__(self, jit_, ir_before, ir_after, addresses, obj=None):
        self._jit = jit_            # keeps the engine (and so the code) alive
        self.ir_before = ir_before
        self.ir_after = ir_after
        self.addresses = addresses
        self.object = obj           # the object file's bytes (what the disk cache holds)

    def address(self, name):
        """The address of an entry, or of another external function of the same object
        (asked of the engine: a disk-cache record names one entry)."""
        a = self.addresses.get(name)
        if a is None:
            with _lock:
                a = self._jit.engine.get_function_address(name)
            if not a:
                raise KeyError(f"JIT: no function {name!r} in this code")
            self.addresses[name] = a
        return a


def optimize(llmod, tm, speed_level=3):
    pto = llvm.create_pipeline_tuning_options(speed_level=speed_level)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_interleaving = True
    pto.loop_unrolling = False
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(llmod, pb)


_fingerprint = None


def _code_fingerprint():
    """A hash of the source of the packages that decide machine code (codegen, ir): a
    changed lowering must not find the kernels an older one cached under the same version
    number (a development checkout changes without a version bump)."""
    global _fingerprint
    if _fingerprint is None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        h = hashlib.sha256()
        for pkg in ("codegen", "ir"):
            for d, dirs, names in sorted(os.walk(os.path.join(root, pkg))):
                dirs.sort()
                for name in sorted(names):
                    if name.endswith(".py"):
                        path = os.path.join(d, name)
                        with open(path, "rb") as f:
                            h.update(os.path.relpath(path, root).encode() + b"\0" + f.read())
        _fingerprint = h.hexdigest()
    return _fingerprint


def key_for(text, options=""):
    """The cache key of a module made from `text` (a graph's canonical IR) with `options`:
    everything that decides the machine code goes in, so a key never names foreign code."""
    j = jit()
    h = hashlib.sha256()
    for part in (text, options, __version__, _code_fingerprint(),
                 ".".join(map(str, llvm.llvm_version_info)), j.triple, j.cpu, j.features):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def _load(j, obj, ir_before, ir_after, entry_names):
    """Put an object file into the engine; a Compiled with its entries' addresses."""
    with _lock:
        j.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        j.engine.finalize_object()
        addresses = {n: j.engine.get_function_address(n) for n in entry_names}
    for n, a in addresses.items():
        if not a:
            raise RuntimeError(f"JIT: no address for function {n!r}")
    return Compiled(j, ir_before, ir_after, addresses, obj)


def lookup(key, entry_name, before_load=None):
    """The Compiled for key from memory, else from a verified disk-cache file, else None.
    before_load(ir_text) runs before a cached object is loaded (linked), given its IR."""
    j = jit()
    with _lock:
        hit = j.memory.get(key)
    if hit is not None:
        stats["memory_hits"] += 1
        return hit
    rec = cache.load(key)
    if rec is None or rec[0] != entry_name:
        return None
    _, obj, before, after = rec
    if before_load is not None:
        before_load(before)
    compiled = _load(j, obj, before, after, [entry_name])
    stats["loaded"] += 1
    with _lock:
        j.memory[key] = compiled
    return compiled


def compile_module(irmod, entry_names, opt=True, key=None):
    """Compile an llvmlite module (optimise, generate an object file, load it); return a
    Compiled with the addresses of entry_names. With a key, the result is remembered in
    memory and written to the disk cache."""
    j = jit()
    ir_before = str(irmod)
    llmod = llvm.parse_assembly(ir_before)
    llmod.triple = j.triple
    llmod.data_layout = j.data_layout
    llmod.verify()
    with _lock:
        if opt:
            optimize(llmod, j.tm)
            stats["optimized"] += 1
        obj = j.tm.emit_object(llmod)
        stats["codegen"] += 1
    ir_after = str(llmod)
    compiled = _load(j, obj, ir_before, ir_after, entry_names)
    if key is not None:
        with _lock:
            j.memory[key] = compiled
        cache.store(key, entry_names[0], obj, ir_before, ir_after)
    return compiled


def compile_private(irmod, entry_names, key=None):
    """Compile a small module of llgrad's own plumbing (trampoline.py) at -O0, outside the
    in-memory table and the stats (which count kernels' code generation only); no IR text
    is kept. With a key the object also goes to the disk cache (load_private)."""
    j = jit()
    llmod = llvm.parse_assembly(str(irmod))
    llmod.triple = j.triple
    llmod.data_layout = j.data_layout
    llmod.verify()
    with _lock:
        obj = j.quick_tm().emit_object(llmod)
    compiled = _load(j, obj, "", "", entry_names)
    if key is not None:
        cache.store(key, entry_names[0], obj, "", "")
    return compiled


def load_private(key, entry_names):
    """What compile_private stored under key, loaded from the disk cache (its external
    symbols must be resolvable first: add_symbol), or None."""
    rec = cache.load(key)
    if rec is None or rec[0] != entry_names[0]:
        return None
    return _load(jit(), rec[1], "", "", entry_names)


def assembly(compiled):
    """The host assembly of a compiled module (for dumps and for checking vectorisation)."""
    mod = llvm.parse_assembly(compiled.ir_after)
    return jit().tm.emit_assembly(mod)
