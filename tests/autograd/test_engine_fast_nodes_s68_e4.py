"""The engine's short step for a node with no pre-hook nor retained grad, in a backward of
every leaf (engine.run_backward's `fast` branch), against PyTorch: nodes with and without
hooks mixed in one graph, hooks registered while the backward runs (on nodes not yet run),
post hooks replacing gradients, anomaly mode's NaN check, and retain_graph."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _leaves(lib, seed=0):
    rng = np.random.default_rng(seed)
    return [lib.tensor(rng.standard_normal((3, 4)), requires_grad=True) for _ in range(3)]


def _graph(lib, log):
    """A graph whose nodes take both of the engine's steps: plain ones, one with a post hook
    that replaces its gradients, one behind a tensor hook, one retaining its grad, and a
    hook that registers a post hook on a node that has not run yet."""
    a, b, c = _leaves(lib)
    h = (a * b).tanh()
    mid = h.exp()                        # (its node gets a post hook while backward runs)
    s = mid * c + h.sin()
    s.retain_grad()

    def post(grad_inputs, grad_outputs):
        log.append(("post", type(grad_inputs[0]).__name__ if grad_inputs[0] is not None
                    else None))
        return tuple(None if g is None else g * 3 for g in grad_inputs)

    def registers(grad):
        log.append(("tensor hook", tuple(grad.shape)))
        mid.grad_fn.register_hook(post)  # (mid's node runs after this one)
        return grad * 0.5

    t = s.cos()
    t.register_hook(registers)
    loss = (t * 2).sum() + (h ** 2).sum()
    return (a, b, c), s, loss


def _run(lib):
    log = []
    leaves, s, loss = _graph(lib, log)
    loss.backward(retain_graph=True)
    first = [x.grad.detach().numpy().copy() for x in leaves]
    for x in leaves:
        x.grad = None
    loss.backward()                     # (the retained graph again, now with mid's hook)
    second = [x.grad.detach().numpy().copy() for x in leaves]
    return log, first, second, s.grad.detach().numpy().copy()


def test_hooks_mixed_with_plain_nodes_as_torch():
    log, first, second, s_grad = _run(llgrad)
    tlog, tfirst, tsecond, ts_grad = _run(torch)
    assert [e[0] for e in log] == [e[0] for e in tlog]
    for x, y in zip(first + second + [s_grad], tfirst + tsecond + [ts_grad]):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


def test_post_hook_on_plain_chain_as_torch():
    """A post hook on one node of a long chain of hook-free nodes, and a node hook returning
    None (the gradients kept)."""
    def run(lib):
        x = lib.tensor(np.linspace(0.1, 0.9, 5), requires_grad=True)
        y = x
        seen = []
        for i in range(20):
            y = (y * 1.01).sin() if i % 2 else y + 0.5
            if i == 7:
                y.grad_fn.register_hook(lambda gi, go: tuple(g * -2 for g in gi))
            if i == 11:
                y.grad_fn.register_hook(lambda gi, go: seen.append(len(gi)))
        y.sum().backward()
        return x.grad.detach().numpy(), seen
    g, seen = run(llgrad)
    tg, tseen = run(torch)
    np.testing.assert_allclose(g, tg, rtol=1e-12, atol=1e-12)
    assert seen == tseen


def test_anomaly_nan_in_plain_node():
    """Anomaly mode's NaN check runs at a hook-free node: PyTorch's error naming the node."""
    def run(lib):
        x = lib.tensor([-1.0, 4.0], requires_grad=True)
        y = x.sqrt().sum()              # (sqrt of -1: NaN in SqrtBackward0's gradient)
        with lib.autograd.detect_anomaly(), pytest.warns(UserWarning):
            with pytest.raises(RuntimeError) as e:
                y.backward()
        return str(e.value)
    msg, tmsg = run(llgrad), run(torch)
    assert "SqrtBackward0" in msg and "SqrtBackward0" in tmsg
    assert "nan" in msg.lower() and "nan" in tmsg.lower()


def test_no_gradient_reaches_plain_node():
    """A node whose every incoming gradient is None passes None on (a hook returning a
    zero-less None gradient: an unused output of a multi-output node)."""
    def run(lib):
        x = lib.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
        first, second = x.unbind(0)
        (first * 2).exp().sum().backward()
        return x.grad.detach().numpy()
    np.testing.assert_allclose(run(llgrad), run(torch), rtol=1e-12, atol=1e-12)
