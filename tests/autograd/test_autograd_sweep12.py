"""autograd semantics against PyTorch, eager and compiled (each failed before its fix unless
marked xfail): a gradient through relu / leaky_relu / hardtanh / relu6 / threshold taken with
create_graph did not require grad (PyTorch's threshold_backward & co depend on the saved
input with a zero derivative), so a second derivative raised "does not require grad" or "not
used in the graph" where PyTorch gives zeros (a Hessian of a ReLU network in its input, an
input-gradient penalty differentiated in the input); max_pool's backward gave None for its
input where PyTorch gives zeros (a third derivative found the input unused); smooth_l1_loss and
huber_loss had a second derivative of 1/beta at |d| = beta (PyTorch: 0); a first .grad made
under create_graph was the engine's gradient itself (a view sharing memory with what hooks
saw; PyTorch copies it: CopyBackwards); a tensor hook of an output no gradient reached was
not called (PyTorch calls it with None and refuses a replacement); calling a node of one
input gave a tuple (PyTorch: the tensor); hardtanh / relu6 / hardswish gave a NaN input the
gradient 0 / NaN (PyTorch: the gradient passes); erfinv saved its result, so writing the result
in place raised in backward (PyTorch saves the input); the version error named a bool tensor
llgrad.BoolTensor (PyTorch: CPUBoolType); Tensor._is_view was missing."""
import math

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _np(t):
    return None if t is None else t.detach().numpy()


def _same_bits(a, b):
    a, b = _np(a), _np(b)
    assert (a is None) == (b is None), (a, b)
    if a is not None:
        assert a.dtype == b.dtype and a.shape == b.shape, (a, b)
        assert np.array_equal(np.ascontiguousarray(a).view(np.uint8),
                              np.ascontiguousarray(b).view(np.uint8)), (a, b)


_MASKED = {
    "relu": lambda L, x: x.relu(),
    "relu_": lambda L, x: (x * 1).relu_(),
    "leaky_relu": lambda L, x: L.nn.functional.leaky_relu(x, 0.1),
    "leaky_relu_": lambda L, x: L.nn.functional.leaky_relu(x * 1, 0.1, inplace=True),
    "hardtanh": lambda L, x: L.nn.functional.hardtanh(x),
    "relu6": lambda L, x: L.nn.functional.relu6(x),
    "threshold": lambda L, x: L.nn.functional.threshold(x, 0.5, 2.0),
    "rrelu_eval": lambda L, x: L.nn.functional.rrelu(x, training=False),
    "module_relu": lambda L, x: L.nn.ReLU()(x) * 3,
}


def _second(L, f, wrap):
    x = L.tensor([1.0, -2.0, 0.5, 3.0, 0.0, -0.0], requires_grad=True)
    g, = L.autograd.grad(wrap(lambda t: f(L, t).sum())(x), x, create_graph=True)
    h, = L.autograd.grad((g * g).sum(), x)          # (no allow_unused: x must be reached)
    return g, g.requires_grad, h


@pytest.mark.parametrize("name", sorted(_MASKED))
def test_second_derivative_through_masked_activations(name):
    f = _MASKED[name]
    tg, treq, th = _second(torch, f, lambda fn: fn)
    for wrap in (lambda fn: fn, llgrad.compile):
        g, req, h = _second(llgrad, f, wrap)
        assert req == treq is True
        _same_bits(g, tg)
        _same_bits(h, th)


def _relu_net_input_hessian(L, wrap):
    L.manual_seed(0)
    m = L.nn.Sequential(L.nn.Linear(3, 4), L.nn.ReLU(), L.nn.Linear(4, 4), L.nn.LeakyReLU(0.2),
                        L.nn.Linear(4, 1), L.nn.Hardtanh())
    x = L.tensor([[1.0, -2.0, 0.5], [0.3, 0.2, -0.1]], requires_grad=True)
    g, = L.autograd.grad(wrap(lambda t: m(t).sum())(x), x, create_graph=True)
    h, = L.autograd.grad(g.sum(), x, create_graph=True)
    (g.pow(2).sum() + h.sum()).backward()
    return g, h, m[0].weight.grad, x.grad


def test_input_hessian_of_a_relu_network():
    want = _relu_net_input_hessian(torch, lambda fn: fn)
    eager = _relu_net_input_hessian(llgrad, lambda fn: fn)
    for a, b in zip(eager, want):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-5, atol=1e-6)
    for a, b in zip(_relu_net_input_hessian(llgrad, llgrad.compile), eager):
        _same_bits(a, b)


@pytest.mark.parametrize("pool", ["max_pool1d", "adaptive_max_pool1d", "max_pool2d"])
def test_third_derivative_through_max_pool(pool):
    def run(L):
        x = L.tensor([1.0, -2.0, 0.5, 3.0, 2.0, 2.0, -1.0, 0.0], requires_grad=True)
        F = L.nn.functional
        if pool == "max_pool2d":
            y = F.max_pool2d(x.view(1, 1, 2, 4), 2, 1)
        else:
            y = getattr(F, pool)(x.view(1, 1, 8), 2)
        g, = L.autograd.grad((y * y).sum(), x, create_graph=True)
        h, = L.autograd.grad(g.sum(), x, create_graph=True)
        t, = L.autograd.grad(h.sum(), x)        # (PyTorch: zeros, not "unused")
        return g, h, t
    for a, b in zip(run(llgrad), run(torch)):
        _same_bits(a, b)


@pytest.mark.parametrize("loss,k", [("smooth_l1_loss", "beta"), ("huber_loss", "delta")])
@pytest.mark.parametrize("kw", [{}, {"reduction": "sum"}, {"value": 0.5}])
def test_piecewise_losses_at_the_boundary(loss, k, kw):
    kw = {k if n == "value" else n: v for n, v in kw.items()}
    nan, inf = float("nan"), float("inf")
    vals = [nan, 1.0, -1.0, 0.5, -0.5, inf, -inf, 0.0, -0.0, 0.3]

    def run(L):
        x = L.tensor(vals, requires_grad=True)
        out = getattr(L.nn.functional, loss)(x, L.zeros(len(vals)), **kw)
        g, = L.autograd.grad(out, x, create_graph=True)
        h, = L.autograd.grad(g[1:].sum(), x)
        return g, h
    for a, b in zip(run(llgrad), run(torch)):
        _same_bits(a, b)


def _version_error(L):
    x = L.tensor([1.0, 2.0], requires_grad=True)
    c = L.tensor([True, False])
    z = L.where(c, x, 0.0)
    c.fill_(True)
    with pytest.raises(RuntimeError) as e:
        z.sum().backward()
    return str(e.value).split("Hint")[0].replace("torch.", "llgrad.")


def test_version_error_names_a_bool_tensor_as_pytorch():
    assert _version_error(llgrad) == _version_error(torch)


def test_is_view_against_torch():
    def run(L):
        x = L.ones(2, 3, requires_grad=True)
        y = x * 1
        return [t._is_view() for t in (x, x[0], x.detach(), y.t(), y.view(6), y.contiguous(),
                                       x.clone(), y.unbind(0)[0], y.expand(2, 2, 3), x.data,
                                       y[[0]], y.diagonal(), y.movedim(0, 1))]
    assert run(llgrad) == run(torch)


def test_calling_a_node_of_one_input_gives_a_tensor():
    def run(L):
        x = L.tensor([1.0, 2.0], requires_grad=True)
        return [type(y.grad_fn(g)).__name__ for y, g in
                ((x.sum(), L.ones(())), (x.exp(), L.ones(2)), (x * 3, L.ones(2)),
                 (L.cat([x, x]), L.ones(4)))]
    assert run(llgrad) == run(torch)


def _create_graph_grad(L):
    x = L.ones(2, 3, requires_grad=True)
    seen = []
    y = x.t() * 1
    y.register_hook(lambda g: seen.append(g))
    (y ** 2).sum().backward(create_graph=True)
    g = x.grad
    out = [g.stride(), g._is_view(), type(g.grad_fn).__name__,
           [type(f).__name__ if f else None for f, _ in g.grad_fn.next_functions]]
    with L.no_grad():
        x.grad.zero_()          # (a copy: the gradient the hook saw is not written)
    out.append(seen[0].tolist())
    (x * 3).sum().backward(create_graph=True)
    out += [x.grad.tolist(), type(x.grad.grad_fn).__name__]
    return out


@pytest.mark.filterwarnings("ignore:Using backward")
def test_first_gradient_under_create_graph_is_a_copy():
    assert _create_graph_grad(llgrad) == _create_graph_grad(torch)


def _hook_given_none(L, wrap, replace=False):
    x = L.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    seen = []
    a, b = wrap(lambda t: (t * 1).chunk(2))(x)
    b.register_hook((lambda g: L.ones(2)) if replace else (lambda g: seen.append(g)))
    b.retain_grad()
    try:
        a.sum().backward()
    except RuntimeError as e:
        return str(e)
    return seen, b.grad, x.grad.tolist()


@pytest.mark.parametrize("replace", [False, True])
def test_hook_of_an_output_no_gradient_reached(replace):
    want = _hook_given_none(torch, lambda fn: fn, replace)
    for wrap in (lambda fn: fn, llgrad.compile):
        assert _hook_given_none(llgrad, wrap, replace) == want


# ---- differences not fixed ------------------------------------------------------------------

@pytest.mark.xfail(strict=True, reason="hardshrink / softshrink / prelu are compositions in "
                   "llgrad: their gradient under create_graph is not connected to the input "
                   "(PyTorch's *_backward ops are, with a zero derivative), so a second "
                   "derivative finds the input unused")
@pytest.mark.parametrize("name", ["hardshrink", "softshrink", "prelu"])
def test_second_derivative_through_composite_activations(name):
    def run(L):
        x = L.tensor([1.0, -2.0, 0.25, 3.0], requires_grad=True)
        F = L.nn.functional
        y = F.prelu(x, L.tensor([0.25])) if name == "prelu" else getattr(F, name)(x)
        g, = L.autograd.grad(y.sum(), x, create_graph=True)
        return g.requires_grad
    assert run(llgrad) == run(torch)


def test_kthvalue_index_among_ties():
    def run(L):
        x = L.tensor([1.0, 1.0, 1.0], requires_grad=True)
        v, i = x.kthvalue(2)
        v.backward()
        return i.item(), x.grad.tolist()
    assert run(llgrad) == run(torch)


def test_logaddexp_gradient_at_equal_infinities():
    def run(L):
        x = L.tensor([-math.inf, math.inf], requires_grad=True)
        y = L.tensor([-math.inf, math.inf], requires_grad=True)
        L.logaddexp(x, y).sum().backward()
        return str(x.grad.tolist()), str(y.grad.tolist())
    assert run(llgrad) == run(torch)


def test_logit_gradient_at_0_and_1():
    def run(L):
        x = L.tensor([0.0, 1.0], requires_grad=True)
        x.logit().sum().backward()
        return str(x.grad.tolist())
    assert run(llgrad) == run(torch)


def test_xlogy_gradients_where_input_is_zero():
    def run(L):
        x = L.tensor([0.0, 0.0], requires_grad=True)
        y = L.tensor([0.0, -1.0], requires_grad=True)
        (L.xlogy(x[:1], y[:1]) + L.special.xlog1py(x[1:], y[1:])).sum().backward()
        return str(x.grad.tolist()), str(y.grad.tolist())
    assert run(llgrad) == run(torch)


def test_erfinv_result_written_in_place_after():
    def run(L):     # (PyTorch's backward reads the input, not the result)
        x = L.tensor([0.1, -0.5, 0.9], requires_grad=True)
        y = x.erfinv()
        y.mul_(2)
        y.sum().backward()
        return x.grad
    np.testing.assert_allclose(_np(run(llgrad)), _np(run(torch)), rtol=1e-6)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", ["hardtanh", "relu6", "hardswish"])
def test_hard_activations_pass_the_gradient_at_nan(name):
    def run(L, wrap):
        x = L.tensor([math.nan, -math.inf, math.inf, -3.0, 3.0, -1.0, 1.0, 6.0, 0.0],
                     requires_grad=True)
        wrap(lambda t: getattr(L.nn.functional, name)(t).sum())(x).backward()
        return x.grad
    want = run(torch, lambda fn: fn)
    for wrap in (lambda fn: fn, llgrad.compile):
        _same_bits(run(llgrad, wrap), want)
