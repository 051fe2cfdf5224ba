"""Helpers of the adversarial tests of values printed inside compiled functions
(test_printed_values_adversarial*.py): a program run compiled and eagerly over calls whose
values change, what it printed and returned compared."""
import contextlib
import io
import warnings

import pytest

import llgrad

VALUES = [0, 0, 1, 2, 3, 10, 12, 100]


@pytest.fixture(autouse=True)
def sync_builds(monkeypatch):
    # (the native code ready from the second call on: later calls are compiled calls)
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")


def vec(*values):
    return llgrad.tensor([float(v) for v in values])


def outputs(fn, calls, compiled):
    """(stdout, stderr, results) of fn over calls (argument tuples), compiled or eagerly."""
    f = llgrad.compile(fn) if compiled else fn
    out, err, results = io.StringIO(), io.StringIO(), []
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        for args in calls:
            try:
                r = f(*args)
            except Exception as e:      # (an error is part of what eager gives)
                r = f"{type(e).__name__}: {e}"
            results.append(r.tolist() if isinstance(r, llgrad.Tensor) else r)
    return out.getvalue(), err.getvalue(), results


def traces(fn, calls, warm=0):
    """n_traces of fn compiled over calls (counted before any eager run: code run 8 times
    is quickened), after `warm` eager runs of its code."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for _ in range(warm):
            fn(*calls[0])
    f = llgrad.compile(fn)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for args in calls:
            f(*args)
    return f.n_traces


def same_as_eager(fn, calls):
    compiled = outputs(fn, calls, True)
    assert compiled == outputs(fn, calls, False)
    return compiled


def sums(values=VALUES):
    return [(vec(v),) for v in values]
