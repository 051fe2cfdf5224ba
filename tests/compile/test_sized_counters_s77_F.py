"""A compiled step that counts its batch size into Python state (`meter.n += x.shape[0]`,
`meter.total += loss.item() * b`) or returns it (`return loss, b * 2`), over batches of
changing sizes: three traces in all (the numbers guarded by value, then as graph inputs,
then at a second size: a size template serves the others), with eager's numbers (PyTorch's,
as the oracle) at every call and no warning.

The counted slot becomes a graph input after the first trace (symbolic_slots.py), so the
trace at the second size meets `stand-in + SymInt`: that used to read the stand-in's
number (an escape), guard the slot by value for good, and trace every call to the
recompile limit; a returned SymInt, and one made by a converted return's operator, kept
the second trace from fitting a template, so every new size traced twice."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

SIZES = (8, 8, 8, 5, 3, 8, 6)


class Meter:
    def __init__(self):
        self.n, self.total, self.seen, self.big = 0, 0.0, 0, 0


def _data(T, b, k):
    rng = np.random.default_rng(k)
    return T.tensor(rng.standard_normal((b, 3)).astype(np.float32))


def _counting(T, w, meter):
    def step(x):
        b = x.shape[0]
        loss = (x * w).sum()
        meter.n += b
        meter.seen = b + meter.seen         # (the SymInt's operator on the left)
        if meter.n >= b:                    # (a comparison of the two: its outcome guarded)
            meter.big += 1
        return loss.detach(), b * 2
    return step


def _with_item(T, w, meter):
    def step(x):
        b = x.shape[0]
        loss = (x * w).sum()
        meter.n += b
        meter.total += loss.item() * b      # (a number read from a tensor, times the size)
        return loss.detach(), b * 2         # (a converted return: returned_binop)
    return step


def _returned_size(T, w, meter):
    def step(x):
        return x * w, x.shape[0] * 2
    return step


def _run(make, T, compiled):
    meter, w = Meter(), T.tensor(np.array([0.5, -1.0, 2.0], dtype=np.float32))
    fn = make(T, w, meter)
    if compiled:
        fn = T.compile(fn)
    out = []
    for k, b in enumerate(SIZES):
        r = fn(_data(T, b, k))
        if compiled:
            fn.wait()       # (LLGRAD_COMPILE=background: the next call runs native code)
        out.append([(np.array(v.detach().numpy()), "tensor") if hasattr(v, "detach")
                    else (v, type(v).__name__) for v in r])
        out.append([(v, type(v).__name__) for v in vars(meter).values()])
    return out, fn


@pytest.mark.parametrize("make", [_counting, _with_item, _returned_size],
                         ids=["counting", "item_times_size", "returned_size"])
def test_sizes_counted_served_by_a_template(make):
    want, _ = _run(make, torch, False)
    eager, _ = _run(make, llgrad, False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (a recompile limit's warning, an eager fallback)
        got, fn = _run(make, llgrad, True)
    for i, (w, e, g) in enumerate(zip(want, eager, got)):
        for (wv, wt), (ev, et), (gv, gt) in zip(w, e, g):
            assert wt == et == gt, (i, wt, et, gt)
            if wt in ("tensor", "float"):   # (sums: torch's order is not NumPy's)
                np.testing.assert_allclose(ev, wv, rtol=1e-5, atol=1e-6, err_msg=f"eager {i}")
                np.testing.assert_allclose(gv, ev, rtol=1e-5, atol=1e-6, err_msg=f"compiled {i}")
            else:
                assert wv == ev == gv, (i, wv, ev, gv)
    assert fn.n_traces == (2 if make is _returned_size else 3), fn.n_traces
    assert all(not isinstance(k, str) for e in fn.entries for k in e.kernels.values()), \
        "an entry ran on the interpreter"
