"""llgrad.backends.cpu: the CPU's vector capability as PyTorch names it ('AVX512', 'AVX2',
'DEFAULT'), read from the CPU's flags (/proc/cpuinfo) where the system gives them."""

_flags = None       # (the CPU's flags do not change while a process runs: read once)


def cpu_flags():
    """The CPU's feature flags (/proc/cpuinfo's names; empty where the system gives none)."""
    global _flags
    if _flags is None:
        flags = set()
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("flags"):
                        flags = set(line.split(":", 1)[1].split())
                        break
        except OSError:
            pass
        _flags = frozenset(flags)
    return _flags


def get_cpu_capability():
    flags = cpu_flags()
    return "AVX512" if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags \
        else "AVX2" if "avx2" in flags else "DEFAULT"


def onednn_half():
    """Whether PyTorch's CPU kernels take float16 through oneDNN here (ATen's
    mkldnn_fp16_device_check: 'the cpu support avx_ne_convert or avx512_fp16'), which
    decides, e.g., the words of a half convolution's dtype error."""
    return bool({"avx512_fp16", "avx_ne_convert"} & cpu_flags())
