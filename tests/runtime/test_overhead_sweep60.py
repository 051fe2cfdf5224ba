"""The eager fast paths of the per-op overhead sweep (H6, sweep 60) against PyTorch: the
in-place dispatcher's one-pass checks (broadcast into self, the result-type cast check, the
overlap check, recording), clamp / clamp_'s bound checks, the scalar-category lookup of
promotion, copy_ of an equal shape, max / min / argmax along a dim without NaNs, cat of
equal shapes, add_ with a float alpha: results, dtypes, strides, errors, version counters
and gradients as torch's."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _pair(a, **kw):
    return llgrad.tensor(a, **kw), torch.tensor(a, **kw)


def _same(r, t, rtol=0):
    assert str(r.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert tuple(r.shape) == tuple(t.shape)
    assert tuple(r.stride()) == tuple(t.stride())
    if str(t.dtype) == "torch.bfloat16":      # (no NumPy bfloat16: compared as float32)
        r, t = r.float(), t.float()
    if rtol:        # (exp's and tanh's last bit: libm's, not Sleef's)
        np.testing.assert_allclose(r.detach().numpy(), t.detach().numpy(), rtol=rtol)
    else:
        np.testing.assert_array_equal(r.detach().numpy(), t.detach().numpy())


def _same_error(f_ll, f_t):
    with pytest.raises(Exception) as et:
        f_t()
    with pytest.raises(Exception) as el:
        f_ll()
    assert type(el.value).__name__ == type(et.value).__name__, (el.value, et.value)
    assert str(el.value) == str(et.value)


def _check(f_ll, f_t, rtol=0):
    """f_t's result or error, and f_ll's the same."""
    try:
        rt = f_t()
    except Exception:
        _same_error(f_ll, f_t)
        return
    _same(f_ll(), rt, rtol)


A = np.arange(-6, 6, dtype=np.float32).reshape(3, 4) / 4


# ---- the in-place dispatcher ------------------------------------------------------------

@pytest.mark.parametrize("name, args", [
    ("add_", lambda L, y: (y,)), ("mul_", lambda L, y: (y,)), ("mul_", lambda L, y: (0.5,)),
    ("add_", lambda L, y: (y[0],)), ("sub_", lambda L, y: (y[:, :1],)),
    ("div_", lambda L, y: (2,)), ("relu_", lambda L, y: ()), ("sigmoid_", lambda L, y: ()),
    ("tanh_", lambda L, y: ()), ("zero_", lambda L, y: ()), ("fill_", lambda L, y: (1.5,)),
    ("addcmul_", lambda L, y: (y, y)), ("lerp_", lambda L, y: (y, 0.25)),
    ("clamp_", lambda L, y: (-0.5, 0.5)), ("clamp_min_", lambda L, y: (0.0,)),
    ("copy_", lambda L, y: (y,)), ("copy_", lambda L, y: (y.t().contiguous().t(),)),
])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_inplace_values_strides_versions(name, args, layout):
    results = []
    for lib in (llgrad, torch):
        base = lib.tensor(A if layout == "contiguous" else A.T.copy())
        x = base if layout == "contiguous" else base.t()
        y = lib.tensor(A[::-1].copy() + 1)
        v0 = x._version
        r = getattr(x, name)(*args(lib, y))
        assert r is x
        results.append((x, x._version - v0))
    (rl, vl), (rt, vt) = results
    _same(rl, rt, rtol=1e-6 if name in ("sigmoid_", "tanh_") else 0)
    assert vl == vt == 1


def test_inplace_broadcast_into_self_errors():
    for shape in [(3, 5), (2, 3, 4), (1, 4)]:
        xl, xt = _pair(A)
        yl, yt = _pair(np.ones(shape, np.float32))
        _check(lambda: xl.add_(yl), lambda: xt.add_(yt))
    xl, xt = _pair(A[0])
    yl, yt = _pair(np.ones((3, 4), np.float32))
    _same_error(lambda: xl.mul_(yl), lambda: xt.mul_(yt))
    assert xl._version == xt._version == 0       # (the error comes before the write)


def test_inplace_complex_and_bfloat16_operands():
    for dtype in ("bfloat16", "complex64"):
        xl = llgrad.tensor(A).to(getattr(llgrad, dtype))
        xt = torch.tensor(A).to(getattr(torch, dtype))
        yl, yt = xl * 3, xt * 3
        _same(xl.add_(yl), xt.add_(yt))
        _same(xl.mul_(0.5), xt.mul_(0.5))
        if dtype == "bfloat16":     # (complex: llgrad's words for the error, not torch's)
            _check(lambda: xl.clamp_(-1, 1), lambda: xt.clamp_(-1, 1))
        fl, ft = _pair(A)
        _check(lambda: fl.add_(yl), lambda: ft.add_(yt))


@pytest.mark.parametrize("dtype, other", [
    ("int64", 0.5), ("int64", 1.5), ("int32", True), ("uint8", 300), ("bool", 1),
    ("bool", True), ("int8", 2), ("float16", 1e3), ("float32", 1j),
])
def test_inplace_result_type_cast(dtype, other):
    a = np.array([1, 0, 3]).astype(dtype)
    xl, xt = _pair(a)
    for name in ("add_", "mul_"):
        try:
            rt = getattr(xt.clone(), name)(other)
        except Exception:
            _same_error(lambda: getattr(xl.clone(), name)(other),
                        lambda: getattr(xt.clone(), name)(other))
            continue
        _same(getattr(xl.clone(), name)(other), rt)


@pytest.mark.parametrize("dt, odt", [
    ("int64", "float32"), ("int32", "int64"), ("uint8", "int8"), ("bool", "int64"),
    ("float16", "float32"), ("float32", "float64"), ("int64", "bool"), ("float32", "int64"),
])
def test_inplace_tensor_operand_cast(dt, odt):
    a = np.array([1, 0, 3]).astype(dt)
    b = np.array([2, 1, 1]).astype(odt)
    for other_l, other_t in (_pair(b), _pair(b[0])):
        xl, xt = _pair(a)
        try:
            rt = xt.add_(other_t)
        except Exception:
            _same_error(lambda: xl.add_(other_l), lambda: xt.add_(other_t))
            continue
        _same(xl.add_(other_l), rt)


def test_inplace_float_result_of_integers():
    xl, xt = _pair(np.array([1, 2, 3]))
    _same_error(lambda: xl.exp_(), lambda: xt.exp_())
    _same_error(lambda: xl.sigmoid_(), lambda: xt.sigmoid_())
    xl, xt = _pair(np.array([1.0, 2.0], np.float64))
    _same(xl.exp_(), xt.exp_())


def test_inplace_overlap_errors():
    xl, xt = _pair(np.arange(6.0, dtype=np.float32))
    _same_error(lambda: xl[1:].add_(xl[:-1]), lambda: xt[1:].add_(xt[:-1]))
    _same(xl.add_(xl), xt.add_(xt))              # (exactly the same memory: allowed)
    el = llgrad.zeros(3).as_strided((3, 3), (0, 1))
    et = torch.zeros(3).as_strided((3, 3), (0, 1))
    _same_error(lambda: el.add_(1), lambda: et.add_(1))
    _same(el.zero_(), et.zero_())


def test_inplace_autograd_checks_and_recording():
    ll, lt = _pair(A, requires_grad=True)
    _same_error(lambda: ll.mul_(2), lambda: lt.mul_(2))
    _same_error(lambda: ll[0].mul_(2), lambda: lt[0].mul_(2))
    grads = []
    for lib, leaf in ((llgrad, ll), (torch, lt)):
        x = leaf * 1
        x.mul_(leaf).add_(leaf[0], alpha=0.5).clamp_(-0.3, 0.3)
        x[1].relu_()
        v = x[:, 1:]                  # (an operand that requires grad only through its base)
        z = lib.zeros(3, 3)
        z.add_(v)
        assert z.requires_grad and type(z.grad_fn).__name__ == "AddBackward0"
        (x.sum() + z.sum()).backward()
        grads.append(leaf.grad)
        with lib.no_grad():
            w = leaf * 1
            w.mul_(leaf)
            assert w.grad_fn is None and not w.requires_grad
    _same(grads[0], grads[1])


def test_inplace_on_views_updates_base():
    bl, bt = _pair(A)
    for b in (bl, bt):
        b.t()[1:3].mul_(2)
        b[:, 0].clamp_(max=0.0)
        b[1].copy_(b[2])
    _same(bl, bt)
    assert bl._version == bt._version


# ---- clamp / clip ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int64", "uint8", "int32"])
@pytest.mark.parametrize("lo, hi", [(-1, 1), (None, 2), (0, None), (-0.5, 0.5), (2, -1),
                                    (True, None)])
def test_clamp_bounds(dtype, lo, hi):
    a = np.array([-3, -1, 0, 1, 2, 5]).astype(dtype)
    xl, xt = _pair(a)
    for f in (lambda x: x.clamp(lo, hi), lambda x: x.clip(lo, hi),
              lambda x: x.clone().clamp_(lo, hi), lambda x: x.clone().clip_(lo, hi)):
        try:
            rt = f(xt)
        except Exception:
            _same_error(lambda: f(xl), lambda: f(xt))
            continue
        _same(f(xl), rt)


def test_clamp_bool_and_tensor_bounds():
    bl, bt = _pair(np.array([True, False]))
    _check(lambda: bl.clamp(0, 1), lambda: bt.clamp(0, 1))
    _check(lambda: bl.clamp(min=False), lambda: bt.clamp(min=False))
    _check(lambda: bl.clone().clamp_(0, 1), lambda: bt.clone().clamp_(0, 1))
    _check(lambda: bl.clamp(min=0.5), lambda: bt.clamp(min=0.5))
    _check(lambda: bl.clamp_max(1), lambda: bt.clamp_max(1))
    ml, mt = _pair(np.array([True, True]))
    _same(bl.clamp(min=ml), bt.clamp(min=mt))
    xl, xt = _pair(A)
    lol, lot = _pair(np.float32(-0.5))
    _same(xl.clamp(lol, 0.5), xt.clamp(lot, 0.5))
    _same(xl.clone().clamp_(min=lol), xt.clone().clamp_(min=lot))
    _same_error(lambda: xl.clamp(), lambda: xt.clamp())
    il, it = _pair(np.array([1, 5]))
    _same_error(lambda: il.clamp_(0.5, 2), lambda: it.clamp_(0.5, 2))
    _same_error(lambda: il.clamp_min_(0.5), lambda: it.clamp_min_(0.5))
    _same_error(lambda: il.clamp_max_(2.5), lambda: it.clamp_max_(2.5))
    _same(il.clamp(0.5, 2), it.clamp(0.5, 2))


def test_clamp_grad():
    grads = []
    for lib in (llgrad, torch):
        x = lib.tensor(A, requires_grad=True)
        (x.clamp(-0.5, 0.5) * 2 + (x * 1).clamp_(min=0.0)).sum().backward()
        grads.append(x.grad)
    _same(*grads)


# ---- promotion with Python scalars ------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float16", "float32", "int64", "int8", "uint8", "bool"])
@pytest.mark.parametrize("other", [2, 1.5, True, 300, -1])
def test_scalar_promotion(dtype, other):
    a = np.array([1, 0, 2]).astype(dtype)
    xl, xt = _pair(a)
    for f in (lambda x: x + other, lambda x: x * other, lambda x: x.clamp(0, other),
              lambda x: x.where(x > 0, other), lambda x: llgrad.where(x > 0, x, other)
              if isinstance(x, llgrad.Tensor) else torch.where(x > 0, x, other)):
        try:
            rt = f(xt)
        except Exception:
            _same_error(lambda: f(xl), lambda: f(xt))
            continue
        _same(f(xl), rt)


def test_where_method_int_out_of_range():
    # Tensor.where(cond, 300) of an int8 tensor wrapped 300 into 44 (llgrad.where raised
    # PyTorch's overflow error): now both raise it
    for dtype in ("int8", "uint8"):
        xl, xt = _pair(np.array([1, 0, 2]).astype(dtype))
        _same_error(lambda: xl.where(xl > 0, 300), lambda: xt.where(xt > 0, 300))
        _check(lambda: xl.where(xl > 0, -1), lambda: xt.where(xt > 0, -1))
        _check(lambda: xl.where(xl > 0, 2.5), lambda: xt.where(xt > 0, 2.5))


def test_non_number_operand_error():
    xl, xt = _pair(A)
    with pytest.raises(TypeError, match="must be a Tensor or a number"):
        llgrad.clamp(xl, "a", None)


# ---- copy_ -------------------------------------------------------------------------------

def test_copy_shapes_dtypes_errors():
    for dst_dtype, src in [("float32", A.astype(np.float64)), ("int64", A * 4),
                           ("float32", A[0]), ("float16", A), ("bool", A)]:
        dl, dt = _pair(np.zeros((3, 4), dst_dtype))
        sl, st = _pair(src)
        _same(dl.copy_(sl), dt.copy_(st))
        assert dl._version == dt._version
    dl, dt = _pair(np.zeros((3, 4), np.float32))
    sl, st = _pair(np.ones((2, 4), np.float32))
    _same_error(lambda: dl.copy_(sl), lambda: dt.copy_(st))
    sl, st = _pair(np.ones((2, 3, 4), np.float32))
    _same_error(lambda: dl.copy_(sl), lambda: dt.copy_(st))
    _same(dl.copy_(2.5), dt.copy_(torch.tensor(2.5)))
    tl, tt = _pair(np.zeros((4, 3), np.float32))
    _same(tl.t().copy_(llgrad.tensor(A)), tt.t().copy_(torch.tensor(A)))
    _same(tl, tt)


def test_copy_grad():
    grads = []
    for lib in (llgrad, torch):
        s = lib.tensor(A, requires_grad=True)
        d = lib.zeros(3, 4)
        d.copy_(s * 2)
        (d * d).sum().backward()
        grads.append(s.grad)
    _same(*grads)


# ---- max / min / argmax along a dim -----------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int64", "uint8", "bool"])
@pytest.mark.parametrize("nan", [False, True])
def test_max_min_dim(dtype, nan):
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (3, 4, 5)).astype(dtype)
    if nan:
        if dtype[0] != "f":
            return
        a[1, 2, 3] = np.nan
        a[0, :, 1] = np.nan
    xl, xt = _pair(a)
    for dim in (0, 1, 2, -1):
        for keepdim in (False, True):
            for name in ("max", "min"):
                rl = getattr(xl, name)(dim, keepdim)
                rt = getattr(xt, name)(dim, keepdim)
                for p, q in zip(rl, rt):
                    assert p.dtype.__repr__().split(".")[-1] == str(q.dtype).split(".")[-1]
                    assert tuple(p.shape) == tuple(q.shape)
                    np.testing.assert_array_equal(p.numpy(), q.numpy())
            if dtype != "bool":
                for name in ("argmax", "argmin"):
                    _same(getattr(xl, name)(dim, keepdim), getattr(xt, name)(dim, keepdim))
    if dtype != "bool":
        _same(xl.argmax(), xt.argmax())
        _same(xl.argmin(), xt.argmin())
    sl, st = _pair(a[0, 0])
    for name in ("max", "min"):
        rl, rt = getattr(sl, name)(0), getattr(st, name)(0)
        np.testing.assert_array_equal(rl[0].numpy(), rt[0].numpy())
        assert int(rl[1]) == int(rt[1])


def test_max_dim_ties_and_grad():
    a = np.array([[0.0, -0.0, 1.0, 1.0], [-0.0, 0.0, -1.0, -1.0]], np.float32)
    xl, xt = _pair(a, requires_grad=True)
    for name in ("max", "min"):
        rl, rt = getattr(xl, name)(1), getattr(xt, name)(1)
        _same(rl[1], rt[1])
        assert np.signbit(rl[0].detach().numpy()).tolist() == \
            np.signbit(rt[0].detach().numpy()).tolist()
    (xl.max(1)[0].sum() + xl.min(0, keepdim=True)[0].sum()).backward()
    (xt.max(1)[0].sum() + xt.min(0, keepdim=True)[0].sum()).backward()
    _same(xl.grad, xt.grad)


# ---- cat ---------------------------------------------------------------------------------

def test_cat_equal_shapes_and_errors():
    xl, xt = _pair(A)
    yl, yt = _pair(A + 1)
    for dim in (0, 1, -1, -2):
        _same(llgrad.cat([xl, yl], dim), torch.cat([xt, yt], dim))
    _same(llgrad.cat([xl.t(), yl.t()], 0), torch.cat([xt.t(), yt.t()], 0))
    el, et = _pair(np.zeros((0,), np.float32))
    _same(llgrad.cat([xl, el, yl]), torch.cat([xt, et, yt]))
    zl, zt = _pair(np.zeros((3, 5), np.float32))
    _same_error(lambda: llgrad.cat([xl, zl]), lambda: torch.cat([xt, zt]))
    _same(llgrad.cat([xl, zl], 1), torch.cat([xt, zt], 1))
    sl, st = _pair(np.float32(1))
    _same_error(lambda: llgrad.cat([sl, sl]), lambda: torch.cat([st, st]))
    ol, ot = _pair(A[0])
    _same_error(lambda: llgrad.cat([xl, ol]), lambda: torch.cat([xt, ot]))
    il, it = _pair(np.ones((3, 4), np.int64))
    _same(llgrad.cat([il, xl]), torch.cat([it, xt]))


def test_cat_channels_last_kept():
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    xl = llgrad.tensor(a).contiguous(memory_format=llgrad.channels_last)
    xt = torch.tensor(a).contiguous(memory_format=torch.channels_last)
    for dim in (0, 1, 3):
        _same(llgrad.cat([xl, xl], dim), torch.cat([xt, xt], dim))


# ---- add_ / sub_ with a float alpha ------------------------------------------------------

def test_add_float_alpha():
    for dtype in ("float32", "float16", "float64", "int64"):
        a = np.array([1, 2, 3]).astype(dtype)
        for alpha in (0.5, 1e6, -2.0):
            for f in (lambda x, y: x.add(y, alpha=alpha),
                      lambda x, y: x.clone().add_(y, alpha=alpha),
                      lambda x, y: x.sub(y, alpha=alpha)):
                xl, xt = _pair(a)
                try:
                    rt = f(xt, xt)
                except Exception:
                    _same_error(lambda: f(xl, xl), lambda: f(xt, xt))
                    continue
                _same(f(xl, xl), rt)
