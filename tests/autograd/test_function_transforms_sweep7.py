"""autograd.Function under torch.func's transforms, against PyTorch (each failed before its
fix): vmap(grad(F)) and grad(vmap(F)) gave zeros (the custom node was recorded on the batched
wrappers, not at the graph level), a backward outside vmap raised; a vmap staticmethod was
ignored; PyTorch's errors for a Function without setup_context, without vmap support, with
both a vmap rule and generate_vmap_rule, and without jvp under jvp / jacfwd; a Function
returning its input under vmap (NumPy read a batched tensor); has_aux outputs that are not
tensors (accepted) and backward() inside a transform."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from autograd_oracle_sweep7 import same  # noqa: E402

X = (np.arange(24.0).reshape(2, 3, 4) / 7).astype(np.float32)


def _sin_mul(L, generate=True, rule=None):
    """F(x, y, k) = (sin(x) * y * k, (2 x).sum(-1)), saving an input and an output."""
    def forward(x, y, k):
        return x.sin() * y * k, (x * 2).sum(-1)

    def setup_context(ctx, inputs, output):
        x, y, k = inputs
        ctx.save_for_backward(x, y, output[0])
        ctx.k = k

    def backward(ctx, g, g2):
        x, y, _ = ctx.saved_tensors
        return g * x.cos() * y * ctx.k + 2 * g2.unsqueeze(-1), g * x.sin() * ctx.k, None
    attrs = {"forward": staticmethod(forward), "setup_context": staticmethod(setup_context),
             "backward": staticmethod(backward), "generate_vmap_rule": generate}
    if rule is not None:
        attrs["vmap"] = staticmethod(rule)
    return type("F", (L.autograd.Function,), attrs)


def _old_style(L):
    def forward(ctx, x):
        return x * 2
    return type("G", (L.autograd.Function,), {"forward": staticmethod(forward),
                                              "backward": staticmethod(lambda ctx, g: g * 2)})


def _x(L):
    return L.tensor(X)


def _loss(F):
    return lambda a, b: F.apply(a, b, 2.0)[0].sum() + F.apply(a, b, 2.0)[1].sum()


def _vmap_grad(L):
    return L.func.vmap(L.func.grad(_loss(_sin_mul(L)), argnums=(0, 1)))(_x(L), _x(L) + 1)


def _vmap_vmap_grad(L):
    g = L.func.grad(_loss(_sin_mul(L)), argnums=(0, 1))
    return L.func.vmap(L.func.vmap(g, in_dims=(0, None)), in_dims=(0, None))(_x(L),
                                                                           _x(L)[0, 0])


def _grad_vmap(L):
    F = _sin_mul(L)
    return L.func.grad(lambda a: L.func.vmap(F.apply, in_dims=(0, 0, None))(a, a + 1, 3.0)[0]
                       .sum())(_x(L))


def _backward_outside_vmap(L):
    F = _sin_mul(L)
    a = _x(L).requires_grad_()
    b = (_x(L)[0] + 1).requires_grad_()
    inner = L.func.vmap(lambda x, y: F.apply(x, y, 3.0), in_dims=(0, None))
    out, o2 = L.func.vmap(inner, in_dims=(0, None))(a, b[0])
    (out.sum() + o2.sum()).backward()
    return out, o2, a.grad, b.grad


def _chunked(L):
    F = _sin_mul(L)
    a = _x(L).requires_grad_()
    out = L.func.vmap(lambda x: F.apply(x, x, 1.0)[0], chunk_size=1)(a)
    out.sum().backward()
    return out, a.grad


def _jacrev_hessian(L):
    F = _sin_mul(L)
    x = _x(L)[0, 0]
    return (L.func.jacrev(lambda a: F.apply(a, a, 1.5)[0])(x),
            L.func.hessian(lambda a: F.apply(a, a, 1.5)[0].sum())(x))


def _two_outputs(L, setup):
    def backward(ctx, g1, g2):
        return g1 * 2 if g2 is None else g1 * 2 + g2
    G = type("G", (L.autograd.Function,), {
        "forward": staticmethod(lambda x: (x * 2, x.argmax(-1))),
        "setup_context": staticmethod(setup), "backward": staticmethod(backward),
        "generate_vmap_rule": True})
    a = _x(L).requires_grad_()
    y, i = L.func.vmap(G.apply)(a)
    y.sum().backward()
    return a.grad, i


def _no_materialize(ctx, inputs, output):
    ctx.set_materialize_grads(False)


def _non_differentiable(ctx, inputs, output):
    ctx.mark_non_differentiable(output[1])


def _rule(info, in_dims, x, y, k):
    return (x.sin() * y * k + info.batch_size, (x * 2).sum(-1)), (in_dims[0], 0)


def _by_rule(L):
    F = _sin_mul(L, generate=False, rule=_rule)
    a = _x(L).requires_grad_()
    out, o2 = L.func.vmap(F.apply, in_dims=(0, 0, None))(a, a, 2.0)
    out.sum().backward()            # (through the rule's own ops, as in PyTorch)
    return out, o2, a.grad


@pytest.mark.parametrize("fn", [
    _vmap_grad, _vmap_vmap_grad, _grad_vmap, _backward_outside_vmap, _chunked,
    _jacrev_hessian, _by_rule,
    lambda L: _two_outputs(L, _no_materialize),
    lambda L: _two_outputs(L, _non_differentiable),
])
def test_function_under_transforms(fn):
    same(fn, torch)


@pytest.mark.parametrize("fn", [
    lambda L: L.func.vmap(_old_style(L).apply)(L.ones(2, 3)),
    lambda L: L.func.grad(lambda t: _old_style(L).apply(t).sum())(L.ones(3)),
    lambda L: L.func.vjp(_old_style(L).apply, L.ones(3)),
    lambda L: L.func.jvp(_old_style(L).apply, (L.ones(3),), (L.ones(3),)),
    lambda L: L.func.vmap(_sin_mul(L, generate=False).apply, in_dims=(0, 0, None))(
        _x(L), _x(L), 1.0),
    lambda L: L.func.vmap(_sin_mul(L, rule=_rule).apply, in_dims=(0, 0, None))(
        _x(L), _x(L), 1.0),
    lambda L: L.func.jvp(lambda t: _sin_mul(L).apply(t, t, 1.0)[0], (L.ones(3),),
                         (L.ones(3),)),
    lambda L: L.func.jacfwd(lambda t: _sin_mul(L).apply(t, t, 1.0)[0])(L.ones(3)),
])
def test_function_transform_errors(fn):
    same(fn, torch)


def test_old_style_function_outside_transforms_still_works():
    same(lambda L: _old_style(L).apply(L.ones(2, requires_grad=True)), torch)


def _returns_input(L, body, backward):
    return type("F", (L.autograd.Function,), {
        "forward": staticmethod(body), "backward": staticmethod(backward),
        "setup_context": staticmethod(lambda ctx, inputs, output: None),
        "generate_vmap_rule": True})


def _input_as_is_under_vmap(L):
    x = L.arange(6.0).reshape(2, 3)
    F = _returns_input(L, lambda t: t, lambda ctx, g: g * 5)
    G = _returns_input(L, lambda t: t[0], lambda ctx, g: L.stack([g, g * 0]))
    a = x.clone().requires_grad_()
    out = L.func.vmap(F.apply)(a)
    out.sum().backward()
    b = x.clone().requires_grad_()
    o2 = L.func.vmap(G.apply, in_dims=1)(b)
    (o2 * L.arange(3.0)).sum().backward()
    return (L.func.vmap(F.apply)(x), L.func.vmap(G.apply, in_dims=1)(x), out, a.grad, o2,
            b.grad, L.func.vmap(L.func.grad(lambda t: F.apply(t).sum()))(x))


def test_function_returning_its_input_under_vmap():
    same(_input_as_is_under_vmap, torch)


@pytest.mark.parametrize("fn", [
    lambda L: L.func.grad(lambda a: ((a * 2).sum(), {"x": a, "n": None}), has_aux=True)(
        L.ones(2)),
    lambda L: L.func.grad(lambda a: ((a * 2).sum(), [a, 3]), has_aux=True)(L.ones(2)),
    lambda L: L.func.jacrev(lambda a: (a * 2, 3), has_aux=True)(L.ones(2)),
    lambda L: L.func.jacfwd(lambda a: (a * 2, 3), has_aux=True)(L.ones(2)),
    lambda L: L.func.vjp(lambda a: (a * 2, "x"), L.ones(2), has_aux=True)[2],
    lambda L: L.func.jvp(lambda a: (a * 2, 3), (L.ones(2),), (L.ones(2),), has_aux=True)[2],
    lambda L: L.func.grad_and_value(lambda a: ((a * 2).sum(), (a, a)), has_aux=True)(
        L.ones(2)),
    lambda L: L.func.grad(lambda a: [(a * 2).sum().backward(), a.sum()][1])(L.ones(2)),
])
def test_transform_outputs_and_backward_inside_against_torch(fn):
    same(fn, torch)
