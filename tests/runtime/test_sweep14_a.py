"""Sweep 14 (helper A): known differences from PyTorch that earlier sweeps left as strict
xfails, fixed; these tests cover the cases around each fix (the de-xfailed tests cover the
original samples)."""
import random
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _ll(t, requires_grad=False):
    return llgrad.tensor(t.detach().numpy().copy(), requires_grad=requires_grad)


# ---- gather / scatter: PyTorch counts a 0-d tensor as 1-d (self or index) ------------------

_ZERO_DIM = {
    "gather_1d_self_0d_index": (lambda m, s, i, v: m.gather(s, 0, i), [3.0, 4.0], 1, None),
    "gather_0d_self_2_indices": (lambda m, s, i, v: m.gather(s, 0, i), 3.0, [0, 0], None),
    "scatter_add_1d_self_0d": (lambda m, s, i, v: s.scatter_add(0, i, v), [3.0, 4.0], 1, 2.0),
    "scatter_add_0d_self_2": (lambda m, s, i, v: s.scatter_add(0, i, v), 3.0, [0, 0], [2.0, 5.0]),
    "scatter_reduce_amax": (lambda m, s, i, v: s.scatter_reduce(0, i, v, "amax"), [3.0, 1.0], 1,
                            2.0),
    "scatter_0d_self": (lambda m, s, i, v: s.scatter(0, i, v), 3.0, [0], [2.0]),
    "scatter_add_inplace": (lambda m, s, i, v: s * 1 + s.clone().scatter_add_(0, i, v), 3.0,
                            [0, 0], [2.0, 5.0]),
}


@pytest.mark.parametrize("case", sorted(_ZERO_DIM))
def test_gather_scatter_zero_dim_as_one_dim(case):
    f, s, i, v = _ZERO_DIM[case]

    def run(m):
        ts = m.tensor(s, dtype=m.float64, requires_grad=True)
        tv = None if v is None else m.tensor(v, dtype=m.float64, requires_grad=True)
        y = f(m, ts, m.tensor(i), tv)
        leaves = [ts] + ([tv] if tv is not None else [])
        grads = m.autograd.grad((y * y).sum(), leaves)
        return [y.detach().numpy()] + [g.numpy() for g in grads]
    for a, b in zip(run(llgrad), run(torch)):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)


# ---- lu: the derivative for tall and wide matrices, empty pivots ---------------------------

@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 5), (2, 5, 3), (3, 1), (1, 3)])
def test_lu_factor_and_lu_gradients_non_square(shape):
    g = torch.Generator().manual_seed(1)
    A = torch.randn(*shape, dtype=torch.float64, generator=g, requires_grad=True)
    LU, _ = torch.linalg.lu_factor(A)
    G = torch.randn(LU.shape, dtype=torch.float64, generator=g)
    _, L, U = torch.linalg.lu(A)
    GL, GU = (torch.randn(t.shape, dtype=torch.float64, generator=g) for t in (L, U))
    want = torch.autograd.grad([LU, L, U], A, [G, GL, GU])[0]
    lA = _ll(A, True)
    lLU, _ = llgrad.linalg.lu_factor(lA)
    _, lL, lU = llgrad.linalg.lu(lA)
    got = llgrad.autograd.grad([lLU, lL, lU], lA, [_ll(G), _ll(GL), _ll(GU)])[0]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


def test_lu_unpack_and_solve_of_empty_batches():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (torch.lu_solve's deprecation)
        for b, lu, piv in [((2, 0, 3), (2, 0, 0), (2, 0)), ((0, 3, 2), (0, 3, 3), (0, 3))]:
            B, LU = torch.randn(b), torch.randn(lu)
            P = torch.ones(piv, dtype=torch.int32)
            want = torch.lu_solve(B, LU, P)
            got = llgrad.lu_solve(_ll(B), _ll(LU), _ll(P))
            assert tuple(got.shape) == tuple(want.shape)
            assert tuple(llgrad.lu_unpack(_ll(LU), _ll(P))[0].shape) == \
                tuple(torch.lu_unpack(LU, P)[0].shape)


# ---- strides of size-1 dims: expand, unsqueeze, view (PyTorch's, not NumPy's) --------------

_VIEWS = [lambda m: m.ones(2, 3, 4, 5), lambda m: m.ones(2, 3, 4, 5)[:, None, 1],
          lambda m: m.ones(2, 3, 4, 5)[0:1], lambda m: m.ones(2, 3, 4, 5).transpose(1, 2),
          lambda m: m.ones(2, 3, 4, 5)[:, :, :1], lambda m: m.ones(2, 3, 4, 5)[1, 2, 3:4],
          lambda m: m.ones(3, 4, 5)[None, 1], lambda m: m.ones(3, 1, 2)[:, :, :1],
          lambda m: m.tensor(2.0)]


@pytest.mark.parametrize("k", range(len(_VIEWS)))
def test_strides_of_size_one_dims(k):
    t, l = _VIEWS[k](torch), _VIEWS[k](llgrad)
    assert l.stride() == t.stride()
    for d in range(t.dim() + 1):
        assert l.unsqueeze(d).stride() == t.unsqueeze(d).stride()
    for size in [(1,) + tuple(t.shape), (3,) + tuple(t.shape), (1, 1) + tuple(t.shape),
                 tuple(n if n != 1 else 2 for n in t.shape)]:
        assert l.expand(size).stride() == t.expand(size).stride(), size
    rng, n = random.Random(k), t.numel()
    factors = [p for p in (2, 2, 2, 3, 5) if n % p == 0 and not (n := n // p) is None]
    for _ in range(25):
        shape = [1] * rng.randint(1, 4)
        for f in factors:
            shape[rng.randrange(len(shape))] *= f
        shape.insert(rng.randrange(len(shape) + 1), 1)
        try:
            want = t.view(shape).stride()
        except RuntimeError:
            continue
        assert l.view(shape).stride() == want, shape
        assert l.reshape(shape).stride() == t.reshape(shape).stride(), shape


# ---- out= that shares memory with an input -------------------------------------------------

_OUT = {
    "add_partial": lambda m, x: m.add(x[:3], 1, out=x[1:4]),
    "neg_partial": lambda m, x: m.neg(x[:3], out=x[1:4]),
    "cumsum_partial": lambda m, x: m.cumsum(x[:3], 0, out=x[1:4]),
    "stack": lambda m, x: m.stack([x[:2], x[2:4]], out=x[:4].view(2, 2)),
    "take": lambda m, x: m.take(x, m.tensor([2, 1, 0]), out=x[:3]),
    "gather_full": lambda m, x: m.gather(x[:3], 0, m.tensor([2, 1, 0]), out=x[:3]),
    "add_full": lambda m, x: m.add(x, 1, out=x),
    "cumsum_full": lambda m, x: m.cumsum(x, 0, out=x),
    "add_disjoint": lambda m, x: m.add(x[:3], 1, out=x[3:]),
    "gather_disjoint": lambda m, x: m.gather(x[:3], 0, m.tensor([2, 1, 0]), out=x[3:]),
}


@pytest.mark.parametrize("case", sorted(_OUT))
def test_out_sharing_memory_with_an_input(case):
    def run(m):
        x = m.arange(6.0)
        try:
            _OUT[case](m, x)
        except RuntimeError as e:
            return str(e)
        return x.tolist()
    assert run(llgrad) == run(torch)


# ---- derivatives of the NumPy-evaluated functions at inf and nan ---------------------------

@pytest.mark.parametrize("name", ["frexp", "nextafter", "i0"])
def test_numpy_function_gradients_at_inf_and_nan(name):
    xs = [float("inf"), -float("inf"), float("nan"), 1.0, -0.0, 3.0]

    def run(m):
        x = m.tensor(xs, dtype=m.float64, requires_grad=True)
        y = {"frexp": lambda: m.frexp(x)[0], "i0": lambda: m.i0(x),
             "nextafter": lambda: m.nextafter(x, m.tensor([0.0, 1, 1, 1, 0, 3],
                                                          dtype=m.float64))}[name]()
        y.sum().backward()
        return y.detach().numpy(), x.grad.numpy()
    for a, b in zip(run(llgrad), run(torch)):       # (I1's series: within an ulp of torch's)
        np.testing.assert_allclose(a, b, rtol=1e-15, atol=0)


# ---- pinv(hermitian=True): PyTorch's derivative, to second order ---------------------------

def test_pinv_hermitian_second_derivative():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 4, 4))
    a = a + np.swapaxes(a, -1, -2)
    g, h = rng.standard_normal((2, 4, 4)), rng.standard_normal((2, 4, 4))

    def run(m):
        x = m.tensor(a, requires_grad=True)
        gx, = m.autograd.grad(m.linalg.pinv(x, hermitian=True), x, m.tensor(g),
                              create_graph=True)
        return gx.detach().numpy(), m.autograd.grad((gx * m.tensor(h)).sum(), x)[0].numpy()
    for u, v in zip(run(llgrad), run(torch)):
        np.testing.assert_allclose(u, v, rtol=1e-7, atol=1e-9)
