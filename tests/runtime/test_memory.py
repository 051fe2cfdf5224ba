"""Memory: 10,000 training steps of W1 (batch 32, MLP 64-128-128-10, tanh, cross-entropy,
SGD), eager and compiled, keep resident memory flat: saved tensors are freed after each
backward and no reference cycle keeps a graph alive (after the first 1,000 steps, when
compiling is over, the run has the cyclic garbage collector switched off, so a cycle per
step would show as growth and as unreachable objects at the end)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

_SCRIPT = textwrap.dedent("""
    import gc, json, sys
    import numpy as np
    import llgrad
    from llgrad import nn, optim

    def rss_mib():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096 / 2**20

    mode, steps = sys.argv[1], int(sys.argv[2])
    llgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.Tanh(), nn.Linear(128, 128), nn.Tanh(),
                          nn.Linear(128, 10))
    opt = optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    rng = np.random.default_rng(0)
    x = llgrad.tensor(rng.standard_normal((32, 64)).astype(np.float32))
    y = llgrad.tensor(rng.integers(0, 10, 32))

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    run = llgrad.compile(step) if mode == "compiled" else step
    marks, losses = {}, []
    for i in range(1, steps + 1):
        loss = run(model, opt, x, y)
        if i % 1000 == 0:
            losses.append(loss.item())
            if i == 1000:           # compiling is over: from here on, no collector
                gc.collect()
                gc.disable()
            marks[i] = rss_mib()
    unreachable = gc.collect()
    print(json.dumps({"marks": marks, "losses": losses, "unreachable": unreachable,
                      "traces": getattr(run, "n_traces", 0)}))
""")


def _run(mode, steps):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", _SCRIPT, mode, str(steps)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_ten_thousand_steps_keep_memory_flat(mode):
    r = _run(mode, 10_000)
    marks = {int(k): v for k, v in r["marks"].items()}
    growth = marks[10_000] - marks[1_000]
    assert growth < 4.0, f"resident memory grew {growth:.1f} MiB: {marks}"
    assert r["unreachable"] < 100, r["unreachable"]       # no garbage cycles per step
    assert r["losses"][-1] < r["losses"][0]               # it did train
    if mode == "compiled":
        assert r["traces"] <= 2


@pytest.mark.slow
def test_a_leak_would_be_seen():
    """The measurement can fail: keeping every step's loss (and so its graph) alive grows
    resident memory well past the bound above."""
    leaky = _SCRIPT.replace("losses.append(loss.item())", "pass").replace(
        "loss = run(model, opt, x, y)", "losses.append(run(model, opt, x, y))")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    leaky = leaky.replace('"losses": losses', '"losses": []')
    out = subprocess.run([sys.executable, "-c", leaky, "eager", "2000"], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    marks = json.loads(out.stdout.strip().splitlines()[-1])["marks"]
    assert marks["2000"] - marks["1000"] > 4.0


@pytest.mark.parametrize("nested", [False, True])
def test_results_are_freed_when_dropped_without_the_collector(nested):
    """A compiled function's results die with their last reference (no reference cycle
    through the structure that rebuilds nested outputs)."""
    import gc
    import weakref

    import llgrad
    fn = (lambda x: ((x * 2).sum(), (x.exp(), [x * 3]))) if nested else (lambda x: x * 2)
    cf = llgrad.compile(fn)
    x = llgrad.ones(8)
    for _ in range(3):
        cf(x)
    gc.collect()
    gc.disable()
    try:
        out = cf(x)
        leaves = [out] if not nested else [out[0], out[1][0], out[1][1][0]]
        refs = [weakref.ref(t) for t in leaves]
        del out, leaves
        assert [r() for r in refs] == [None] * len(refs)
    finally:
        gc.enable()
