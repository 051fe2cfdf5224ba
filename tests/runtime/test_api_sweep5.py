"""torch names llgrad lacked (fifth sweep), each against torch: the *_scatter functions,
index_reduce, the unsafe splits, the *_copy functions and nonzero_static (values, dtypes,
shapes, grad_fn names, gradients in both inputs, errors), and a compiled call of a few."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from sweep5_harness import same  # noqa: E402

R = np.random.default_rng(0)
X43 = R.standard_normal((4, 3)).astype(np.float32)
X234 = R.standard_normal((2, 3, 4)).astype(np.float32)


@pytest.mark.parametrize("fn, src", [
    (lambda t, x, s: t.slice_scatter(x, s, 0, 1, 3), R.standard_normal((2, 3))),
    (lambda t, x, s: t.slice_scatter(x, s, 1, step=2), R.standard_normal((4, 2))),
    (lambda t, x, s: t.slice_scatter(x, s, -1, -2), R.standard_normal((4, 2))),
    (lambda t, x, s: x.slice_scatter(s, 0, 0, 4, 3), R.standard_normal((2, 3))),
    (lambda t, x, s: t.slice_scatter(x, s, 0, 0, 4, -1), R.standard_normal((2, 3))),
    (lambda t, x, s: t.slice_scatter(x, s, 0, 1, 3), R.standard_normal((2, 2))),
    (lambda t, x, s: t.select_scatter(x, s, 0, 1), R.standard_normal(3)),
    (lambda t, x, s: x.select_scatter(s, 1, -1), R.standard_normal(4)),
    (lambda t, x, s: t.select_scatter(x, s, 0, 9), R.standard_normal(3)),
    (lambda t, x, s: t.select_scatter(x, s, 0, 1), R.standard_normal(2)),
    (lambda t, x, s: t.diagonal_scatter(x, s), R.standard_normal(3)),
    (lambda t, x, s: x.diagonal_scatter(s, -1), R.standard_normal(3)),
    (lambda t, x, s: t.diagonal_scatter(x, s, 1, 1, 0), R.standard_normal(3)),
    (lambda t, x, s: t.diagonal_scatter(x, s), R.standard_normal(2)),
    (lambda t, x, s: t.as_strided_scatter(x, s, (2, 2), (1, 3), 1), R.standard_normal((2, 2))),
    (lambda t, x, s: x.as_strided_scatter(s, (3,), (4,)), R.standard_normal(3)),
    (lambda t, x, s: t.as_strided_scatter(x, s, (2,), (1,), 20), R.standard_normal(2)),
    (lambda t, x, s: t.slice_scatter(x, s.double(), 0, 1, 3), R.standard_normal((2, 3))),
    (lambda t, x, s: t.slice_scatter(x.double(), s, 0, 1, 3), R.standard_normal((2, 3))),
])
def test_scatters(fn, src):
    # (torch 2.13's as_strided_scatter gives the input the wrong gradient, the scattered
    # positions' instead of the others': its own gradcheck fails; see the test below)
    same(fn, X43, src.astype(np.float32), grad="as_strided" not in str(fn.__code__.co_names))


def test_as_strided_scatter_gradcheck():
    x = llgrad.randn(4, 3, dtype=llgrad.float64, requires_grad=True)
    s = llgrad.randn(2, 2, dtype=llgrad.float64, requires_grad=True)
    assert llgrad.autograd.gradcheck(
        lambda x, s: llgrad.as_strided_scatter(x, s, (2, 2), (1, 3), 1), (x, s))


IDX = np.array([0, 4, 2, 0])


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce(reduce, include_self):
    x = R.standard_normal((5, 3)).astype(np.float32)
    s = R.standard_normal((4, 3)).astype(np.float32)
    same(lambda t, x, s: t.index_reduce(x, 0, t.tensor(IDX), s, reduce,
                                        include_self=include_self), x, s)
    same(lambda t, x, s: x.t().index_reduce(1, t.tensor(IDX), s.t(), reduce,
                                            include_self=include_self), x, s)
    same(lambda t, x, s: x.clone().index_reduce_(0, t.tensor(IDX), s, reduce,
                                                 include_self=include_self), x, s)


@pytest.mark.parametrize("fn", [
    lambda t, x, s: x.index_reduce(0, t.tensor(IDX), s, "sum"),
    lambda t, x, s: x.index_reduce(0, t.tensor(IDX).float(), s, "prod"),
    lambda t, x, s: x.index_reduce(0, t.tensor(IDX), s[:, :2], "prod"),
    lambda t, x, s: x.index_reduce(0, t.tensor([0, 9, 2, 0]), s, "prod"),
    lambda t, x, s: x.index_reduce(0, t.tensor(IDX[:3]), s, "prod"),
    lambda t, x, s: x.index_reduce(0, t.tensor(IDX), s.double(), "prod"),
    lambda t, x, s: x.index_reduce(0, t.tensor([-1, 4, 2, 0]), s, "amax"),
])
def test_index_reduce_errors(fn):
    same(fn, np.ones((5, 3), np.float32), np.arange(12.0, dtype=np.float32).reshape(4, 3))


@pytest.mark.parametrize("fn", [
    lambda t, x: t.unsafe_chunk(x, 2, 2), lambda t, x: x.unsafe_chunk(3),
    lambda t, x: t.unsafe_split(x, 2, 1), lambda t, x: x.unsafe_split(3, -1),
    lambda t, x: t.unsafe_split_with_sizes(x, [1, 2], 1),
    lambda t, x: x.unsafe_split_with_sizes([3, 1], 2),
    lambda t, x: t.view_copy(x, (6, 4)), lambda t, x: t.view_copy(x, (-1,)),
    lambda t, x: t.permute_copy(x, (2, 0, 1)), lambda t, x: t.transpose_copy(x, 0, 2),
    lambda t, x: t.t_copy(x[0]), lambda t, x: t.expand_copy(x[:, :1], (2, 5, 4)),
    lambda t, x: t.squeeze_copy(x[:, :1]), lambda t, x: t.squeeze_copy(x[:, :1], 1),
    lambda t, x: t.squeeze_copy(x[:, :1], (0, 1)), lambda t, x: t.unsqueeze_copy(x, 1),
    lambda t, x: t.select_copy(x, 1, 2), lambda t, x: t.slice_copy(x, 2, 1, 3),
    lambda t, x: t.slice_copy(x), lambda t, x: t.slice_copy(x, 1, -2, None, 2),
    lambda t, x: t.diagonal_copy(x, 0, 1, 2), lambda t, x: t.unbind_copy(x, 1),
    lambda t, x: t.split_copy(x, 2, 2), lambda t, x: t.split_with_sizes_copy(x, [1, 3], 2),
    lambda t, x: t.unfold_copy(x, 2, 2, 1), lambda t, x: t.alias_copy(x),
    lambda t, x: t.narrow_copy(x, 2, 1, 2), lambda t, x: x.narrow_copy(1, 0, 2),
    lambda t, x: t.as_strided_copy(x, (2, 2), (1, 2), 1),
    lambda t, x: [o.stride() for o in t.split_copy(x, 2, 2)],
    lambda t, x: t.permute_copy(x, (2, 0, 1)).stride(),
    lambda t, x: t.expand_copy(x[:, :1], (2, 5, 4)).stride(),
    lambda t, x: t.view_copy(x, (5, 5)),
])
def test_view_copies(fn):
    same(fn, X234)


def test_detach_copy():
    x = llgrad.randn(3, requires_grad=True)
    y = llgrad.detach_copy(x)
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    ty = torch.detach_copy(tx)
    assert y.requires_grad == ty.requires_grad
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    with pytest.raises(RuntimeError, match="derivative for aten::detach_copy is not implemented"):
        y.sum().backward()


@pytest.mark.parametrize("fn", [
    lambda t, x: t.nonzero_static(x, size=4), lambda t, x: x.nonzero_static(size=1, fill_value=7),
    lambda t, x: t.nonzero_static(x[0, 0], size=2), lambda t, x: x.nonzero_static(size=0),
    lambda t, x: t.nonzero_static(x, size=-1),
])
def test_nonzero_static(fn):
    same(fn, np.array([[0, 1], [2, 0]]), grad=False)


@pytest.mark.slow
def test_compiled_scatter_and_copy_match_eager():
    def f(x, s):
        y = llgrad.slice_scatter(x, s, 0, 1, 3)
        z = llgrad.select_scatter(y, s[0], 0, 2) * 2
        return llgrad.permute_copy(llgrad.diagonal_scatter(z, s[1, :3] + 1), (1, 0)).sum(0)

    cf = llgrad.compile(f)
    for _ in range(2):
        x = llgrad.randn(4, 3, requires_grad=True)
        s = llgrad.randn(2, 3, requires_grad=True)
        out = cf(x, s)
        out.sum().backward()
        x2 = x.detach().requires_grad_(True)
        s2 = s.detach().requires_grad_(True)
        ref = f(x2, s2)
        ref.sum().backward()
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-6)
        np.testing.assert_allclose(s.grad.numpy(), s2.grad.numpy(), rtol=1e-6)
