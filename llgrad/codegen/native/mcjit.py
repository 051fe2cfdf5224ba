"""LLVM itself, for the JIT (jit.py): llvmlite.binding imported on first need, the MCJIT
engines objects go into when llgrad's own loader (elf.py) does not take them, and the
optimisation pipeline."""
import weakref

from . import worker_main

_engines = weakref.WeakSet()    # engines alive (tests count them)
_binding = []                   # llvmlite.binding, once something needs LLVM itself


def _llvm():
    """llvmlite.binding, imported (and the native target initialised) on first need: a
    process whose objects all come from the disk cache never loads LLVM."""
    if not _binding:
        import llvmlite.binding as binding
        binding.initialize_native_target()
        binding.initialize_native_asmprinter()
        _binding.append(binding)
    return _binding[0]


class _Engine:
    """An MCJIT engine (with a target machine and an empty module of its own, in a context
    of its own) that objects are loaded into; disposed, code and all, once unreferenced."""

    def __init__(self, j):
        llvm = j.llvm()
        tm = j.target.create_target_machine(cpu=j.cpu, features=j.features, opt=3, jit=True)
        self._context = llvm.create_context()
        backing = llvm.parse_assembly("", context=self._context)
        backing.triple = j.triple
        self.ee = llvm.create_mcjit_compiler(backing, tm)      # (owns tm and backing)
        self.objects = 0
        self.nbytes = 0
        self.names = set()
        _engines.add(self)

    def __del__(self):
        # the engine (and the module it owns) first, then the context that module lives in
        # (llvmlite's engine lets go of its module's Python object, and with it the
        # context, before it disposes of the module)
        self.ee = None


def optimize(llmod, tm, speed_level=3):
    """LLVM's O3 pipeline on llmod (worker_main.optimize: the worker's, exactly)."""
    worker_main.optimize(_llvm(), llmod, tm, speed_level)
