"""Launching the MPI jobs of tests/distributed (conftest.py's `mpirun` fixture): each test launches a worker script of this
folder (mpi_*.py) with `mpiexec -n 2` in a subprocess bounded by a timeout, and reads what
the ranks print ("rank R OK name" per check, "rank R FAIL name: why"). Skipped when mpi4py
or mpiexec is missing (`pip install -e ".[mpi]"` brings both)."""
import functools
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def mpiexec_path():
    """The mpiexec beside this Python (the mpich wheel's, in a venv), else the one on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.access(here, os.X_OK) else shutil.which("mpiexec")


def skip_reason():
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed (pip install -e '.[mpi]')"
    if mpiexec_path() is None:
        return "no mpiexec found (pip install -e '.[mpi]')"
    return None


@functools.lru_cache(maxsize=None)
def launch(script, n=2, timeout=60, args=()):
    """Run `mpiexec -n n python script args` -> CompletedProcess (output as text); the job
    is killed after `timeout` seconds (a test failure, not a hang)."""
    out = os.path.join(tempfile.mkdtemp(prefix="llgrad-mpi-test-"), "report")
    env = dict(os.environ, LLGRAD_NUM_THREADS="1", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MPI_TEST_OUT=out, PYTHONPATH=ROOT + os.pathsep +
               os.environ.get("PYTHONPATH", ""))
    cmd = [mpiexec_path(), "-n", str(n), sys.executable, os.path.join(HERE, script), *args]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"{' '.join(cmd)} did not finish in {timeout} s (a hang):\n{text}")
    proc.reports = {}
    for r in range(n):
        try:
            with open(f"{out}.{r}") as f:
                proc.reports[r] = f.read().splitlines()
        except OSError:
            proc.reports[r] = []
    shutil.rmtree(os.path.dirname(out), ignore_errors=True)
    return proc


def checks(proc, n=2):
    """{name: set of ranks that printed OK} after asserting no rank printed FAIL."""
    text = proc.stdout + proc.stderr
    lines = [ln for r in range(n) for ln in proc.reports[r]]
    fails = [ln for ln in lines if " FAIL " in ln]
    assert not fails, "\n".join(fails) + "\n--- output ---\n" + text
    assert proc.returncode == 0, f"exit code {proc.returncode}\n{text}"
    ok = {}
    for ln in lines:
        parts = ln.split(" ", 3)
        if len(parts) >= 4 and parts[0] == "rank" and parts[2] == "OK":
            ok.setdefault(parts[3], set()).add(int(parts[1]))
    return ok
