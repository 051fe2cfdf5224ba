"""A compiled function called from several threads at once (a ThreadPoolExecutor serving
requests), its kernels in the disk cache from an earlier run: the process crashed
("LLVM ERROR: Symbol not found: scipy_cblas_sgemm64_", or a segmentation fault). The first
thread to need BLAS marked the search for its routines done before giving their addresses
to the JIT, and another thread loaded a cached kernel calling a routine not given yet. The
search is now one at a time, and the others wait for its result."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent("""
    import json, sys
    from concurrent.futures import ThreadPoolExecutor
    import llgrad

    model = llgrad.nn.Sequential(llgrad.nn.Linear(4, 8), llgrad.nn.Tanh(),
                                 llgrad.nn.Linear(8, 1))
    with llgrad.no_grad():
        for p in model.parameters():
            p.copy_(llgrad.linspace(-0.5, 0.5, p.numel()).reshape(p.shape))


    def loss(x):
        return model(x).pow(2).mean()


    f = llgrad.compile(loss)
    sizes = [1, 2, 3, 5] * 5
    xs = [llgrad.linspace(-1, 1, n * 4).reshape(n, 4) for n in sizes]


    def serve(x):
        with llgrad.no_grad():
            return f(x).item(), loss(x).item()


    if sys.argv[1] == "threads":
        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(serve, xs))
    else:
        got = list(map(serve, xs))
    print(json.dumps([sizes, [c for c, _ in got]]))
""")



def _expected(n):
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape))
        return model(torch.linspace(-1, 1, n * 4).reshape(n, 4)).pow(2).mean().item()


def test_threads_loading_cached_kernels_at_once_do_not_crash(tmp_path):
    path = tmp_path / "serve.py"
    path.write_text(SCRIPT)
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=ROOT)
    # the kernels built in one thread, then loaded from the disk cache in several at once
    runs = [("sync", "one"), ("background", "threads"), ("background", "threads")]
    for mode, how in runs:
        out = subprocess.run([sys.executable, str(path), how], cwd=str(tmp_path),
                             env=dict(env, LLGRAD_COMPILE=mode), capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        sizes, got = json.loads(out.stdout.strip().splitlines()[-1])
        assert got == pytest.approx([_expected(n) for n in sizes], rel=1e-5)
