"""Images of changing size through a conv net with adaptive pooling, compiled to native code,
against torch and eager llgrad (sweep 21); a third batch size runs the code shared with the
second (codegen/size_params.py) instead of building its own."""
import pytest
from contract_harness_sweep7 import runs

import llgrad

torch = pytest.importorskip("torch")


def images_of_changing_size(lib, wrap, see):
    nn = lib.nn
    m = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(),
                      nn.MaxPool2d(2), nn.AdaptiveAvgPool2d((2, 2)), nn.Flatten(),
                      nn.Linear(12, 3))
    opt = lib.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    sch = lib.optim.lr_scheduler.ExponentialLR(opt, 0.9)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        sch.step()
        return loss
    g = wrap(step)
    for b, s in [(2, 8), (2, 8), (2, 11), (2, 11), (3, 6), (2, 8), (1, 9), (2, 11)]:
        x = lib.arange(b * 2 * s * s * 1.).reshape(b, 2, s, s).div(37).sin()
        see(g(x, lib.arange(b) % 3), m[1].running_mean, m[1].running_var, m[0].weight,
            opt.param_groups[0]["lr"])


def test_images_of_changing_size():
    runs(images_of_changing_size, torch, backend="llvm")


def test_a_third_batch_size_runs_the_shared_code(monkeypatch):
    monkeypatch.setenv("LLGRAD_SHARE_SIZES", "1")
    llgrad.manual_seed(0)
    m = llgrad.nn.Sequential(llgrad.nn.Linear(8, 16), llgrad.nn.ReLU(), llgrad.nn.Linear(16, 3))
    opt = llgrad.optim.SGD(m.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = llgrad.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss
    cf = llgrad.compile(step)
    counts = []
    for n in [32, 32, 24, 24, 40, 40, 32, 24, 40]:
        x = llgrad.arange(n * 8.).reshape(n, 8).div(50).sin()
        cf(x, llgrad.arange(n) % 3)
        cf.wait()
        counts.append((cf.n_traces, cf.n_llvm_compiles))
    # (a module is built when a call runs its entry again; the second size makes the
    # template, the third runs it, made from the first two's entries without a trace)
    assert counts[-1] == (2, 2), counts
