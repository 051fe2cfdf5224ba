"""llgrad's own modules' bytecode, kept in the signed disk cache when Python writes none.

With PYTHONDONTWRITEBYTECODE=1 (or `python -B`) and no __pycache__ files beside the source
(an editable install), every process compiles llgrad's ~80,000 lines of source again:
importing llgrad costs ~0.8 s of CPU instead of ~0.2 s. Then, and only then, llgrad's
__init__ puts a finder first on sys.meta_path that gives llgrad's submodules a loader
keeping each module's code object in the kernel cache's directory `modules`
(codegen/native/cache.py: entries signed with the user's key; LLGRAD_CACHE_DIR=0 turns it
off), keyed as a __pycache__ file is: the source's path, size and modification time and
the Python version (a changed source gets another key). Where a __pycache__ file exists,
Python's own loading runs as ever. The modules' __file__, __spec__ and tracebacks are the
source's. `counts`: how many modules this process loaded from the cache and compiled."""
import hashlib
import importlib.machinery
import importlib.util
import marshal
import os
import sys

_SOURCE = importlib.machinery.SourceFileLoader
_KIND = "module"
_SUBDIR = "modules"
counts = {"cached": 0, "compiled": 0}
_cache = None               # codegen/native/cache.py, once install() has loaded it


def reset_counts():
    counts.update(cached=0, compiled=0)


class _CachedLoader(_SOURCE):
    def get_code(self, fullname):
        path = self.get_filename(fullname)
        try:
            st = os.stat(path)
            if os.path.exists(importlib.util.cache_from_source(path)):
                return super().get_code(fullname)      # (Python's own file: its rules)
        except (OSError, NotImplementedError, ValueError):
            return super().get_code(fullname)
        key = hashlib.sha256("\0".join((path, str(st.st_mtime_ns), str(st.st_size),
                                         sys.version, str(marshal.version), _KIND)
                                        ).encode()).hexdigest()
        found = _cache.load(key, _SUBDIR)
        if found is not None and found[0] == _KIND:
            try:
                code = marshal.loads(found[1])
                counts["cached"] += 1
                return code
            except (EOFError, ValueError, TypeError):   # (not expected: the entry is signed)
                pass
        code = super().get_code(fullname)
        counts["compiled"] += 1
        _cache.store(key, _KIND, marshal.dumps(code), b"", b"", _SUBDIR)
        return code


class _Finder:
    """Finds llgrad's submodules as the path finder does, with _CachedLoader for source."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if not name.startswith("llgrad.") or path is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and type(spec.loader) is _SOURCE:
            spec.loader = _CachedLoader(spec.loader.name, spec.loader.path)
        return spec

    @staticmethod
    def invalidate_caches():
        pass


def install():
    """Put the finder first on sys.meta_path where Python writes no bytecode (once)."""
    global _cache
    if sys.dont_write_bytecode and os.environ.get("LLGRAD_CACHE_DIR") != "0" and \
            _Finder not in sys.meta_path:
        from .codegen.native import cache   # (standard library only, no LLVM: loaded as
        _cache = cache                      # usual, before the finder serves its modules)
        sys.meta_path.insert(0, _Finder)
