"""`import llgrad` stays quick to start: the heavy modules it uses only for some calls
(LLVM, the Python-source printer, the network stack of hub's downloads) load on first use."""
import subprocess
import sys

LAZY = ("llvmlite", "astunparse", "urllib.request", "http.client", "ssl", "email", "torch",
        "jax")


def test_import_llgrad_leaves_heavy_modules_unloaded():
    code = ("import sys, llgrad; print(' '.join(m for m in %r if m in sys.modules))" % (LAZY,))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.split() == []
