"""Keeping a training step's freed memory for the next step.

glibc's malloc hands the top of its heap back to the OS as soon as more than
M_TRIM_THRESHOLD bytes are free there, and by default that threshold follows the largest
block freed so far (twice it). A training step frees its activations and gradients
together at the end of the backward, the heap's top is trimmed, and the next step touches
every page of them again: the transformer block of bench/real_models.py took ~1,250 minor
page faults a step eagerly and up to ~740 compiled (each a zeroed 4 KiB page, about a
microsecond), where torch's steps took ~50.

So at import llgrad lets the heap keep up to LLGRAD_HEAP_KEEP_MB (default 256) MiB of free
memory at its top, and serves blocks up to 32 MiB (glibc's largest mmap threshold) from
the heap rather than from fresh mappings, as the allocators PyTorch recommends for CPU
training (jemalloc, tcmalloc) do. Only the process's heap settings change, never a value;
LLGRAD_HEAP_KEEP_MB=0 leaves glibc's defaults. Other C libraries are left alone.

What a compile frees is not a step's memory, and is not kept: a trace (an eager step that
also records the graph, its values held until the graph is built) and a lowering (plans,
emitted IR) free tens of MiB of small blocks scattered among live ones, which the kept top
and the holes between live blocks would hold resident for good (a stack of four transformer
blocks: 140 MiB resident compiled against 96 eager, 115 with them handed back).
`release_freed()` hands every free page back to the OS (glibc's malloc_trim), once after a
trace and once after a build; the next step touches its pages again, once."""
import ctypes
import os
import platform
import sys
import warnings

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD_MAX = 32 << 20       # glibc's ceiling on 64-bit (HEAP_MAX_SIZE / 2)
DEFAULT_KEEP_MB = 256


def keep_mb_setting():
    """LLGRAD_HEAP_KEEP_MB as a number of MiB: the default where unset, and (with a warning
    naming it) where it is not a non-negative integer."""
    raw = os.environ.get("LLGRAD_HEAP_KEEP_MB", "").strip()
    if not raw:
        return DEFAULT_KEEP_MB
    try:
        mb = int(raw)
    except ValueError:
        mb = -1
    if mb < 0:
        warnings.warn(f"llgrad: ignoring LLGRAD_HEAP_KEEP_MB={raw!r} (not an int >= 0)",
                      RuntimeWarning, stacklevel=2)
        return DEFAULT_KEEP_MB
    return mb


_trim = []     # [malloc_trim] where the C library is glibc, else [None] (found on first use)


def release_freed():
    """Hand the heap's free pages back to the OS (glibc's malloc_trim(0)); a no-op with
    another C library or LLGRAD_HEAP_KEEP_MB=0 (glibc's own defaults then trim)."""
    if not _trim:
        fn = None
        if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
            try:
                fn = ctypes.CDLL(None).malloc_trim
                fn.argtypes, fn.restype = (ctypes.c_size_t,), ctypes.c_int
            except (OSError, AttributeError):
                fn = None
        _trim.append(fn)
    if _trim[0] is not None:
        _trim[0](0)


def keep_freed_memory(mb):
    """Let glibc's heap keep up to mb MiB free at its top, and serve blocks up to 32 MiB from
    the heap. Returns whether the settings were made (False: mb is 0, or the C library is
    not glibc)."""
    if mb <= 0 or not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    trim = min(mb << 20, (1 << 31) - 1)
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and \
        bool(mallopt(M_TRIM_THRESHOLD, trim))
