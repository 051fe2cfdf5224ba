"""llgrad.distributions.transforms against torch's for the transforms added after the first
set (Abs, Power, Softplus, Softmax, StickBreaking, LowerCholesky, PositiveDefinite,
CorrCholesky, Independent, Reshape, Cat, Stack, CumulativeDistribution), the new
constraints, and the biject_to / transform_to registries."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

torch.broadcast_shapes((1,), ())    # (its first call imports torch._refs: ~1 s, at collection)


def _data(lib, *shape, seed=0, positive=False):
    a = np.random.default_rng(seed + 13 * len(shape) + sum(shape)).standard_normal(shape)
    a = np.abs(a) + 0.3 if positive else a
    return lib.tensor(a.astype(np.float32))


def _same(fn, rtol=2e-5, atol=1e-5):
    want, got = fn(torch), fn(llgrad)
    assert len(want) == len(got)
    for i, (a, b) in enumerate(zip(want, got)):
        if isinstance(a, (tuple, bool, str, int, type(None))):
            assert (tuple(b) if isinstance(a, tuple) else b) == a, f"item {i}"
        else:
            np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=rtol,
                                       atol=atol, err_msg=f"item {i}")


# name -> (make(t), input(t))
TRANSFORMS = {
    "Abs": (lambda t: t.distributions.transforms.AbsTransform(), lambda t: _data(t, 3, 4)),
    "Power": (lambda t: t.distributions.transforms.PowerTransform(_data(t, 4, positive=True)),
              lambda t: _data(t, 3, 4, positive=True)),
    "PowerNegative": (lambda t: t.distributions.transforms.PowerTransform(t.tensor(-1.5)),
                      lambda t: _data(t, 3, 4, positive=True)),
    "Softplus": (lambda t: t.distributions.transforms.SoftplusTransform(),
                 lambda t: _data(t, 3, 4) * 5),
    "Softmax": (lambda t: t.distributions.transforms.SoftmaxTransform(),
                lambda t: _data(t, 3, 4)),
    "StickBreaking": (lambda t: t.distributions.transforms.StickBreakingTransform(),
                      lambda t: _data(t, 3, 4)),
    "LowerCholesky": (lambda t: t.distributions.transforms.LowerCholeskyTransform(),
                      lambda t: _data(t, 2, 3, 3)),
    "PositiveDefinite": (lambda t: t.distributions.transforms.PositiveDefiniteTransform(),
                         lambda t: _data(t, 2, 3, 3)),
    "CorrCholesky": (lambda t: t.distributions.transforms.CorrCholeskyTransform(),
                     lambda t: _data(t, 2, 6)),
    "Independent": (lambda t: t.distributions.transforms.IndependentTransform(
        t.distributions.transforms.SigmoidTransform(), 2), lambda t: _data(t, 2, 3, 4)),
    "Reshape": (lambda t: t.distributions.transforms.ReshapeTransform((2, 3), (6,)),
                lambda t: _data(t, 4, 2, 3)),
    "Cat": (lambda t: t.distributions.transforms.CatTransform(
        [t.distributions.transforms.ExpTransform(),
         t.distributions.transforms.AffineTransform(1., 3.)], dim=-1, lengths=[1, 3]),
        lambda t: _data(t, 2, 4)),
    "CatDim0": (lambda t: t.distributions.transforms.CatTransform(
        [t.distributions.transforms.SigmoidTransform(),
         t.distributions.transforms.TanhTransform()], dim=0, lengths=[2, 1]),
        lambda t: _data(t, 3, 4)),
    "Stack": (lambda t: t.distributions.transforms.StackTransform(
        [t.distributions.transforms.ExpTransform(),
         t.distributions.transforms.SoftplusTransform(),
         t.distributions.transforms.AffineTransform(0., -2.)], dim=1),
        lambda t: _data(t, 2, 3)),
    "CumulativeDistribution": (
        lambda t: t.distributions.transforms.CumulativeDistributionTransform(
            t.distributions.Normal(_data(t, 4, seed=1), _data(t, 4, seed=2, positive=True))),
        lambda t: _data(t, 3, 4)),
}
HAS_JACOBIAN = set(TRANSFORMS) - {"Abs", "Softmax", "LowerCholesky", "PositiveDefinite"}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_transform_matches_torch(name):
    make, data = TRANSFORMS[name]

    def f(t):
        tr = make(t)
        x = data(t).requires_grad_()
        y = tr(x)
        out = [y, tr.inv(y), tr.domain.event_dim, tr.codomain.event_dim, tr.bijective,
               tuple(tr.forward_shape(tuple(x.shape))), tuple(tr.inverse_shape(tuple(y.shape))),
               repr(tr.codomain).split("(")[0], bool(tr.codomain.check(y).all()),
               tr.inv.inv == tr or tr.inv.inv is tr]
        total = (y * y).sum()
        if name in HAS_JACOBIAN:
            j = tr.log_abs_det_jacobian(x, y)
            out.append(j)
            total = total + j.sum()
            out.append(tr.inv.log_abs_det_jacobian(y, x))
        total.backward()
        out.append(x.grad)
        return out
    _same(f, rtol=1e-4)


def test_transforms_with_cache_equality_sign_and_errors():
    for lib in (torch, llgrad):
        T = lib.distributions.transforms
        p = T.PowerTransform(lib.tensor([2., -1.]))
        assert p == T.PowerTransform(lib.tensor([2., -1.])) and p != T.ExpTransform()
        assert p.sign.tolist() == [1., -1.]
        c = p.with_cache(1)
        x = lib.tensor([1.5, 2.])
        assert c(x) is c(x) and c.inv(c(x)) is x
        assert T.SoftplusTransform().sign == 1 and T.AbsTransform() == T.AbsTransform()
        for make in (lambda: T.ReshapeTransform((2, 3), (5,)),
                     lambda: T.SoftmaxTransform().forward_shape(()),
                     lambda: T.CorrCholeskyTransform().forward_shape((4,)),
                     lambda: T.ReshapeTransform((2, 3), (6,)).forward_shape((3, 2))):
            with pytest.raises(ValueError):
                make()
        with pytest.raises(AssertionError):
            T.CatTransform([T.ExpTransform()], lengths=[1, 2])
        assert repr(T.IndependentTransform(T.ExpTransform(), 1)) == \
            "IndependentTransform(ExpTransform(), 1)"


def test_transformed_distribution_with_the_new_transforms():
    def f(t):
        D, T = t.distributions, t.distributions.transforms
        loc = _data(t, 2, 3).requires_grad_()
        base = D.Independent(D.Normal(loc, 1.), 1)
        d1 = D.TransformedDistribution(base, T.StickBreakingTransform())
        d2 = D.TransformedDistribution(D.Normal(loc, 1.), [T.SoftplusTransform(),
                                                           T.PowerTransform(t.tensor(0.5))])
        d3 = D.TransformedDistribution(D.Normal(_data(t, 2, 6), 1.),
                                       T.ReshapeTransform((6,), (2, 3)))
        v1 = t.softmax(_data(t, 2, 4, seed=1), -1)
        v2 = _data(t, 2, 3, seed=2, positive=True)
        lp1, lp2, lp3 = d1.log_prob(v1), d2.log_prob(v2), d3.log_prob(_data(t, 2, 2, 3))
        (lp1.sum() + lp2.sum()).backward()
        return [lp1, lp2, lp3, loc.grad, tuple(d1.event_shape), tuple(d3.event_shape),
                tuple(d3.batch_shape), tuple(d1.sample((5,)).shape)]
    _same(f, rtol=1e-4)


def test_new_constraints_match_torch():
    def f(t):
        C = t.distributions.constraints
        x = t.tensor([[0., 0.5, 1.], [1., -1., 2.]])
        corr = t.distributions.transforms.CorrCholeskyTransform()(_data(t, 3))
        return [C.half_open_interval(0., 1.).check(x), C.positive_integer.check(x),
                C.multinomial(3).check(x), C.lower_triangular.check(t.eye(3) + t.ones(3, 3).tril()),
                C.lower_triangular.check(t.ones(2, 2)), C.corr_cholesky.check(corr),
                C.corr_cholesky.check(t.eye(3) * 2),
                C.positive_semidefinite.check(t.tensor([[1., 1.], [1., 1.]])),
                C.positive_semidefinite.check(t.tensor([[1., 2.], [2., 1.]])),
                C.cat([C.positive, C.real], 1, [1, 2]).check(x),
                C.stack([C.positive, C.unit_interval, C.real], -1).check(x),
                C.stack([C.positive, C.real], 0).event_dim, C.cat([C.simplex], 0).event_dim,
                repr(C.half_open_interval(0., 1.)), repr(C.positive_integer),
                C.multinomial(3).is_discrete, C.corr_cholesky.event_dim]
    _same(f)


CONSTRAINTS = [
    lambda C, t: C.real, lambda C, t: C.positive, lambda C, t: C.nonnegative,
    lambda C, t: C.greater_than(t.tensor([1., -2., 0.5, 3.])), lambda C, t: C.less_than(2.),
    lambda C, t: C.greater_than_eq(-1.), lambda C, t: C.unit_interval,
    lambda C, t: C.interval(-2., t.tensor([1., 3., 0., 5.])),
    lambda C, t: C.half_open_interval(1., 4.), lambda C, t: C.simplex,
    lambda C, t: C.real_vector, lambda C, t: C.independent(C.positive, 1),
    lambda C, t: C.cat([C.positive, C.unit_interval], -1, [1, 3]),
    lambda C, t: C.stack([C.positive, C.real, C.unit_interval, C.less_than(0.)], -1),
]


@pytest.mark.parametrize("i", range(len(CONSTRAINTS)))
@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
def test_registries_match_torch(i, registry):
    def f(t):
        D = t.distributions
        tr = getattr(D, registry)(CONSTRAINTS[i](D.constraints, t))
        x = _data(t, 3, 4).requires_grad_()
        y = tr(x)
        out = [type(tr).__name__, y, bool(CONSTRAINTS[i](D.constraints, t).check(y).all())]
        total = y.sum()
        if tr.bijective:
            j = tr.log_abs_det_jacobian(x, y)
            out += [tr.inv(y), j]
            total = total + j.sum()
        total.backward()
        return out + [x.grad]
    _same(f, rtol=1e-4)


def test_registries_matrices_and_errors():
    def f(t):
        D = t.distributions
        C = D.constraints
        L = D.transform_to(C.lower_cholesky)(_data(t, 2, 3, 3))
        P = D.transform_to(C.positive_definite)(_data(t, 3, 3))
        R = D.biject_to(C.corr_cholesky)(_data(t, 2, 3))
        return [L, P, R, bool(C.positive_definite.check(P)), bool(C.corr_cholesky.check(R).all())]
    _same(f)
    for lib in (torch, llgrad):
        D = lib.distributions
        with pytest.raises(NotImplementedError, match="Cannot transform _Boolean"):
            D.biject_to(D.constraints.boolean)
        with pytest.raises(NotImplementedError):
            D.biject_to(D.constraints.lower_cholesky)
        with pytest.raises(TypeError):
            D.constraint_registry.ConstraintRegistry().register(3, lambda c: None)


def test_registry_register_and_unconstrained_fit():
    reg = llgrad.distributions.constraint_registry.ConstraintRegistry()
    C, T = llgrad.distributions.constraints, llgrad.distributions.transforms

    @reg.register(C.positive)
    def _softplus(constraint):
        return T.SoftplusTransform()
    assert isinstance(reg(C.greater_than(3.)), T.SoftplusTransform)
    # the docs' pattern: optimise an unconstrained parameter of a constrained one
    raw = llgrad.zeros(3, requires_grad=True)
    scale = llgrad.distributions.transform_to(llgrad.distributions.Normal.arg_constraints["scale"])
    loss = -llgrad.distributions.Normal(0., scale(raw)).log_prob(llgrad.ones(3) * 2).sum()
    loss.backward()
    assert np.isfinite(raw.grad.numpy()).all() and bool((raw.grad != 0).all())
