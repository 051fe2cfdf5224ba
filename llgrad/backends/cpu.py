"""llgrad.backends.cpu: the CPU's vector capability as PyTorch names it ('AVX512', 'AVX2',
'DEFAULT'), read from the CPU's flags (/proc/cpuinfo) where the system gives them."""

_capability = None


def get_cpu_capability():
    global _capability
    if _capability is None:
        flags = set()
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("flags"):
                        flags = set(line.split(":", 1)[1].split())
                        break
        except OSError:
            pass
        _capability = "AVX512" if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags \
            else "AVX2" if "avx2" in flags else "DEFAULT"
    return _capability
