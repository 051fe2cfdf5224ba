"""Cache keys: the SHA-256 of everything that decides a module's machine code (the graph's
IR text and the lowering options, llgrad's version and the source of its code generation,
the LLVM version, the host's triple, CPU name and features), so a key never names foreign
code, in memory (memory_lru.py) or on disk (cache.py)."""
import hashlib
import os

from ...version import __version__
from .jit import jit

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
                 j.llvm_version, j.triple, j.cpu, j.features):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()
