"""Run each script in examples/ as a subprocess with a short schedule, in both compiled and
eager mode, and check that it exits cleanly and that its final metric is sensible."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
MODES = ["--compile", "--eager"]
# the eager runs of all but mlp.py are marked slow (the suite's time): their default mode is
# compiled, and the eager ops they use are tested op by op throughout the suite
SLOW_EAGER = ["--compile", pytest.param("--eager", marks=pytest.mark.slow)]


def run(script, *args, timeout=60):
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES, script), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def final_accuracy(out):
    m = re.search(r"final test accuracy ([0-9.]+)", out)
    assert m, out
    return float(m.group(1))


@pytest.mark.parametrize("mode", MODES)
def test_mlp_spirals(mode):
    out = run("mlp.py", "--epochs", "15", mode)
    assert final_accuracy(out) > 0.9, out


@pytest.mark.slow
@pytest.mark.parametrize("mode", SLOW_EAGER)
def test_cnn_bars(mode):
    out = run("cnn.py", "--epochs", "3", mode)
    assert final_accuracy(out) > 0.9, out


@pytest.mark.parametrize("mode", SLOW_EAGER)
def test_char_transformer(mode):
    out = run("char_transformer.py", "--steps", "60", "--sample-len", "40", mode)
    losses = [float(x) for x in re.findall(r"^step +\d+ +loss ([0-9.]+)", out, re.M)]
    assert len(losses) >= 3, out
    assert losses[-1] < losses[0] - 1.0, out       # from ~3.7 (uniform) to well below
    sample = out.split("greedy sample:\n", 1)[1]
    assert sample.startswith("The lamp") and len(sample.rstrip("\n")) >= 40, out


@pytest.mark.slow
@pytest.mark.parametrize("mode", SLOW_EAGER)
def test_char_lstm(mode):
    out = run("char_lstm.py", "--steps", "40", "--seq-len", "16", "--hidden", "64",
              "--sample-len", "40", mode, timeout=180)
    losses = [float(x) for x in re.findall(r"^step +\d+ +loss ([0-9.]+)", out, re.M)]
    assert len(losses) >= 3, out
    assert losses[-1] < losses[0] - 1.0, out       # from ~3.6 (uniform) to well below
    sample = out.split("greedy sample:\n", 1)[1]
    assert sample.startswith("The lamp") and len(sample.rstrip("\n")) >= 40, out


@pytest.mark.slow
@pytest.mark.parametrize("mode", SLOW_EAGER)
def test_vit(mode):
    out = run("vit.py", "--epochs", "3", mode, timeout=180)
    assert final_accuracy(out) > 0.7, out          # 3 classes: chance is 0.33
