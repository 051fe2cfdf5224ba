"""Prepared graphs in the disk cache: a warm process skips simplification and planning.

A kernel found in the disk cache (its key: the planned graph's text and its plan) still
needed the graph simplified, planned and its call table made before the lookup, in every
process: 0.15 s of the char-transformer step's 0.38 s from its first call to its first
native result, with the kernels on disk. What `lower` prepares from a traced graph (the
simplified graph, the plan, the release split, the kernel's cache key, entry name and
family) is a function of the traced graph's IR text, the lowering options and llgrad's
code only, so it is kept in the cache as well, keyed by those (keys.key_for: llgrad's code
and the host are in every key), in the subdirectory `plans`, and loaded in its place.

An entry is the pickled tuple in the cache's signed format (cache.py): it is unpickled only
after its tag checks, as object code is only run after its tag checks; an entry anyone
else wrote is never unpickled. One that fails to load, or a tuple that does not pickle (a
graph too deep for pickle's recursion), is prepared as before. The graph's nodes are
pickled first, in order, so that pickling a value's producer never recurses down a chain.

LLGRAD_CHECK_PREPARED=1 (set by the test suite) prepares every graph found here afresh as
well and checks that the two agree in cache key (which covers the planned graph's text and
the plan's description): a test that changes planning by patching llgrad, or any
nondeterminism, fails there instead of running a stale plan."""
import os
import pickle
import threading

from .lowerings import gemm, host_call
from .native import cache, keys

SUBDIR = "plans"
_KIND = "prepared"
CHECK = os.environ.get("LLGRAD_CHECK_PREPARED", "") == "1"
counts = {"loaded": 0, "stored": 0}
_counts_lock = threading.Lock()


def reset_counts():
    with _counts_lock:
        counts.update(loaded=0, stored=0)


def _count(what):
    with _counts_lock:
        counts[what] += 1


def key_of(graph, settings, text=None):
    """The entry's key: the traced graph's text (text: str(graph) if the caller has it; its
    name too: the entry name is made from it) and the options `settings` names."""
    return keys.key_for(str(graph) if text is None else text,
                        f"prepared;name={graph.name};{settings}")


def dumps(prepared, libraries):
    """The bytes of an entry: prepared (lower._prepare's tuple) and the libraries
    (gemm.libraries_asked) its preparation made resolvable; None where it does not pickle.
    Call before anything emits its plan (emission records in the groups' states)."""
    try:
        return pickle.dumps((list(prepared[0].nodes), prepared, sorted(set(libraries))),
                            protocol=pickle.HIGHEST_PROTOCOL)
    except (RecursionError, pickle.PicklingError, TypeError, AttributeError):
        return None


def loads(blob):
    """(prepared, libraries) from dumps' bytes."""
    _, prepared, libraries = pickle.loads(blob)
    return prepared, libraries


def load(key):
    """The prepared tuple stored under key, its libraries made resolvable, or None."""
    found = cache.load(key, SUBDIR)
    if found is None or found[0] != _KIND:
        return None
    try:
        prepared, libraries = loads(found[1])
    except Exception:   # (not expected of a signed entry: one from another llgrad whose code
        return None     # hashes alike; prepared again)
    for dtype, kind in libraries:       # (what preparing it did besides: its code calls them)
        gemm.ensure_library(dtype, kind)
    host_call.register_loaded(prepared[1])      # (and the keys its callbacks look up)
    _count("loaded")
    return prepared


def store(key, prepared, libraries):
    """Keep prepared under key (see dumps), if the disk cache is on and it pickles."""
    if cache.cache_dir() is None:
        return
    blob = dumps(prepared, libraries)
    if blob is not None:
        cache.store(key, _KIND, blob, b"", b"", SUBDIR)
        _count("stored")
