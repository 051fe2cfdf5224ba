"""Differential checks against PyTorch, sixth sweep: property-style tables of small programs
run in torch and in llgrad (as `t`, with NumPy as `np`) whose values, dtypes, shapes,
strides, requires_grad, grad_fn names, gradients (of the leaves a program lists in `g`,
through a weighted sum of its results), Python values, or exception types and first lines
must agree. Each table holds cases that failed before their fix and neighbours that pin the
rule: NumPy integer scalars in type promotion (a Python int, not a float), numbers as the
first operand of torch.add / sub / mul / div, Python ints wrapped into an integer tensor's
dtype before %, fmod, // and alpha (uint8 % -3 is % 253) or checked against it (where, pow,
fill_, masked_fill, addcmul's value), integer division by zero in an empty result, x % inf,
ldexp's dtype, float16 computed in float32 and rounded once (sigmoid, gelu, silu, erf, sinc,
addcmul, lerp, var, cumsum, x * 0.1, round(decimals)), out= dtypes of reductions, PyTorch's
missing bool kernels, setitem's dtype rule, torch.tensor of floats with an integer dtype,
writes into expanded tensors, empty-reduction messages, copysign's gradient and mode of nans."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _tensors(v):
    if isinstance(v, (tuple, list)):
        return [x for e in v for x in _tensors(e)]
    return [v]


def _first_line(text):
    return (text.splitlines() or [""])[0].replace("llgrad", "torch")


def _weights(lib, o):
    w = np.linspace(0.5, 2.0, o.numel()).reshape(tuple(o.shape))
    return lib.tensor(w, dtype=o.dtype)


def _run(lib, src):
    env = {"t": lib, "np": np}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            exec(src, env)
            r = env["r"]
            grads = None
            if "g" in env:
                outs = [o for o in _tensors(r) if isinstance(o, lib.Tensor) and o.requires_grad]
                total = sum((o * _weights(lib, o)).sum() for o in outs)
                grads = lib.autograd.grad(total, env["g"], allow_unused=True)
            return "ok", r, grads
        except Exception as e:      # noqa: BLE001 (the exception is what is compared)
            return "raise", (type(e).__name__, _first_line(str(e))), None


def _name(d):
    return str(d).split(".")[-1]


def _same_tensor(a, b, strides):
    assert isinstance(b, llgrad.Tensor), type(b)
    assert tuple(b.shape) == tuple(a.shape), (b.shape, a.shape)
    assert _name(b.dtype) == _name(a.dtype), (b.dtype, a.dtype)
    if strides and a.numel() > 1:
        assert b.stride() == a.stride(), (b.stride(), a.stride())
    assert b.requires_grad == a.requires_grad
    assert type(b.grad_fn).__name__ == type(a.grad_fn).__name__, (b.grad_fn, a.grad_fn)
    if a.dtype.is_floating_point:
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-6,
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(b.detach().numpy(), a.detach().numpy())


def same(src, strides=True):
    """src (which sets r, and g: leaves whose gradients to compare) in torch and in llgrad:
    the same tensors, Python values, gradients, or exception."""
    (tk, tv, tg), (lk, lv, lg) = _run(torch, src), _run(llgrad, src)
    assert tk == lk, (tv, lv)
    if tk == "raise":
        assert tv == lv
        return
    for a, b in zip(_tensors(tv), _tensors(lv), strict=True):
        if isinstance(a, torch.Tensor):
            _same_tensor(a, b, strides)
        elif isinstance(a, torch.dtype):
            assert _name(b) == _name(a)
        else:
            assert type(b) is type(a) and (b == a or a != a and b != b), (a, b)
    for a, b in zip(tg or (), lg or (), strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-7)


# ---- type promotion: NumPy scalars, numbers as the first operand ------------------------

_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]
_NP_SCALARS = ["np.int64(3)", "np.int32(-2)", "np.uint8(7)", "np.float64(2.5)",
               "np.float32(1.5)", "np.bool_(True)"]


@pytest.mark.parametrize("dt", _DTYPES)
@pytest.mark.parametrize("s", _NP_SCALARS)
@pytest.mark.parametrize("expr", [
    "t.result_type(a, s)", "t.full((2,), s)", "t.fmod(a, s)", "t.remainder(a, s)",
    "t.div(a, s, rounding_mode='floor')", "t.floor_divide(a, s)", "t.where(a > 1, s, s)",
    "t.where(a > 1, s, 1.0)", "a * s", "s + a",
])
def test_numpy_scalars_promote_as_python_numbers(dt, s, expr):
    same(f"a = t.tensor([3, 1, 5], dtype=t.{dt}); s = {s}; r = {expr}")


@pytest.mark.parametrize("src", [
    "r = t.mul(2, t.tensor([3, 1, 5], dtype=t.uint8))",
    "r = t.multiply(2.5, t.tensor([3, 1, 5], dtype=t.uint8))",
    "r = t.sub(2, t.tensor([3, 1, 5], dtype=t.uint8), alpha=2)",
    "r = t.subtract(2.5, t.tensor(3., dtype=t.float16))",
    "r = t.add(2, 3)", "r = t.add(2, 3.5)", "r = t.mul(True, False)",
    "r = t.div(2, t.tensor([3, 1, 5]))", "r = t.divide(7, t.tensor([3, 2]), rounding_mode='floor')",
    "r = t.true_divide(1, t.tensor([4.]))", "r = t.floor_divide(7, t.tensor([2, -2]))",
    "x = t.tensor([1., 2.], requires_grad=True); g = [x]; r = t.sub(3, x, alpha=2)",
    "x = t.tensor([1., 2.], requires_grad=True); g = [x]; r = t.div(3, x)",
    "x = t.tensor([1., 2.], requires_grad=True); g = [x]; r = t.mul(np.float64(3), x)",
    "r = t.add(2, t.tensor([1], dtype=t.int8), out=t.empty(1, dtype=t.int8))",
    # (and those that take no number first)
    "r = t.maximum(2, t.tensor([1]))", "r = t.exp(2)", "r = t.atan2(2., t.tensor([1.]))",
    "r = t.sum(np.ones(3))", "r = t.neg([1., 2.])",
])
def test_number_as_first_operand(src):
    same(src)


# ---- Python ints next to integer tensors: wrapped into the tensor's dtype first ----------

@pytest.mark.parametrize("dt", ["uint8", "int8", "int16", "int32"])
@pytest.mark.parametrize("s", ["-3", "-129", "300", "2**40", "-(2**40) - 1"])
@pytest.mark.parametrize("expr", [
    "t.remainder(a, s)", "t.fmod(a, s)", "a % s", "s % a", "s // a", "a // s",
    "t.remainder(s, a)", "t.div(a, s, rounding_mode='trunc')", "t.floor_divide(a, s)",
    "a + s", "a * s",
])
def test_python_ints_wrap_into_integer_dtypes(dt, s, expr):
    same(f"a = t.tensor([3, 1, -5, 0]).to(t.{dt}); s = {s}; r = {expr}")


@pytest.mark.parametrize("src", [
    "r = t.zeros(0, dtype=t.int64) // 0", "r = t.zeros(0, 3, dtype=t.int8) % 0",
    "r = t.zeros(2, 0, dtype=t.int32).div(t.zeros(2, 1, dtype=t.int32), rounding_mode='trunc')",
    "r = t.zeros(0, dtype=t.uint8).fmod(0)", "r = t.ones(2, dtype=t.int64) // 0",
    "r = t.ones(2, dtype=t.uint8) // 256", "r = t.ones(2, dtype=t.int64) % t.tensor([1, 0])",
])
def test_integer_division_by_zero(src):
    same(src)


@pytest.mark.parametrize("dt", _DTYPES[1:])
@pytest.mark.parametrize("expr", ["a % float('inf')", "a % float('-inf')",
                                  "a % t.tensor(float('inf'))", "t.remainder(a, float('inf'))",
                                  "t.fmod(a, float('-inf'))", "float('inf') % a"])
def test_remainder_of_infinity(dt, expr):
    same(f"a = t.tensor([3, 1, -5, 0]).to(t.{dt}); r = {expr}")


def test_remainder_operator_gradients():
    same("x = t.tensor([3.5, -1.25, 7.], requires_grad=True); y = t.tensor([2., 2., -3.], "
         "requires_grad=True); g = [x, y]; r = (x % y, x % 2.5)")


@pytest.mark.parametrize("src", [
    "r = t.ldexp(t.tensor(3., dtype=t.float16), t.tensor([2, 7, -3], dtype=t.int16))",
    "r = t.ldexp(t.tensor([3., 1., 1.], dtype=t.float64), t.tensor([2, 7, 253], dtype=t.uint8))",
    "r = t.ldexp(t.tensor([3., 1.]), t.tensor([True, False]))",
    "r = t.ldexp(t.tensor([3, 1]), t.tensor([2, 3]))",
    "r = t.ldexp(t.tensor([3., 1.]), t.tensor([2., 0.5], dtype=t.float64))",
    "x = t.tensor([3., 1.], requires_grad=True); g = [x]; r = t.ldexp(x, t.tensor([2, 1]))",
])
def test_ldexp(src):
    same(src)


# ---- fills and scalars stored into integer tensors: PyTorch's checked conversion ----------

@pytest.mark.parametrize("dt", ["uint8", "int8", "int64"])
@pytest.mark.parametrize("v", ["-3", "-129", "-255", "300", "float('inf')", "float('nan')",
                               "2.7", "np.int64(-2)"])
@pytest.mark.parametrize("expr", ["a.fill_(v)", "a.masked_fill(a > 1, v)",
                                  "a.masked_fill_(a > 1, v)", "a.new_full((2,), v)",
                                  "t.full((2,), v, dtype=a.dtype)", "t.full_like(a, v)"])
def test_fill_values_into_integer_dtypes(dt, v, expr):
    same(f"a = t.tensor([3, 1, 5]).to(t.{dt}); v = {v}; r = {expr}")


@pytest.mark.parametrize("src", [
    "a = t.tensor([3, 1, 5], dtype=t.uint8); r = t.add(a, -3, alpha=2)",
    "a = t.tensor([3, 1, 5], dtype=t.int8); r = a.sub(-129, alpha=2)",
    "a = t.tensor([3, 1, 5], dtype=t.uint8); r = a.add_(-3, alpha=3)",
    "a = t.tensor([3, 1, 5], dtype=t.uint8); r = a.add_(a.flip(0), alpha=-2)",
    "a = t.tensor([3, 1, 5], dtype=t.int8); r = a.sub(a, alpha=-300)",
    "a = t.tensor([3, 1, -5]); r = a.addcmul(a, a, value=2.5)",
    "a = t.tensor([3, 1, -5]); r = a.addcmul(a, a, value=-2.5)",
    "a = t.tensor([3, 1, -5]); r = a.addcmul_(a, a, value=2.5)",
    "a = t.tensor([3, 1, 5], dtype=t.uint8); r = a.addcmul(a, a, value=-3)",
    "a = t.tensor([3, 1, 5], dtype=t.int8); r = a.addcmul(a, a, value=np.float32(1.5))",
    "a = t.tensor([3, 1, 5], dtype=t.int16); r = a.addcmul(a, a, value=np.int64(3))",
    "a = t.tensor([3., 1., 5.]); r = a.addcmul(a, a, value=np.float64(0.1))",
    "a = t.tensor([True, False]); r = a.addcmul(a, a)",
    "a = t.tensor([3, 1, -5]); r = a.addcdiv(a, a, value=2)",
    "a = t.tensor([3, 1, -5]); r = a.addcdiv(a.float(), a.float(), value=2.5)",
    "a = t.tensor([3, 1, -5], dtype=t.int8); r = (True ** a, t.pow(False, a), 1 ** a, 2 ** a)",
])
def test_scalar_arguments_in_integer_arithmetic(src):
    same(src)


# ---- float16: PyTorch computes in float32 and rounds once ---------------------------------

_HALF = "x = t.tensor([[1., 0., 3.], [2., 5., -1.5]], dtype=t.float16); "


@pytest.mark.parametrize("expr", [
    "x.sigmoid()", "t.sigmoid(x)", "x.erf()", "t.nn.functional.gelu(x)",
    "t.nn.functional.gelu(x, approximate='tanh')", "t.nn.functional.silu(x)", "x.sinc()",
    "x.addcmul(x, x, value=-129)", "x.addcdiv(x, x + 3, value=0.3)", "x.exp()", "x.tanh()",
    "t.lerp(x, x.flip(0), 0.3)", "t.lerp(x, x.flip(1), t.full_like(x, 0.7))",
])
def test_float16_rounds_once(expr):
    same(_HALF + f"r = {expr}")


_HALF_DATA = ("x = t.tensor(np.random.default_rng(0).standard_normal((4, 37)) * 3, "
              "dtype=t.float16); ")


@pytest.mark.parametrize("expr", [
    "x * 0.1", "0.1 * x", "x + 0.1", "x - 1e-3", "1.1 - x", "x / 0.3", "3.3 / x",
    "x.add(x, alpha=0.1)", "x.sub(x.flip(0), alpha=0.1)", "x.cumsum(1)", "x.cumprod(1)",
    "x.round(decimals=1)", "x.round(decimals=-1)", "x.sigmoid()", "t.nn.functional.silu(x)",
    "x.var(1)", "x.sum(1)", "x.mean()",
])
def test_float16_with_numbers_and_scans(expr):
    same(_HALF_DATA + f"r = {expr}")


# ---- out=: the reductions computed in out's dtype, the functions whose out must match ------

_X = "x = t.tensor([[1., 0., 3.], [2., 5., 1.]]); xi = x.long(); "


@pytest.mark.parametrize("expr", [
    "t.sum(x, 0, out=t.empty(0, dtype=t.int32))", "t.prod(x, 0, out=t.empty(0, dtype=t.int32))",
    "t.cumsum(x, 0, out=t.empty(0, dtype=t.int32))", "t.cumprod(x, 1, out=t.empty(0, dtype=t.int8))",
    "t.sum(xi, 0, out=t.empty(0))", "t.prod(xi, 0, out=t.empty(0, dtype=t.bool))",
    "t.sum(x, 0, dtype=t.float64, out=t.empty(0, dtype=t.int32))",
    "t.sum(x, 0, dtype=t.float64, out=t.empty(0, dtype=t.float64))",
    "t.mean(x, 0, out=t.empty(0, dtype=t.float64))", "t.mean(x, 0, out=t.empty(0, dtype=t.int64))",
    "t.argmax(x, 1, out=t.empty(0, dtype=t.int32))", "t.argmin(x, 0, out=t.empty(0, dtype=t.long))",
    "t.amax(x, 0, out=t.empty(0, dtype=t.float64))", "t.amin(x, 0, out=t.empty(0))",
    "t.max(x, 0, out=(t.empty(0, dtype=t.float64), t.empty(0, dtype=t.long)))",
    "t.max(x, 0, out=(t.empty(0), t.empty(0, dtype=t.long)))",
    "t.norm(x, dim=0, out=t.empty(0, dtype=t.float64))", "t.add(x, x, out=t.empty(0, dtype=t.int32))",
    "t.add(x, x, out=t.empty(0, dtype=t.float64))",
])
def test_out_dtypes(expr):
    same(_X + f"r = {expr}")


# ---- ops PyTorch has no bool kernel for --------------------------------------------------

@pytest.mark.parametrize("expr", [
    "x.floor()", "x.ceil_()", "t.round(x)", "x.trunc()", "x.fix_()", "x.relu()", "t.relu(x)",
    "x.relu_()", "x.topk(1)", "t.topk(x, 1, 0)", "x.kthvalue(1)", "x.trace()", "t.trace(x)",
    "t.searchsorted(x[0], x)", "t.bucketize(x, t.tensor([0, 1]))", "t.searchsorted(t.tensor([0, 1]), x)",
    "t.bucketize(x, t.tensor([False, True]))", "x.sin()", "x.sign()",
    "x.abs()", "x.neg() if False else x.sum()",
])
def test_bool_kernels(expr):
    same(f"x = t.tensor([[True, False], [False, True]]); r = {expr}")


# ---- x[idx] = value of another dtype: only PyTorch's masked_fill path converts it --------

@pytest.mark.parametrize("stmt", [
    "x[[0, 2], [1, 3]] = t.tensor([7, 8])", "x[[0, 2]] = t.tensor([7, 8, 9, 10])",
    "x[[0, 2]] = t.tensor(7)", "x[t.tensor([0, 2])] = t.tensor([1.], dtype=t.float64)",
    "x[[0, 2], 1:] = t.tensor([True])", "x[..., [0]] = t.tensor([1])",
    "x[x > 5] = t.tensor([1, 2, 3, 4, 5, 6])", "x[x > 5] = t.tensor([1])",
    "x[x > 5] = t.tensor(1, dtype=t.float64)", "x[t.tensor([True, False, True]), 1] = t.tensor([1])",
    "x[t.tensor([True, False, True])] = t.tensor([1., 2., 3., 4.], dtype=t.float16)",
    "x[0] = t.tensor([7, 8, 9, 10])", "x[[0, 2]] = 7", "x[[0, 2]] = t.tensor([7.])",
])
def test_setitem_value_dtypes(stmt):
    same(f"x = t.arange(12.).reshape(3, 4); {stmt}; r = x")


# ---- torch.tensor of Python floats with an integer or bool dtype: from the doubles --------

@pytest.mark.parametrize("src", [
    "r = t.tensor([123456789., 1.], dtype=t.int32)", "r = t.tensor(1e16, dtype=t.int64)",
    "r = t.tensor([1e300, 1e-300, 0.], dtype=t.bool)", "r = t.tensor([5e-324], dtype=t.bool)",
    "r = t.tensor([2.7, -2.7], dtype=t.int8)", "r = t.tensor([1, 2.5], dtype=t.int64)",
    "r = t.tensor([300.], dtype=t.uint8)", "r = t.tensor([[0.1, 2.9]], dtype=t.int16)",
    "r = t.tensor([0.1], dtype=t.float16)", "r = t.tensor([0.1])",
])
def test_tensor_of_floats_with_a_dtype(src):
    same(src)


@pytest.mark.parametrize("expr", [
    "t.where(a > 1, a, 300)", "t.where(a > 1, 2**40, a.int())", "t.where(a > 1, -3, a)",
    "t.where(a > 1, 300, 2)", "t.where(a > 1, a, 255)", "a ** 300", "a ** 3",
    "a.int() ** 2**40", "a.long() ** 2**62", "a.addcmul(a, a, value=300)",
    "a.addcmul(a, a, value=float('inf'))", "a.addcmul(a, a, value=-3)",
])
def test_python_ints_checked_against_integer_results(expr):
    same(f"a = t.tensor([3, 1, 5], dtype=t.uint8); r = {expr}")


# ---- writes into expanded tensors: where no two written elements share memory, or one value

@pytest.mark.parametrize("src", [
    "x.expand(2, 3, 4)[0, 0, 0] = 5; r = x", "x[0].expand(2, 4).zero_(); r = x",
    "x[0].expand(2, 4).fill_(3.); r = x", "x[:, :1].expand(3, 4).fill_(t.tensor(2.)); r = x",
    "y = x.expand(2, 3, 4); y[1].add_(1); r = x", "y = x.expand(2, 3, 4); y.add_(1); r = x",
    "y = x[0].expand(3, 4); y[:, 0] = 7; r = (x, y)", "y = x[0].expand(3, 4); y[...] = 7; r = x",
    "y = x[0].expand(3, 4); y[0] = t.tensor([1., 2, 3, 4]); r = x",
    "y = x[0].expand(3, 4); y.copy_(t.ones(3, 4)); r = x",
    "y = x.expand(2, 3, 4); y[0].mul_(2); r = (x, x._version)",
    "y = t.from_numpy(np.ones(3)); y.expand(2, 3)[0].fill_(1); r = y",
    "w = t.ones(2, requires_grad=True); y = w.clone(); z = y.expand(3, 2); z[0].mul_(w); "
    "g = [w]; r = (y, z)",
    "w = t.ones(2, requires_grad=True); y = w.clone(); y.expand(3, 2).zero_(); g = [w]; r = y",
])
def test_writes_into_expanded_tensors(src):
    same("x = t.arange(12.).reshape(3, 4); " + src)


@pytest.mark.parametrize("src", [
    "r = t.zeros(0).amax(-1)", "r = t.zeros(3, 0).amin(-1)", "r = t.zeros(3, 0).amax((0, -1))",
    "r = t.zeros(3, 0, dtype=t.bool).amax(-1)", "r = t.zeros(3, 0).max(-1)",
    "r = t.zeros(0).norm(p=float('inf'), dim=-1)", "r = t.zeros(3, 0).norm(p=float('inf'), dim=-1)",
    "r = t.linalg.vector_norm(t.zeros(0, 3), ord=-float('inf'))",
    "r = t.linalg.vector_norm(t.zeros(0, 3), ord=float('inf'), dim=1)",
    "r = t.linalg.vector_norm(t.zeros(2, 0), ord=-float('inf'), dim=(0, 1))",
])
def test_empty_reduction_messages(src):
    same(src)


def test_fill_of_an_expanded_tensor_recorded():
    same("w = t.ones(2, requires_grad=True); y = w.clone(); y.expand(3, 2).fill_(2.); r = y")


@pytest.mark.parametrize("src", [
    "x = t.tensor([[1., 0., 1.], [0., 1., 1.]], dtype=t.float16); r = (x.var(), x.var(1), "
    "x.std(0), t.var_mean(x, 1), t.std_mean(x))",
    "x = t.tensor([[1., 0., 1.], [0., 1., 1.]], dtype=t.float16, requires_grad=True); g = [x]; "
    "r = x.var(1)",
])
def test_float16_moments(src):
    same(src)


# ---- mode with nans: no nan counts as repeated; a leading one is the mode of distinct values

@pytest.mark.parametrize("expr", ["x.mode(1)", "x[:, :1].mode(1)", "x.long().mode(1)",
                                  "x.nan_to_num().mode(1)", "x[3:].mode(-1, keepdim=True)"])
def test_mode_of_nans(expr):
    n = "float('nan')"
    same(f"x = t.tensor([[1., {n}, 3., -1.], [{n}, {n}, 2., float('inf')], [{n}, 1., 1., {n}], "
         f"[{n}] * 4, [float('inf'), float('inf'), 1., 1.]]); r = {expr}")


@pytest.mark.parametrize("src", [
    "a = t.tensor([1.5, -2., 0.5], requires_grad=True); b = t.tensor([2., -0., -1.], "
    "requires_grad=True); g = [a, b]; r = t.copysign(a, b)",
    "a = t.tensor([1.5, -2., 0.], requires_grad=True); b = t.tensor(-1.5, dtype=t.float64, "
    "requires_grad=True); g = [a, b]; r = t.copysign(a, b)",
    "a = t.tensor([1.5, -0., 0.]); b = t.tensor([float('nan'), -1., float('-inf')], "
    "requires_grad=True); g = [b]; r = a.copysign(b)",
    "a = t.tensor([1.5, -2., 0.], requires_grad=True); g = [a]; r = t.copysign(a, -0.)",
])
def test_copysign_gradients(src):
    same(src)
