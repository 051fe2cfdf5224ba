"""Sweep 25: tensor hooks the caller registered on a compiled function's inputs, reached by
an autograd.grad (or a backward) inside it, and hooks inside func transforms: compiled ==
eager == torch, with the hooks' Python effects run at every call."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _rnd(T, seed, *shape):
    return T.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32),
                    requires_grad=True)


def _grad_inside(T, x, w):
    return T.autograd.grad((x @ w).tanh().sum(), (x, w))


def _backward_inside(T, x, w):
    (x @ w).tanh().sum().backward()
    return x.grad, w.grad


@pytest.mark.parametrize("case", [_grad_inside, _backward_inside])
def test_a_new_hook_on_an_input_each_call(case):
    # The leaf's AccumulateGrad is made on its first use, inside the trace: its hook was
    # taken for one the traced code registered, traced in unguarded, and a later call's
    # hook (g * 5) was never run: the first call's g * 3 was replayed instead.
    fn = llgrad.compile(lambda x, w: case(llgrad, x, w))
    for k in (3.0, 5.0, 7.0):
        got, want = [], []
        for T, f in ((llgrad, fn), (torch, lambda x, w: case(torch, x, w))):
            x, w = _rnd(T, 0, 3, 4), _rnd(T, 1, 4, 2)
            w.register_hook(lambda g, k=k: g * k)
            (want if T is torch else got).append(f(x, w))
        for g, t in zip(got[0], want[0]):
            np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", [_grad_inside, _backward_inside])
def test_a_hook_kept_on_a_parameter_runs_at_every_call(case):
    fn = llgrad.compile(lambda x, w: case(llgrad, x, w))
    for T, f in ((llgrad, fn), (torch, lambda x, w: case(torch, x, w))):
        w, seen, outs = _rnd(T, 1, 4, 2), [], []
        w.register_hook(lambda g: seen.append(float(g.sum())) or g * 3)
        for s in range(3):
            w.grad = None
            outs.append(f(_rnd(T, s, 3, 4), w)[1].detach().numpy())
        if T is llgrad:
            got = outs, seen
        else:
            np.testing.assert_allclose(np.array(got[0]), np.array(outs), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(got[1], seen, rtol=1e-5)


def test_hooks_inside_func_transforms_compiled():
    def case(T, x):
        seen = []

        def f(a):
            b = a.sin()
            b.register_hook(lambda g: seen.append(1) or g * 2)
            return (b * b).sum()
        return T.func.grad(f)(x), T.func.vmap(T.func.grad(f))(x[None].expand(2, 3))

    fn = llgrad.compile(lambda x: case(llgrad, x))
    for s in range(3):
        x = _rnd(llgrad, s, 3).detach()
        want = case(torch, torch.tensor(x.numpy()))
        for got in (case(llgrad, x), fn(x)):
            for g, t in zip(got, want):
                np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)
    assert fn.n_traces == 1


def test_hook_on_a_batched_tensor_under_vmap_of_grad_and_jacrev():
    # (register_hook on a BatchedTensor raised; torch.func runs it on each sample's gradient)
    def case(T, x, c):
        seen = []

        def f(a, k):
            b = a.sin() * k
            b.register_hook(lambda g: seen.append(tuple(g.shape)) or g * k)
            return (b * b).sum()

        def f2(a):
            b = a.exp()
            b.register_hook(lambda g: g + T.ones(3))
            return (b * b).sum(0, keepdim=True) * b[:2]
        return (T.func.vmap(T.func.grad(f), in_dims=(0, None))(x, c),
                T.func.vmap(T.func.grad(f), in_dims=(None, 0))(c, x),
                T.func.vmap(T.func.jacrev(f2))(x), T.tensor(seen))
    args = np.arange(6.0, dtype=np.float32).reshape(2, 3) / 4, np.float32([1, 2, 3])
    got = case(llgrad, *map(llgrad.tensor, args))
    for g, t in zip(got, case(torch, *map(torch.tensor, args))):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)
