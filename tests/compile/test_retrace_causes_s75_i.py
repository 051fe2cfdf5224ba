"""Steps that re-traced without need (s75 task I). An eval step that begins with
`model.zero_grad()` / `opt.zero_grad()` (set_to_none) read each parameter's .grad to skip
the None ones, so its entry was keyed on the .grad state it was entered with: the first eval
call after a training call (.grad filled) traced again, silently. zero_grad(set_to_none)
now clears without reading, and an entry whose trace only cleared .grad (no read, no
backward) serves any .grad state (entry.py's grad_free), clearing them as eager does."""
import numpy as np
import pytest

import llgrad


def _model_and_step(zero):
    llgrad.manual_seed(0)
    nn = llgrad.nn
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.25), nn.Linear(8, 2))
    opt = llgrad.optim.SGD(model.parameters(), lr=0.1)     # (no state: no first step)

    def step(x, y, train):
        model.train(train)
        (model if zero == "model" else opt).zero_grad()
        loss = llgrad.nn.functional.cross_entropy(model(x), y)
        if train:
            loss.backward()
            if zero == "model":
                with llgrad.no_grad():
                    for p in model.parameters():
                        p.sub_(0.1 * p.grad)
            else:
                opt.step()
        return loss.detach()
    return model, step


def _run(step, model, compiled):
    fn = llgrad.compile(step) if compiled else step
    llgrad.manual_seed(1)
    rng = np.random.default_rng(0)
    out = []
    for i in range(8):
        x = llgrad.tensor(rng.standard_normal((6, 4)).astype(np.float32))
        y = llgrad.tensor(rng.integers(0, 2, (6,)))
        # (eval, eval, train, eval, train, ...: the first call of a step reaching an
        # optimiser with no state yet runs untraced; the second is traced with no .grad)
        out.append(fn(x, y, i > 1 and i % 2 == 0).numpy().copy())
    out.append([p.detach().numpy().copy() for p in model.parameters()])
    out.append([p.grad is None for p in model.parameters()])
    return fn, out


@pytest.mark.parametrize("zero", ["model", "optimizer"])
def test_eval_step_clearing_grads_is_not_traced_again(zero):
    model, step = _model_and_step(zero)
    _, eager = _run(step, model, False)
    model, step = _model_and_step(zero)
    cf, got = _run(step, model, True)
    # (the eval entry, traced with no .grad, and the training entry: no eval call after
    # a training one, entered with .grad filled, traces again)
    assert cf.n_traces == 2, (cf.n_traces, cf.graph_breaks)
    assert len(cf.entries) == 2, len(cf.entries)
    assert cf.entries[0].grad_free
    for a, b in zip(eager[:8], got[:8]):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)
    for a, b in zip(eager[8], got[8]):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)
    assert got[9] == eager[9] == [True] * 4        # (the last call, an eval's, cleared them)


def test_zero_grad_set_to_none_clears_without_reading():
    """zero_grad() leaves .grad None either way, and set_to_none=False still zeroes."""
    nn = llgrad.nn
    m = nn.Linear(2, 1)
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    m(llgrad.ones(1, 2)).sum().backward()
    m.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in m.parameters())
    opt = llgrad.optim.SGD(m.parameters(), lr=0.1)
    opt.zero_grad()
    assert all(p.grad is None for p in m.parameters())
