"""The JIT: one MCJIT engine per process, created on first use, targeting the host CPU.

`compile_module(irmod)` takes an llvmlite `ir.Module`, parses its text, verifies it,
optimises it at O3 with the new pass manager (loop and SLP vectorisation on) and adds it
to the engine. The result keeps the LLVM IR text before and after optimisation for dumps,
and the engine it lives in (a Compiled keeps its engine alive, so `_reset()` never frees
code that a kernel still points at)."""
import os
import threading
import weakref

import llvmlite.binding as llvm
from llvmlite import ir

_lock = threading.Lock()
_jit = None


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
    """A module living in the engine: function addresses and the IR text for dumps."""

    def __init__(self, jit_, llmod, ir_before, ir_after, addresses):
        self._jit = jit_            # keeps the engine (and so the code) alive
        self._llmod = llmod
        self.ir_before = ir_before
        self.ir_after = ir_after
        self.addresses = addresses
        # when the last reference goes, give the module back (its IR is freed; the engine
        # keeps the little machine code it made until the engine itself goes)
        fin = weakref.finalize(self, _remove, jit_, llmod)
        fin.atexit = False

    def address(self, name):
        return self.addresses[name]


def _remove(jit_, llmod):
    with _lock:
        jit_.engine.remove_module(llmod)


def optimize(llmod, tm, speed_level=3):
    pto = llvm.create_pipeline_tuning_options(speed_level=speed_level)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_interleaving = True
    pto.loop_unrolling = False
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(llmod, pb)


def compile_module(irmod, entry_names, opt=True):
    """Compile an llvmlite module; return a Compiled with the addresses of entry_names."""
    j = jit()
    ir_before = str(irmod)
    llmod = llvm.parse_assembly(ir_before)
    llmod.triple = j.triple
    llmod.data_layout = j.data_layout
    llmod.verify()
    if opt:
        with _lock:
            optimize(llmod, j.tm)
    ir_after = str(llmod)
    with _lock:
        j.engine.add_module(llmod)
        j.engine.finalize_object()
        addresses = {n: j.engine.get_function_address(n) for n in entry_names}
    for n, a in addresses.items():
        if not a:
            raise RuntimeError(f"JIT: no address for function {n!r}")
    return Compiled(j, llmod, ir_before, ir_after, addresses)


def assembly(compiled):
    """The host assembly of a compiled module (for dumps and for checking vectorisation)."""
    mod = llvm.parse_assembly(compiled.ir_after)
    return jit().tm.emit_assembly(mod)
