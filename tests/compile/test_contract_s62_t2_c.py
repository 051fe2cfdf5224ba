"""Compile-contract adversary s62 (helper H2, t2): global optimizer step hooks
(torch.optim.optimizer.register_optimizer_step_pre_hook / post_hook) registered between
calls of a compiled training step. The registry is module state no guard followed: calls
of the entry traced before the registration ran no hook (a log missed entries, a hook that
scales the gradients changed nothing). While one is registered, calls run eagerly with a
warning, as for global module hooks (compile/eager_only.py)."""
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.optim.optimizer import (register_optimizer_step_post_hook,
                                    register_optimizer_step_pre_hook)


def _run(compile_with):
    """Per call: the loss, the parameters and the hooks' log; the pre hook scales the
    gradients, the post hook logs the step's lr."""
    llgrad.manual_seed(0)
    m = llgrad.nn.Linear(3, 2)
    opt = llgrad.optim.SGD(m.parameters(), lr=0.1)
    log = []

    def pre(o, args, kwargs):
        for p in m.parameters():
            p.grad.mul_(0.5)
        log.append("pre")

    def post(o, args, kwargs):
        log.append(("post", o.param_groups[0]["lr"]))

    def step(x):
        opt.zero_grad()
        loss = m(x).pow(2).sum()
        loss.backward()
        opt.step()
        return loss
    f = llgrad.compile(step, backend=compile_with) if compile_with else step
    got, handles = [], []
    try:
        for i in range(7):
            if i == 2:
                handles.append(register_optimizer_step_pre_hook(pre))
            if i == 3:
                handles.append(register_optimizer_step_post_hook(post))
            if i == 5:
                for h in handles:
                    h.remove()
            loss = f(llgrad.ones(4, 3) * (i + 1))
            got.append((loss.item(), [p.detach().numpy().copy() for p in m.parameters()],
                        list(log)))
    finally:
        for h in handles:
            h.remove()
    return got


def test_global_step_hooks_registered_between_calls_run_as_eager():
    want = _run(None)
    assert want[-1][2] == ["pre", "pre", ("post", 0.1), "pre", ("post", 0.1)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _run("interpret")
    for i, (a, b) in enumerate(zip(want, got)):
        assert a[2] == b[2], i
        np.testing.assert_allclose(b[0], a[0], rtol=1e-6, err_msg=f"loss {i}")
        for u, v in zip(a[1], b[1]):
            np.testing.assert_allclose(v, u, rtol=1e-6, err_msg=f"parameter {i}")
    assert any("global optimizer step hooks are registered" in str(w.message) for w in caught)


def test_no_global_hook_left_compiles_again():
    """After the hooks are removed the step runs compiled code again."""
    from llgrad.runtime import global_optimizer_hooks
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _run("interpret")
    assert not global_optimizer_hooks.any_hooks()
    w = llgrad.ones(3, requires_grad=True)
    f = llgrad.compile(lambda x: (x * w).sum(), backend="interpret")
    for _ in range(3):
        out = f(llgrad.ones(3))
    assert type(out.grad_fn).__name__ == "CompiledFunctionBackward"


@pytest.fixture(autouse=True)
def _no_hooks_left():
    yield
    from llgrad.runtime import global_optimizer_hooks
    global_optimizer_hooks.step_pre.clear()
    global_optimizer_hooks.step_post.clear()
