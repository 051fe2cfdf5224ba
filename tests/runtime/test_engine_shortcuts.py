"""The eager shortcuts that skip the dispatcher must give what the general path gives, bit
for bit: the broadcast gradient's sum (fast_vjp.summed_to, every bias's gradient), the
shape checks of bitselect.where and masked_fill, fill_value_fits' first test."""
import itertools

import numpy as np
import pytest

import llgrad
from llgrad.ir import bitselect
from llgrad.ir.ops_shape import sum_to_shape
from llgrad.runtime.fast_vjp import summed_to

SHAPES = [((300, 5), (5,)), ((16, 192), (1, 192)), ((7, 30, 5), (5,)), ((7, 30, 5), (30, 1)),
          ((7, 30, 5), (1, 30, 5)), ((7, 1, 5), (7, 1, 1)), ((4, 3), (1, 1)),
          ((2, 3, 4, 5), (3, 1, 5)), ((64, 128, 16), (128, 1)), ((5, 0, 3), (3,)),
          ((3,), ())]


def _values(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape).astype(dtype)
    flat = a.reshape(-1)
    if flat.size >= 4:
        flat[:4] = [np.nan, np.inf, -0.0, np.finfo(dtype).max]
    return a


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("have,want", SHAPES)
def test_summed_to_is_the_general_sum(have, want, dtype):
    g = llgrad.tensor(_values(have, dtype, len(have)))
    with llgrad.no_grad():
        fast = summed_to(g, want)
        general = sum_to_shape(g, want)
    assert fast is not None or want == () or 0 in have
    got = (fast if fast is not None else general).numpy()
    assert got.shape == tuple(want) and got.dtype == general.numpy().dtype
    np.testing.assert_array_equal(got.reshape(-1).view(np.uint8),
                                  general.numpy().reshape(-1).view(np.uint8))


def test_summed_to_leaves_the_rest_to_the_general_path():
    g = llgrad.randn(4, 3)
    with llgrad.no_grad():
        assert summed_to(g, (5,)) is None                   # (does not broadcast: it raises)
        assert summed_to(g, (4, 3)) is None                 # (nothing to sum)
        assert summed_to(g.long(), (3,)) is None            # (an integer sum promotes)
    assert summed_to(g, (3,)) is None                       # (grad mode on: a graph op)
    with pytest.raises(RuntimeError):
        g.sum_to_size(5)


def test_bias_gradient_equals_the_rule_and_double_backward_still_works():
    llgrad.manual_seed(0)
    x = llgrad.randn(32, 8, requires_grad=True)
    lin = llgrad.nn.Linear(8, 5)
    lin(x).tanh().sum().backward()
    g = (1 - lin(x).tanh() ** 2).detach()
    np.testing.assert_array_equal(lin.bias.grad.numpy(), sum_to_shape(g, (5,)).numpy())
    # create_graph: the sum must be a graph op (its gradient flows on)
    b = llgrad.randn(5, requires_grad=True)
    y = (x[:, :5] * b).pow(2).sum()
    (gb,) = llgrad.autograd.grad(y, b, create_graph=True)
    assert gb.requires_grad
    (ggb,) = llgrad.autograd.grad(gb.sum(), b)
    np.testing.assert_allclose(ggb.numpy(), 2 * (x[:, :5] ** 2).sum(0).detach().numpy(),
                               rtol=1e-5)


def test_bitselect_broadcast_is_numpys():
    shapes = [(), (1,), (3,), (4, 3), (4, 1), (1, 3), (2, 4, 3)]
    for trio in itertools.product(shapes, repeat=3):
        try:
            want = np.broadcast_shapes(*trio)
        except ValueError:
            with pytest.raises(ValueError):
                bitselect._broadcast(*trio)
            continue
        assert bitselect._broadcast(*trio) == want


@pytest.mark.parametrize("n", [10, 5000])
def test_masked_fill_values_and_errors(n):
    x = llgrad.tensor(_values((n,), np.float32, 1))
    m = x > 0
    for v in (0, 1.5, -2, float("inf"), float("-inf"), float("nan"), 3.4e38, 2 ** 64 - 1):
        got = x.masked_fill(m, v).numpy()
        want = np.where(m.numpy(), np.float32(v), x.numpy())
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    with pytest.raises(RuntimeError, match="without overflow"):
        x.masked_fill(m, 1e39)
    with pytest.raises(RuntimeError, match="without overflow"):
        x.half().masked_fill(m, 65520.0)
    for v in (2 ** 64, -2 ** 63 - 1):       # (beyond a PyTorch Scalar, as torch)
        with pytest.raises(OverflowError):
            x.masked_fill(m, v)
        with pytest.raises(OverflowError):
            llgrad.zeros(2).fill_(v)
    assert x.half().masked_fill(m, 65504.0).numpy()[m.numpy()].max() == 65504
    with pytest.raises(RuntimeError):           # (a mask that does not broadcast)
        x.masked_fill(llgrad.ones(n + 1, dtype=llgrad.bool), 0)


def test_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    xs, ws, b = (rng.standard_normal(s).astype(np.float32) for s in ((16, 8), (5, 8), (5,)))
    out = {}
    for lib in (torch, llgrad):
        params = [lib.tensor(a, requires_grad=True) for a in (ws, b)]
        y = lib.nn.functional.linear(lib.tensor(xs), *params).relu()
        y.masked_fill(y > 1, 0).sum().backward()
        out[lib.__name__] = [p.grad.numpy() for p in params]
    for a, t in zip(out["llgrad"], out["torch"]):
        np.testing.assert_allclose(a, t, rtol=1e-6, atol=1e-6)


def test_slices_clamp_and_refuse_as_torch():
    """Tensor slicing's bounds (Python's slice.indices, then stop >= start) against torch,
    and its refusals: a float bound (TypeError), a zero or negative step (ValueError)."""
    torch = pytest.importorskip("torch")
    for n in (0, 1, 5):
        for a, b, c in itertools.product([None, -7, -1, 0, 2, 9], [None, -7, -1, 0, 3, 9],
                                         [None, 1, 2]):
            s = slice(a, b, c)
            assert llgrad.arange(n)[s].tolist() == torch.arange(n)[s].tolist(), (n, s)
    x = llgrad.arange(5)
    with pytest.raises(TypeError, match="slice indices must be integers"):
        x[1.5:3]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        x[::0]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[::-1]
    assert x[llgrad.tensor(1):3].tolist() == [1, 2]


def test_a_linear_forwards_product_is_np_matmuls_bit_for_bit():
    """x @ w.T through (w @ x.T).T (np_matmul's path for a few rows of float32): NumPy's own
    product (to rounding: OpenBLAS's kernels may sum in another order on another CPU; on the
    AVX2 and AVX-512 hosts seen, bit for bit), C-contiguous, around the path's bounds."""
    from llgrad.ir.np_matmul import matmul
    rng = np.random.default_rng(0)
    for m, k, n in [(16, 96, 192), (15, 96, 192), (64, 33, 64), (65, 8, 64), (40, 100, 63),
                    (32, 1, 64), (20, 257, 300)]:
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((n, k)).astype(np.float32)
        got, want = matmul(x, w.T), np.matmul(x, w.T)
        assert got.flags.c_contiguous and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.sqrt(k))
