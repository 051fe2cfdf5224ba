"""`return float(loss), int(correct)` in a compiled step (tracer/returned.returned_number):
the numbers are graph outputs each call returns, not value guards (a trace per value, then
eager with a warning after four), and float()'s once-per-process warning is eager's."""
import warnings

import llgrad
from llgrad.runtime import trace_state


def _run(compiled, monkeypatch):
    monkeypatch.setitem(trace_state.given_once, "scalar conversion", False)
    llgrad.manual_seed(0)
    w = llgrad.randn(3, 2, requires_grad=True)

    def step(x, y):
        out = x @ w
        loss = (out - y).square().mean()
        loss.backward()
        with llgrad.no_grad():
            w.sub_(0.1 * w.grad)
            w.grad.zero_()
        correct = (out.argmax(1) == y.argmax(1)).sum()
        return float(loss), int(correct), float(correct) / 4
    fn = llgrad.compile(step) if compiled else step
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = [fn(llgrad.randn(4, 3), llgrad.randn(4, 2)) for _ in range(8)]
    return out, [str(c.message) for c in caught], fn


def test_returned_conversions_are_outputs(monkeypatch):
    (eager, we, _), (comp, wc, fn) = _run(False, monkeypatch), _run(True, monkeypatch)
    for (a, b, c), (d, e, f) in zip(comp, eager):     # (fused kernels: float32 rounding)
        assert abs(a - d) <= 1e-5 * abs(d) and b == e and c == f
    assert all(type(a) is float and type(b) is int for a, b, _ in comp)
    assert wc == we and len(we) == 1 and we[0].startswith("Converting a tensor")
    assert fn.n_traces <= 2 and len(fn.entries) >= 1
