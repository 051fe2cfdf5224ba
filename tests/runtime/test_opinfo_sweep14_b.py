"""Sweep 14 (helper B): differences found by running PyTorch's OpInfo reference inputs,
noncontiguous samples, out= variants and in-place variants on strided self through llgrad,
each written here as a small standalone comparison with torch (the OpInfo databases are not
imported)."""
import time
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _strided(mod, base, dtype):
    """The transpose of a column slice of base: a (n, m) view with strides (2, 2 m)."""
    t = mod.tensor(base, dtype=getattr(mod, dtype))
    return t[:, ::2].T


# ---- resize_ / resize_as_ to self's own shape are no-ops (strides, values, version kept) ------

@pytest.mark.parametrize("how", ["resize_", "resize_as_"])
def test_resize_to_same_shape_keeps_strided_layout(how):
    base = np.arange(50.0).reshape(5, 10)
    t, l = _strided(torch, base, "float64"), _strided(llgrad, base, "float64")
    vt, vl = t._version, l._version
    if how == "resize_":
        t.resize_(5, 5), l.resize_(5, 5)
    else:
        t.resize_as_(torch.zeros(5, 5)), l.resize_as_(llgrad.zeros(5, 5))
    assert l.stride() == t.stride() == (2, 10)
    np.testing.assert_array_equal(l.numpy(), t.numpy())      # (was the storage re-read)
    assert l._version - vl == t._version - vt == 0


def test_resize_to_other_shape_still_restrides():
    base = np.arange(50.0).reshape(5, 10)
    t, l = _strided(torch, base, "float64"), _strided(llgrad, base, "float64")
    vt, vl = t._version, l._version
    t.resize_(3, 3), l.resize_(3, 3)
    assert l.stride() == t.stride()
    np.testing.assert_array_equal(l.numpy(), t.numpy())
    assert l._version - vl == t._version - vt


# ---- i0's gradient at huge inputs (a power series of |x| + 40 terms: 1e30 never returned) ----

def test_i0_gradient_of_huge_inputs_is_fast_and_torchs():
    x = [700.0, 710.0, 713.0, 720.0, -720.0, 1e10, 1e30, -1e300, float("inf"), float("nan"), 2.5]
    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    l = llgrad.tensor(x, dtype=llgrad.float64, requires_grad=True)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # (no NumPy overflow warnings: PyTorch has none)
        lr = llgrad.i0(l)
        lr.backward(llgrad.ones_like(lr))
    assert time.perf_counter() - start < 2.0
    tr = torch.i0(t)
    tr.backward(torch.ones_like(tr))
    np.testing.assert_allclose(lr.detach().numpy(), tr.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(l.grad.numpy(), t.grad.numpy(), rtol=1e-12)


# ---- out= of the functions with a list of outputs: PyTorch returns None, checks the count -----

@pytest.mark.parametrize("name,args,sizes", [("split_copy", (3,), (3, 3, 3, 1)),
                                             ("split_with_sizes_copy", ([3, 7],), (3, 7))])
def test_list_out_returns_none_and_fills(name, args, sizes):
    x = np.arange(10.0)
    to = [torch.empty(n, dtype=torch.float64) for n in sizes]
    lo = [llgrad.empty(n, dtype=llgrad.float64) for n in sizes]
    assert getattr(torch, name)(torch.tensor(x), *args, out=to) is None
    assert getattr(llgrad, name)(llgrad.tensor(x), *args, out=lo) is None
    for a, b in zip(to, lo):
        np.testing.assert_array_equal(b.numpy(), a.numpy())


def test_unbind_copy_out_returns_none():
    x = np.arange(10.0).reshape(2, 5)
    to = [torch.empty(5, dtype=torch.float64) for _ in range(2)]
    lo = [llgrad.empty(5, dtype=llgrad.float64) for _ in range(2)]
    assert torch.unbind_copy(torch.tensor(x), out=to) is None
    assert llgrad.unbind_copy(llgrad.tensor(x), out=lo) is None
    for a, b in zip(to, lo):
        np.testing.assert_array_equal(b.numpy(), a.numpy())


@pytest.mark.parametrize("call", [
    lambda m, x: m.split_copy(x, 3, out=[m.empty(3)]),
    lambda m, x: m.unbind_copy(x.reshape(2, 5), out=[m.empty(5) for _ in range(3)]),
    lambda m, x: m.split_with_sizes_copy(x, [3, 7], out=[m.empty(3)]),
    lambda m, x: m.split_copy(x, 5, out=[m.empty(0), m.empty(0)]),     # (no resize)
])
def test_list_out_of_wrong_count_raises(call):
    with pytest.raises(RuntimeError) as te:
        call(torch, torch.arange(10.0))
    with pytest.raises(RuntimeError) as le:
        call(llgrad, llgrad.arange(10.0))
    assert str(le.value) == str(te.value)


# ---- as_strided_scatter of a strided or offset input: the view is of input's storage ---------

_VIEWS = [(slice(None), slice(None, None, 2)), (slice(1, None), slice(None)),
          (slice(None), slice(1, 7, 2))]


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("view", range(len(_VIEWS)))
@pytest.mark.parametrize("args", [((2, 2), (1, 2), 1), ((2, 2), (1, 2), None),
                                  ((2, 2), (2, 1), 3), ((2, 2), (4, 2), None)])
def test_as_strided_scatter_of_strided_input(dt, view, args):
    # PyTorch takes the as_strided of a clone of input's whole storage (offset default
    # input's own): llgrad counted positions in input's elements as if it were contiguous
    x, s = np.arange(30.0).reshape(3, 10), np.array([[-1.0, -2.0], [-3.0, -4.0]])
    t = torch.as_strided_scatter(torch.tensor(x, dtype=getattr(torch, dt))[_VIEWS[view]],
                                 torch.tensor(s, dtype=getattr(torch, dt)), *args)
    l = llgrad.as_strided_scatter(llgrad.tensor(x, dtype=getattr(llgrad, dt))[_VIEWS[view]],
                                  llgrad.tensor(s, dtype=getattr(llgrad, dt)), *args)
    assert l.dtype == getattr(llgrad, dt) and l.shape == t.shape
    np.testing.assert_array_equal(l.numpy(), t.numpy())


def test_as_strided_scatter_of_strided_input_gradients_and_bounds():
    rng = np.random.default_rng(0)
    a = llgrad.tensor(rng.standard_normal((3, 10)), requires_grad=True)
    b = llgrad.tensor(rng.standard_normal((2, 2)), requires_grad=True)
    assert llgrad.autograd.gradcheck(
        lambda a, b: llgrad.as_strided_scatter(a[:, ::2], b, (2, 2), (1, 2), 1), (a, b))
    x = np.arange(30.0).reshape(3, 10)
    with pytest.raises(RuntimeError) as te:
        torch.as_strided_scatter(torch.tensor(x)[:, ::2], torch.zeros(2, 2, dtype=torch.float64),
                                 (2, 2), (1, 2), 29)
    with pytest.raises(RuntimeError) as le:
        llgrad.as_strided_scatter(llgrad.tensor(x)[:, ::2], llgrad.zeros(2, 2), (2, 2), (1, 2), 29)
    assert str(le.value) == str(te.value)


# ---- tensordot: a contracted dim of size 1 broadcasts (the other operand summed over it) -----

@pytest.mark.parametrize("sa,sb,dims", [((1, 1, 1), (2, 1, 2), ([0, 1], [2, 0])),
                                        ((3, 1, 4), (4, 5, 1), ([0, 2], [2, 0])),
                                        ((3, 4), (1, 5), ([0], [0])),
                                        ((3, 4), (3, 1), ([0, 1], [0, 1]))])
def test_tensordot_size_one_contracted_dims(sa, sb, dims):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    la, lb = llgrad.tensor(a, requires_grad=True), llgrad.tensor(b, requires_grad=True)
    tr, lr = torch.tensordot(ta, tb, dims=dims), llgrad.tensordot(la, lb, dims=dims)
    assert tuple(lr.shape) == tuple(tr.shape)
    np.testing.assert_allclose(lr.detach().numpy(), tr.detach().numpy(), rtol=1e-12)
    g = rng.standard_normal(tuple(tr.shape))
    tg = torch.autograd.grad(tr, (ta, tb), torch.tensor(g))
    lg = llgrad.autograd.grad(lr, (la, lb), llgrad.tensor(g))
    for u, v in zip(tg, lg):
        np.testing.assert_allclose(v.numpy(), u.numpy(), rtol=1e-12)


# ---- histogram's bin_edges of a bins tensor: a new contiguous tensor, not bins itself --------

def test_histogram_bin_edges_are_a_copy_of_bins():
    for mod in (torch, llgrad):
        bins = mod.tensor([0.0, 9.0, 1.0, 9.0, 2.0, 9.0, 3.0])[::2]
        hist, edges = mod.histogram(mod.tensor([0.5, 1.5, 2.5, 2.7]), bins)
        assert edges is not bins and edges.stride() == (1,)
        edges[0] = -100.0
        assert bins[0].item() == 0.0        # (writing bin_edges changed the user's bins)
        np.testing.assert_array_equal(hist.numpy(), [1.0, 1.0, 2.0])


# ---- grid_sample of a 3-D grid: a contiguous result (was channels-last; .view raised) --------

def test_grid_sample_3d_result_is_contiguous_and_viewable():
    rng = np.random.default_rng(2)
    x, g = rng.standard_normal((2, 3, 5, 6, 7)), rng.uniform(-1, 1, (2, 12, 11, 10, 3))
    t = torch.nn.functional.grid_sample(torch.tensor(x), torch.tensor(g), align_corners=False)
    l = llgrad.nn.functional.grid_sample(llgrad.tensor(x), llgrad.tensor(g), align_corners=False)
    assert l.stride() == t.stride()
    np.testing.assert_allclose(l.view(2, -1).numpy(), t.view(2, -1).numpy(), rtol=1e-10)


# ---- igamma / igammac: the upper tail directly (1 - P gave 0), Temme's expansion for large a --

def test_igammac_upper_tail_is_not_one_minus_p():
    a = [1.0, 1.0, 2.5, 10.0, 0.5, 100.0, 3.0]
    x = [50.0, 40.0, 60.0, 80.0, 30.0, 300.0, 1e-20]
    t = torch.igammac(torch.tensor(a, dtype=torch.float64), torch.tensor(x, dtype=torch.float64))
    l = llgrad.igammac(llgrad.tensor(a, dtype=llgrad.float64),
                       llgrad.tensor(x, dtype=llgrad.float64))
    np.testing.assert_allclose(l.numpy(), t.numpy(), rtol=1e-10, atol=0)   # (1.9e-22 was 0)
    tl = torch.igamma(torch.tensor(x, dtype=torch.float64), torch.tensor(a, dtype=torch.float64))
    ll = llgrad.igamma(llgrad.tensor(x, dtype=llgrad.float64), llgrad.tensor(a, dtype=llgrad.float64))
    np.testing.assert_allclose(ll.numpy(), tl.numpy(), rtol=1e-10, atol=0)


@pytest.mark.parametrize("fn", ["igamma", "igammac"])
def test_igamma_large_a_near_x(fn):
    # a = x = 1e20 gave nan, 1e10 gave 0.34 (0.5): the series and fraction lose everything
    # (a = 1e20 only at x = a: elsewhere PyTorch's own digits go, 1e-6 off the true value)
    rng = np.random.default_rng(3)
    a = np.repeat([1e5, 1e6, 1e7, 1e9, 1e10], 20)
    x = a + rng.uniform(-4.4, 4.4, a.size) * np.sqrt(a)
    x[::20] = a[::20]
    a, x = np.append(a, [1e20, 1e30]), np.append(x, [1e20, 1e30])
    t = getattr(torch, fn)(torch.tensor(a), torch.tensor(x)).numpy()
    l = getattr(llgrad, fn)(llgrad.tensor(a), llgrad.tensor(x)).numpy()
    np.testing.assert_allclose(l, t, rtol=1e-9, atol=1e-15)


def test_igamma_of_0d_tensors():
    """0-d operands (one element: NumPy's 1 - out is a scalar there, not an array)."""
    torch = pytest.importorskip("torch")
    for a, x in [(0.5, 0.3), (2.0, 50.0), (1.0, 50.0)]:
        for fn in ("igamma", "igammac"):
            got = getattr(llgrad, fn)(llgrad.tensor(a, dtype=llgrad.float64),
                                      llgrad.tensor(x, dtype=llgrad.float64))
            want = getattr(torch, fn)(torch.tensor(a, dtype=torch.float64),
                                      torch.tensor(x, dtype=torch.float64))
            assert got.shape == () and abs(got.item() - want.item()) <= 1e-12 * abs(want.item())
