"""llgrad.profiler / llgrad.autograd.profiler against torch.profiler: event names (PyTorch's
aten names), call counts, input shapes, the table's layout, schedules and step events,
Chrome traces, the older autograd API; no hook left when nothing records; a compiled
training step with record_function blocks inside gives eager's results while profiled."""
import json
import os
import re
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.autograd.profiler as autograd_profiler
import llgrad.profiler as profiler
from llgrad.profiler import ProfilerAction, ProfilerActivity, profile, record_function
from llgrad.runtime import dispatch

torch = pytest.importorskip("torch")


def _run(lib, x, w):
    with lib.profiler.profile(activities=[lib.profiler.ProfilerActivity.CPU],
                              record_shapes=True) as prof:
        with lib.no_grad():
            with lib.profiler.record_function("block"):
                for _ in range(3):
                    y = lib.mm(x, w)
                y = y + 1
                y = y + 2
                y.relu()
    return prof


def _counts(prof):
    return {e.key: e.count for e in prof.key_averages()}


def test_names_counts_and_shapes_match_torch():
    a = np.ones((4, 3), np.float32)
    b = np.ones((3, 2), np.float32)
    tp = _run(torch, torch.tensor(a), torch.tensor(b))
    lp = _run(llgrad, llgrad.tensor(a), llgrad.tensor(b))
    tc, lc = _counts(tp), _counts(lp)
    for name in ("block", "aten::mm", "aten::add", "aten::relu"):
        assert lc[name] == tc[name], name
    shapes = {(e.key, str(e.input_shapes))
              for e in lp.key_averages(group_by_input_shape=True)}
    assert ("aten::mm", "[[4, 3], [3, 2]]") in shapes
    assert dispatch.profiler is None            # (nothing on the op path after the block)
    block = [e for e in lp.events() if e.name == "block"][0]
    assert {c.name for c in block.cpu_children} == {"aten::mm", "aten::add", "aten::relu"}
    assert block.self_cpu_time_total <= block.cpu_time_total


def test_table_layout_is_torchs():
    a, b = np.ones((4, 3), np.float32), np.ones((3, 2), np.float32)
    tt = _run(torch, torch.tensor(a), torch.tensor(b)).key_averages().table(
        sort_by="cpu_time_total", row_limit=3)
    lt = _run(llgrad, llgrad.tensor(a), llgrad.tensor(b)).key_averages().table(
        sort_by="cpu_time_total", row_limit=3)
    tl, ll = tt.splitlines(), lt.splitlines()
    assert len(tl) == len(ll) == 8                  # rule, header, rule, 3 rows, rule, total
    heads = [re.split(r"\s{2,}", line.strip()) for line in (tl[1], ll[1])]
    assert heads[0] == heads[1]
    assert [len(c) for c in tl[0].split()] == [len(c) for c in ll[0].split()] or \
        [len(c) for c in tl[0].split()][1:] == [len(c) for c in ll[0].split()][1:]
    assert ll[-1].startswith("Self CPU time total: ")
    rows = [re.split(r"\s{2,}", r.strip()) for r in ll[3:6]]
    totals = [float(re.sub("[a-z]+", "", r[4])) * (1e3 if r[4].endswith("ms") else 1)
              for r in rows]
    assert totals == sorted(totals, reverse=True)
    mem = _run(llgrad, llgrad.tensor(a), llgrad.tensor(b))
    assert mem.key_averages().table(row_limit=1).count("\n") == 6


def test_record_function_as_decorator_and_memory_columns():
    @record_function("my_fn")
    def f(x):
        return x * 2

    x = llgrad.ones(8)
    with profile(profile_memory=True) as prof:
        f(x)
        f(x)
    avg = {e.key: e for e in prof.key_averages()}
    assert avg["my_fn"].count == 2 and avg["aten::mul"].count == 2
    assert avg["aten::mul"].cpu_memory_usage == 2 * 8 * 4
    assert avg["my_fn"].cpu_memory_usage == 2 * 8 * 4       # (its children's, as PyTorch)
    assert "Self CPU Mem" in prof.key_averages().table()
    f(x)                                                    # (not recording: no error)


def test_inplace_and_backward_events():
    x = llgrad.ones(3, requires_grad=True)
    with profile() as prof:
        y = (x * 3).sum()
        y.backward()
        with llgrad.no_grad():
            x.add_(1)
    names = {e.name for e in prof.events()}
    assert {"aten::mul", "aten::sum", "aten::add_", "SumBackward0",
            "autograd::engine::evaluate_function: SumBackward0"} <= names


def test_schedule_actions_match_torch():
    for kw in ({"wait": 1, "warmup": 1, "active": 2, "repeat": 1},
               {"wait": 2, "warmup": 1, "active": 1, "repeat": 0, "skip_first": 2},
               {"wait": 1, "warmup": 1, "active": 3, "repeat": 2, "skip_first_wait": 1}):
        ts, ls = torch.profiler.schedule(**kw), profiler.schedule(**kw)
        assert [ts(i).name for i in range(14)] == [ls(i).name for i in range(14)]
    assert {m: int(getattr(ProfilerActivity, m)) for m in ("CPU", "CUDA", "XPU")} == \
        {m: int(getattr(torch.profiler.ProfilerActivity, m)) for m in ("CPU", "CUDA", "XPU")}
    assert [a.value for a in ProfilerAction] == [a.value for a in torch.profiler.ProfilerAction]


def _scheduled(lib):
    ready = []

    def on_ready(p):
        ready.append(sorted({(e.name, e.trace_name) for e in p.events()
                             if e.name.startswith("ProfilerStep")}))
    x = lib.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with lib.profiler.profile(schedule=lib.profiler.schedule(wait=1, warmup=1, active=2,
                                                                 repeat=2),
                                  on_trace_ready=on_ready) as prof:
            for _ in range(9):
                x + 1
                prof.step()
    return ready


def test_schedule_steps_and_trace_ready_match_torch():
    assert _scheduled(llgrad) == _scheduled(torch)


def test_chrome_trace_and_tensorboard_handler(tmp_path):
    x = llgrad.ones(4, requires_grad=True)
    with profile(record_shapes=True, with_stack=True) as prof:
        with record_function("step"):
            (x * x).sum().backward()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    data = json.loads(path.read_text())
    xs = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert {"step", "aten::mul", "aten::sum"} <= {e["name"] for e in xs}
    assert all(e["dur"] >= 0 and "ts" in e and "pid" in e and "tid" in e for e in xs)
    assert any(__file__ in s for e in prof.events() for s in e.stack)
    handler = profiler.tensorboard_trace_handler(str(tmp_path / "tb"))
    with profile(on_trace_ready=handler, schedule=profiler.schedule(wait=0, warmup=1,
                                                                    active=1, repeat=1)) as p:
        for _ in range(3):
            x + 1
            p.step()
    files = os.listdir(tmp_path / "tb")
    assert len(files) == 1 and files[0].endswith(".pt.trace.json")
    assert "traceEvents" in json.loads((tmp_path / "tb" / files[0]).read_text())


def test_autograd_profiler_api():
    x = llgrad.ones(2, 2)
    prof = autograd_profiler.profile()
    with pytest.raises(RuntimeError, match="didn't finish"):
        prof.key_averages()
    with prof:
        with autograd_profiler.record_function("outer"):
            x @ x
    with autograd_profiler.emit_nvtx():
        x @ x
    names = [e.name for e in prof.function_events]
    assert names[:2] == ["outer", "aten::mm"]
    assert prof.self_cpu_time_total > 0
    assert "outer" in prof.table(sort_by="self_cpu_time_total")
    assert prof.total_average().count == 2
    assert llgrad.autograd.profiler is autograd_profiler


def test_compiled_training_step_with_record_function_blocks():
    """The blocks change nothing a compiled step computes: the same results as the step
    without blocks and without a profile (and eager's, up to float32 rounding)."""
    def make():
        llgrad.manual_seed(0)
        model = llgrad.nn.Linear(3, 2)
        return model, llgrad.optim.SGD(model.parameters(), lr=0.1)

    def step_of(model, opt, blocks):
        def step(x, y):
            opt.zero_grad()
            if blocks:
                with record_function("forward"):
                    out = model(x)
                with record_function("loss"):
                    loss = ((out - y) ** 2).mean()
            else:
                out = model(x)
                loss = ((out - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        return step

    rng = np.random.default_rng(0)
    data = [(llgrad.tensor(rng.standard_normal((5, 3)).astype(np.float32)),
             llgrad.tensor(rng.standard_normal((5, 2)).astype(np.float32))) for _ in range(4)]
    m0, o0 = make()
    eager = [step_of(m0, o0, True)(x, y).item() for x, y in data]
    m1, o1 = make()
    plain = llgrad.compile(step_of(m1, o1, False))
    expected = [plain(x, y).item() for x, y in data]
    m2, o2 = make()
    cstep = llgrad.compile(step_of(m2, o2, True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with profile() as prof:
            compiled = [cstep(x, y).item() for x, y in data]
    assert compiled == expected
    np.testing.assert_array_equal(m1.weight.detach().numpy(), m2.weight.detach().numpy())
    np.testing.assert_allclose(compiled, eager, rtol=1e-6)
    names = {e.name for e in prof.events()}
    assert "llgrad::compiled: step" in names
    assert "forward" in names                  # (the trace ran the blocks)
