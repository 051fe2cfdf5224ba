"""torch.autograd.graph's saved-tensor hooks on llgrad's eager autograd, against PyTorch: which
tensors are packed and when, what backward reads, grad mode inside the pack hook, nesting,
disabling, the errors, double backward through unpacked values, custom Functions, and a
compiled function called under hooks (it runs eagerly, with a warning)."""
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.autograd.graph import (Node, disable_saved_tensors_hooks, get_gradient_edge,
                                   increment_version, save_on_cpu, saved_tensors_hooks)

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _program(lib, log, scale):
    """exp saves its result, mul saves both operands; the hooks record and rescale."""
    def pack(t):
        log.append(("pack", tuple(t.shape), t.requires_grad, lib.is_grad_enabled()))
        return t.detach() * scale          # what backward reads is the scaled copy

    def unpack(p):
        log.append(("unpack", tuple(p.shape)))
        return p

    x = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
    with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = x.exp()
        z = (y * x).sum()
    n_packed = len(log)
    (g,) = lib.autograd.grad(z, x)
    return n_packed, log, g.detach().numpy()


@pytest.mark.parametrize("scale", [1.0, 2.0])
def test_pack_and_unpack_as_torch(scale):
    n_t, log_t, g_t = _program(torch, [], scale)
    n_l, log_l, g_l = _program(llgrad, [], scale)
    assert n_l == n_t == 3
    assert sorted(log_l) == sorted(log_t)         # (each op's saved fields, in any order)
    np.testing.assert_allclose(g_l, g_t, rtol=1e-6)


def test_unpack_runs_at_each_read_and_no_version_check():
    for lib in (torch, llgrad):
        calls = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t,
                                                    lambda t: calls.append(1) or t):
            a = x * 1
            b = a.sin()
        a.add_(1)       # no "modified by an inplace operation": the hooks own the value
        b.sum().backward(retain_graph=True)
        b.sum().backward()
        assert len(calls) == 2


def test_innermost_hooks_win_and_disable_raises():
    for lib in (torch, llgrad):
        seen = []
        x = lib.ones(2, requires_grad=True)
        G = lib.autograd.graph
        with G.saved_tensors_hooks(lambda t: seen.append("outer") or t, lambda t: t):
            with G.saved_tensors_hooks(lambda t: seen.append("inner") or t, lambda t: t):
                x.sin()
        assert seen == ["inner"]
        with pytest.raises(RuntimeError, match="no hooks here"):
            with G.disable_saved_tensors_hooks("no hooks here"):
                with G.saved_tensors_hooks(lambda t: t, lambda t: t):
                    pass
        with pytest.raises(RuntimeError, match="no hooks here"):
            with G.saved_tensors_hooks(lambda t: t, lambda t: t):
                with G.disable_saved_tensors_hooks("no hooks here"):
                    pass
        with G.saved_tensors_hooks(lambda t: t, lambda t: t):   # (the state was put back)
            pass


def _errors(lib):
    G = lib.autograd.graph
    x = lib.ones(3, requires_grad=True)
    out = []

    def writes(t):
        t.add_(1)
        return t
    try:
        with G.saved_tensors_hooks(writes, lambda t: t):
            (x * 1).sin()
    except RuntimeError as e:
        out.append(str(e))
    with G.saved_tensors_hooks(lambda t: t, lambda t: 3):
        y = x.sin()
    try:
        y.sum().backward()
    except TypeError as e:
        out.append(str(e))
    return out


def test_errors_as_torch():
    assert _errors(llgrad) == _errors(torch)
    assert len(_errors(llgrad)) == 2


def _double_backward(lib):
    x = lib.tensor([0.3, -0.7, 1.1], requires_grad=True, dtype=lib.float64)
    w = lib.tensor([1.5, 2.0, -0.5], requires_grad=True, dtype=lib.float64)
    with lib.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda t: t):
        h = (x * w).tanh()          # saves x, w (leaves) and the tanh result
        loss = (h * h).sum()
    gx, gw = lib.autograd.grad(loss, (x, w), create_graph=True)
    hx, hw = lib.autograd.grad((gx * gx).sum() + gw.sum(), (x, w))
    return [t.detach().numpy() for t in (gx, gw, hx, hw)]


def test_double_backward_through_unpacked_values():
    for a, b in zip(_double_backward(llgrad), _double_backward(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_custom_function_and_save_on_cpu():
    for lib in (torch, llgrad):
        calls = []

        class Cube(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(a)
                return a ** 3

            @staticmethod
            def backward(ctx, g):
                (a,) = ctx.saved_tensors
                return 3 * g * a * a
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: calls.append("p") or t,
                                                    lambda t: calls.append("u") or t):
            y = Cube.apply(x)
        y.sum().backward()
        assert calls == ["p", "u"]
        assert x.grad.tolist() == [3.0, 12.0]
        with save_on_cpu() if lib is llgrad else lib.autograd.graph.save_on_cpu():
            z = (x * x).sum()
        z.backward()
        assert x.grad.tolist() == [5.0, 16.0]


def test_gradient_edge_node_and_increment_version():
    x = llgrad.ones(2, requires_grad=True)
    y = x * 2
    assert isinstance(y.grad_fn, Node)
    edge = get_gradient_edge(y)
    assert edge.node is y.grad_fn and edge.output_nr == 0
    assert type(get_gradient_edge(x).node).__name__ == "AccumulateGrad"
    with pytest.raises(RuntimeError, match="does not require gradients"):
        get_gradient_edge(llgrad.ones(2))
    v = y._version
    increment_version(y)
    assert y._version == v + 1
    z = y.sin()
    increment_version(y)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_a_compiled_call_under_hooks_runs_eagerly_with_a_warning():
    w = llgrad.tensor([0.5, -1.0], requires_grad=True)

    @llgrad.compile
    def step(x):
        return (x * w).exp().sum()

    x = llgrad.tensor([1.0, 2.0])
    step(x).backward()              # traced outside hooks: compiled code from now on
    packed = []
    with saved_tensors_hooks(lambda t: packed.append(t.shape) or t, lambda t: t):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loss = step(x)
    assert packed                   # eager ran, so the pack hook saw the saved tensors
    assert any("saved_tensors_hooks" in str(c.message) for c in caught)
    loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * np.array([1.0, 2.0]) *
                               np.exp(np.array([0.5, -2.0])), rtol=1e-6)


def test_hooks_entered_inside_a_compiled_function_run_it_eagerly():
    packed = []

    @llgrad.compile
    def f(x):
        with saved_tensors_hooks(lambda t: packed.append(1) or t, lambda t: t):
            return x.sin().sum()

    x = llgrad.tensor([1.0, 2.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            f(x).backward()
    assert len(packed) == 3         # each call's pack, once (no traced run counted twice)
    assert any("saved_tensors_hooks inside the compiled function" in str(c.message)
               for c in caught)
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.cos([1.0, 2.0]), rtol=1e-6)
