"""A compiled training step whose backward runs hooks registered on its parameters before the
call (`p.register_hook`): traced into the step (guards.py walks them as the function's own
reads; backward_hooks.hooks_allowed lets them run), and equal to eager as the hooks change:
removed, replaced, reading a global that changes, with Python effects; post-accumulate-grad
hooks likewise; hooks of the AccumulateGrad node itself still run the step eagerly."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn

CLIP = 0.05


def _model():
    llgrad.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = llgrad.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)
    x, y = llgrad.randn(16, 4), llgrad.randn(16, 1)

    def step():
        opt.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    return m, step


def _run(compiled, script):
    """script(m, call) drives the calls; -> (losses, final parameters, the compiled fn)."""
    m, step = _model()
    fn = llgrad.compile(step) if compiled else step
    losses = []
    script(m, lambda: losses.append(fn().item()))
    return losses, [p.detach().numpy().copy() for p in m.parameters()], fn


def _same(script):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (le, pe, _), (lc, pc, fn) = _run(False, script), _run(True, script)
    np.testing.assert_allclose(lc, le, rtol=1e-6, atol=1e-7)
    for a, b in zip(pe, pc):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)
    return fn


def test_clamping_hooks_are_traced_into_the_step():
    def script(m, call):
        for p in m.parameters():
            p.register_hook(lambda g: g.clamp(-CLIP, CLIP))
        for _ in range(4):
            call()
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (no graph break: no warning)
        fn = _same(script)
    # (the first trace reaches the hooks its guard walk left out: the call traces again
    # with them guarded, compile/leaf_hooks.py)
    assert fn.n_traces == 2 and len(fn.entries) == 1
    assert all(type(e).__name__ == "Entry" for e in fn.entries)


def test_removed_and_replaced_hooks():
    def script(m, call):
        h = m[0].weight.register_hook(lambda g: g * 3)
        call()
        call()
        h.remove()
        call()
        m[0].weight.register_hook(lambda g: g * 0.5)
        call()
        call()
    fn = _same(script)
    assert fn.n_traces == 4 and len(fn.entries) == 3


def test_a_global_the_hook_reads_is_guarded():
    def script(m, call):
        global CLIP
        m[2].weight.register_hook(lambda g: g.clamp(-CLIP, CLIP))
        try:
            call()
            CLIP = 0.001
            call()
            call()
        finally:
            CLIP = 0.05
    _same(script)


def test_a_hook_with_python_effects_keeps_them():
    norms = []

    def script(m, call):
        norms.clear()

        def record(g):
            norms.append(1)         # (counted per backward: compiled calls must count too)
            return g * 2
        m[0].bias.register_hook(record)
        for _ in range(3):
            call()
        script.counts.append(len(norms))
    script.counts = []
    _same(script)
    assert script.counts == [3, 3]


def test_a_hook_reading_the_gradient_value():
    def script(m, call):
        m[0].bias.register_hook(lambda g: g * 0 if float(g.abs().sum()) > 1e9 else g / 2)
        for _ in range(3):
            call()
    _same(script)


def test_post_accumulate_grad_hook_is_traced_too():
    def clip(p):
        p.grad.clamp_(-0.01, 0.01)

    def script(m, call):
        m[0].weight.register_hook(lambda g: g * 2)
        m[2].bias.register_post_accumulate_grad_hook(clip)
        for _ in range(3):
            call()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fn = _same(script)
    assert fn.n_traces == 2 and len(fn.entries) == 1
    assert all(type(e).__name__ == "Entry" for e in fn.entries)


def test_a_hook_of_the_accumulate_grad_node_runs_the_step_eagerly():
    def script(m, call):
        acc = m[0].bias.view_as(m[0].bias).grad_fn.next_functions[0][0]
        acc.register_hook(lambda grad_in, grad_out: None)
        for _ in range(3):
            call()
    with pytest.warns(UserWarning, match="runs in a backward inside the compiled function"):
        _run(True, script)
    _same(script)


@pytest.mark.parametrize("inside", [False, True])
def test_hook_on_an_input_of_a_function_the_caller_differentiates(inside):
    # (not a step: the engine runs the input's hooks when the compiled backward reaches it)
    w = llgrad.randn(3, requires_grad=True)
    seen = []
    w.register_hook(lambda g: seen.append(1) or g * 2)
    f = (lambda w: (w * w).sum())
    fn = llgrad.compile(f) if inside else f
    fn(w).backward()
    np.testing.assert_allclose(w.grad.numpy(), 4 * w.detach().numpy(), rtol=1e-6)
    assert seen == [1]


def test_a_callable_object_hook_runs_the_step_eagerly():
    # (its state is not a function's captured reads: compile does not follow it)
    class Scale:
        def __init__(self):
            self.calls = 0

        def __call__(self, g):
            self.calls += 1
            return g * 0.5

    counts = []

    def script(m, call):
        hook = Scale()
        m[0].weight.register_hook(hook)
        for _ in range(3):
            call()
        counts.append(hook.calls)
    _same(script)
    assert counts == [3, 3]
