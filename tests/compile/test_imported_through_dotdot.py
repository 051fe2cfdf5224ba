"""llgrad imported through a path with `..` in it, as scripts beside a checkout do
(`sys.path.insert(0, os.path.join(here, ".."))`): its frames' file names are not normalised,
and must still count as llgrad's own. They did not, so a compiled training step took the
autograd engine's own read of `grad_fn` for the user's and ran eagerly."""
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = textwrap.dedent("""
    import os, sys, warnings
    sys.path.insert(0, os.path.join({tests!r}, ".."))
    import llgrad
    import llgrad.nn as nn
    import llgrad.nn.functional as F
    assert ".." in llgrad.__file__, llgrad.__file__
    warnings.simplefilter("error")
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = llgrad.optim.Adam(model.parameters(), lr=1e-2)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    f = llgrad.compile(step)
    x, y = llgrad.randn(5, 6), llgrad.tensor([0, 1, 2, 0, 1])
    for _ in range(4):
        f(x, y).item()
    print(f.n_traces, f.n_llvm_compiles)
""")


def test_a_compiled_step_compiles_when_llgrad_comes_through_dotdot(tmp_path):
    env = dict(os.environ, LLGRAD_COMPILE="sync", LLGRAD_CACHE_DIR=str(tmp_path))
    env.pop("PYTHONPATH", None)
    script = SCRIPT.format(tests=os.path.join(ROOT, "tests"))
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=str(tmp_path),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "1"]
