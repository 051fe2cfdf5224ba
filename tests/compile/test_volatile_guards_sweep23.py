"""A value guard whose value changes on every call (the count nonzero gives for a top-k
routing, a mask's count; bench/untuned_models_fourth.py's MoE): its function traces again a
few times, then its calls run eagerly with a warning naming the line, instead of tracing up
to the recompile limit and then running every kept entry's forward (the value guards are
read from its kernel) before running eagerly anyway. A guard that takes a few values (a
batch of another size at an epoch's end) keeps its compiled entries."""
import warnings

import numpy as np

import llgrad


def _route(x, w):
    # tokens sent to each expert: the counts nonzero reads are value guards of the trace
    h = x @ w
    top = h.argmax(1)
    out = llgrad.zeros_like(h)
    for e in range(3):
        (idx,) = llgrad.where(top == e)
        if idx.numel() == 0:
            continue
        out = out.index_add(0, idx, h.index_select(0, idx) * (e + 1.0))
    return out.square().mean()


def _calls(n, batch=lambda i: i):
    """(x, w) for n calls, x the batch(i)-th of random batches: other counts each time."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    xs = rng.standard_normal((n, 64, 4)).astype(np.float32)
    return [(llgrad.tensor(xs[batch(i)]), llgrad.tensor(w, requires_grad=True))
            for i in range(n)]


def _run(f, calls):
    out = []
    for x, w in calls:
        loss = f(x, w)
        loss.backward()
        out.append((loss.item(), w.grad.numpy().copy()))
        if hasattr(f, "wait"):  # (the next call runs native code, in the background mode too)
            f.wait()
    return out


def test_a_count_changing_every_call_runs_eagerly_after_a_few_traces():
    calls = _calls(14)
    want = _run(_route, _calls(14))
    cf = llgrad.compile(_route)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = _run(cf, calls[:8])
        with llgrad.profile() as p:
            got += _run(cf, calls[8:])
    for (a, ga), (b, gb) in zip(got, want):
        np.testing.assert_allclose([a], [b], rtol=1e-6)
        np.testing.assert_allclose(ga, gb, rtol=1e-5, atol=1e-6)
    assert cf.n_traces <= 4
    notes = [str(x.message) for x in w if "llgrad" in str(x.message)]
    assert any("test_volatile_guards_sweep23.py:20" in n and "changes from call to call" in n
               for n in notes), notes
    assert any("changes from call to call" in r for r in cf.graph_breaks)
    # the later calls run no compiled kernel at all (each kept entry's forward would run
    # before its guards could be read)
    kernels = [r for r in p.key_averages() if r.kind == "kernel"]
    assert not kernels, [(r.name, r.calls) for r in kernels]


def test_a_count_taking_two_values_stays_compiled():
    calls = _calls(8, batch=lambda i: i % 2)
    want = _run(_route, _calls(8, batch=lambda i: i % 2))
    cf = llgrad.compile(_route)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = _run(cf, calls)
    for (a, ga), (b, gb) in zip(got, want):
        np.testing.assert_allclose([a], [b], rtol=1e-6)
        np.testing.assert_allclose(ga, gb, rtol=1e-5, atol=1e-6)
    assert cf.n_traces == 2 and not cf.graph_breaks
    assert not [x for x in w if "running eagerly" in str(x.message)]
