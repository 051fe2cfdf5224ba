"""bench/compile_speed.py says whether bytecode was cached: its "cached" children read the .pyc
files a warm-up child wrote under a temporary PYTHONPYCACHEPREFIX (as a pip-installed
wheel's), its "source" children compile llgrad's modules from source, and neither writes
__pycache__ into the source tree."""
import json
import os
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import compile_speed  # noqa: E402


def test_children_environments(monkeypatch):
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", "/somewhere/else")
    cached = compile_speed._env("/tmp/pyc")
    source = compile_speed._env(None)
    assert cached["PYTHONPYCACHEPREFIX"] == "/tmp/pyc"
    assert "PYTHONPYCACHEPREFIX" not in source
    assert cached["PYTHONDONTWRITEBYTECODE"] == source["PYTHONDONTWRITEBYTECODE"] == "1"


def _pycache_dirs():
    return {d for d, _, _ in os.walk(ROOT) if os.path.basename(d) == "__pycache__"}


@pytest.mark.slow
def test_both_modes_rows(capsys):
    before = _pycache_dirs()
    rows = compile_speed.main(["--blocks", "1", "--stack", "0"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[-3:] == ["bytecode", "cpu", "s"]
    assert [r[3] for r in rows] == ["cached", "source"]
    assert [line.split()[8] for line in out[1:]] == ["cached", "source"]
    (_, cached, _, _), (_, source, _, _) = rows
    assert cached["compiled_modules"] == 0          # (every llgrad module from its .pyc)
    assert source["compiled_modules"] > 50
    assert cached["ops"] == source["ops"] == 48
    assert _pycache_dirs() == before


@pytest.mark.slow
def test_child_reports_worker_cpu():
    with tempfile.TemporaryDirectory() as cache:
        got = compile_speed._run(1, 16, cache, "mlp", compile_speed._env(None))
    assert got["build_cpu"] > 0 and got["worker_cpu"] >= 0
    json.dumps(got)
