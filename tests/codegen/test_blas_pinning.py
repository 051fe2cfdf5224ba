"""LLGRAD_NUM_THREADS pins NumPy's OpenBLAS at `import llgrad` (codegen/native/openblas.py)
unless OPENBLAS_NUM_THREADS is set, without loading llvmlite."""
import os
import subprocess
import sys

import pytest

from llgrad.codegen.native import openblas

SCRIPT = """
import ctypes, sys
import llgrad
from llgrad.codegen.native import openblas
lib = ctypes.CDLL(next(openblas.libraries()))
get = next(getattr(lib, g) for g in openblas.GETTERS if hasattr(lib, g))
print(get(), "llvmlite" in sys.modules)
"""


def _run(**env):
    e = {k: v for k, v in os.environ.items()
         if k not in ("LLGRAD_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    e.update(env)
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=e, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    count, llvm = out.stdout.split()
    return int(count), llvm == "True"


@pytest.mark.slow
@pytest.mark.skipif(openblas.thread_setter() is None, reason="NumPy without OpenBLAS")
def test_llgrad_num_threads_pins_openblas():
    assert _run(LLGRAD_NUM_THREADS="1") == (1, False)
    assert _run(LLGRAD_NUM_THREADS="1", OPENBLAS_NUM_THREADS="2")[0] == 2
    assert _run(LLGRAD_NUM_THREADS="x")[1] is False        # (ignored: threadcount warns)
