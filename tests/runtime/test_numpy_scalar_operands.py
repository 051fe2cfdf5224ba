"""NumPy scalars beside a tensor in an operator, on either side: the result is a Tensor
(NumPy defers to the tensor's reflected operator: Tensor.__array_priority__), of the dtype
PyTorch gives: a NumPy number reads as the Python number it holds (a weak scalar), an
np.bool_ as a float (runtime/numpy_scalars.py)."""
import operator
import warnings

import numpy as np
import pytest

import llgrad

OPS = {"and": operator.and_, "or": operator.or_, "xor": operator.xor,
       "lshift": operator.lshift, "rshift": operator.rshift, "add": operator.add,
       "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
       "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow,
       "lt": operator.lt, "eq": operator.eq, "ne": operator.ne, "ge": operator.ge}
SCALARS = [np.int64(3), np.int32(3), np.uint8(3), np.int8(2), np.float64(1.5),
           np.float32(2), np.float16(2), np.bool_(True)]
DTYPES = ["int64", "int32", "float32", "float64", "bool"]


def _tensor(lib, dtype):
    if dtype == "bool":
        return lib.tensor([True, False, True])
    return lib.tensor([1, 2, 3], dtype=getattr(lib, dtype))


def _outcome(fn):
    """(type name, dtype name, values) or (error class name,): what a call gives."""
    try:
        r = fn()
    except (RuntimeError, TypeError, NotImplementedError) as e:
        return (type(e).__name__,)
    return (type(r).__name__, str(r.dtype).split(".")[-1], r.tolist())


def _same(a, b):
    if len(a) != len(b) or a[:2] != b[:2]:
        return False
    return len(a) == 1 or np.allclose(np.array(a[2], float), np.array(b[2], float),
                                      equal_nan=True)


def _as_python(s):
    return float(s) if isinstance(s, np.bool_) else s.item()


@pytest.mark.parametrize("left", [True, False], ids=["left", "right"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_numpy_scalar_reads_as_python_number(name, left):
    op = OPS[name]
    for s in SCALARS:
        for dt in DTYPES:
            t = _tensor(llgrad, dt)
            got = _outcome(lambda: op(s, t) if left else op(t, s))
            py = _as_python(s)
            want = _outcome(lambda: op(py, t) if left else op(t, py))
            assert _same(got, want), (s, dt, got, want)
            assert got[0] in ("Tensor", "RuntimeError", "NotImplementedError"), (s, dt, got)


@pytest.mark.parametrize("name", sorted(OPS))
def test_numpy_scalar_operands_match_torch(name):
    torch = pytest.importorskip("torch")
    op = OPS[name]
    for s in SCALARS:
        for dt in DTYPES:
            for left in (True, False):
                res = []
                for lib in (torch, llgrad):
                    t = _tensor(lib, dt)
                    res.append(_outcome(lambda: op(s, t) if left else op(t, s)))
                assert _same(*res), (s, dt, left, res)


def test_issue_examples():
    t = llgrad.tensor([1, 2, 3])
    r = np.int64(3) & t
    assert type(r) is llgrad.Tensor and r.dtype is llgrad.int64 and r.tolist() == [1, 2, 3]
    f = llgrad.tensor([1.0, 2.0])
    for r, want in ((np.float32(2) * f, [2.0, 4.0]), (np.float64(1) - f, [0.0, -1.0])):
        assert type(r) is llgrad.Tensor and r.dtype is llgrad.float32
        assert r.tolist() == want
    assert (np.int64(2) << t.int()).dtype is llgrad.int32     # (a weak int: t's dtype)
    assert (3 << t.int()).dtype is llgrad.int32
    t8 = t.to(llgrad.int8)
    assert (300 << t8).tolist() == [88, -80, 96] and (t8 << 300).tolist() == [0, 0, 0]


def test_bool_subtraction_raises_as_torch():
    b, t = llgrad.tensor([True, False]), llgrad.tensor([1, 2])
    two = "with two bool tensors is not supported"
    one = "with a bool tensor is not supported"
    for fn, msg in ((lambda: b - b, two), (lambda: b - True, two), (lambda: t - b, one),
                    (lambda: 3 - b, one), (lambda: t - True, one), (lambda: b.sub(1), one),
                    (lambda: llgrad.rsub(b, 1), one), (lambda: t.clone().sub_(b), one),
                    (lambda: np.int64(3) - b, one)):
        with pytest.raises(RuntimeError, match=msg):
            fn()
    assert (np.bool_(True) - t).tolist() == [0.0, -1.0]     # (an np.bool_ is a float)


def _arrays_on_the_left(lib):
    t = lib.tensor([1.0, 2.0])
    out = [type(np.exp(t)).__name__, type(np.zeros(2) == t).__name__]
    for fn in (lambda a: a + t, lambda a: a * t, lambda a: a & t, lambda a: np.array(2.0) * t):
        with pytest.raises(TypeError):
            fn(np.zeros(2))
    a = b = np.zeros(2)
    with pytest.raises(TypeError):
        a += t
    assert a is b and not a.any()
    return out


def test_ndarrays_on_the_left():
    # (a ufunc's result is wrapped back into a tensor: torch.Tensor.__array_wrap__)
    assert _arrays_on_the_left(llgrad) == ["Tensor", "Tensor"]


def test_ndarrays_on_the_left_as_torch():
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)     # (NumPy 2 on its signature)
        assert _arrays_on_the_left(torch) == ["Tensor", "Tensor"]


@pytest.mark.parametrize("backend", ["llvm", "interpret"])
def test_compiled_reflected_numpy_scalars(backend):
    def f(x, s, k):
        return (s * x - np.float64(1)) + (k & x.long())

    cf = llgrad.compile(f, backend=backend)
    x = llgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    for s, k in ((np.float32(2), np.int64(3)), (np.float32(0.5), np.int64(1))):
        got, want = cf(x, s, k), f(x, s, k)
        assert type(got) is llgrad.Tensor and got.dtype is want.dtype is llgrad.float32
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy())
        (g,) = llgrad.autograd.grad(got.sum(), x)
        np.testing.assert_allclose(g.numpy(), np.full(3, float(s)))


_METHOD_FORMS = [
    lambda lib, a: a.add(np.float64(1)), lambda lib, a: a.mul(np.float64(2)),
    lambda lib, a: a.clone().add_(np.float64(1)), lambda lib, a: lib.add(a, np.float64(1)),
    lambda lib, a: a.clamp(np.float64(0.5)), lambda lib, a: a.pow(np.float64(2)),
    lambda lib, a: a.int().add(np.int64(2)), lambda lib, a: a.int().add(np.float64(2.5)),
    lambda lib, a: a.int().mul_(np.int64(3)), lambda lib, a: a.masked_fill(a > 0, np.float64(3)),
    lambda lib, a: a.where(a > 0, np.float32(2)), lambda lib, a: a.sub(np.int32(1), alpha=2),
    lambda lib, a: a.add(1, alpha=2), lambda lib, a: a.sub(2.5, alpha=2),
    lambda lib, a: a.int().add(3, alpha=2), lambda lib, a: a.clone().sub_(1, alpha=3)]


@pytest.mark.parametrize("form", range(len(_METHOD_FORMS)))
def test_numpy_numbers_in_method_forms_keep_the_tensors_dtype(form):
    torch = pytest.importorskip("torch")
    f = _METHOD_FORMS[form]
    got = f(llgrad, llgrad.tensor([[-1.5, 2.0, 0.5]]))
    want = f(torch, torch.tensor([[-1.5, 2.0, 0.5]]))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_captured_numpy_numbers_changed_between_compiled_calls():
    """NumPy numbers read by a compiled function (in a dict, on an object, an array it wraps)
    change between calls: each call gives eager's values and dtype."""
    w = llgrad.ones(3)
    cfg = {"lr": np.float64(0.5)}

    class Holder:
        scale = np.float32(2.0)
    holder = Holder()
    arr = np.array([1.0, 2.0, 3.0], dtype=np.float32)

    def step(x):
        return x.add(cfg["lr"]) * holder.scale + llgrad.from_numpy(arr)
    f = llgrad.compile(step)
    for v in (0.5, 0.5, 1.5, 2.5):
        cfg["lr"], holder.scale, arr[0] = np.float64(v), np.float32(v), v
        got, want = f(w), step(w)
        assert got.dtype == want.dtype == llgrad.float32
        np.testing.assert_array_equal(got.numpy(), want.numpy())
