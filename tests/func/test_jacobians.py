"""llgrad.func.jvp, jacrev, jacfwd and hessian: against torch.func, and (without torch)
against float64 finite differences and each other; argnums tuples, has_aux, pytrees,
chunk_size, composition with vmap, torch's errors."""
import numpy as np
import pytest

import llgrad
import llgrad.func as F
from func_helpers import (assert_trees_close, error_of, fd_jacobian, load_torch, rand,
                          same_message, to_torch)


def g(x, y):
    return x.sin() * y.exp() + (x.unsqueeze(1) * y.unsqueeze(0)).sum(0)


def h(x, y):
    return {"prod": x * y.sum(), "pair": (x.tanh(), (x.sum() * y).sum())}


def scalar(x, y):
    return (x.sin() * y).sum() + (x ** 2).sum() * y.mean()


# ---- without torch: finite differences --------------------------------------------------------

@pytest.mark.parametrize("jac", [F.jacrev, F.jacfwd])
def test_jacobians_match_finite_differences(jac):
    x, y = rand(4, seed=1), rand(4, seed=2)
    jx, jy = jac(g, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(jx.numpy(), fd_jacobian(lambda t: g(t, y), x), atol=1e-6)
    np.testing.assert_allclose(jy.numpy(), fd_jacobian(lambda t: g(x, t), y), atol=1e-6)
    np.testing.assert_allclose(jac(g)(x, y).numpy(), jx.numpy())


@pytest.mark.parametrize("jac", [F.jacrev, F.jacfwd])
def test_jacobian_structure_of_pytree_outputs(jac):
    x, y = rand(3, seed=1), rand(2, seed=2)
    j = jac(h, argnums=(0, 1))(x, y)
    assert set(j) == {"prod", "pair"}
    assert j["prod"][0].shape == (3, 3) and j["prod"][1].shape == (3, 2)
    assert j["pair"][1][0].shape == (3,) and j["pair"][1][1].shape == (2,)
    np.testing.assert_allclose(j["pair"][0][0].numpy(), np.diag(1 - np.tanh(x.numpy()) ** 2))
    np.testing.assert_allclose(j["prod"][1].numpy(),
                               fd_jacobian(lambda t: h(x, t)["prod"], y), atol=1e-6)


def test_jacrev_and_jacfwd_agree_with_aux_and_dict_inputs():
    p = {"a": rand(2, 3, seed=1), "b": rand(3, seed=2)}

    def f(p):
        out = (p["a"] * p["b"]).tanh()
        return out, out.sum()
    jr, aux_r = F.jacrev(f, has_aux=True)(p)
    jf, aux_f = F.jacfwd(f, has_aux=True)(p)
    assert jr["a"].shape == (2, 3, 2, 3) and jr["b"].shape == (2, 3, 3)
    assert_trees_close(jr, jf, atol=1e-9)
    np.testing.assert_allclose(aux_r.numpy(), aux_f.numpy())
    np.testing.assert_allclose(aux_r.numpy(), f(p)[1].numpy())


@pytest.mark.parametrize("chunk", [1, 2, 3, 100])
def test_jacrev_chunk_size(chunk):
    x, y = rand(5, seed=1), rand(5, seed=2)
    np.testing.assert_allclose(F.jacrev(g, chunk_size=chunk)(x, y).numpy(),
                               F.jacrev(g)(x, y).numpy())


def test_hessian_matches_finite_differences_of_the_gradient():
    x, y = rand(4, seed=3), rand(4, seed=4)
    hx = F.hessian(scalar)(x, y)
    fd = fd_jacobian(lambda t: F.grad(scalar)(t, y), x)
    np.testing.assert_allclose(hx.numpy(), fd, atol=1e-6)
    np.testing.assert_allclose(hx.numpy(), hx.numpy().T, atol=1e-12)
    blocks = F.hessian(scalar, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(blocks[0][0].numpy(), hx.numpy())
    np.testing.assert_allclose(blocks[0][1].numpy(),
                               fd_jacobian(lambda t: F.grad(scalar)(x, t), y), atol=1e-6)
    np.testing.assert_allclose(F.jacrev(F.jacrev(scalar))(x, y).numpy(), hx.numpy(), atol=1e-10)
    np.testing.assert_allclose(F.jacrev(F.jacfwd(scalar))(x, y).numpy(), hx.numpy(), atol=1e-10)


def test_jvp_is_the_jacobian_times_the_tangent():
    x, y = rand(4, seed=1), rand(4, seed=2)
    tx, ty = rand(4, seed=3), rand(4, seed=4)
    out, jv = F.jvp(g, (x, y), (tx, ty))
    np.testing.assert_allclose(out.numpy(), g(x, y).numpy())
    jx, jy = F.jacrev(g, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(jv.numpy(), jx.numpy() @ tx.numpy() + jy.numpy() @ ty.numpy(),
                               atol=1e-10)
    out, jv, aux = F.jvp(lambda a: (a.exp(), {"s": a.sum()}), (x,), (tx,), has_aux=True)
    np.testing.assert_allclose(jv.numpy(), np.exp(x.numpy()) * tx.numpy())
    np.testing.assert_allclose(aux["s"].numpy(), x.sum().numpy())
    # pytree primals and outputs
    p, t = {"u": x, "v": (y,)}, {"u": tx, "v": (ty,)}
    o, jo = F.jvp(lambda q: {"w": q["u"] * q["v"][0]}, (p,), (t,))
    np.testing.assert_allclose(jo["w"].numpy(), (tx * y + x * ty).numpy(), atol=1e-12)


def test_jvp_of_a_constant_and_strict():
    x = rand(3, seed=1)
    _, jv = F.jvp(lambda a: llgrad.ones(3, dtype=llgrad.float64), (x,), (x,))
    np.testing.assert_allclose(jv.numpy(), np.zeros(3))
    with pytest.raises(RuntimeError, match="independent of the inputs"):
        F.jvp(lambda a: llgrad.ones(3, dtype=llgrad.float64), (x,), (x,), strict=True)


def test_vmap_of_jacobians_and_hessians_per_sample():
    xs = rand(5, 3, seed=1)

    def f(a):
        return (a.sin() * a.sum()).sum()
    hs = F.vmap(F.hessian(f))(xs)
    for b in range(5):
        np.testing.assert_allclose(hs[b].numpy(), F.hessian(f)(xs[b]).numpy(), atol=1e-12)
    js = F.vmap(F.jacrev(lambda a: a.sin() * a.sum()))(xs)
    jf = F.vmap(F.jacfwd(lambda a: a.sin() * a.sum()))(xs)
    np.testing.assert_allclose(js.numpy(), jf.numpy(), atol=1e-12)


# ---- against torch.func ------------------------------------------------------------------------

def test_against_torch_func():
    torch = load_torch()
    tf = torch.func
    x, y = rand(4, seed=1), rand(4, seed=2)
    tx, ty = to_torch((x, y), torch)
    for ours, theirs in ((F.jacrev, tf.jacrev), (F.jacfwd, tf.jacfwd)):
        assert_trees_close(ours(g, argnums=(0, 1))(x, y), theirs(g, argnums=(0, 1))(tx, ty))
        assert_trees_close(ours(h, argnums=1)(x, y), theirs(h, argnums=1)(tx, ty))
    assert_trees_close(F.hessian(scalar, argnums=(0, 1))(x, y),
                       tf.hessian(scalar, argnums=(0, 1))(tx, ty))
    assert_trees_close(F.jvp(g, (x, y), (y, x)), tf.jvp(g, (tx, ty), (ty, tx)))
    xs = rand(3, 4, seed=5)
    assert_trees_close(F.vmap(F.jacfwd(F.jacrev(lambda a: (a.tanh() * a).sum())))(xs),
                       tf.vmap(tf.jacfwd(tf.jacrev(lambda a: (a.tanh() * a).sum())))(
                           to_torch(xs, torch)))


def test_errors_match_torch():
    torch = load_torch()
    tf = torch.func
    x = rand(3)
    tx = to_torch(x, torch)
    cases = [
        lambda m, t: m.jvp(lambda a: a, t, t),                          # primals not a tuple
        lambda m, t: m.jvp(lambda a: a, (t,), (t[:2],)),                 # tangent shape
        lambda m, t: m.jvp(lambda a: a, (t,), (t, t)),                   # structures differ
        lambda m, t: m.jvp(lambda a: (a, 1), (t,), (t,)),                # non-tensor output
        lambda m, t: m.jacrev(lambda a: a, chunk_size=0)(t),
        lambda m, t: m.jacfwd(lambda a: a, argnums=2)(t),
    ]
    for case in cases:
        ours, theirs = error_of(lambda: case(F, x)), error_of(lambda: case(tf, tx))
        assert ours[0] == theirs[0], (ours, theirs)
        assert same_message(ours[1], theirs[1]), (ours, theirs)
