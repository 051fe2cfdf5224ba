"""Activation checkpointing (llgrad.utils.checkpoint) against PyTorch and against the same
program without checkpoints: values, gradients, grad_fn names, the random state (dropout
draws the same masks on the second run), which gradients each mode brings, nesting,
checkpoint_sequential, the recomputation check, and a compiled training step."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.utils.checkpoint as lck

torch = pytest.importorskip("torch")
import torch.utils.checkpoint as tck  # noqa: E402

pytestmark = pytest.mark.torch
CK = {"torch": tck, "llgrad": lck}


def _weights(lib, in_grad=True):
    rng = np.random.default_rng(0)
    w1 = lib.tensor(rng.standard_normal((6, 8)).astype(np.float32), requires_grad=True)
    w2 = lib.tensor(rng.standard_normal((8, 4)).astype(np.float32), requires_grad=True)
    x = lib.tensor(rng.standard_normal((5, 6)).astype(np.float32), requires_grad=in_grad)
    return x, w1, w2


def _segment(lib, w1, w2, p=0.0):
    def seg(a):
        h = (a @ w1).tanh()
        h = lib.nn.functional.dropout(h, p, training=p > 0)
        return (h @ w2).sigmoid()
    return seg


def _run(lib, reentrant, checkpointed=True, p=0.0, in_grad=True, preserve=True):
    lib.manual_seed(0)
    x, w1, w2 = _weights(lib, in_grad)
    seg = _segment(lib, w1, w2, p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = CK[lib.__name__].checkpoint(seg, x, use_reentrant=reentrant,
                                        preserve_rng_state=preserve) if checkpointed \
            else seg(x)
    name = type(y.grad_fn).__name__ if y.grad_fn is not None else None
    if y.requires_grad:
        (y * y).sum().backward()
    grads = [None if t.grad is None else t.grad.numpy().copy() for t in (x, w1, w2)]
    return y.detach().numpy(), grads, name, lib.rand(3).numpy()


def _same(a, b, rtol=1e-5):
    assert (a is None) == (b is None)
    if a is not None:
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("reentrant", [True, False])
@pytest.mark.parametrize("in_grad", [True, False])
def test_values_gradients_and_node_names_as_torch(reentrant, in_grad):
    y_t, g_t, n_t, _ = _run(torch, reentrant, in_grad=in_grad)
    y_l, g_l, n_l, _ = _run(llgrad, reentrant, in_grad=in_grad)
    _same(y_l, y_t)
    for a, b in zip(g_l, g_t):
        _same(a, b)
    assert n_l == n_t


@pytest.mark.parametrize("reentrant", [True, False])
def test_dropout_draws_the_same_masks_again(reentrant):
    y_c, g_c, _, after_c = _run(llgrad, reentrant, p=0.5)
    y_p, g_p, _, after_p = _run(llgrad, reentrant, checkpointed=False, p=0.5)
    np.testing.assert_array_equal(y_c, y_p)
    for a, b in zip(g_c, g_p):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_array_equal(after_c, after_p)     # (the generator was put back)
    _, g_n, _, _ = _run(llgrad, reentrant, p=0.5, preserve=False)
    assert not np.allclose(g_n[1], g_p[1])              # new masks: other gradients


def test_the_default_warns_and_is_reentrant():
    x, w1, w2 = _weights(llgrad)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed"):
        y = lck.checkpoint(_segment(llgrad, w1, w2), x)
    assert type(y.grad_fn).__name__ == "CheckpointFunctionBackward"
    with pytest.raises(ValueError, match="Unexpected keyword arguments"):
        lck.checkpoint(lambda a, k=1: a, x, use_reentrant=True, k=2)


def _nested(lib):
    ck = CK[lib.__name__]
    x, w1, w2 = _weights(lib)

    def inner(a):
        return (a @ w1).relu()

    def outer(a):
        return ck.checkpoint(inner, a, use_reentrant=False) @ w2
    y = ck.checkpoint(outer, x, use_reentrant=False)
    y.pow(2).sum().backward()
    seq = lib.nn.Sequential(lib.nn.Linear(6, 8), lib.nn.Tanh(), lib.nn.Linear(8, 8),
                            lib.nn.ReLU(), lib.nn.Linear(8, 3))
    return [y.detach().numpy(), x.grad.numpy(), w1.grad.numpy()], seq


def test_nested_and_sequential_as_torch():
    (t, seq_t), (ll, seq_l) = _nested(torch), _nested(llgrad)
    for a, b in zip(ll, t):
        _same(a, b)
    seq_l.load_state_dict({k: llgrad.tensor(v.numpy()) for k, v in seq_t.state_dict().items()})
    outs = []
    for lib, seq in ((torch, seq_t), (llgrad, seq_l)):
        x = lib.tensor(np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6),
                       requires_grad=True)
        y = CK[lib.__name__].checkpoint_sequential(seq, 2, x, use_reentrant=False)
        y.sum().backward()
        outs.append([y.detach().numpy(), x.grad.numpy(), seq[0].weight.grad.numpy()])
    for a, b in zip(*outs):
        _same(a, b)


def test_a_second_run_that_saves_other_tensors_raises():
    calls = []
    x, w1, _ = _weights(llgrad)

    def seg(a):
        calls.append(1)
        return (a @ w1).tanh() if len(calls) == 1 else (a @ w1).sum()     # (saves less)
    y = lck.checkpoint(seg, x, use_reentrant=False)
    with pytest.raises(lck.CheckpointError, match="different number of tensors"):
        y.sum().backward()


def test_a_compiled_training_step_with_checkpoints_equals_eager():
    def make():
        llgrad.manual_seed(0)
        return llgrad.nn.Sequential(llgrad.nn.Linear(6, 16), llgrad.nn.GELU(),
                                    llgrad.nn.Dropout(0.25), llgrad.nn.Linear(16, 2))
    x = llgrad.tensor(np.random.default_rng(1).standard_normal((8, 6)).astype(np.float32))
    results = []
    for compiled in (False, True):
        model = make()
        opt = llgrad.optim.SGD(model.parameters(), lr=0.1)

        def step(inp):
            opt.zero_grad()
            out = lck.checkpoint(model, inp, use_reentrant=False)
            loss = out.pow(2).mean()
            loss.backward()
            opt.step()
            return loss
        run = llgrad.compile(step) if compiled else step
        llgrad.manual_seed(5)
        with warnings.catch_warnings():
            warnings.simplefilter("error")          # (no fallback to eager)
            losses = [run(x).item() for _ in range(4)]
        results.append((losses, model[0].weight.detach().numpy().copy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-5)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-5, atol=1e-7)
