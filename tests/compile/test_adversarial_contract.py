"""Differential probes of the compile contract: the same function run eagerly and under
llgrad.compile for several calls, with state changed between calls; everything observable
must match (or the call runs eagerly with a warning)."""
import warnings

import numpy as np

import llgrad


def _both(scenario):
    """scenario(wrap) -> list of observations; run eagerly and compiled, compared."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager = scenario(lambda f: f)
        compiled = scenario(llgrad.compile)
    assert len(eager) == len(compiled)
    for a, b in zip(eager, compiled):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
        else:
            assert a == b


def test_manual_seed_inside_reseeds_every_call():
    def scenario(wrap):
        def f(x):
            llgrad.manual_seed(0)
            return x + llgrad.randn(3)
        g = wrap(f)
        llgrad.manual_seed(5)
        out = []
        for _ in range(3):
            out.append(g(llgrad.ones(3)).numpy().copy())
            out.append(llgrad.randn(2).numpy().copy())
        return out
    _both(scenario)


def test_manual_seed_inside_warns_with_users_line():
    g = llgrad.compile(lambda x: (llgrad.manual_seed(0), x + llgrad.randn(3))[1])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        g(llgrad.ones(3))
    msgs = [str(m.message) for m in w]
    assert any("manual_seed()" in m and "test_adversarial_contract.py" in m for m in msgs), msgs


def test_data_write_in_a_trace_that_falls_back_runs_once():
    # the trace writes w through .data (a version counter of its own), then cannot be
    # compiled: the state it wrote must be put back before the eager run
    def scenario(wrap):
        def f(w, x):
            w.data.mul_(0.5)
            return (w * x).sum()
        g = wrap(f)
        w = llgrad.ones(3, requires_grad=True)
        out = []
        for _ in range(3):
            loss = g(w, llgrad.ones(3))
            loss.backward()
            out += [loss.item(), w.detach().numpy().copy(), w.grad.numpy().copy()]
        return out
    _both(scenario)


def test_returned_view_written_in_place_aliases_the_input():
    def scenario(wrap):
        def f(x):
            v = x[:, 1]
            v.add_(1)
            return v
        g = wrap(f)
        x = llgrad.arange(6.).view(2, 3)
        out = []
        for _ in range(3):
            r = g(x)
            r.mul_(10)                  # eager: r is a view of x, so x changes too
            out += [x.numpy().copy(), r._base is x]
        return out
    _both(scenario)


def test_returned_view_of_a_non_contiguous_input_aliases_it_natively():
    """The input's memory need not be contiguous: the view is rebuilt over its layout (it
    ran eagerly, and the op table's view programs lost their native code)."""
    def scenario(wrap):
        def f(x):
            v = x[:, 1]
            v.add_(1)
            return v
        g = wrap(f)
        memory = np.arange(24.).reshape(4, 6)
        x = llgrad.from_numpy(memory[:, ::2])       # (4, 3) over every other column
        out = []
        for k in range(3):
            r = g(x)
            r.mul_(k + 2)               # eager: writes through to x's memory
            out += [memory.copy(), r._base is x]
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no eager fallback: before _both, which ignores them)
        scenario(llgrad.compile)
    _both(scenario)


def test_same_tensor_returned_twice_is_one_tensor():
    def scenario(wrap):
        def f(x, w):
            y = x * w
            return y, y
        g = wrap(f)
        w = llgrad.ones(2, requires_grad=True)
        out = []
        for i in range(3):
            a, b = g(llgrad.ones(2) * (i + 1), w)
            a.retain_grad()
            (a.sum() + 2 * b.sum()).backward()
            out += [a is b, w.grad.numpy().copy(), a.grad.numpy().copy()]
        return out
    _both(scenario)


def test_enable_grad_inside_a_call_made_under_no_grad():
    def scenario(wrap):
        w = llgrad.ones(3, requires_grad=True)

        def f(x):
            with llgrad.enable_grad():
                return x * w
        g = wrap(f)
        out = []
        for _ in range(3):
            with llgrad.no_grad():
                r = g(llgrad.ones(3))
            out += [r.requires_grad, r.grad_fn is not None]
        return out
    _both(scenario)


def test_an_in_place_write_that_autograd_needs_warns_once_with_its_line():
    """The eager fallback's warning names compile once (it had said `llgrad.compile(h):
    running eagerly: llgrad.compile(h): ...`) and the line of the write."""
    def h(x, w):
        w.copy_(x * 2)
        return w
    x = llgrad.randn(3, requires_grad=True)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        out = llgrad.compile(h)(x, llgrad.zeros(3))
    texts = [str(r.message) for r in rec if "running eagerly" in str(r.message)]
    assert len(texts) == 1 and texts[0].count("llgrad.compile(") == 1, texts
    assert "written at test_adversarial_contract.py:" in texts[0], texts
    np.testing.assert_allclose(out.detach().numpy(), 2 * x.detach().numpy())
    assert out.grad_fn is not None            # (eager's history: the copy of x * 2)
