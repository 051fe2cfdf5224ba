"""The in-memory cache of compiled modules: an LRU of Compileds (jit.py) bounded by the bytes
of the engines it keeps alive, and a weak index of every Compiled alive, by key.

    LLGRAD_KERNEL_CACHE_MB (default 64): the LRU keeps the most recently used compiled
    modules, counting the bytes of the engines they keep alive, up to this many MiB (0:
    none), so that a graph lowered again is served without a reload; beyond it, a module
    lives exactly as long as something uses it (compiled functions that are gone free their
    kernels' code). A module still in use is always found by its key (the weak index), so
    it is never loaded twice.

It holds no lock of its own: the JIT calls it under jit._lock."""
import os
import warnings
import weakref
from collections import OrderedDict

DEFAULT_CACHE_MB = 64


def _cache_limit():
    """LLGRAD_KERNEL_CACHE_MB in bytes."""
    env = os.environ.get("LLGRAD_KERNEL_CACHE_MB", "")
    if not env:
        return DEFAULT_CACHE_MB << 20
    try:
        mb = float(env)
        if not mb >= 0:
            raise ValueError
    except ValueError:
        warnings.warn(f"llgrad: ignoring LLGRAD_KERNEL_CACHE_MB={env!r} (not a number of MiB "
                      f">= 0); using {DEFAULT_CACHE_MB}", RuntimeWarning, stacklevel=3)
        return DEFAULT_CACHE_MB << 20
    return int(mb * (1 << 20))


class _Memory:
    """The in-memory cache: an LRU of Compileds bounded by the bytes of the engines it keeps
    alive, and a weak index of every Compiled alive, by key."""

    def __init__(self, limit):
        self.limit = limit
        self.lru = OrderedDict()        # key -> Compiled (strong)
        self.index = weakref.WeakValueDictionary()
        self.pinned = {}                # engine -> how many LRU entries live in it
        self.bytes = 0                  # their engines' bytes

    def get(self, key):
        c = self.lru.get(key)
        if c is not None:
            self.lru.move_to_end(key)
            return c
        c = self.index.get(key)
        if c is not None:
            self.put(key, c)
        return c

    def put(self, key, c):
        self.index[key] = c
        if self.limit <= 0 or key in self.lru:
            return
        self.lru[key] = c
        n = self.pinned.get(c._engine, 0)
        if not n:
            self.bytes += c._engine.nbytes
        self.pinned[c._engine] = n + 1
        self._evict()

    def grew(self, engine, nbytes):
        if engine in self.pinned:
            self.bytes += nbytes
            self._evict()

    def _evict(self):
        while self.bytes > self.limit and len(self.lru) > 1:
            _, c = self.lru.popitem(last=False)
            e = c._engine
            n = self.pinned[e] - 1
            if n:
                self.pinned[e] = n
            else:
                del self.pinned[e]
                self.bytes -= e.nbytes

    def clear(self):
        self.lru.clear()
        self.pinned.clear()
        self.bytes = 0
