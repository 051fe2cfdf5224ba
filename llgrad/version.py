"""llgrad's version (one place: the package, the kernel cache keys)."""
__version__ = "0.1.0"

# (torch.version's build facts: no CUDA, ROCm or XPU build; not a debug build)
cuda = None
hip = None
rocm = None
xpu = None
debug = False
