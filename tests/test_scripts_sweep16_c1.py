"""A model class in a file of its own, reading a module of the user's (`from . import cfg`,
`import cfg`): `cfg.act(h) * cfg.SCALE` in forward. The compiled step walked the method's
globals and took the module itself for a value it could not guard, so every call ran
eagerly ("the call reaches one of the user's modules ... as a value"). A module named by a
method is now walked through the attributes it reads, as one named by the compiled
function is. Each program runs in a child process laid out as a user's project."""
import json
import os
import subprocess
import sys
import textwrap
import zipfile

import pytest

torch = pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CFG = """
import LIB
SCALE = 1.0
SHIFT = LIB.zeros(3)


def act(x):
    return LIB.tanh(x) + SHIFT
"""

MODEL = """
import LIB.nn as nn
from . import cfg


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(4, 3)

    def forward(self, x):
        return cfg.act(self.l1(x)) * cfg.SCALE
"""

MAIN = """
import json, sys, warnings
import LIB
import LIB.nn.functional as F
WHERE
from nets import Net, cfg


def run(compiled):
    net = Net()
    with LIB.no_grad():
        for p in net.parameters():
            p.copy_(LIB.arange(p.numel(), dtype=LIB.float32).reshape(p.shape) / 10 - 0.3)
    opt = LIB.optim.SGD(net.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    f = LIB.compile(step) if compiled else step
    x = LIB.arange(8, dtype=LIB.float32).reshape(2, 4) / 8
    y = LIB.ones(2, 3)
    cfg.SCALE, cfg.SHIFT = 1.0, LIB.zeros(3)
    out = []
    for i in range(5):
        if i == 2:
            cfg.SCALE = 2.5                     # a setting changed: traced again
        if i == 3:
            cfg.SHIFT = LIB.full((3,), 0.5)     # the module's tensor replaced
        if i == 4:
            cfg.SHIFT.mul_(2)                   # and written in place
        out.append(f(x, y).item())
    return out, getattr(f, "n_traces", None)


if __name__ == "__main__":
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        eager = run(False)
        compiled = run(COMPILED) if COMPILED else eager
    print(json.dumps([eager, compiled, [str(m.message) for m in w
                                        if "llgrad" in str(m.message)]]))
"""


def _project(root, lib, where, compiled):
    """The user's project under root: main.py beside a package nets/ (or nets in a zip)."""
    os.makedirs(os.path.join(root, "nets"))
    files = {"nets/__init__.py": "from .model import Net\n", "nets/cfg.py": CFG,
             "nets/model.py": MODEL}
    for name, text in files.items():
        with open(os.path.join(root, name), "w") as fh:
            fh.write(text.replace("LIB", lib))
    if where == "zip":
        with zipfile.ZipFile(os.path.join(root, "nets.zip"), "w") as z:
            for name in files:
                z.write(os.path.join(root, name), name)
        for name in files:
            os.remove(os.path.join(root, name))
        os.rmdir(os.path.join(root, "nets"))
        head = "import os; sys.path.insert(0, os.path.join(os.path.dirname(__file__), 'nets.zip'))"
    else:
        head = ""
    main = MAIN.replace("LIB", lib).replace("WHERE", head).replace("COMPILED", repr(compiled))
    with open(os.path.join(root, "main.py"), "w") as fh:
        fh.write(main)


def _run(tmp_path, lib, where, compiled):
    root = str(tmp_path / f"{lib}-{where}")
    _project(root, lib, where, compiled)
    env = dict(os.environ, LLGRAD_COMPILE="sync", LLGRAD_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "main.py"], cwd=root, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("where", ["package", pytest.param("zip", marks=pytest.mark.slow)])
def test_a_model_reading_a_users_module_compiles_and_follows_it(tmp_path, where):
    (eager, _), (compiled, n_traces), warned = _run(tmp_path, "llgrad", where, True)
    assert warned == []
    assert compiled == eager
    assert n_traces == 2            # the first call, and the call after SCALE changed
    (expected, _), _, _ = _run(tmp_path, "torch", "package", False)
    assert eager == pytest.approx(expected, rel=1e-5)
