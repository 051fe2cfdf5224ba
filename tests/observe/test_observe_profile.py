"""llgrad.profile(): every kernel group of a known graph appears, the rows add up to the
measured call time, eager ops are listed by name, the Chrome trace parses, and leaving the
block puts the call path back as it was."""
import json
import time

import numpy as np
import pytest

import llgrad
from llgrad.codegen.kernel import Kernel
from llgrad.compile import compiled_function, instrument


def _mlp_loss(x, w1, w2):
    return ((x @ w1).tanh() @ w2).pow(2).mean()


def _args(n=256, d=512, h=512):
    llgrad.manual_seed(0)
    return (llgrad.randn(n, d), llgrad.randn(d, h, requires_grad=True),
            llgrad.randn(h, 8, requires_grad=True))


def _groups(entry, which):
    from llgrad.compile.groupkernel import group_label
    return [f"{entry.name} {which} {group_label(g)}" for g in entry.kernels[which].plan.groups]


def test_every_kernel_group_of_a_known_graph_appears():
    f = llgrad.compile(_mlp_loss)
    args = _args(32, 64, 64)
    for _ in range(2):
        f(*args).backward()
        f.wait()        # (background builds: native code from the next call on)
    entry = f.entries[-1]
    with llgrad.profile() as p:
        for _ in range(3):
            f(*args).backward()
    names = {r.name: r for r in p.kernel_rows()}
    want = _groups(entry, "forward") + _groups(entry, "backward")
    assert len(want) >= 4
    for label in want:
        assert label in names, (label, sorted(names))
        assert names[label].calls == 3
    table = p.table()
    for label in want:
        assert label[:60] in table
    mm = [r for r in p.kernel_rows() if " mm " in r.name or r.name.endswith(" mm")
          or " mm (" in r.name]
    assert mm and all("GFLOP/s" in r.rate for r in mm), [(r.name, r.rate) for r in mm]
    assert any("GB/s" in r.rate for r in p.kernel_rows())
    assert "guards and dispatch" in table and "launch (checks, allocation)" in table


def test_rows_add_up_to_the_measured_call_time():
    f = llgrad.compile(_mlp_loss)
    args = _args()
    with llgrad.no_grad():
        for _ in range(2):
            f(*args)
            f.wait()
    best = None
    for attempt in range(8):        # (a noisy machine: the best of a few tries)
        with llgrad.profile() as p, llgrad.no_grad():
            measured = 0.0
            for _ in range(5):
                t0 = time.perf_counter_ns()
                f(*args)
                measured += time.perf_counter_ns() - t0
        total = p.total_ns()
        kernels = sum(r.total_ns for r in p.kernel_rows())
        # the events lie inside the calls measured around them, whatever the load
        assert 0 < kernels <= total <= measured, (kernels, total, measured)
        err = (measured - total) / measured
        best = err if best is None else min(best, err)
        if err < 0.10:
            break
    assert best < 0.10, (best, total, measured)      # (the acceptance's bound of issue 26)
    assert p.top_ns == total


def test_eager_ops_by_name_and_backward_nodes():
    x = llgrad.randn(64, 64, requires_grad=True)
    with llgrad.profile() as p:
        y = (x * 2).tanh().sum()
        y.backward()
    rows = {r.name: r for r in p.key_averages()}
    assert "eager mul" in rows and "eager tanh" in rows and "eager sum" in rows, sorted(rows)
    assert rows["eager mul"].calls >= 1 and rows["eager mul"].kind == "eager"   # (VJPs too)
    assert any(r.kind == "eager backward" and r.name == "TanhBackward0" for r in rows.values())


def test_chrome_trace_parses(tmp_path):
    f = llgrad.compile(_mlp_loss)
    args = _args(16, 32, 32)
    f(*args).backward()
    f.wait()
    with llgrad.profile() as p:
        f(*args).backward()
        f(*args).backward()
    path = p.export_chrome_trace(str(tmp_path / "trace.json"))
    data = json.loads(open(path).read())
    events = data["traceEvents"]
    assert events and all(e["ph"] == "X" and e["dur"] >= 0 for e in events)
    assert any(e["cat"] == "kernel" and " mm" in e["name"] for e in events)
    assert any(e["cat"] == "call" for e in events)


def test_leaving_the_block_restores_everything_and_results_stay_right():
    f = llgrad.compile(_mlp_loss)
    args = _args(16, 32, 32)
    f(*args).backward()
    f.wait()
    f(*args).backward()
    entry = f.entries[-1]
    kernels = dict(entry.kernels)
    want = f(*args).item()
    with llgrad.profile():
        assert compiled_function.CompiledFunction.__call__ is not instrument._ORIG_CALL_FOR_TESTS
        assert f(*args).item() == want
        g = llgrad.compile(lambda x: (x * 3).exp().sum())      # traced and built inside
        xs = llgrad.randn(5, requires_grad=True)
        for _ in range(3):
            g(xs).backward()
            g.wait()    # (background: built on the worker while the profile is on)
    assert compiled_function.CompiledFunction.__call__ is instrument._ORIG_CALL_FOR_TESTS
    assert not instrument.active()
    for which, k in kernels.items():
        assert entry.kernels[which] is k
    assert all(type(k) is Kernel and k._native is not None for k in
               g.entries[-1].kernels.values())
    assert f(*args).item() == want
    np.testing.assert_allclose(g(xs).item(), np.exp(3 * xs.detach().numpy()).sum(), rtol=1e-5)


@pytest.mark.parametrize("groups", [False, True])
def test_whole_kernel_timing_without_group_wrappers(groups):
    f = llgrad.compile(_mlp_loss)
    args = _args(16, 32, 32)
    for _ in range(2):
        f(*args).backward()
        f.wait()
    with llgrad.profile(groups=groups) as p:
        f(*args).backward()
    names = [r.name for r in p.kernel_rows()]
    if groups:
        assert any(" g0 " in n for n in names), names
    else:
        assert "_mlp_loss forward kernel" in names and "_mlp_loss backward kernel" in names
