"""examples/mlp.py's checkpoint: written with llgrad.save, it is a PyTorch checkpoint --
torch.load (weights_only=True) reads it into a torch model of the same layers, which then
predicts what the llgrad model predicted (when torch is installed)."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import llgrad

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_mlp_checkpoint_loads_in_llgrad_and_torch(tmp_path):
    path = tmp_path / "mlp.pt"
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "mlp.py"), "--epochs",
                           "3", "--eager", "--checkpoint", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reloaded = float(re.search(r"reloaded: test acc ([0-9.]+)", proc.stdout).group(1))
    final = float(re.search(r"final test accuracy ([0-9.]+)", proc.stdout).group(1))
    assert reloaded == final

    ckpt = llgrad.load(path)
    assert ckpt["epoch"] == 3 and set(ckpt) == {"epoch", "model", "optimizer", "scheduler"}
    assert list(ckpt["optimizer"]["state"][0]) == ["step", "exp_avg", "exp_avg_sq"]
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    try:
        import mlp
    finally:
        sys.path.pop(0)
    model = mlp.make_model(64)
    model.load_state_dict(ckpt["model"])
    x = np.random.default_rng(0).standard_normal((6, 2)).astype(np.float32)
    with llgrad.no_grad():
        ours = model(llgrad.from_numpy(x)).numpy()

    torch = pytest.importorskip("torch")
    tckpt = torch.load(path, weights_only=True)
    tmodel = torch.nn.Sequential(torch.nn.Linear(2, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64),
                                 torch.nn.Tanh(), torch.nn.Linear(64, 3))
    tmodel.load_state_dict(tckpt["model"])
    topt = torch.optim.Adam(tmodel.parameters(), lr=torch.tensor(0.02))
    topt.load_state_dict(tckpt["optimizer"])
    with torch.no_grad():
        np.testing.assert_allclose(tmodel(torch.from_numpy(x)).numpy(), ours, rtol=1e-5,
                                   atol=1e-6)
