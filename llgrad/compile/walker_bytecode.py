"""The bytecode of guard walkers (guard_walker.py), kept in the signed disk cache: a
training step's walker is ~1,000 lines of generated Python, ~20 ms to compile."""
import hashlib
import marshal
import sys


def compiled_walker(code, filename):
    """compile(code): a training step's walker is ~1,000 lines, ~20 ms to compile, on the
    call after the trace; a process that compiled the same text before left its bytecode
    in the disk cache (signed as kernels are: codegen/native/cache.py), loaded in < 1 ms."""
    from ..codegen.native import cache      # (no LLVM: the cache's files only)
    key = hashlib.sha256("\0".join((code, filename, sys.version, str(marshal.version),
                                     "guard walker")).encode()).hexdigest()
    found = cache.load(key)
    if found is not None and found[0] == "walker":
        try:
            return marshal.loads(found[1])
        except (EOFError, ValueError, TypeError):   # (not expected: the entry is signed)
            pass
    compiled = compile(code, filename, "exec")
    cache.store(key, "walker", marshal.dumps(compiled), b"", b"")
    return compiled
