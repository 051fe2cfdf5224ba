"""Shared helpers of the recurrent, attention and transformer tests: torch's weights into
llgrad, NaN-aware comparisons, the same error raised by both libraries, and a compiled
training step checked against the eager one over a few steps."""
import copy

import numpy as np
import pytest

import llgrad


def torch_or_skip():
    return pytest.importorskip("torch")


def ll(t, requires_grad=False):
    """A llgrad copy of a torch tensor (bool, int and float)."""
    x = llgrad.tensor(t.detach().numpy().copy())
    return x.requires_grad_(True) if requires_grad else x


def load_torch(lm, tm):
    """Copy the torch module's state_dict into the llgrad module (load_state_dict)."""
    lm.load_state_dict({k: ll(v) for k, v in tm.state_dict().items()})
    return lm


def close(a, b, what="", rtol=1e-4, atol=1e-5):
    """a (llgrad or NumPy) == b (torch or NumPy) within tolerance; NaN where both are NaN."""
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape, f"{what}: shapes {a.shape} != {b.shape}"
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def grads_close(lm, tm, rtol=1e-4, atol=1e-5):
    """Every parameter's gradient, by name (the names must be torch's, in torch's order)."""
    lp, tp = list(lm.named_parameters()), list(tm.named_parameters())
    assert [n for n, _ in lp] == [n for n, _ in tp]
    for (name, p), (_, q) in zip(lp, tp):
        if q.grad is None:
            assert p.grad is None or not p.grad.abs().sum().item(), name
            continue
        close(p.grad, q.grad, f"grad of {name}", rtol, atol)


def same_error(f_torch, f_llgrad):
    """Both raise the same exception type with the same message (torch. -> llgrad.)."""
    with pytest.raises(Exception) as te:
        f_torch()
    with pytest.raises(Exception) as le:
        f_llgrad()
    assert type(le.value).__name__ == type(te.value).__name__, (le.value, te.value)
    assert str(le.value) == str(te.value).replace("torch.", "llgrad."), \
        f"\nllgrad: {le.value}\ntorch:  {te.value}"


def _train_step(model, opt, inputs, loss_of):
    opt.zero_grad()
    out = model(*inputs)
    loss = loss_of(out[0] if isinstance(out, tuple) else out)
    loss.backward()
    opt.step()
    return loss.detach()


def compiled_matches_eager(make, inputs, steps=3, loss_of=lambda o: (o * o).mean()):
    """A training step (zero_grad, forward, loss, backward, SGD with momentum) run eagerly
    and through llgrad.compile on two copies of one model: equal losses and parameters
    after every step; -> the compiled step (its trace count)."""
    m1 = make()
    m2 = copy.deepcopy(m1)
    o1 = llgrad.optim.SGD(m1.parameters(), lr=0.1, momentum=0.9)
    o2 = llgrad.optim.SGD(m2.parameters(), lr=0.1, momentum=0.9)
    step = llgrad.compile(_train_step)
    for i in range(steps):
        a = _train_step(m1, o1, inputs, loss_of).item()
        b = step(m2, o2, inputs, loss_of).item()
        assert abs(a - b) <= 1e-5 * max(1.0, abs(a)), (i, a, b)
        for (name, p), q in zip(m1.named_parameters(), m2.parameters()):
            close(q, p, f"step {i}: {name}", rtol=1e-4, atol=1e-6)
    assert not step.graph_breaks, step.graph_breaks
    return step
