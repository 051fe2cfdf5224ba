"""Idioms of the classic PyTorch tutorials (tests/programs) inside compiled training steps:
updates through `.data` (the char-RNN tutorial's `p.data.add_(p.grad.data, alpha=-lr)`),
numbers returned through arithmetic or a variable (`return loss.item() / n`), inputs that
share memory (a language model's x[i:i+n] and x[i+1:i+1+n]) and in-place view ops."""
import copy
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn


def _model():
    llgrad.manual_seed(0)
    return nn.Linear(3, 2)


def _updates(model, update, steps=4):
    """(eager, compiled) losses and final weights of a step ending with `update(p)`."""
    def step(model, x):
        model.zero_grad()
        loss = model(x).pow(2).sum()
        loss.backward()
        for p in model.parameters():
            update(p)
        return loss.detach()

    m1, m2, cf = model, copy.deepcopy(model), llgrad.compile(step, backend="llvm")
    x = llgrad.tensor(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
    for _ in range(steps):
        a, b = step(m1, x).item(), cf(m2, x).item()
        assert abs(a - b) <= 1e-5 * abs(a), (a, b)
        np.testing.assert_allclose(m2.weight.detach().numpy(), m1.weight.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
    return cf


def _data_add(p):
    p.data.add_(p.grad.data, alpha=-0.1)


def _data_sub(p):
    p.data.sub_(0.1 * p.grad)


def _no_grad_data(p):
    with llgrad.no_grad():
        p.add_(p.grad.data, alpha=-0.1)


@pytest.mark.parametrize("update", [_data_add, _data_sub, _no_grad_data])
def test_updates_through_data_are_written_back(update):
    cf = _updates(_model(), update)
    assert cf.entries


def test_data_assignment_to_an_input_is_replayed():
    """`p.data = p.data - lr * p.grad`: the new memory is p's alone, so compiled calls give p
    the new value in a buffer of its own (compile/moved_data.py)."""
    def update(p):
        p.data = p.data - 0.1 * p.grad
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cf = _updates(_model(), update)
    assert cf.entries


def _item_after_arithmetic(x, n):
    y = (x * 2).sum()
    v = y.item()                    # only returned: an output, not a value guard
    return v / n, -(x * 3).sum().item() + 1, (y.item() * 2) ** 2, v


def test_returned_numbers_through_arithmetic_and_a_variable():
    cf = llgrad.compile(_item_after_arithmetic, backend="llvm")
    for k in range(4):
        x = llgrad.full((3,), float(k) + 0.5)
        assert cf(x, 3) == _item_after_arithmetic(x, 3)
    assert cf.n_traces == 1


def _item_then_written(x):
    s = x * 1
    total = s.sum().item()
    s.mul_(0)
    return total, x.sum().item() * x     # (with a tensor: a value guard)


def test_a_returned_variable_keeps_its_value_and_a_tensor_product_guards(monkeypatch):
    # (builds on the caller's thread: in the background mode the calls made while the
    # first entry builds run eagerly, not traced, and the count below is the traces')
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    cf = llgrad.compile(_item_then_written, backend="llvm")
    for k in range(3):
        x = llgrad.arange(3.0) + k
        got, want = cf(x), _item_then_written(x)
        assert got[0] == want[0] and got[1].tolist() == want[1].tolist()
    assert cf.n_traces == 3


def test_inputs_sharing_memory_that_the_step_only_reads():
    m1 = _model()
    m2 = copy.deepcopy(m1)
    o1, o2 = (llgrad.optim.SGD(m.parameters(), lr=0.1) for m in (m1, m2))
    source = llgrad.tensor(np.random.default_rng(1).standard_normal((9, 3)).astype(np.float32))
    step = llgrad.compile(_shared_step, backend="llvm")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(4):
            a = _shared_step(m1, o1, source[i:i + 4], source[i + 1:i + 5])
            b = step(m2, o2, source[i:i + 4], source[i + 1:i + 5])
            assert abs(a.item() - b.item()) <= 1e-5 * abs(a.item())
    np.testing.assert_allclose(m2.weight.detach().numpy(), m1.weight.detach().numpy(),
                               rtol=1e-5)
    assert step.entries


def _shared_step(model, opt, data, target):      # data, target: source[i:i+4], source[i+1:i+5]
    loss = (model(data) - target[:, :2]).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.detach()


def test_a_write_into_memory_inputs_share_runs_eagerly():
    def f(a, b):
        a.add_(1)
        return b * 2

    cf = llgrad.compile(f, backend="llvm")
    base, ref = llgrad.arange(4.0), llgrad.arange(4.0)
    with pytest.warns(UserWarning, match="memory that inputs share"):
        out = cf(base[:3], base[1:])
    assert out.tolist() == f(ref[:3], ref[1:]).tolist() and base.tolist() == ref.tolist()


def _unsqueezes(x):
    y = x * 2
    y.unsqueeze_(0)
    y.squeeze_().t_()
    return (y * llgrad.arange(6.0).view(3, 2)).sum(), y


def test_inplace_view_ops_inside_a_compiled_function():
    cf = llgrad.compile(_unsqueezes, backend="llvm")
    for k in range(3):
        x = (llgrad.arange(6.0).view(2, 3) + k).requires_grad_()
        x2 = x.detach().clone().requires_grad_()
        (a, y), (b, z) = cf(x), _unsqueezes(x2)
        a.backward()
        b.backward()
        assert a.item() == b.item() and y.shape == z.shape == (3, 2)
        assert x.grad.tolist() == x2.grad.tolist()
    assert cf.n_traces == 1


def test_inplace_view_op_on_an_input_with_a_history_runs_eagerly():
    def f(x, t):
        t.unsqueeze_(-1)        # (one that requires no grad is replayed: input_reshapes.py)
        return (x * t).sum()

    cf = llgrad.compile(f, backend="llvm")
    with pytest.warns(UserWarning, match=r"unsqueeze_\(\) changes the shape of an input"):
        for _ in range(2):
            t = llgrad.ones(3, requires_grad=True) * 1
            assert cf(llgrad.ones(3, 1), t).item() == 3.0 and t.shape == (3, 1)


def _data_set_inside(x):
    h = x * 2
    h.data = x * 3          # h's memory is now another tensor's
    return h + 1


def test_data_assignment_inside_a_compiled_function():
    cf = llgrad.compile(_data_set_inside, backend="llvm")
    for k in range(3):
        x = llgrad.full((2,), float(k))
        assert cf(x).tolist() == _data_set_inside(x).tolist()
