"""LLGRAD_LOG channels (recompiles, graph_breaks, guards, compile, perf), the progress line,
and that logging off leaves the call path as it is."""
import logging
import os
import subprocess
import sys
import warnings

import pytest

import llgrad
import llgrad.nn as nn
from llgrad.compile import compiled_function, instrument, log


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.records = []

    def emit(self, record):
        self.records.append(record)

    def text(self, channel=None):
        return "\n".join(r.getMessage() for r in self.records
                         if channel is None or r.name == f"llgrad.{channel}")


@pytest.fixture
def logs():
    """logs(spec) -> a handler that collects the records of those channels."""
    handlers = []

    def start(spec):
        h = _Records()
        logging.getLogger("llgrad").addHandler(h)      # (set_logs then adds no stderr one)
        handlers.append(h)
        llgrad.set_logs(spec)
        return h
    yield start
    llgrad.set_logs(None)
    for h in handlers:
        logging.getLogger("llgrad").removeHandler(h)


def _line(marker):
    """The line number of `marker` in this file."""
    with open(__file__) as f:
        for k, line in enumerate(f, 1):
            if marker in line and "_line(" not in line:
                return k
    raise AssertionError(marker)


def test_recompile_on_a_new_shape_names_the_shape_guard_and_the_line(logs):
    h = logs("recompiles")

    @llgrad.compile
    def f(x):
        return (x * 2).sum()

    f(llgrad.randn(4, 3, requires_grad=True))
    assert h.text("recompiles") == ""                   # a first trace is no recompile
    f(llgrad.randn(8, 3, requires_grad=True))           # RECOMPILE-SHAPE
    text = h.text("recompiles")
    assert "x.shape[0] == 4 (now 8)" in text, text
    assert "x: shape (4, 3) -> (8, 3)" in text, text
    assert f"test_observe_logs.py:{_line('# RECOMPILE-SHAPE')}" in text, text
    f(llgrad.randn(8, 3, dtype=llgrad.float64, requires_grad=True))
    assert "x.dtype == float32 (now float64)" in h.text("recompiles")


def test_recompile_of_an_optimiser_value_reads_as_python(logs):
    m = nn.Linear(3, 2)
    opt = llgrad.optim.SGD(m.parameters(), lr=0.1)

    @llgrad.compile
    def step(m, opt, x):
        opt.zero_grad()
        loss = m(x).sum()
        loss.backward()
        opt.step()
        return loss.detach()

    x = llgrad.randn(5, 3)
    step(m, opt, x)
    step(m, opt, x)
    h = logs("recompiles")
    opt.param_groups[0]["lr"] = 0.05        # (an input read at each call: no recompile)
    step(m, opt, x)
    assert h.text() == "", h.text()
    opt.param_groups[0]["dampening"] = 0.5
    step(m, opt, x)
    assert "opt.param_groups[0]['dampening'] == 0 (now 0.5)" in h.text(), h.text()
    m.eval()
    step(m, opt, x)
    assert "m.training == True (now False)" in h.text(), h.text()


def test_recompile_after_a_structure_change_names_the_container_that_changed(logs):
    # (opt.load_state_dict puts each group's 'params' key last, as PyTorch's: the reason
    # names that group's keys, not `len(opt.param_groups) == 1 (now: ... == 1)`)
    m = nn.Linear(3, 2)
    opt = llgrad.optim.Adam(m.parameters(), lr=0.1)

    @llgrad.compile
    def step(x):
        loss = m(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    x = llgrad.randn(5, 3)
    step(x)
    step(x)
    h = logs("recompiles")
    opt.load_state_dict(opt.state_dict())
    step(x)
    text = h.text()
    assert "list(opt.param_groups[0].keys()) == ['params', 'lr'," in text, text
    assert "(now: list(opt.param_groups[0].keys()) == ['lr'," in text, text
    assert "[opt.param_groups[0]: structure changed]" in text, text
    h.records.clear()
    box = {"sizes": [1, 2]}

    @llgrad.compile
    def f(x):
        return x * len(box["sizes"])

    f(x)
    box["sizes"].append(3)
    f(x)
    assert "len(box['sizes']) == 2 (now: len(box['sizes']) == 3)" in h.text(), h.text()


def test_a_value_guard_recompile_says_where_the_value_was_read(logs):
    h = logs("recompiles")

    @llgrad.compile(transform=False)
    def f(x):
        if x.sum() > 0:                                 # VALUE-READ
            return x * 2
        return x * 3

    f(llgrad.ones(3))
    f.wait()            # (built: the next call checks the value guard)
    f(-llgrad.ones(3))
    text = h.text()
    assert "value guard failed" in text and \
        f"test_observe_logs.py:{_line('# VALUE-READ')}" in text, text


def test_graph_break_names_the_construct_and_the_line(logs):
    h = logs("graph_breaks")

    @llgrad.compile
    def f(x):
        y = x * 2
        y.numpy()                                       # GRAPH-BREAK
        return y.sum()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f(llgrad.randn(3))
    text = h.text("graph_breaks")
    assert "running eagerly" in text and "numpy()" in text, text
    assert f"test_observe_logs.py:{_line('# GRAPH-BREAK')}" in text, text
    assert f.graph_breaks and "numpy()" in f.graph_breaks[0]


def test_guards_channel_lists_readable_guards(logs):
    h = logs("guards")
    model = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 3))
    opt = llgrad.optim.Adam(model.parameters(), lr=0.01)

    @llgrad.compile
    def step(model, opt, x):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    x = llgrad.randn(32, 2)
    step(model, opt, x)         # (Adam's first step makes its state: not kept)
    step(model, opt, x)
    text = h.text("guards")
    for want in ("type(model) is Sequential", "type(model[0]) is Linear",
                 "model[0].weight.dtype == float32 and model[0].weight.shape == (4, 2)",
                 "opt.param_groups[0]['lr'] != 0  (its value an input, read at each call)",
                 "opt.param_groups[0]['eps'] == 1e-08", "x.shape == (32, 2)",
                 "llgrad.is_grad_enabled() == True"):
        assert want in text, (want, text)
    assert "__modules" not in text and "_parameters_" not in text, text


def test_compile_channel_reports_trace_and_kernel_builds(logs):
    h = logs("compile")

    @llgrad.compile
    def f(x, w):
        return (x @ w).tanh().sum()

    x, w = llgrad.randn(3, 5), llgrad.randn(5, 2, requires_grad=True)
    f(x, w).backward()
    f.wait()            # (background: the kernels are built and logged meanwhile)
    f(x, w).backward()
    text = h.text("compile")
    assert "traced f (forward 3 ops, backward" in text and "partition" in text, text
    assert "f forward graph (3 ops)" in text and "f backward graph" in text, text
    assert any(w in text for w in ("LLVM", "disk cache", "in memory")), text


def test_perf_channel_splits_each_call(logs):
    @llgrad.compile
    def f(x, w):
        return (x @ w).tanh().sum()

    x, w = llgrad.randn(3, 5), llgrad.randn(5, 2, requires_grad=True)
    f(x, w).backward()
    f.wait()
    h = logs("perf")
    f(x, w).backward()
    f(x, w).backward()
    text = h.text("perf")
    assert "f: " in text and "guards and dispatch" in text and "kernels" in text, text
    assert "f backward: " in text and "launch" in text, text
    llgrad.set_logs(None)
    assert compiled_function.CompiledFunction.__call__ is instrument._ORIG_CALL_FOR_TESTS


def test_logging_off_leaves_the_call_path_untouched():
    cls = compiled_function.CompiledFunction
    assert "__call__" in vars(cls) and cls.__call__ is instrument._ORIG_CALL_FOR_TESTS
    assert compiled_function.entry_runner.__module__ == "llgrad.compile.run"
    assert not instrument.active()


def test_unknown_channel_is_an_error():
    with pytest.raises(ValueError, match="unknown channel"):
        log.parse("recompiles,bogus")
    assert log.parse("all") == set(log.CHANNELS)


def test_llgrad_log_env_var_writes_to_stderr(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("import llgrad\n"
                      "@llgrad.compile\n"
                      "def f(x):\n"
                      "    return x.sum()\n"
                      "f(llgrad.ones(2))\n"
                      "f(llgrad.ones(3))\n")
    env = dict(os.environ, LLGRAD_LOG="recompiles,compile")
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "[llgrad:recompiles] f: recompiling" in res.stderr, res.stderr
    assert "x.shape[0] == 2 (now 3)" in res.stderr and "prog.py:6" in res.stderr
    assert "[llgrad:compile] traced f" in res.stderr
    assert res.stdout == ""


def test_progress_line_after_a_long_compile(monkeypatch, capsys):
    monkeypatch.delenv("LLGRAD_LOG", raising=False)
    monkeypatch.delenv("LLGRAD_QUIET", raising=False)
    monkeypatch.setattr(log, "PROGRESS_SECONDS", 0.0)

    @llgrad.compile
    def train_step(x, w):
        return (x @ w).tanh().sum()

    x, w = llgrad.randn(3, 5), llgrad.randn(5, 2, requires_grad=True)
    train_step(x, w).backward()
    if os.environ.get("LLGRAD_COMPILE") == "sync":    # (kernels built at the next call)
        assert "llgrad: compiled" not in capsys.readouterr().err
    train_step.wait()   # (background: the line comes when the build ends)
    train_step(x, w).backward()
    err = capsys.readouterr().err
    assert err.count("llgrad: compiled train_step (forward 3 ops, backward") == 1, err
    assert " s" in err
    train_step(x, w).backward()
    assert capsys.readouterr().err == ""                          # once per entry


@pytest.mark.parametrize("env", [{"LLGRAD_QUIET": "1"}, {"LLGRAD_LOG": "guards"}])
def test_progress_line_silenced(monkeypatch, capsys, env):
    monkeypatch.delenv("LLGRAD_LOG", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(log, "PROGRESS_SECONDS", 0.0)

    @llgrad.compile
    def g(x, w):
        return (x @ w).sum()

    x, w = llgrad.randn(3, 5), llgrad.randn(5, 2, requires_grad=True)
    for _ in range(2):
        g(x, w).backward()
    assert "llgrad: compiled" not in capsys.readouterr().err


def test_channels_turned_on_through_logging_itself():
    h = _Records()
    lg = logging.getLogger("llgrad.recompiles")
    lg.addHandler(h)
    lg.setLevel(logging.INFO)
    try:
        f = llgrad.compile(lambda x: x.sum())
        f(llgrad.ones(2))
        f(llgrad.ones(3))
    finally:
        lg.setLevel(logging.NOTSET)
        lg.removeHandler(h)
    assert "shape[0] == 2 (now 3)" in h.text(), h.text()
    root = logging.getLogger()
    old = root.level
    root.setLevel(logging.INFO)                 # (a root at INFO turns no channel on)
    try:
        assert not log.enabled("recompiles")
    finally:
        root.setLevel(old)


def test_import_llgrad_loads_no_logging():
    res = subprocess.run([sys.executable, "-c", "import sys, llgrad; "
                          "print('logging' in sys.modules, 'llvmlite' in sys.modules)"],
                         capture_output=True, text=True, timeout=300,
                         env={k: v for k, v in os.environ.items() if k != "LLGRAD_LOG"})
    assert res.stdout.split() == ["False", "False"], (res.stdout, res.stderr)
