"""llgrad._inductor: torch._inductor's `config`, which PyTorch programs set before compiling
(gpt-fast: `torch._inductor.config.coordinate_descent_tuning = True`). llgrad compiles
through its own LLVM backend, not Inductor: the settings are held, not read (see config.py)."""
from . import config  # noqa: F401
