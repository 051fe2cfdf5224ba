"""A cold process's first build pays only for what its graph uses (issue 19, the small-graph
end of compile time): the lowering modules of rarer ops (convolutions, pooling, linear
algebra, sorting, losses, ...) are imported on the lowering table's first miss, not with
the code generator (lowerings/table.py: defer); the BLAS shims are compiled at -O0.

Checked in a fresh process (this one has imported every lowering long ago): a compiled
MLP block's loss and gradients equal torch's and eager llgrad's without importing any
deferred module; a compiled convolution after it imports them and equals torch's too."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from llgrad.codegen.lowerings import table

torch = pytest.importorskip("torch")

DEFERRED = ["ops_conv", "ops_sort", "ops_avgpool", "ops_pool2d", "ops_batch_norm_backward",
            "ops_special", "ops_linalg", "ops_linalg_solve", "ops_linalg_slogdet",
            "complex_region", "ops_loss", "ops_positional", "ops_advindex"]

_CHILD = r"""
import json, sys
import numpy as np
import llgrad
import llgrad.nn.functional as F
from llgrad.codegen.native import jit

modes = {}
_generate = jit._generate


def generate(irmod, mode, keep_ir):       # (which LLVM pipeline each module was given)
    modes[irmod.name] = mode
    return _generate(irmod, mode, keep_ir)


jit._generate = generate
DEFERRED = %r
rng = np.random.default_rng(0)
arrays = [rng.standard_normal(s).astype(np.float32) * 0.5
          for s in [(8, 16), (16,), (16,), (16, 32), (32,), (32, 16), (16,)]]


def mlp(x, g, b, w1, b1, w2, b2):
    h = F.layer_norm(x, (16,), g, b)
    y = x + F.gelu(h @ w1 + b1) @ w2 + b2
    return (y * y).mean()


def conv(x, w):
    return F.conv2d(x, w, padding=1).sin().sum()


def run(fn, arrays, compiled):
    ts = [llgrad.tensor(a, requires_grad=True) for a in arrays]
    f = llgrad.compile(fn) if compiled else fn
    for _ in range(3):          # (the last call runs native code, in either build mode)
        for t in ts:
            t.grad = None
        loss = f(*ts)
        loss.backward()
        if compiled:
            f.wait()
    how = f.entries[-1].timings.get("forward_how", "") if compiled else ""
    return {"loss": loss.item(), "grads": [t.grad.numpy().tolist() for t in ts], "how": how}


out = {"mlp": run(mlp, arrays, True), "mlp_eager": run(mlp, arrays, False)}
out["after_mlp"] = [m for m in DEFERRED if "llgrad.codegen.lowerings." + m in sys.modules]
conv_arrays = [rng.standard_normal(s).astype(np.float32) for s in [(2, 3, 6, 6), (4, 3, 3, 3)]]
out["conv"] = run(conv, conv_arrays, True)
out["after_conv"] = [m for m in DEFERRED if "llgrad.codegen.lowerings." + m in sys.modules]
out["shims"] = modes.get("llgrad_blas_shims")
print(json.dumps(out))
"""


def _torch_mlp(arrays):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    x, g, b, w1, b1, w2, b2 = ts
    h = torch.nn.functional.layer_norm(x, (16,), g, b)
    y = x + torch.nn.functional.gelu(h @ w1 + b1) @ w2 + b2
    loss = (y * y).mean()
    loss.backward()
    return loss.item(), [t.grad.numpy() for t in ts]


def _torch_conv(arrays):
    x, w = [torch.tensor(a, requires_grad=True) for a in arrays]
    loss = torch.nn.functional.conv2d(x, w, padding=1).sin().sum()
    loss.backward()
    return loss.item(), [x.grad.numpy(), w.grad.numpy()]


def _close(got, loss, grads, rtol):
    np.testing.assert_allclose(got["loss"], loss, rtol=rtol)
    for a, e in zip(got["grads"], grads):
        np.testing.assert_allclose(np.asarray(a, np.float32), e, rtol=rtol,
                                   atol=rtol * float(np.abs(e).max()))


@pytest.mark.slow      # (a fresh process building every support module: ~5 s of CPU)
def test_a_cold_build_imports_only_the_lowerings_its_graph_uses(tmp_path):
    # (an empty cache of its own: the support modules are built, not loaded)
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(tmp_path), LLGRAD_QUIET="1")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_CHILD % (DEFERRED,))],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "LLVM" in out["mlp"]["how"] and "LLVM" in out["conv"]["how"], out
    assert out["after_mlp"] == [], out["after_mlp"]
    assert "ops_conv" in out["after_conv"] and len(out["after_conv"]) == len(DEFERRED)
    assert out["shims"] == "O0"
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) * 0.5
              for s in [(8, 16), (16,), (16,), (16, 32), (32,), (32, 16), (16,)]]
    loss, grads = _torch_mlp(arrays)
    _close(out["mlp"], loss, grads, 1e-4)
    _close(out["mlp"], out["mlp_eager"]["loss"], [np.asarray(g, np.float32) for g in
                                                  out["mlp_eager"]["grads"]], 1e-5)
    conv_arrays = [rng.standard_normal(s).astype(np.float32) for s in [(2, 3, 6, 6),
                                                                       (4, 3, 3, 3)]]
    loss, grads = _torch_conv(conv_arrays)
    _close(out["conv"], loss, grads, 1e-4)


def test_the_table_runs_its_deferred_loaders_on_the_first_miss(monkeypatch):
    t = table._Table()
    runs = []

    def loader():
        runs.append(1)
        dict.__setitem__(t, "late_op", "lowering")

    monkeypatch.setattr(table, "_deferred", [])
    dict.__setitem__(t, "early_op", "x")
    table.defer(loader)
    assert t.get("early_op") == "x" and "early_op" in t and not runs    # (a hit: no load)
    assert not t.registered("late_op") and not runs
    assert t.get("late_op") == "lowering" and runs == [1]
    assert "late_op" in t and t["late_op"] == "lowering" and "other" not in t
    assert t.get("other") is None and runs == [1]          # (loaded once)
    with pytest.raises(KeyError):
        t["other"]


def test_every_walk_over_the_table_sees_the_deferred_lowerings(monkeypatch):
    for walk in (list, len, lambda t: list(t.items()), lambda t: list(t.keys()),
                 lambda t: list(t.values())):
        t = table._Table()
        monkeypatch.setattr(table, "_deferred", [lambda t=t: dict.__setitem__(t, "op", 1)])
        walk(t)
        assert dict.__contains__(t, "op")


def test_a_failing_loader_is_tried_again(monkeypatch):
    t = table._Table()
    tries = []

    def loader():
        tries.append(1)
        if len(tries) == 1:
            raise ImportError("not yet")
        dict.__setitem__(t, "op", 1)

    monkeypatch.setattr(table, "_deferred", [loader])
    with pytest.raises(ImportError):
        t.get("op")
    assert t.get("op") == 1 and len(tries) == 2
