"""x.unsqueeze_(d), squeeze_, t_, transpose_ on an input of a compiled function that
requires no grad (the PyTorch "generating names with a character-level RNN" tutorial's
`target_line_tensor.unsqueeze_(-1)` inside train): compiled calls give the input the view
eager's run leaves (shape, strides, version counter), with eager's results and grads and
one trace; an input written too, or one with a history, runs eagerly with a warning."""
import warnings

import numpy as np
import pytest

import llgrad


def _names_step(lib, w, x, target):
    target.unsqueeze_(-1)
    loss = 0
    for i in range(x.size(0)):
        out = lib.nn.functional.log_softmax(x[i] @ w, dim=1)
        loss = loss + lib.nn.functional.nll_loss(out, target[i])
    loss.backward()
    return loss


def _state(t):
    return tuple(t.shape), t.stride(), t._version


def test_names_tutorial_target_unsqueeze_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((5, 4)).astype(np.float32)
    wt = torch.tensor(w0, requires_grad=True)
    w = llgrad.tensor(w0, requires_grad=True)
    step = llgrad.compile(lambda w, x, t: _names_step(llgrad, w, x, t))
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (no eager fallback)
        for k in range(3):
            xs = rng.standard_normal((3, 1, 5)).astype(np.float32)
            ts = rng.integers(0, 4, (3,))
            tt, tl = torch.tensor(ts), llgrad.tensor(ts)
            wt.grad = w.grad = None             # (zero_grad's set_to_none)
            ref = _names_step(torch, wt, torch.tensor(xs), tt)
            got = step(w, llgrad.tensor(xs), tl)
            if k == 0:
                step.wait()
            np.testing.assert_allclose(got.item(), ref.item(), rtol=1e-5)
            np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-5, atol=1e-6)
            assert _state(tl) == _state(tt)
            assert tl.tolist() == tt.tolist()
    assert step.n_traces == 1 and step.entries


def _views(x, t, s):
    t.t_()
    s.squeeze_(1).unsqueeze_(0)
    s.transpose_(0, 1)
    return x @ t + s.sum()


def test_t_squeeze_transpose_on_inputs_match_eager():
    cf = llgrad.compile(_views)
    for k in range(3):
        mats = [llgrad.arange(6.0).view(2, 3) + k, llgrad.arange(6.0).view(2, 3) * k,
                llgrad.arange(3.0).view(3, 1) - k]
        a = [m.clone() for m in mats]
        b = [m.clone() for m in mats]
        out, ref = cf(*a), _views(*b)
        cf.wait()
        assert out.tolist() == ref.tolist()
        for p, q in zip(a, b):
            assert _state(p) == _state(q) and p.tolist() == q.tolist()
    assert cf.n_traces == 1 and cf.entries


def test_input_written_after_its_inplace_view_runs_eagerly():
    def f(t):
        t.unsqueeze_(0)
        t.mul_(2)
        return t.sum()

    cf = llgrad.compile(f)
    with pytest.warns(UserWarning, match=r"unsqueeze_\(\) on an input .* also writes"):
        for _ in range(2):
            a, b = llgrad.arange(3.0), llgrad.arange(3.0)
            assert cf(a).item() == f(b).item() and _state(a) == _state(b)
            assert a.tolist() == b.tolist()
