"""bench/workloads.py runs end to end: W1 and W5 with NumPy and the three llgrad systems,
in quick mode, every loss and gradient checked against the NumPy reference."""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "workloads.py")
SYSTEMS = ["numpy", "llgrad eager", "llgrad llvm", "llgrad llvm value_and_grad"]


def test_workloads_quick_w1_w5(tmp_path):
    out_json = tmp_path / "out.json"
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, SCRIPT, "--quick", "--workloads", "W1,W5",
                           "--skip-peers", "--json", str(out_json)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    # table rows: cells separated by two or more spaces; the check column reads OK
    cells = [re.split(r"\s{2,}", ln.strip()) for ln in proc.stdout.splitlines()
             if ln.startswith(("W1 ", "W5 "))]
    table = {(c[0], c[1]): c for c in cells}
    for wl in ("W1", "W5"):
        for system in SYSTEMS:
            assert "OK" in table.get((wl, system), []), (wl, system, proc.stdout)
    rows = json.loads(out_json.read_text())["rows"]
    assert {(r["workload"], r["system"]) for r in rows} == \
        {(w, s) for w in ("W1", "W5") for s in SYSTEMS}
    assert all(r["ok"] and r["time"] > 0 for r in rows), rows
