"""What the host is to code generation (target triple, data layout, CPU name and features,
the vector width kernels are shaped for, LLVM's version): asked of LLVM once per machine
and then remembered in the disk cache, so that a process whose kernels are all on disk
never loads LLVM (elf.py loads their objects).

The record is keyed by what decides it: /proc/cpuinfo's description of the CPU (vendor,
family, model, flags), llvmlite's version and LLGRAD_AVX512; it is signed and checked as
every cache entry is (cache.py). Without /proc/cpuinfo it is asked of LLVM every time."""
import hashlib
import json
import os

from . import cache, worker, worker_main

ENTRY = "host"       # the record's entry name in the cache (its key: _key)
_FIELDS = ("vendor_id", "cpu family", "model", "model name", "flags")


def _cpuinfo_fingerprint():
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    first = text.split("\n\n", 1)[0]
    lines = sorted(ln for ln in first.splitlines() if ln.split(":")[0].strip() in _FIELDS)
    return "\n".join(lines) if lines else None


def _key(fingerprint):
    import llvmlite
    h = hashlib.sha256()
    for part in ("llgrad host v1", fingerprint, llvmlite.__version__,
                 os.environ.get("LLGRAD_AVX512", "1")):
        h.update(part.encode("utf-8") + b"\0")
    return h.hexdigest()


def ask_llvm(llvm):
    """The description from LLVM itself (llvm: llvmlite.binding, initialised)."""
    return worker_main.ask_llvm(llvm)


def known():
    """Whether the host's description is remembered in the disk cache (describe() then
    answers without LLVM). Every kernel built into this cache stored it first, so where it
    is not, no kernel of this host is on disk: callers asking whether one is skip the
    LLVM round trip (the compile worker's start) the key would cost."""
    fingerprint = _cpuinfo_fingerprint()
    if fingerprint is None:
        return False
    rec = cache.load(_key(fingerprint))
    return rec is not None and rec[0] == ENTRY


def describe(load_llvm):
    """The host's description: remembered, else asked of the compile worker's LLVM or, where
    there is no worker, of this process's (load_llvm() -> the binding, initialised), and
    remembered."""
    fingerprint = _cpuinfo_fingerprint()
    key = _key(fingerprint) if fingerprint else None
    if key is not None:
        rec = cache.load(key)
        if rec is not None and rec[0] == ENTRY:
            try:
                info = json.loads(rec[1].decode("utf-8"))
                if set(info) == {"cpu", "features", "vector_bits", "triple", "data_layout",
                                 "llvm_version"}:
                    return info
            except ValueError:
                pass
    info = worker.describe(os.environ.get("LLGRAD_AVX512", "1")) or ask_llvm(load_llvm())
    if key is not None:
        cache.store(key, ENTRY, json.dumps(info, sort_keys=True).encode("utf-8"), b"", b"")
    return info
