"""Differential checks against PyTorch, eighth sweep (generated comparisons of dtypes, values,
strides and errors; sweep7_harness.same). Each table holds cases that failed before their
fix and neighbours that pin the rule: a Python number divided by an integer tensor is not
wrapped into its dtype; remainder by a 0-dim tensor of another integer dtype; fmod / copysign
take no number input; in-place integer division of bools checks the cast first; bool pow_;
float16 logaddexp and norms in float32; float operands of fmod / remainder rounded to the
dtype; PyTorch's own linspace / logspace / arange values (its kernels' rounding, not
NumPy's); mode's layout; amax(None); cumsum / cumprod to bool raise."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from sweep7_harness import same  # noqa: E402


@pytest.mark.parametrize("src", [
    "b = t.tensor([3, 5, 250], dtype=t.uint8); r = t.true_divide(-2, b)",
    "b = t.tensor([3, 5, 250], dtype=t.uint8); r = t.div(300, b)",
    "b = t.tensor([3, 5, 250], dtype=t.uint8); r = t.divide(-2, b, rounding_mode=None)",
    "b = t.tensor([3, 5, 250], dtype=t.uint8); r = t.div(-2, b, rounding_mode='floor')",
    "b = t.tensor([3, 5, 250], dtype=t.uint8); r = t.floor_divide(-2, b)",
    "b = t.tensor([3, 5, 250], dtype=t.uint8); r = t.sub(-2, b)",
    "b = t.tensor([True, False]); r = t.div(-2, b)",
    "b = t.tensor([1, 2]); r = t.div(2.5, b)",
])
def test_number_input_of_division(src):
    same(src)


@pytest.mark.parametrize("src", [
    "a = t.tensor([3, 5, 250], dtype=t.uint8); r = a % t.tensor(-2, dtype=t.int8)",
    "a = t.tensor([3, 5, 250], dtype=t.uint8); r = t.remainder(a, t.tensor(-2))",
    "a = t.tensor([3, 5, 250], dtype=t.uint8); r = t.fmod(a, t.tensor(-2, dtype=t.int32))",
    "a = t.tensor([-3, 5, 7], dtype=t.int8); r = a % t.tensor(-2, dtype=t.int64)",
    "a = t.tensor([1.5, -2.]); r = t.remainder(a, t.tensor(2))",
    "a = t.tensor(2); r = t.remainder(a, t.tensor([1.5, -2.]))",
])
def test_remainder_by_zero_dim_of_other_dtype(src):
    same(src)


@pytest.mark.parametrize("src", [
    "r = t.fmod(2, t.ones(2))", "r = t.fmod(2.5, t.ones(2))", "r = t.copysign(-1.0, t.ones(2))",
    "r = t.copysign(True, t.ones(2))", "r = t.remainder(2, t.tensor([3, -3]))",
])
def test_number_input_without_number_form(src):
    same(src)


@pytest.mark.parametrize("op", ["__ifloordiv__", "__imod__", "fmod_", "remainder_",
                                "floor_divide_"])
@pytest.mark.parametrize("other", ["t.tensor([2, 0])", "0", "t.tensor(0)",
                                   "t.tensor(0, dtype=t.int8)"])
def test_inplace_on_bool_checks_cast_before_dividing(op, other):
    same(f"a = t.tensor([True, False]); r = a.{op}({other})")


@pytest.mark.parametrize("src", [
    "a = t.tensor([True, False]); r = (a.pow_(a), a)",
    "a = t.tensor([True, False]); r = (a.pow_(t.tensor(True)), a)",
    "a = t.tensor([True, False]); r = (a.__ipow__(True), a)",
    "a = t.tensor([True, False]); r = (a.__ipow__(False), a)",
    "a = t.tensor([True, False]); r = a.__ipow__(2)",
])
def test_bool_pow_inplace(src):
    same(src)


@pytest.mark.parametrize("src", [
    "a = t.tensor([-1.5, 2.25, 3.0], dtype=t.float16); r = t.logaddexp(a, t.tensor(-2))",
    "a = t.tensor([True, False, True]); r = t.logaddexp(a, t.tensor(1.5, dtype=t.float16))",
    "a = t.linspace(-3, 5, 40).half(); r = t.logaddexp2(a, a.flip(0))",
    "x = t.arange(24.).reshape(2, 3, 4).half() * 20; r = x.norm(3)",
    "x = t.arange(24.).reshape(2, 3, 4).half() * 20; r = x.norm()",
    "x = t.arange(24.).reshape(2, 3, 4).half() * 20; r = x.norm(2, dim=0)",
    "x = t.arange(24.).reshape(2, 3, 4).half() * 20; r = t.linalg.vector_norm(x, 0.5, -1)",
])
def test_float16_computed_in_float32(src):
    same(src)


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("op", ["fmod", "remainder", "__mod__"])
@pytest.mark.parametrize("v", ["0.7", "-0.1", "1e-3"])
def test_float_operand_rounded_to_dtype(dt, op, v):
    same(f"x = t.tensor(np.linspace(-3, 5, 40)).to(t.{dt}); r = x.{op}({v})")


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "int64", "int32", "uint8"])
@pytest.mark.parametrize("args", ["-9, 9, 101", "0, 1, 10", "-3, 5, 40", "1.5, -2.25, 9",
                                  "-1, 1, 1000", "-3, 7.9, 7", "2, 2, 1", "0, 1, 0"])
def test_linspace_values(dt, args):
    if dt == "uint8" and args.startswith("-"):
        args = "0, 250, 7"
    same(f"r = t.linspace({args}, dtype=t.{dt})")


@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
@pytest.mark.parametrize("args", ["-9, 9, 101", "0, 1, 10", "-3, 5, 40, base=2.0",
                                  "0, 3, 7, base=0.5", "2, 2, 1"])
def test_logspace_values(dt, args):
    same(f"r = t.logspace({args}, dtype=t.{dt})")


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "int32"])
@pytest.mark.parametrize("args", ["0, 10, 0.1", "-3, 5, 0.37", "1.5, 100., 0.7",
                                  "0, 1000, 1.1", "5, -3, -0.3", "0., 1., 0.125", "10"])
def test_arange_values(dt, args):
    same(f"r = t.arange({args}, dtype=t.{dt})")


def test_arange_linspace_default_dtype():
    same("r = (t.arange(0, 3, 0.3), t.linspace(0, 1, 11), t.arange(5), t.logspace(0, 1, 5))")


def test_affine_grid_uses_linspace_values():
    same("th = t.tensor([[[1., 0.2, 0.1], [0.3, 1., -0.2]]]); "
         "r = t.nn.functional.affine_grid(th, (1, 1, 33, 36), align_corners=False)")


@pytest.mark.parametrize("src", [
    "x = t.arange(24.).reshape(2, 3, 4).sin(); r = x.mode(0)",
    "x = t.arange(24.).reshape(2, 3, 4).sin(); r = x.mode(1, keepdim=True)",
    "x = t.arange(24.).reshape(2, 3, 4).sin(); r = t.mode(x, 0, keepdim=True)",
    "x = (t.arange(24).reshape(2, 3, 4) % 3); r = x.mode(0)",
    "x = t.arange(24.).reshape(2, 3, 4).sin().requires_grad_(); r = x.mode(0)[0]",
])
def test_mode_is_contiguous(src):
    same(src)


@pytest.mark.parametrize("src", [
    "x = t.arange(6.).reshape(2, 3); r = x.amax(None)",
    "x = t.arange(6.).reshape(2, 3); r = t.amin(x, None, keepdim=True)",
    "x = t.arange(6.).reshape(2, 3); r = x.amax(dim=None, keepdim=True)",
    "x = t.ones(2, 0, 3); r = x.amax(None)",
    "x = t.ones(3); r = x.cumsum(0, dtype=t.bool)",
    "x = t.ones(3); r = t.cumprod(x, 0, dtype=t.bool)",
    "x = t.ones(3, dtype=t.bool); r = (x.cumsum(0), x.cumprod(0), x.sum(dtype=t.bool))",
])
def test_reduction_arguments(src):
    same(src)


@pytest.mark.parametrize("src", [
    "r = t.full((2,), -2.25, dtype=t.uint8)", "r = t.full((2,), -0.5, dtype=t.uint8)",
    "r = t.full((2,), 127.9, dtype=t.int8)", "r = t.full((2,), -128.5, dtype=t.int8)",
    "r = t.full((2,), -2, dtype=t.uint8)", "r = t.ones(2, dtype=t.uint8).fill_(-2.5)",
    "r = t.ones(2, dtype=t.int32).fill_(3.7)", "r = t.linspace(-2.5, 3, 4, dtype=t.uint8)",
    "r = t.linspace(-300, 3, 4, dtype=t.uint8)", "r = t.linspace(-9, 9, 10, dtype=t.uint8)",
    "r = t.ones(2, dtype=t.uint8).masked_fill(t.tensor([True, False]), -1.5)",
])
def test_float_value_into_integer_dtype_overflows(src):
    same(src)


@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_ndtr_is_pytorchs_composition(dt):
    # (1 + erf(x / sqrt 2)) / 2: its lower tail rounds to 0 where erfc's would not
    same(f"x = t.linspace(-9, 9, 101, dtype=t.{dt}, requires_grad=True); "
         "r = t.special.ndtr(x)")


@pytest.mark.parametrize("src", [
    "r = t.nn.functional.layer_norm(x, (8,))",
    "r = t.nn.functional.layer_norm(x, (8,), t.linspace(0.5, 2, 8).half(), "
    "t.linspace(-1, 1, 8).half())",
    "r = t.nn.functional.layer_norm(x, (5, 8), x, x)",
    "r = x.logcumsumexp(-1)", "r = t.logcumsumexp(x, 0)",
])
def test_float16_layer_norm_and_scan_in_float32(src):
    same("x = t.tensor(np.linspace(-3, 5, 40)).reshape(5, 8).half(); " + src)


@pytest.mark.parametrize("src", [
    "x = t.arange(6); x[x > 3] = t.tensor(-1.5); r = x",
    "x = t.zeros(6, dtype=t.bool); x[x == 0] = t.tensor(2.5); r = x",
    "x = t.zeros(3, 4, dtype=t.uint8); x[x == 0] = t.tensor(-1.); r = x",
    "x = t.zeros(3, dtype=t.uint8); x[x == 0] = t.tensor([300]); r = x",
    "x = t.zeros(3); x[x == 0] = t.tensor(2., dtype=t.float64, requires_grad=True); r = x",
    "x = t.arange(6); x[x > 3] = t.tensor([1.5, 2.5]); r = x",
    "x = t.arange(6); x[[0, 1]] = t.tensor(2.5); r = x",
])
def test_setitem_bool_mask_number_value_is_cast(src):
    same(src)


_OUT_CASES = [("matmul", "x, x.t()"), ("mm", "x, x.t()"), ("sort", "x"), ("topk", "x, 2"),
              ("abs", "x"), ("clamp", "x, 0, 3"), ("neg", "x"), ("kthvalue", "x, 1"),
              ("addmm", "x, x, x.t() @ x"), ("floor", "x"), ("round", "x"), ("sign", "x"),
              ("clip", "x, 0, 1"), ("softmax", "x, 0"), ("log_softmax", "x, 1"),
              ("dot", "x[0], x[0]"), ("mv", "x, x[0]"), ("where", "x > 1, x, x"),
              ("nan_to_num", "x"), ("index_select", "x, 0, t.tensor([0])"),
              ("gather", "x, 0, t.tensor([[0]])"), ("take", "x, t.tensor([0])"),
              ("masked_select", "x, x > 1"), ("tril", "x"), ("cummax", "x, 0"),
              ("logcumsumexp", "x, 0"), ("tensordot", "x, x.t(), 1"), ("inner", "x, x"),
              ("atan2", "x, x"), ("exp", "x"), ("mul", "x, x"), ("max", "x, 0"),
              ("bitwise_not", "x > 1"), ("cumsum", "x, 0"), ("sum", "x, 0")]


@pytest.mark.parametrize("name,args", _OUT_CASES)
@pytest.mark.parametrize("out", ["t.empty(0, dtype=t.float64)", "t.empty(0)",
                                 "t.empty(0, dtype=t.int32)", "t.empty(0, dtype=t.bool)"])
def test_out_dtype_and_resize(name, args, out):
    tup = name in ("sort", "topk", "kthvalue", "cummax", "max")
    o = f"({out}, t.empty(0, dtype=t.long))" if tup else out
    same(f"x = t.arange(6.).reshape(2, 3) + 1; o = {o}; r0 = t.{name}({args}, out=o); "
         "r = (o, r0 is o, r0[0] is o[0] if isinstance(o, tuple) else 0)")


@pytest.mark.parametrize("src", [
    "r = t.cholesky(A, out=o)", "r = t.linalg.inv(A, out=o)", "r = t.inverse(A, out=o)",
    "r = t.linalg.solve(A, x, out=o)", "r = t.bitwise_and(x.long(), 3, out=o.long())",
    "r = t.range(0, 3, out=o)", "r = t.cholesky_inverse(t.eye(2), out=o)",
    "r = t.sort(x, out=(o, o.long())).values",
    "r = t.tensordot(x, x.t(), 1, out=o)", "r = t.atan2(x, x, out=o)",
])
def test_own_out_parameters_resize(src):
    # (strides not compared: PyTorch's linear algebra resizes out column-major)
    same("x = t.arange(6.).reshape(2, 3) + 1; A = x[:, :2] @ x[:, :2].T + t.eye(2); "
         f"o = t.empty(0); {src}; r = (r, o)", strides=False)


@pytest.mark.parametrize("src", [
    "a = t.zeros(3, dtype=t.int8); r = a.index_copy_(0, t.tensor([0, 1, 2]), "
    "t.ones(3, dtype=t.uint8))",
    "a = t.zeros(3); r = a.index_copy(0, t.tensor([0, 1, 2]), t.ones(3, dtype=t.float64))",
    "a = t.zeros(3); r = a.index_copy(0, t.tensor([0, 1, 2]), t.ones(3))",
    "a = t.zeros(3); r = a.put(t.tensor([0, 1, 2]), t.ones(3, dtype=t.float64))",
    "a = t.zeros(3); r = a.put_(t.tensor([0, 1, 2]), t.ones(3, dtype=t.float64))",
    "a = t.zeros(3); r = a.put_(t.tensor([0, -1]), t.ones(2))",
])
def test_index_copy_and_put_do_not_promote(src):
    same(src)


@pytest.mark.parametrize("src", [
    "r = a.clone().masked_fill_(a > 3, t.tensor(-1.5))", "r = a.masked_fill(a > 3, t.tensor(-1))",
    "r = a.masked_fill(a > 3, t.tensor(2.5))", "r = a.int().masked_fill(a > 3, t.tensor(1e10))",
])
def test_masked_fill_tensor_value_read_as_number(src):
    same("a = t.tensor([3, 5, 250], dtype=t.uint8); " + src)


@pytest.mark.parametrize("src", [
    "r = t.add(b, b, alpha=2)", "r = t.add(b, b, alpha=0)", "r = t.add(b, True, alpha=2)",
    "r = t.add(b, False, alpha=2)", "r = b.clone().add_(b, alpha=5)",
    "r = t.add(t.tensor([1, 2]), b, alpha=3)", "r = t.add(b, 1, alpha=3)",
    "r = t.add(b, b, alpha=0.5)",
])
def test_bool_add_with_alpha_stays_bool(src):
    same("b = t.tensor([True, False]); " + src)


@pytest.mark.parametrize("src", [
    "x = t.tensor(0.); r = t.where(x > 1)", "x = t.tensor(2.); r = t.where(x > 1)",
    "x = t.tensor([[0., 2], [3, 0]]); r = t.where(x > 1)",
    "x = t.tensor(2., requires_grad=True); r = x.flip(0)", "x = t.tensor(2.); r = x.flip(-1)",
    "x = t.tensor(2.); r = x.flip(1)", "x = t.tensor(2.); r = t.fmax(x, x.flip(0))",
])
def test_zero_dim_where_and_flip(src):
    same(src)


@pytest.mark.parametrize("src", [
    "x = t.arange(6); r = t.std_mean(x)", "x = t.arange(6); r = t.var_mean(x, 0)",
    "x = t.arange(6); r = x.var()", "x = t.ones(2, 0, 3); r = x.cumsum(0, dtype=t.bool)",
    "x = t.ones(2, 0, 3); r = t.cumprod(x, 1, dtype=t.bool)",
])
def test_moment_and_scan_errors(src):
    same(src)


@pytest.mark.parametrize("src", [
    "r = t.arange(24.).reshape(4, 3, 2).transpose(-1, -2) @ t.ones(2, 3)",
    "r = t.arange(24.).reshape(4, 3, 2) @ t.ones(3, 3)",
    "r = t.arange(24.).reshape(4, 3, 2).transpose(0, 1) @ t.ones(3, 3)",
    "r = t.arange(24.).reshape(4, 3, 2).transpose(-1, -2) @ t.ones(2, 3, requires_grad=True)",
    "r = t.arange(24.).reshape(4, 3, 2).transpose(-1, -2) @ t.ones(2)",
    "r = t.ones(2, 3, dtype=t.bool) @ t.ones(3, 2, dtype=t.bool)",
    "r = t.mm(t.ones(2, 3, dtype=t.bool), t.ones(3, 2, dtype=t.bool))",
    "r = t.mv(t.ones(2, 3, dtype=t.bool), t.ones(3, dtype=t.bool))",
    "r = t.dot(t.ones(3, dtype=t.bool), t.ones(3, dtype=t.bool))",
    "r = t.bmm(t.ones(1, 2, 3, dtype=t.bool), t.ones(1, 3, 2, dtype=t.bool))",
    "r = t.einsum('ij,jk->ik', t.ones(2, 3, dtype=t.bool), t.ones(3, 2, dtype=t.bool))",
    "r = t.addmm(t.ones(2, 2, dtype=t.bool), t.ones(2, 3, dtype=t.bool), "
    "t.ones(3, 2, dtype=t.bool))",
    "r = t.ones(2, 3, dtype=t.int32) @ t.ones(3, 2, dtype=t.int32)",
])
def test_matmul_fold_errors_and_bool_products(src):
    same(src)


_LDEXP = {"int8": "[-3, 5, 7]", "bool": "[True, False, True]", "float16": "[-1.5, 2.25, 3.0]",
          "float32": "[-1.5, 2.25, 3.0]", "float64": "[-1.5, 2.25, 3.0]", "int64": "[-3, 5, 7]"}


@pytest.mark.parametrize("da", list(_LDEXP))
@pytest.mark.parametrize("db", list(_LDEXP))
def test_ldexp_power_in_others_dtype(da, db):
    same(f"a = t.tensor({_LDEXP[da]}, dtype=t.{da}); b = t.tensor({_LDEXP[db]}, dtype=t.{db}); "
         "r = t.ldexp(a, b)")


@pytest.mark.parametrize("data", ["'a'", "['a', 'b']", "[['a']]", "['a']", "[1, 'a']",
                                  "[[1], ['a']]", "[b'ab']"])
def test_tensor_of_strings_error(data):
    same(f"r = t.tensor({data})")


def test_float16_layer_norm_backward_in_float32():
    # PyTorch's float16 layer_norm backward computes in float32: its gradients are the
    # float64 ones rounded (a float16 composition was up to 100 ulps off)
    rng = np.random.default_rng(0)
    x, g, w, b = (rng.standard_normal(s).astype(np.float16) for s in ((6, 16), (6, 16), 16, 16))
    got, ref = [], []
    for lib, dt, out in ((llgrad, np.float16, got), (torch, np.float64, ref)):
        xs = [lib.tensor(v.astype(dt), requires_grad=True) for v in (x, w, b)]
        lib.nn.functional.layer_norm(xs[0], (16,), xs[1], xs[2]).backward(lib.tensor(g.astype(dt)))
        out.extend(v.grad.double().numpy() for v in xs)
    for a, r in zip(got, ref):
        ulp = np.spacing(np.abs(r).astype(np.float16)).astype(np.float64)
        assert (np.abs(a - r) / ulp).max() <= 1


@pytest.mark.parametrize("op", ["fmod", "remainder"])
def test_float64_fmod_exact(op):
    x = np.linspace(-3, 5, 40)
    a = getattr(torch.tensor(x), op)(0.7).numpy()
    np.testing.assert_array_equal(getattr(llgrad.tensor(x), op)(0.7).numpy(), a)


@pytest.mark.parametrize("dt", ["float32", "float16", "float64"])
def test_float_operand_infinite(dt):
    same(f"x = t.tensor(np.linspace(-3, 5, 40)).to(t.{dt}); r = (x.fmod(float('inf')), "
         "x % float('inf'))")


def test_unsqueeze_stride_of_size_one_dims():
    same("x = t.ones(3, 4, 5)[None, 1]; r = (x.unsqueeze(3).stride(), x.unsqueeze(1).stride(), "
         "x.view(1, 4, 5).stride())")
