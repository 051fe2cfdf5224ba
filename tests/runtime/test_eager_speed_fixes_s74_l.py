"""s74 (L): eager speed fixes that keep the values: F.cosine_similarity as ATen's steps (the
norms cloned and clamped in place without autograd: 26 dispatches -> 10, and the clamped
norm exactly max(norm, eps), not norm + (max(norm, eps) - norm), an ulp off below eps), and
lerp with a number weight on the native a + alpha * b kernel (compile/eager_axpy.py), bit
for bit the fused multiply-add emulation's values."""
import numpy as np
import pytest
import torch

import llgrad
from llgrad.compile import eager_axpy, eager_builds
from llgrad.ir import fused_madd

INF, NAN = float("inf"), float("nan")


def _eq(p, q):
    return p.shape == q.shape and p.dtype == q.dtype and np.array_equal(p, q, equal_nan=True)


def _cos(mod, x, y, dim=1, eps=1e-8, compiled=False):
    xs = [mod.tensor(v, requires_grad=True) for v in (x, y)]

    def f(a, b):
        return mod.nn.functional.cosine_similarity(a, b, dim=dim, eps=eps)
    out = (llgrad.compile(f) if compiled else f)(*xs)
    out.sum().backward()
    return out.detach().numpy(), [v.grad.numpy() for v in xs], type(out.grad_fn).__name__


def _check_cos(x, y, dim=1, eps=1e-8, exact=True):
    t = _cos(torch, x, y, dim, eps)
    for compiled in (False, True):
        ll = _cos(llgrad, x, y, dim, eps, compiled)
        if exact:
            assert _eq(t[0], ll[0]), (compiled, t[0], ll[0])
            for p, q in zip(t[1], ll[1]):
                assert _eq(p, q), (compiled, p, q)
        else:
            np.testing.assert_allclose(ll[0], t[0], rtol=1e-6, atol=1e-7)
            for p, q in zip(t[1], ll[1]):
                np.testing.assert_allclose(q, p, rtol=1e-5, atol=1e-6)
        if not compiled:
            assert t[2] == ll[2] == "SumBackward1"


def test_cosine_norm_below_eps_is_eps_exactly():
    # (the old norm + (clamp_min(norm, eps) - norm) was an ulp off eps for these norms)
    x = np.zeros((5, 2), np.float32)
    x[:, 0] = [2.239467722375821e-09, 1.988384124018694e-09, 2.468848681047575e-09,
               2.431725487639369e-09, 1.5868120151196763e-09]
    _check_cos(x, np.ones((5, 2), np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cosine_edge_values(dtype):
    x = np.array([[INF, 1.], [NAN, 1.], [0., 0.], [-0., 0.], [1e-30, 0], [3., 4.], [INF, INF],
                  [-0., -0.], [1e-5, 1e-6], [2., -3.]], dtype)
    y = np.array([[1., 2.], [1., 1.], [1., 1.], [1., 0.], [1., 1.], [INF, 1.], [1., 1.],
                  [-0., 1.], [1e-9, 0.], [-0., 5.]], dtype)
    for eps in (1e-8, 0.0, 0.5, 1e-6):
        _check_cos(x, y, 1, eps)
    _check_cos(x, y, 0, 1e-8)
    _check_cos(x, y, -1, 1e-8)


def _cos_old(x, y, dim, eps=1e-8):
    """the composition replaced (its norm + (max(norm, eps) - norm))."""
    n1, n2 = (llgrad.linalg.vector_norm(v, 2, dim, keepdim=True) for v in (x, y))
    with llgrad.no_grad():
        c1, c2 = ((n.clamp_min(eps) - n).nan_to_num(0.0, 0.0, 0.0) for n in (n1, n2))
    return ((x / (n1 + c1)) * (y / (n2 + c2))).sum(dim)


def test_cosine_random_and_broadcast():
    r = np.random.RandomState(0)
    a, b = r.randn(6, 33).astype(np.float32), r.randn(6, 33).astype(np.float32)
    # (33 summed in another order than torch's vector_norm / sum: already so, to rounding)
    _check_cos(a, b, 1, exact=False)
    _check_cos(a * 1e-10, b, 1, exact=False)       # (norms below eps)
    for dim in (0, 1):      # norms above eps: bit for bit the old composition's
        la, lb = llgrad.tensor(a, requires_grad=True), llgrad.tensor(b)
        new = llgrad.nn.functional.cosine_similarity(la, lb, dim)
        new.sum().backward()
        g = la.grad.numpy().copy()
        la.grad = None
        old = _cos_old(la, lb, dim)
        old.sum().backward()
        assert _eq(new.detach().numpy(), old.detach().numpy())
        assert _eq(g, la.grad.numpy())
    # broadcast operands (ExpandBackward0 in the graph); the sum of 5 in another order than
    # torch's here (already so before), so to float rounding
    _check_cos(r.randn(3, 1, 5).astype(np.float32), r.randn(4, 5).astype(np.float32), -1, 0.5,
               exact=False)


def test_cosine_integer_operands_raise():
    with pytest.raises(RuntimeError, match="floating point"):
        llgrad.nn.functional.cosine_similarity(llgrad.tensor([[1, 2]]), llgrad.tensor([[1, 2]]))


def _lerp_inputs(dtype, n):
    r = np.random.RandomState(1)
    a, b = r.randn(n).astype(dtype), r.randn(n).astype(dtype)
    a[:8] = [INF, -INF, NAN, -0., 0., 1e30, 3.0, -0.]
    b[:8] = [1., INF, 2., 0., -0., -1e30, 3.0, -0.]
    return a, b


def _lerp_old(a, b, w):
    """the emulation the kernel replaces (ir/ops_select._lerp's number weight)."""
    dt = a.dtype
    with np.errstate(all="ignore"):
        d = np.subtract(b, a)
        w = dt.type(w)
        return np.asarray(fused_madd.fma(w, d, a, dt) if abs(w) < 0.5 else
                          fused_madd.fma(-d, dt.type(1) - w, b, dt))


WEIGHTS = [0.3, 0.5, 0.7, 1.0, 0.0, -0.0, -0.5, 1.5, 0.49999997, 1e-8]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [4096 * 3 + 5, 37])
def test_lerp_number_weight_bitwise(dtype, n):
    a, b = _lerp_inputs(dtype, n)
    calls = eager_axpy.stats["calls"]
    for w in WEIGHTS:
        old = _lerp_old(a, b, w)
        got = llgrad.lerp(llgrad.tensor(a), llgrad.tensor(b), w).numpy()
        ref = torch.lerp(torch.tensor(a), torch.tensor(b), w).numpy()
        assert _eq(got, old), w
        assert _eq(got, ref), w
        x = llgrad.tensor(a)
        x.lerp_(llgrad.tensor(b), w)
        assert _eq(x.numpy(), old), w
        comp = llgrad.compile(lambda p, q, w=w: p.lerp(q, w))(llgrad.tensor(a), llgrad.tensor(b))
        assert _eq(comp.numpy(), ref), w
    if n >= eager_axpy.MIN_ELEMENTS and eager_axpy.ENABLED:
        assert eager_axpy.stats["calls"] > calls        # (the native kernel served them)


def test_lerp_number_weight_grads_and_views():
    r = np.random.RandomState(2)
    a, b = r.randn(80, 70).astype(np.float32), r.randn(80, 70).astype(np.float32)
    for mk in (lambda t: t, lambda t: t.t()):       # (a transposed view: not contiguous)
        la, lb = (llgrad.tensor(v, requires_grad=True) for v in (a, b))
        ta, tb = (torch.tensor(v, requires_grad=True) for v in (a, b))
        lo, to = llgrad.lerp(mk(la), mk(lb), 0.7), torch.lerp(mk(ta), mk(tb), 0.7)
        assert _eq(lo.detach().numpy(), to.detach().numpy())
        (lo * lo).sum().backward()
        (to * to).sum().backward()
        assert np.allclose(la.grad.numpy(), ta.grad.numpy(), rtol=1e-6, atol=1e-6)
        assert np.allclose(lb.grad.numpy(), tb.grad.numpy(), rtol=1e-6, atol=1e-6)
        assert type(lo.grad_fn).__name__ == type(to.grad_fn).__name__ == "LerpBackward0"


def _emulated(x, y, z, dtype):
    """fused_madd.fma's NumPy emulation (the native three-array kernel off)."""
    native, fused_madd._native_fma[0] = fused_madd._native_fma[0], None
    try:
        with np.errstate(all="ignore"):
            return np.asarray(fused_madd.fma(x, y, z, dtype))
    finally:
        fused_madd._native_fma[0] = native


def _fma_operands(dtype, n, seed):
    r = np.random.RandomState(seed)
    x, y, z = (r.randn(n).astype(dtype) for _ in range(3))
    # exact products with sums on a float32 midpoint (the double-rounding trap), ties,
    # cancellation to +-0, infinities, NaN, overflowing and subnormal products
    x[:12] = [1 + 2 ** -12, 0., -0., INF, NAN, 1e30, 1e-30, 3., -2., 1., 0., 2 ** -70]
    y[:12] = [1 + 2 ** -12, -1., 0., 0., 1., 1e30, 1e-30, 1 / 3, 2., -1., 5., 2 ** -70]
    z[:12] = [2 ** -25, -0., -0., 1., 1., -INF, 0., -1., 4., 1., -0., 1e-40]
    if dtype == np.float64:
        x[12:14] = [1e300, 1e-200]
        y[12:14] = [1e10, 1e-200]
    x[20:40] = (1 + r.randint(0, 2 ** 12, 20) * 2.0 ** -12).astype(dtype)
    y[20:40] = (1 + r.randint(0, 2 ** 12, 20) * 2.0 ** -12).astype(dtype)
    return x, y, z


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_fma_matches_the_emulation(dtype):
    for seed in range(3):
        x, y, z = _fma_operands(dtype, 5000, seed)
        if eager_axpy.ENABLED:      # (built on the builder thread: ready before the count)
            fused_madd.fma(x, y, z, dtype)
            eager_builds.wait()
        calls = eager_axpy.stats["calls"]
        got = np.asarray(fused_madd.fma(x, y, z, dtype))
        if eager_axpy.ENABLED:
            assert eager_axpy.stats["calls"] == calls + 1
        assert _eq(got, _emulated(x, y, z, dtype))
        ref = torch.addcmul(torch.tensor(z), torch.tensor(x), torch.tensor(y)).numpy()
        assert _eq(got, ref)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [4096 * 2 + 3, 45])
def test_addcmul_bitwise(dtype, n):
    x, y, z = _fma_operands(dtype, n, 7)
    for value in (1, 0.5, -3, 1e-3):
        old = _emulated(x * dtype(value) if value != 1 else x, y, z, np.dtype(dtype))
        ref = torch.addcmul(torch.tensor(z), torch.tensor(x), torch.tensor(y), value=value)
        got = llgrad.addcmul(llgrad.tensor(z), llgrad.tensor(x), llgrad.tensor(y), value=value)
        assert _eq(got.numpy(), old) and _eq(got.numpy(), ref.numpy()), value
        inp = llgrad.tensor(z)
        inp.addcmul_(llgrad.tensor(x), llgrad.tensor(y), value=value)
        assert _eq(inp.numpy(), old), value
        comp = llgrad.compile(lambda a, b, c, v=value: a.addcmul(b, c, value=v))(
            llgrad.tensor(z), llgrad.tensor(x), llgrad.tensor(y))
        assert _eq(comp.numpy(), ref.numpy()), value


def test_lerp_tensor_weight_bitwise():
    r = np.random.RandomState(3)
    a, b = _lerp_inputs(np.float32, 6000)
    w = r.uniform(-0.5, 1.5, 6000).astype(np.float32)
    w[:6] = [0.5, 0.49999997, 1.0, 0.0, -0.0, NAN]
    ref = torch.lerp(torch.tensor(a), torch.tensor(b), torch.tensor(w)).numpy()
    got = llgrad.lerp(llgrad.tensor(a), llgrad.tensor(b), llgrad.tensor(w)).numpy()
    assert _eq(got, ref)


def _topk_cases():
    r = np.random.RandomState(5)
    for trial in range(24):
        shape = [(16, 64), (3, 40, 5), (64, 256), (7, 100)][trial % 4]
        x = r.randn(*shape).astype([np.float32, np.float64][trial % 2])
        if trial % 3 == 0:
            x = np.round(x * 2) / 2         # many ties, at the edge too
        if trial % 5 == 0:
            x.flat[r.randint(0, x.size, 10)] = NAN
        if trial % 7 == 0:
            x.flat[r.randint(0, x.size, 10)] = INF
        if trial % 4 == 1:
            x.flat[r.randint(0, x.size, 20)] = -0.0
        if trial == 13:
            x[...] = NAN
        yield x


def test_topk_partition_of_values_matches_torch_and_argpartition():
    from llgrad.ir import ops_sort
    for x in _topk_cases():
        for dim in range(x.ndim):
            n = x.shape[dim]
            for k in sorted({1, 2, n // 4, max(n // 64, 1)}):
                for largest in (True, False):
                    t = torch.tensor(x).topk(k, dim, largest, True)
                    ll = llgrad.tensor(x).topk(k, dim, largest, True)
                    assert _eq(ll[0].numpy(), t[0].numpy()), (x.shape, k, dim, largest)
                    assert _eq(ll[1].numpy(), t[1].numpy()), (x.shape, k, dim, largest)
                    if 0 < k and k * 4 <= n:
                        old = ops_sort._topk_partitioned(x, k, dim, largest, True)
                        assert _eq(ll[1].numpy(), old[1]) and _eq(ll[0].numpy(), old[0])
                    # unsorted (k * 64 <= n): torch's own order; the same set
                    t = torch.tensor(x).topk(k, dim, largest, False)[1].numpy()
                    ll = llgrad.tensor(x).topk(k, dim, largest, False)[1].numpy()
                    assert _eq(np.sort(ll, dim), np.sort(t, dim))


def test_topk_grad_and_compiled():
    r = np.random.RandomState(6)
    x = np.round(r.randn(12, 80).astype(np.float32) * 3) / 3
    lx, tx = llgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    lv, tv = lx.topk(5, 1)[0], tx.topk(5, 1)[0]
    (lv * lv).sum().backward()
    (tv * tv).sum().backward()
    assert _eq(lx.grad.numpy(), tx.grad.numpy())
    comp = llgrad.compile(lambda t: t.topk(5, 1))(llgrad.tensor(x))
    ref = torch.tensor(x).topk(5, 1)
    assert _eq(comp[0].numpy(), ref[0].numpy()) and _eq(comp[1].numpy(), ref[1].numpy())


def _piecewise_old(x, t, k, huber):
    """ir/ops_losses' old NumPy forward (unreduced)."""
    with np.errstate(all="ignore"):
        z = np.abs(x - t)
        loss = np.where(z < k, 0.5 * z * z, k * (z - 0.5 * k)) if huber else \
            np.where(z < k, 0.5 * z * z / k, z - 0.5 * k)
    return loss.astype(np.result_type(x, t), copy=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("huber", [True, False])
def test_huber_smooth_l1_values(dtype, huber):
    r = np.random.RandomState(8)
    x, t = (r.randn(7, 50) * 2).astype(dtype), (r.randn(7, 50) * 2).astype(dtype)
    x[0, :10] = [NAN, INF, -INF, 1., 0.5, -0., 0., 3., 2., 1e4]
    t[0, :10] = [0., 0., 1., 0., 0., 0., -0., INF, 1., -1e4]     # (|x - t| = k: the edge)
    f = llgrad.nn.functional.huber_loss if huber else llgrad.nn.functional.smooth_l1_loss
    tf = torch.nn.functional.huber_loss if huber else torch.nn.functional.smooth_l1_loss
    kw = "delta" if huber else "beta"
    for k in (1.0, 0.5, 2, 1e-3):
        for red in ("none", "sum", "mean"):
            got = f(llgrad.tensor(x), llgrad.tensor(t), reduction=red, **{kw: k}).numpy()
            if red == "none" and not (huber and dtype == np.float16):   # (see below)
                assert _eq(got, _piecewise_old(x, t, k, huber)), k
            if dtype != np.float16 or red == "none":
                ref = tf(torch.tensor(x), torch.tensor(t), reduction=red, **{kw: k}).numpy()
                assert _eq(got, ref) if red == "none" else \
                    np.allclose(got, ref, rtol=1e-5, equal_nan=True), (k, red)
    # broadcast target, 0-d operands, gradients and compiled
    lx, lt = llgrad.tensor(x, requires_grad=True), llgrad.tensor(t[:1], requires_grad=True)
    tx, tt = torch.tensor(x, requires_grad=True), torch.tensor(t[:1], requires_grad=True)
    with pytest.warns(UserWarning):
        lo = f(lx, lt, **{kw: 0.5})
    to = tf(tx, tt, **{kw: 0.5})
    np.testing.assert_allclose(lo.detach().numpy(), to.detach().numpy(), rtol=1e-3)
    if dtype != np.float16:
        lo.backward()
        to.backward()
        assert _eq(lx.grad.numpy(), tx.grad.numpy())
        # (the broadcast target's gradient summed over 7 rows in another order than torch's,
        # already so before: to rounding)
        np.testing.assert_allclose(lt.grad.numpy(), tt.grad.numpy(), rtol=1e-5, atol=1e-8)
        assert type(lo.grad_fn).__name__ == type(to.grad_fn).__name__
    s = f(llgrad.tensor(x[1, 1]), llgrad.tensor(t[1, 1]), reduction="none").numpy()
    assert _eq(s, tf(torch.tensor(x[1, 1]), torch.tensor(t[1, 1]), reduction="none").numpy())
    comp = llgrad.compile(lambda p, q: f(p, q, reduction="none", **{kw: 0.5}))(
        llgrad.tensor(x), llgrad.tensor(t))
    np.testing.assert_allclose(comp.numpy(), _piecewise_old(x, t, 0.5, huber), rtol=1e-3)


def test_huber_float16_in_float32_as_torch():
    # FINDING (fixed): eager huber_loss on float16 computed in float16 step by step (PyTorch's
    # kernel: float32, rounded once); 37 of these 350 an ulp off; compiled already agreed
    r = np.random.RandomState(8)
    x, t = (r.randn(7, 50) * 2).astype(np.float16), (r.randn(7, 50) * 2).astype(np.float16)
    for delta in (1.0, 0.5, 2.0, 0.3):
        ref = torch.nn.functional.huber_loss(torch.tensor(x), torch.tensor(t),
                                             reduction="none", delta=delta).numpy()
        for compiled in (False, True):
            def f(a, b):
                return llgrad.nn.functional.huber_loss(a, b, reduction="none", delta=delta)
            got = (llgrad.compile(f) if compiled else f)(llgrad.tensor(x), llgrad.tensor(t))
            assert _eq(got.numpy(), ref), (delta, compiled)


def test_median_dim_by_partition_matches_torch():
    r = np.random.RandomState(3)
    for trial in range(36):
        shape = [(16, 64), (3, 41, 5), (64, 256), (7, 100), (1,), (5, 1)][trial % 6]
        x = r.randn(*shape).astype([np.float32, np.float64, np.float16][trial % 3])
        if trial % 2 == 0:
            x = (np.round(x * 2) / 2).astype(x.dtype)       # ties at the median
        if trial % 5 == 0:
            x.flat[r.randint(0, x.size, 3)] = NAN
        if trial % 7 == 0:
            x.flat[r.randint(0, x.size, 5)] = INF
        if trial % 4 == 1:
            x.flat[r.randint(0, x.size, 20)] = -0.0
        for d in range(-x.ndim, x.ndim):
            for kd in (False, True):
                t, ll = torch.tensor(x).median(d, kd), llgrad.tensor(x).median(d, kd)
                assert _eq(ll[0].numpy(), t[0].numpy()), (shape, d, kd)
                assert _eq(ll[1].numpy(), t[1].numpy()), (shape, d, kd)
                assert (np.signbit(ll[0].numpy()) == np.signbit(t[0].numpy())).all()
    e = llgrad.zeros(0, 5).median(1)
    assert tuple(e[0].shape) == tuple(e[1].shape) == (0,)


def test_median_dim_grad_and_compiled():
    r = np.random.RandomState(4)
    x = np.round(r.randn(9, 30).astype(np.float32) * 2) / 2
    x[0, 3] = NAN
    lx, tx = llgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    lv, tv = lx.median(1), tx.median(1)
    assert type(lv[0].grad_fn).__name__ == type(tv[0].grad_fn).__name__ == "MedianBackward1"
    (lv[0] * 3).sum().backward()
    (tv[0] * 3).sum().backward()
    assert _eq(lx.grad.numpy(), tx.grad.numpy())
    f = llgrad.compile(lambda t: t.median(0))
    for seed in (5, 6):         # (a second input: no index computed while tracing kept)
        y = np.random.RandomState(seed).randn(11, 4).astype(np.float32)
        got, ref = f(llgrad.tensor(y)), torch.tensor(y).median(0)
        assert _eq(got[0].numpy(), ref[0].numpy()) and _eq(got[1].numpy(), ref[1].numpy())
    g = llgrad.vmap(lambda t: t.median(0)[0])(llgrad.tensor(x[1:]))
    assert _eq(g.numpy(), torch.vmap(lambda t: t.median(0)[0])(torch.tensor(x[1:])).numpy())
