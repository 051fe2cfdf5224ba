"""Adversarial comparison with PyTorch 2.13 (sweep 19, d1): corners of in-place view ops,
bool-mask writes under compile, and mean into float16, each checked against torch or
against eager."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _both(fn):
    return fn(torch), fn(llgrad)


def test_in_place_view_op_under_no_grad_on_a_non_view():
    # x.t_() / unsqueeze_() under no_grad on a tensor that is no view: still no view, and
    # requires_grad reads False (it raised AttributeError on the missing base)
    def f(T):
        a = T.ones(3, 4, requires_grad=True)
        with T.no_grad():
            b = a * 1
            b.t_()
            b.unsqueeze_(0)
        b.mul_(2)               # (and later in-place ops with grad on are allowed)
        return b.requires_grad, b._base is None, tuple(b.shape), b._version
    want, got = _both(f)
    assert got == want


def test_in_place_view_op_in_inference_mode_on_a_normal_tensor():
    def f(T):
        e = T.ones(3)
        with T.inference_mode():
            e.unsqueeze_(0)
        return tuple(e.shape), e.is_inference(), e.requires_grad
    want, got = _both(f)
    assert got == want


def test_compiled_write_by_constant_mask_beside_an_index_tensor():
    # x[mask, i] = v: the mask's count broadcasts with i's length, so the traced index_put
    # needs the count even for a one-element value (the shape rule's all-False stand-in
    # raised "shape mismatch ... [0], [2]" while eager ran)
    def f(a):
        a[llgrad.tensor([True, False, True, False]), llgrad.tensor([1, 2])] = -1.0
        a[llgrad.tensor([False, True, False, True]), llgrad.tensor([0])] = llgrad.tensor(7.5)
        return a
    x = np.arange(120, dtype=np.float32).reshape(4, 5, 6)
    want = f(llgrad.tensor(x)).numpy()
    t = torch.tensor(x)
    t[torch.tensor([True, False, True, False]), torch.tensor([1, 2])] = -1.0
    t[torch.tensor([False, True, False, True]), torch.tensor([0])] = torch.tensor(7.5)
    np.testing.assert_array_equal(want, t.numpy())
    cf = llgrad.compile(f)
    for _ in range(3):
        np.testing.assert_array_equal(cf(llgrad.tensor(x)).numpy(), want)


def test_compiled_write_by_data_mask_beside_an_index_tensor_retraces_on_a_new_count():
    def f(a, m):
        a[m, llgrad.tensor([1, 2])] = 0.0
        return a
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    cf = llgrad.compile(f)
    for mask in ([True, False, True, False], [True, False, True, False],
                 [False, False, True, False], [False, True, False, True]):
        m = np.array(mask)
        want = f(llgrad.tensor(x), llgrad.tensor(m)).numpy()
        np.testing.assert_array_equal(cf(llgrad.tensor(x), llgrad.tensor(m)).numpy(), want)


def test_mean_into_float16_of_float32_sums_in_float32():
    # PyTorch's mean(dtype=half): the input summed in float32 and divided, then rounded once
    # (not the input rounded to half first)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    for args in ((), (0,), ((0, 2), True)):
        want = torch.from_numpy(x).mean(*args, dtype=torch.float16)
        got = llgrad.from_numpy(x).mean(*args, dtype=llgrad.float16)
        assert str(got.dtype) == "llgrad.float16"
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    i = np.arange(-7, 17).reshape(4, 6)
    np.testing.assert_array_equal(llgrad.tensor(i).mean(1, dtype=llgrad.float16).numpy(),
                                  torch.tensor(i).mean(1, dtype=torch.float16).numpy())



@pytest.mark.parametrize("key, value", [
    ("m", "1.0"), ("m", "T.tensor(2.0)"), ("m", "T.tensor([2.0])"), ("(m, 0)", "1.0"),
    ("(slice(None), m)", "1.0"), ("(Ellipsis, m)", "1.0"), ("(None, m)", "1.0"),
    ("m", "T.tensor([2.0, 3.0])"), ("m", "T.ones(2, 3)"), ("(m, T.tensor([0, 1]))", "1.0"),
    ("m.bool()", "1.0"), ("T.tensor(1, dtype=T.uint8)", "7.0"),
    ("T.tensor(0, dtype=T.uint8)", "7.0")])
def test_write_by_uint8_mask(key, value):
    # x[uint8 mask] = one number: PyTorch's index_put_ takes masked_fill_'s path, which takes
    # bool masks only; values of the masked shape still go through index_put_
    def f(T):
        a = T.zeros(3, 3)
        m = T.tensor([1, 0, 1], dtype=T.uint8)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # (the uint8 deprecation warning)
            try:
                a[eval(key)] = eval(value)
            except RuntimeError as e:
                return str(e)
        return a.numpy().tolist()
    want, got = _both(f)
    assert got == want


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_ldexp_by_integer_exponents_rounds_once(dtype):
    # PyTorch's kernel for a floating input and integer exponents is std::ldexp: finite
    # wherever the result is (2 ** 130 overflows float32 on its own; 0 * 2 ** 200 is 0, not
    # nan; 2 ** 100 * 2 ** -160 is 2 ** -60)
    x = [1.5, 0.0, 1e-30 if dtype != "float16" else 1e-7, 2.0 ** 100 if dtype != "float16"
         else 3.0, -2.5, 0.75]
    e = [3, 200, 130, -160, -1030, 1024]
    for edt in ("int64", "int32", "uint8"):
        ev = [v % 256 for v in e] if edt == "uint8" else e
        want = torch.ldexp(torch.tensor(x, dtype=getattr(torch, dtype)),
                           torch.tensor(ev, dtype=getattr(torch, edt)))
        got = llgrad.ldexp(llgrad.tensor(x, dtype=getattr(llgrad, dtype)),
                           llgrad.tensor(ev, dtype=getattr(llgrad, edt)))
        assert str(got.dtype).split(".")[1] == dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_ldexp_by_integer_exponents_compiled_and_grad():
    def f(x, e):
        return llgrad.ldexp(x, e) * 3
    x = np.array([1.5, 0.0, 1e-30, -2.5], np.float32)
    e = np.array([3, 200, 130, -2])
    want = f(llgrad.tensor(x, requires_grad=True), llgrad.tensor(e))
    assert type(want.grad_fn).__name__ == "MulBackward0"
    cf = llgrad.compile(f)
    for _ in range(3):
        xl = llgrad.tensor(x, requires_grad=True)
        got = cf(xl, llgrad.tensor(e))
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        got.sum().backward()
        with np.errstate(over="ignore"):
            want_grad = (3 * 2.0 ** e.astype(float)).astype(np.float32)
        np.testing.assert_array_equal(xl.grad.numpy(), want_grad)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [1, 0])
def test_float16_softmax_backward_in_float32(name, dim):
    # PyTorch's softmax / log_softmax backward kernels compute a float16 gradient in float32
    # and round once (llgrad's rule ran op by op in float16: a few float16 ulps off)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 33)).astype(np.float32) * 3
    w = rng.standard_normal((6, 33)).astype(np.float32)

    def grad(T):
        x = T.tensor(a).half().requires_grad_()
        y = getattr(x, name)(dim)
        y.backward(T.tensor(w).half())
        r, g = y.detach().float(), T.tensor(w).half().float()
        if name == "softmax":
            in_float = r * (g - (g * r).sum(dim, keepdim=True))
        else:
            in_float = g - r.exp() * g.sum(dim, keepdim=True)
        return x.grad.numpy(), in_float.half().numpy()
    want, got = _both(grad)
    np.testing.assert_array_equal(want[0], want[1])     # (PyTorch's, from its result)
    np.testing.assert_array_equal(got[0], got[1])
    if dim == 1:    # (float16 softmax over another dim: the results differ in a few elements,
        # PyTorch's exp rounded to float16 on the way)
        np.testing.assert_array_equal(got[0], want[0])

    def f(x):
        return getattr(x.half(), name)(dim).float() * llgrad.tensor(w)
    xl = llgrad.tensor(a, requires_grad=True)
    f(xl).sum().backward()
    cf = llgrad.compile(f)
    for _ in range(2):
        xc = llgrad.tensor(a, requires_grad=True)
        cf(xc).sum().backward()
        np.testing.assert_array_equal(xc.grad.numpy(), xl.grad.numpy())


@pytest.mark.parametrize("body", [
    "a.zero_()", "a.fill_(2.5)", "a[0] = b[0]", "a[1].mul_(3)", "a[0, 1:3] = 9.0",
    "a[:, 1].add_(1)"])
def test_compiled_write_into_an_expanded_input(body):
    # an input expanded from a row (NumPy holds the view read-only): eager writes it through
    # its memory where PyTorch allows the write (one value everywhere, or elements that share
    # no memory); the compiled call's write-back raised "assignment destination is read-only"
    src = f"def f(a, b):\n    {body}\n    return a.sum() + b.sum()\n"
    scope = {}
    exec(compile(src, "<probe>", "exec"), scope)
    f = scope["f"]

    def run(T, fn):
        base = T.arange(4.0)
        try:
            out = fn(base.expand(3, 4), T.ones(3, 4) * 7)
        except RuntimeError as e:
            return str(e), base.tolist()
        return out.item(), base.tolist()
    want = run(torch, f)
    assert run(llgrad, f) == want
    cf = llgrad.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            assert run(llgrad, cf) == want


def test_compiled_calls_across_a_default_dtype_change():
    # int64 * 2.5 is float32 or float64 by the default dtype: one entry per default, and the
    # second entry's build looked for code shared with the first (graphs equal but for their
    # numbers: f32 and f64 blank alike) by re-planning the first's graph under the new
    # default, whose verifier raised VerifyError out of the call
    def f(x):
        return x.long() * 2.5
    cf = llgrad.compile(f)
    try:
        for name in ("float32", "float32", "float64", "float64", "float64", "float32"):
            llgrad.set_default_dtype(getattr(llgrad, name))
            x = llgrad.tensor([1.0, 2.0, 3.0])
            got, want = cf(x), f(x)
            assert got.dtype == want.dtype == getattr(llgrad, name)
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    finally:
        llgrad.set_default_dtype(llgrad.float32)
