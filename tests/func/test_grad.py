"""llgrad.func.grad, grad_and_value and vjp: against torch.func, and (without torch) against
float64 finite differences; argnums ints and tuples, has_aux, pytrees of dicts and tuples,
nesting, no_grad, .grad left alone, closures over module parameters, torch's errors."""
import numpy as np
import pytest

import llgrad
import llgrad.func as F
from func_helpers import (assert_trees_close, error_of, fd_grad, load_torch, rand, same_message,
                          to_torch)


def f_mix(x, y):
    return (x.sin() * y.exp()).sum() + (x ** 3).mean() - (x * y).tanh().sum()


def f_tree(params, x):
    h = (x @ params["w"] + params["b"]).tanh()
    a, c = params["pair"]
    return (h * a).sum() + (c ** 2).sum() * h.mean()


def tree_args(seed=0):
    params = {"w": rand(3, 4, seed=seed), "b": rand(4, seed=seed + 1),
              "pair": (rand(4, seed=seed + 2), rand(2, seed=seed + 3))}
    return params, rand(5, 3, seed=seed + 4)


# ---- against finite differences (no torch needed) -------------------------------------------

def test_grad_matches_finite_differences():
    x, y = rand(4, seed=1), rand(4, seed=2)
    g = F.grad(f_mix)(x, y)
    np.testing.assert_allclose(g.numpy(), fd_grad(lambda t: f_mix(t, y), x), atol=1e-6)
    gx, gy = F.grad(f_mix, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gy.numpy(), fd_grad(lambda t: f_mix(x, t), y), atol=1e-6)
    np.testing.assert_allclose(gx.numpy(), g.numpy())


def test_grad_of_pytree_matches_finite_differences():
    params, x = tree_args()
    g = F.grad(f_tree)(params, x)
    assert set(g) == {"w", "b", "pair"} and isinstance(g["pair"], tuple)
    for key, get in (("w", lambda p: p["w"]), ("b", lambda p: p["b"]),
                     ("pair0", lambda p: p["pair"][0]), ("pair1", lambda p: p["pair"][1])):
        def loss(t, key=key):
            p = {"w": params["w"], "b": params["b"], "pair": list(params["pair"])}
            if key in ("w", "b"):
                p[key] = t
            else:
                p["pair"][int(key[-1])] = t
            p["pair"] = tuple(p["pair"])
            return f_tree(p, x)
        np.testing.assert_allclose(get(g).numpy(), fd_grad(loss, get(params)), atol=1e-6)


def test_grad_and_value_and_has_aux():
    x, y = rand(4, seed=1), rand(4, seed=2)

    def f(x, y):
        loss = f_mix(x, y)
        return loss, {"loss": loss, "twice": x * 2}
    (gx, gy), (value, aux) = F.grad_and_value(f, argnums=(0, 1), has_aux=True)(x, y)
    np.testing.assert_allclose(value.numpy(), f_mix(x, y).numpy())
    np.testing.assert_allclose(aux["twice"].numpy(), (x * 2).numpy())
    assert not value.requires_grad and not aux["twice"].requires_grad
    g, aux2 = F.grad(f, has_aux=True)(x, y)
    np.testing.assert_allclose(g.numpy(), gx.numpy())
    np.testing.assert_allclose(aux2["loss"].numpy(), value.numpy())


def test_vjp_matches_finite_differences_and_can_be_called_again():
    x, y = rand(3, seed=1), rand(3, seed=2)

    def f(x, y):
        return {"a": x.sin() * y, "b": (x * y).sum()}
    out, vjp_fn = F.vjp(f, x, y)
    ct = {"a": rand(3, seed=5), "b": llgrad.tensor(0.7, dtype=llgrad.float64)}
    gx, gy = vjp_fn(ct)

    def scalar(t):
        o = f(t, y)
        return (o["a"] * ct["a"]).sum() + o["b"] * ct["b"]
    np.testing.assert_allclose(gx.numpy(), fd_grad(scalar, x), atol=1e-6)
    gx2, _ = vjp_fn(ct)
    np.testing.assert_allclose(gx2.numpy(), gx.numpy())
    assert isinstance(vjp_fn(ct), tuple)


def test_nested_grad_is_the_second_derivative():
    x = rand(4, seed=3)

    def inner(t):
        return (t.sin() * t).sum()
    gg = F.grad(lambda t: F.grad(inner)(t).sum())(x)
    # d/dx sum(cos x * x + sin x) = -sin x * x + 2 cos x
    xn = x.numpy()
    np.testing.assert_allclose(gg.numpy(), -np.sin(xn) * xn + 2 * np.cos(xn), atol=1e-10)


def test_no_perturbation_confusion():
    x = rand(4, seed=4)
    # inner: d/db sum(a * b) = a, with a closed over (the outer x): the outer gradient of
    # sum(a) is ones, not 2 * ones
    g = F.grad(lambda a: F.grad(lambda b: (a * b).sum())(a).sum())(x)
    np.testing.assert_allclose(g.numpy(), np.ones(4))


def test_functional_under_no_grad_and_never_touches_grad():
    x = rand(4, seed=5).requires_grad_()
    y = rand(4, seed=6)
    with llgrad.no_grad():
        g = F.grad(f_mix)(x, y)
    np.testing.assert_allclose(g.numpy(), fd_grad(lambda t: f_mix(t, y), x.detach()), atol=1e-6)
    assert x.grad is None and y.grad is None

    def f(t):       # a no_grad inside the function is respected
        with llgrad.no_grad():
            c = t * 3
        return (c * t).sum()
    np.testing.assert_allclose(F.grad(f)(y).numpy(), 3 * y.numpy())


def test_unused_input_gives_zeros():
    x, y = rand(3, seed=1), rand(2, seed=2)
    gx, gy = F.grad(lambda a, b: a.sum(), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gy.numpy(), np.zeros(2))
    np.testing.assert_allclose(gx.numpy(), np.ones(3))


def test_closure_over_module_parameters_stays_attached():
    llgrad.manual_seed(0)
    model = llgrad.nn.Linear(3, 2).double()
    x = rand(3, seed=7)
    g = F.grad(lambda t: model(t).tanh().sum())(x)
    # as torch.func: the gradient depends on the parameters, which require grad
    assert g.requires_grad and g.grad_fn is not None
    g.sum().backward()
    assert model.weight.grad is not None
    assert x.grad is None
    # detached parameters: nothing attached
    w = model.weight.detach()
    g2 = F.grad(lambda t: (t @ w.t()).tanh().sum())(x)
    assert not g2.requires_grad


# ---- against torch.func ----------------------------------------------------------------------

def test_against_torch_func():
    torch = load_torch()
    tf = torch.func
    x, y = rand(4, seed=1), rand(4, seed=2)
    tx, ty = to_torch((x, y), torch)
    assert_trees_close(F.grad(f_mix, argnums=(0, 1))(x, y), tf.grad(f_mix, argnums=(0, 1))(tx, ty))
    assert_trees_close(F.grad_and_value(f_mix, argnums=1)(x, y),
                       tf.grad_and_value(f_mix, argnums=1)(tx, ty))
    params, xs = tree_args()
    assert_trees_close(F.grad(f_tree)(params, xs), tf.grad(f_tree)(to_torch(params, torch),
                                                                to_torch(xs, torch)))

    def g(x, y):
        return x.sin() * y, (x * y).sum()
    out, fn = F.vjp(g, x, y)
    tout, tfn = tf.vjp(g, tx, ty)
    ct = (rand(4, seed=9), llgrad.tensor(1.5, dtype=llgrad.float64))
    assert_trees_close(out, tout)
    assert_trees_close(fn(ct), tfn(to_torch(ct, torch)))
    h = F.grad(lambda a: F.grad(lambda b: (b.sin() * a).sum())(a).sum())(x)
    th = tf.grad(lambda a: tf.grad(lambda b: (b.sin() * a).sum())(a).sum())(tx)
    assert_trees_close(h, th)


def test_errors_match_torch():
    torch = load_torch()
    tf = torch.func
    x = rand(3)
    tx = to_torch(x, torch)
    cases = [
        (lambda m, t: m.grad(lambda a: a)(t)),                      # not a scalar
        (lambda m, t: m.grad(lambda a: 1.0)(t)),                    # not a tensor
        (lambda m, t: m.grad(lambda a: a.sum(), argnums=3)(t)),     # argnum out of range
        (lambda m, t: m.grad(lambda a: a.sum(), argnums=())(t)),
        (lambda m, t: m.grad(lambda a: a.sum(), argnums=(0, 0))(t)),
        (lambda m, t: m.grad(lambda a: a.sum(), argnums=[0])(t)),
        (lambda m, t: m.grad(lambda a: a.sum(), has_aux=True)(t)),  # no (output, aux)
        (lambda m, t: m.vjp(lambda a: (a, a), t)[1](t)),            # cotangent structure
        (lambda m, t: m.vjp(lambda a: a, t)[1](t[:2])),             # cotangent shape
    ]
    for case in cases:
        ours, theirs = error_of(lambda: case(F, x)), error_of(lambda: case(tf, tx))
        assert ours[0] == theirs[0], (ours, theirs)
        assert same_message(ours[1], theirs[1]), (ours, theirs)


def test_integer_input_is_refused():
    with pytest.raises(RuntimeError, match="floating point"):
        F.grad(lambda a: a.sum())(llgrad.tensor([1, 2, 3]))
