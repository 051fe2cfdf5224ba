"""Gradients through the masked activations (relu, leaky_relu, hardtanh, relu6, threshold)
taken with create_graph: linked to the saved input or result by a zero of its own (ops_elementwise
.zero_linked: out - |sign(saved)| * 0) in four ops, where it took ten (a nan_to_num of six
more, a no-op since sign(NaN) is 0), which was a fifth of MAML's eager step. The values must
stay bit for bit what they were: the first-order gradient equals the one taken without
create_graph and torch's, NaN, infinities and -0.0 in the input included; second and third
derivatives are torch's zeros; compiled equals eager; a MAML step (inner SGD step by
autograd.grad(create_graph=True)) gives torch's meta-gradients."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

_VALUES = [1.5, -2.0, 0.0, -0.0, float("nan"), float("inf"), float("-inf"), 0.25, -0.5, 3.0]

_MASKED = {
    "relu": lambda L, t: L.nn.functional.relu(t),
    "relu_module": lambda L, t: L.nn.ReLU()(t),
    "leaky_relu": lambda L, t: L.nn.functional.leaky_relu(t, 0.1),
    "hardtanh": lambda L, t: L.nn.functional.hardtanh(t, -1.0, 1.0),
    "relu6": lambda L, t: L.nn.functional.relu6(t),
    "threshold": lambda L, t: L.nn.functional.threshold(t, 0.2, -3.0),
}


def _bits(t):
    return t.detach().numpy().view(np.uint32)


def _grads(L, f, create_graph, weights):
    x = L.tensor(_VALUES, requires_grad=True)
    w = L.tensor(weights)
    g, = L.autograd.grad((f(L, x * 1.0) * w).sum(), x, create_graph=create_graph)
    return x, g


@pytest.mark.parametrize("name", sorted(_MASKED))
def test_first_order_unchanged_by_create_graph(name):
    f = _MASKED[name]
    weights = [0.5, -1.0, 2.0, -0.0, 1.0, 3.0, -2.0, float("inf"), 0.0, -1.5]
    _, plain = _grads(llgrad, f, False, weights)
    x, linked = _grads(llgrad, f, True, weights)
    _, want = _grads(torch, f, False, weights)
    assert linked.requires_grad and not plain.requires_grad
    np.testing.assert_array_equal(_bits(linked), _bits(plain))
    np.testing.assert_array_equal(_bits(plain), _bits(want))


@pytest.mark.parametrize("name", sorted(_MASKED))
def test_second_and_third_derivatives_are_torchs(name):
    f = _MASKED[name]
    weights = [0.5, -1.0, 2.0, 1.0, 1.0, 3.0, -2.0, 1.0, 0.0, -1.5]

    def run(L):
        x, g = _grads(L, f, True, weights)
        h, = L.autograd.grad((g * g).sum(), x, create_graph=True)
        # (a third derivative where h has a graph: relu's, through the saved result)
        k = L.autograd.grad(h.sum(), x, allow_unused=True)[0] if h.requires_grad else None
        return g, h, k
    ours, theirs = run(llgrad), run(torch)
    for a, b in zip(ours[:2], theirs[:2]):
        assert a.requires_grad == b.requires_grad
        np.testing.assert_array_equal(_bits(a), _bits(b))
    assert (ours[2] is None) == (theirs[2] is None)
    if ours[2] is not None:
        np.testing.assert_array_equal(_bits(ours[2]), _bits(theirs[2]))


def test_link_is_four_nodes():
    # the zero link's graph: sub <- mul(0) <- abs <- sign <- the saved tensor's node
    x = llgrad.tensor([1.0, -1.0, float("nan")], requires_grad=True)
    y = x * 2.0
    g, = llgrad.autograd.grad(llgrad.relu(y).sum(), y, create_graph=True)
    names, stack, seen = [], [g.grad_fn], set()
    while stack:
        n = stack.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        names.append(type(n).__name__)
        stack.extend(c for c, _ in n.next_functions)
    assert names.count("NanToNumBackward0") == 0
    assert {"SubBackward0", "MulBackward0", "AbsBackward0", "SignBackward0"} <= set(names)
    assert len(names) <= 8, names


def _second_through_relu(L, x):
    g, = L.autograd.grad((L.relu(x * 1.5) ** 2).sum(), x, create_graph=True)
    return g, L.autograd.grad((g * g).sum(), x)[0]


def test_compiled_equals_eager_with_nan_and_inf():
    fn = llgrad.compile(_second_through_relu)
    for values in (_VALUES, [v * -1 for v in _VALUES]):
        eager = _second_through_relu(llgrad, llgrad.tensor(values, requires_grad=True))
        compiled = fn(llgrad, llgrad.tensor(values, requires_grad=True))
        for a, b in zip(compiled, eager):
            np.testing.assert_array_equal(_bits(a), _bits(b))


def _maml_meta_grads(L, params, xs, ys):
    F = L.nn.functional
    ws = [L.tensor(p, requires_grad=True) for p in params]

    def net(x, v):
        x = F.relu(F.linear(x, v[0], v[1]))
        x = F.relu(F.linear(x, v[2], v[3]))
        return F.linear(x, v[4], v[5])
    total = 0
    for i in range(xs.shape[0]):
        xs_i, ys_i = L.tensor(xs[i, :5]), L.tensor(ys[i, :5])
        loss = F.mse_loss(net(xs_i, ws), ys_i)
        grads = L.autograd.grad(loss, ws, create_graph=True)
        fast = [w - 0.01 * g for w, g in zip(ws, grads)]
        total = total + F.mse_loss(net(L.tensor(xs[i, 5:]), fast), L.tensor(ys[i, 5:]))
    (total / xs.shape[0]).backward()
    return [w.grad.numpy() for w in ws]


def test_maml_meta_gradients_are_torchs():
    rng = np.random.default_rng(0)
    params = []
    for fan_in, fan_out in ((1, 8), (8, 8), (8, 1)):
        params += [rng.standard_normal((fan_out, fan_in)).astype(np.float32),
                   (rng.standard_normal(fan_out) * 0.1).astype(np.float32)]
    xs = rng.uniform(-5, 5, (3, 10, 1)).astype(np.float32)
    ys = (np.sin(xs) * 2).astype(np.float32)
    ours = _maml_meta_grads(llgrad, params, xs, ys)
    theirs = _maml_meta_grads(torch, params, xs, ys)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
