"""A plan loaded from the disk cache (codegen/prepared.py) whose kernel calls back into
Python (host_call.py: LAPACK ops, complex regions) registers the keys its callbacks look
up: the prepare that registered them ran in the process that stored the plan. Without
that, the warm process's kernel raised its error flag at every call and the call ran
eagerly, silently."""
import json
import os
import subprocess
import sys

import numpy as np

_PROGRAM = r"""
import json, sys
import llgrad as torch
from llgrad.codegen import prepared
from llgrad.codegen.lowerings import host_call

def step(a, x):
    x.add_(1)
    y = torch.linalg.inv(a @ a.mT + torch.eye(4)) @ x
    return (y.sin() * 2).sum()

cf = torch.compile(step)
torch.manual_seed(0)
a, x = torch.randn(4, 4), torch.randn(4, 3)
x2 = x.clone()
got = [cf(a, x).item() for _ in range(3)]
want = [step(a, x2).item() for _ in range(3)]
print(json.dumps({"got": got, "want": want, "x_same": bool((x == x2).all()),
                  "loaded": prepared.counts["loaded"], "keys": len(host_call._CALLS),
                  "traces": cf.n_traces}))
"""


def _run(tmp_path):
    env = dict(os.environ, LLGRAD_COMPILE="sync", LLGRAD_CACHE_DIR=str(tmp_path / "cache"),
               LLGRAD_CHECK_PREPARED="0")
    out = subprocess.run([sys.executable, "-c", _PROGRAM], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_warm_process_registers_the_host_calls_of_a_loaded_plan(tmp_path):
    cold = _run(tmp_path)
    warm = _run(tmp_path)
    assert cold["loaded"] == 0 and warm["loaded"] >= 1
    assert warm["keys"] >= 1 and warm["keys"] == cold["keys"]
    for run in (cold, warm):
        np.testing.assert_allclose(run["got"], run["want"], rtol=1e-5)
        assert run["x_same"] and run["traces"] == 1
    assert warm["got"] == cold["got"]
