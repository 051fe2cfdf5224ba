"""Bugs found by sweep 19 (C)'s programs (tests/programs/test_sweep19_c*.py), each checked
against PyTorch's documented behaviour without needing torch installed."""
import warnings

import numpy as np
import pytest

import llgrad


def test_tensor_split_takes_split_size_by_keyword():
    # mamba-minimal: x_and_res.split(split_size=[d_inner, d_inner], dim=-1)
    x = llgrad.arange(6.0).reshape(1, 6)
    a, b = x.split(split_size=[2, 4], dim=-1)
    assert a.shape == (1, 2) and b.shape == (1, 4)
    assert [t.shape[0] for t in llgrad.arange(5.0).split(split_size=2)] == [2, 2, 1]
    # the function's keyword is torch.split's own (tensor, split_size_or_sections, dim)
    parts = llgrad.split(x, split_size_or_sections=3, dim=1)
    assert [tuple(p.shape) for p in parts] == [(1, 3), (1, 3)]
    parts = llgrad.split(tensor=x, split_size_or_sections=[1, 5], dim=1)
    np.testing.assert_array_equal(parts[1].numpy(), [[1, 2, 3, 4, 5]])
    with pytest.raises(TypeError):
        x.split(split_size_or_sections=2)


def test_split_size_keyword_compiles():
    w = llgrad.randn(4, 6, requires_grad=True)

    def f(x):
        a, b = (x @ w).split(split_size=[2, 4], dim=-1)
        return (a.sum() * b.mean())

    x = llgrad.randn(3, 4)
    cf = llgrad.compile(f)
    np.testing.assert_allclose(cf(x).item(), f(x).item(), rtol=1e-6)


def _hvp_fn(w, retain):
    def hvp(x, v):
        loss = (x @ w).tanh().pow(2).sum()
        (g,) = llgrad.autograd.grad(loss, [w], create_graph=True)
        (hv,) = llgrad.autograd.grad(g, [w], grad_outputs=[v], retain_graph=retain)
        return loss, hv
    return hvp


def test_a_result_whose_graph_an_autograd_grad_inside_freed_compiles():
    # PyHessian's hessian-vector product returning the loss: autograd.grad without
    # retain_graph frees the loss's graph, so a later loss.backward() raises, compiled as eager
    llgrad.manual_seed(22)      # (a seed whose product's entries differ by 3e-6 of its 2.3)
    w = llgrad.randn(3, 2, requires_grad=True)
    x, v = llgrad.randn(4, 3), llgrad.randn(3, 2)
    cf = llgrad.compile(_hvp_fn(w, False), fullgraph=True)
    for _ in range(2):
        loss, hv = cf(x, v)
        el, ehv = _hvp_fn(w, False)(x, v)
        # (float32 rounding relative to the product's scale: an entry near 0 beside entries
        # near 3 differs by more than 1e-5 of itself)
        np.testing.assert_allclose(hv.numpy(), ehv.numpy(), rtol=1e-5,
                                   atol=1e-5 * float(np.abs(ehv.numpy()).max()))
        np.testing.assert_allclose(loss.item(), el.item(), rtol=1e-6)
        assert loss.requires_grad and el.requires_grad
        for out in (loss, el):
            with pytest.raises(RuntimeError, match="backward through the graph a second time"):
                out.backward()
    assert w.grad is None


def test_a_result_an_autograd_grad_inside_left_alive_keeps_its_backward():
    w = llgrad.randn(3, 2, requires_grad=True)
    x, v = llgrad.randn(4, 3), llgrad.randn(3, 2)
    cf = llgrad.compile(_hvp_fn(w, True), fullgraph=True)
    loss, hv = cf(x, v)
    loss.backward()
    g = w.grad.clone()
    w.grad = None
    _hvp_fn(w, True)(x, v)[0].backward()
    np.testing.assert_allclose(g.numpy(), w.grad.numpy(), rtol=1e-5)


def _clip_step(w, opt, log):
    def step(x, y):
        h = (x @ w).tanh()
        h.register_hook(lambda g: g.clamp(-0.01, 0.01))
        z = h * 2
        if log is None:
            z.register_hook(lambda g: g * 0.5)
        else:
            z.register_hook(lambda g: log.append(g.shape) or g * 0.5)  # (a Python effect)
        loss = ((z.sum(1) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def _clip_runs(compiled, log):
    w = llgrad.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), requires_grad=True)
    opt = llgrad.optim.SGD([w], lr=0.5)
    step = _clip_step(w, opt, log)
    if compiled:
        step = llgrad.compile(step)
    x = llgrad.tensor(np.linspace(-2, 2, 20, dtype=np.float32).reshape(5, 4))
    y = llgrad.tensor(np.arange(5, dtype=np.float32))
    return [step(x, y).item() for _ in range(3)], w.detach().numpy().copy(), step


def test_a_hook_registered_inside_a_training_step_compiles():
    # tensor_hook_in_step / the DEQ recipe: hooks on intermediates the step makes, run by
    # the step's own backward: traced with it, as the body's own code is
    eager = _clip_runs(False, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled = _clip_runs(True, None)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-6)
    np.testing.assert_allclose(compiled[1], eager[1], rtol=1e-6)
    assert compiled[2].entries and compiled[2].n_traces == 1


def test_a_hooks_python_effects_run_on_every_call():
    logs = [], []
    eager = _clip_runs(False, logs[0])
    compiled = _clip_runs(True, logs[1])
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-6)
    assert len(logs[1]) == len(logs[0]) == 3


def test_a_hook_on_a_returned_result_still_runs_eagerly():
    # the caller's backward would run the hook: compile's own derivation cannot
    w = llgrad.randn(3, 2, requires_grad=True)

    def f(x):
        h = x @ w
        h.register_hook(lambda g: g * 3)
        return h.sum()

    cf = llgrad.compile(f)
    x = llgrad.randn(4, 3)
    with pytest.warns(UserWarning, match="hook"):
        out = cf(x)
    out.backward()
    g = w.grad.clone()
    w.grad = None
    f(x).backward()
    np.testing.assert_allclose(g.numpy(), w.grad.numpy(), rtol=1e-6)


def test_a_hook_on_a_leafs_node_inside_still_runs_eagerly():
    # a parameter's AccumulateGrad outlives the call: eager adds a hook at every call
    def run(compiled):
        w = llgrad.ones(3, requires_grad=True)
        log = []

        def f(x):
            (w * 1).grad_fn.next_functions[0][0].register_hook(lambda *a: log.append(1))
            return (x * w).sum()
        g = llgrad.compile(f) if compiled else f
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                g(llgrad.ones(3))
            g(llgrad.ones(3)).backward()
        return len(log), [str(c.message) for c in caught]
    assert run(False) == (4, [])
    n, warned = run(True)
    assert n == 4 and any("a hook registered inside the compiled function" in w for w in warned)
