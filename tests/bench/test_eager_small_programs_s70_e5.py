"""bench/eager_small_programs.py's programs give torch's gradients (its check, which runs
before any timing): the LSTMCell loop, the small MLP's step, the elementwise chain and the
indexing / views program against torch to float32 rounding; the MAML step runs three steps to
a finite loss. Its timing loop runs end to end (one short block)."""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import eager_small_programs  # noqa: E402

import llgrad  # noqa: E402


@pytest.mark.parametrize("name", ["lstm", "mlp", "chain", "views"])
def test_program_matches_torch(name):
    steps = {lib.__name__: eager_small_programs.PROGRAMS[name](lib) for lib in (llgrad, torch)}
    assert "match torch" in eager_small_programs.check(name, steps)


def test_script_runs():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "eager_small_programs.py"),
                           "chain,views", "--blocks", "1", "--seconds", "0.02"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr
    rows = [ln.split()[0] for ln in proc.stdout.splitlines() if ln and not ln.startswith("#")]
    assert rows == ["program", "chain", "views"], proc.stdout
