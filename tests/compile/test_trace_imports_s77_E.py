"""A warm process's first trace loads no module it does not use: astunparse (the printer of
rewritten control flow, with six: ~3 ms of issue 19's 0.3 s from the first call to native
code) loads only when a function's control flow is rewritten. The suite's process has it
loaded already, so the test hides it (an import of it fails) and imports the converter
again."""
import sys

import pytest

import llgrad
import llgrad.tracer


def plain(x, w):                    # no tensor-dependent control flow: nothing to rewrite
    return ((x @ w).tanh() * 2.0).sum()


def branchy(x):                     # a tensor condition: rewritten into a cond node
    if x.sum() > 0:
        y = x * 2.0
    else:
        y = x * 3.0
    return y


def _inputs():
    return llgrad.arange(6.0).reshape(2, 3) / 10, llgrad.ones(3, 2)


def test_plain_function_traces_without_astunparse(monkeypatch):
    x, w = _inputs()
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "astunparse", None)      # (`import astunparse` raises)
        m.delitem(sys.modules, "llgrad.tracer.convert", raising=False)
        m.delattr(llgrad.tracer, "convert", raising=False)
        cf = llgrad.compile(plain, backend="interpret")
        got = [cf(x, w).item() for _ in range(3)]
        assert cf.n_traces == 1
        with pytest.raises(ImportError):    # (the hiding works: a rewrite needs it)
            llgrad.compile(branchy, backend="interpret")(x)
    assert got == [plain(x, w).item()] * 3


def test_rewritten_control_flow_still_prints_its_source():
    x, _ = _inputs()
    cb = llgrad.compile(branchy, backend="interpret")
    assert [cb(x).tolist(), cb(-x).tolist()] == [branchy(x).tolist(), branchy(-x).tolist()]
    assert cb.n_traces == 1
    assert "if_stmt" in cb._converted[1]
