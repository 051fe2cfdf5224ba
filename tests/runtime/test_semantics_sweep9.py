"""Differential checks against PyTorch, ninth sweep (sweep7_harness.same: dtypes, values,
strides, grad_fn names and errors). The layout of elementwise results is PyTorch's
TensorIterator's (the first operand that orders two dimensions decides; an input cast to
the promoted dtype counts as its preserve_format copy), also for special functions and
compositions that end in a fill, in eager, the interpreter and compiled code; advanced
indexing, sort, flip and index_put results, and a new .grad of an expanded leaf, are laid
out as PyTorch's; scans over a transposed tensor are row-major; signed zeros (asinh, sinh,
float16 relu, lgamma(1), zero remainders); i0 of a 0-dim tensor; gather / scatter of a
0-dim tensor; rsub's and trapezoid's nodes; arctan2's own name in its errors; operators
return NotImplemented for objects that are not operands; addcdiv of integer tensors, a
tensor value of addcmul, a 0-dim weight of lerp; range factories' out= shapes; tensordot /
multi_dot dtype messages."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from sweep7_harness import run, same  # noqa: E402

_T = "t.arange(6.).reshape(3, 2).t()"          # (2, 3) strides (1, 2)
_C = "t.arange(6.).reshape(2, 3)"
_E = "t.arange(3.).reshape(1, 3).expand(2, 3)"  # strides (0, 1)
_R = "t.arange(2.).reshape(2, 1).expand(2, 3)"  # strides (1, 0)


@pytest.mark.parametrize("src", [
    f"r = t.add({_T}, {_C})", f"r = t.add({_C}, {_T})", f"r = {_T} * {_C}.int()",
    f"r = t.add({_T}.int(), {_E})", f"r = t.add({_R}, {_T}.double())",
    f"r = t.add({_R}.double(), {_T})", f"r = t.where({_T} > 1, {_C}, 0.)",
    f"r = t.maximum({_T}.half(), {_C})", f"r = t.lerp({_T}, {_C}, 0.5)",
    f"r = t.addcmul({_E}, {_T}, {_C})", f"r = {_T}[:, None] - {_C}[None, :]",
    "r = t.arange(24.).reshape(2, 3, 4).permute(2, 0, 1) + t.arange(6.).reshape(2, 3)",
])
def test_elementwise_layout_of_disagreeing_operands(src):
    same(src)


@pytest.mark.parametrize("fn", ["exp", "sin", "sqrt", "sigmoid", "round", "sign", "log1p"])
@pytest.mark.parametrize("x", [
    "t.tensor([[1, 2, 3]], dtype=t.int32).expand(3, 3)",
    "t.tensor([[True, False, True]]).expand(3, 3)",
    "t.tensor([[1., 2., 3.]]).half().expand(3, 3)",
    "t.tensor([[1], [2]], dtype=t.uint8).expand(2, 3)",
])
def test_elementwise_layout_of_a_cast_expanded_input(fn, x):
    same(f"r = t.{fn}({x})")


@pytest.mark.parametrize("fn", ["asinh", "acosh", "erf", "erfc", "erfinv", "lgamma",
                                "digamma", "i0", "sinc", "exp2"])
@pytest.mark.parametrize("dt", ["float32", "float64", "int32"])
def test_special_functions_keep_a_transposed_layout(fn, dt):
    same(f"r = t.{fn}(t.tensor([[0.25, 0.5, 1.], [2., 0.75, 3.]]).to(t.{dt}).t())")


@pytest.mark.parametrize("src", [
    f"r = t.hypot({_T}, t.tensor([1., 2.]))", f"r = t.hypot({_T}.double(), {_C})",
    f"r = t.xlogy({_T}, t.tensor([1., 2., 3.]))", f"r = t.nextafter({_T}, {_C})",
    f"r = t.logaddexp({_T}, t.tensor([1., 2., 3.]))", f"r = t.igamma({_T} + 1, {_C})",
    f"r = t.igammac({_T} + 1, {_C})", f"r = t.igamma({_C} + 1, {_T})",
    "r = t.nextafter(t.ones(2, 3), t.tensor([1., 2.]))",
    "r = t.igamma(t.ones(2, 3), t.tensor([1., 2.]))",
])
def test_compositions_keep_a_transposed_layout(src):
    same(src)


def test_gradients_through_relaid_results():
    got, ref = [], []
    for lib, out in ((llgrad, got), (torch, ref)):
        a = lib.tensor([[0.5, -0.75, 1.5], [-2.25, 3.0, 0.0]], requires_grad=True)
        b = lib.tensor([[1., 2.], [0.5, 4.], [3., 4.]], requires_grad=True)
        r = lib.hypot(a.t(), b) * lib.sinc(a.t()) + lib.xlogy(a.t(), b) + a.t() * b.int()
        r.backward(lib.ones(3, 2).t().contiguous().t())
        out += [r.stride(), a.grad.numpy(), b.grad.numpy()]
    assert got[0] == ref[0]
    for g, w in zip(got[1:], ref[1:]):
        np.testing.assert_allclose(g, w, rtol=1e-6)


@pytest.mark.parametrize("src", [
    f"r = t.cummax({_T}, 0)", f"r = t.cummin({_T}, 1)", f"r = t.logcumsumexp({_T}, 0)",
    f"r = t.cummax({_T}.int(), -1)", f"r = t.all({_T}, dim=[])", f"r = t.any({_T}.int(), dim=())",
])
def test_scans_of_a_transposed_tensor_are_row_major(src):
    same(src)


@pytest.mark.parametrize("src", [
    "x = t.tensor([-0.0, 0.0, -1.0, 2.0]); r = (t.asinh(x), t.sinh(x), t.asinh(x.half()))",
    "x = t.tensor([-0.0, 0.0, -1.0, float('nan')]).half(); r = (t.relu(x), x.relu_())",
    "x = t.tensor([1., 2., 3.]); r = (t.lgamma(x), t.lgamma(x.double()), t.lgamma(x.half()))",
    "r = (t.lgamma(t.tensor([True, True])), t.lgamma(t.tensor([1, 2], dtype=t.uint8)))",
])
def test_signed_zeros(src):
    same(src)
    (_, tv), (_, lv) = run(torch, src), run(llgrad, src)
    for a, b in zip(tv, lv):
        np.testing.assert_array_equal(np.signbit(b.numpy()), np.signbit(a.numpy()))


@pytest.mark.parametrize("src", [
    "x = t.tensor(1.5, requires_grad=True); r = t.i0(x); r.backward(); r = (r, x.grad)",
    "x = t.tensor(2.5); r = (t.i0(x), t.special.i0(x), t.frexp(x)[0])",
])
def test_zero_dim_i0(src):
    same(src)


@pytest.mark.parametrize("src", [
    "a = t.ones(2, requires_grad=True); r = t.rsub(a, t.tensor(2.5, requires_grad=True))",
    "a = t.ones(2, requires_grad=True); r = t.rsub(a, t.tensor(2.5), alpha=2)",
    "a = t.ones(2, requires_grad=True); r = (t.rsub(a, 2), 3 - a)",
])
def test_rsub_node_names(src):
    same(src)


@pytest.mark.parametrize("src", [
    "r = t.arctan2(t.ones(2), 2)", "r = t.arctan2(2, t.ones(2))", "r = t.ones(2).arctan2(2)",
    "r = t.ones(2).arctan2_(2.5)", "r = t.atan2(t.ones(2), 2)", "r = t.ones(2).atan2(True)",
    "r = t.arctan2(t.ones(2), t.ones(2))",
])
def test_arctan2_errors_name_arctan2(src):
    same(src)


_P = "t.arange(24).reshape(2, 3, 4).permute(2, 0, 1)"
_X = "t.arange(4.).reshape(1, 4, 1).expand(2, 4, 3)"


@pytest.mark.parametrize("src", [
    f"r = 2 ** {_P}", f"r = t.pow(2.5, {_T})", f"r = t.pow({_T}, 2)", f"r = 2 - {_T}",
    f"r = t.pow(t.tensor(2.), {_T})",
    f"r = {_X}.flip(-1)", f"r = {_X}.flip((0, 1))", f"r = t.rot90({_X}, 3, (1, 2))",
    f"r = {_X}.index_fill(-1, t.tensor([0]), -1)", f"r = {_T}.index_fill(1, t.tensor([0]), -1)",
    f"r = {_P}.sort(-1)", f"r = {_P}.sort(0, descending=True)", f"r = {_P}.argsort(1)",
    f"r = {_P}.msort()", "r = t.arange(12.).reshape(3, 4).t()[::2].sort(1)",
    "r = t.arange(3.).reshape(3, 1).expand(3, 2).t().sort(1)", f"r = {_P}.topk(2, 0)",
])
def test_layouts_of_pow_flip_index_put_and_sort(src):
    same(src)


def test_sort_gradient_of_a_permuted_input():
    got, ref = [], []
    for lib, out in ((llgrad, got), (torch, ref)):
        x = lib.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
        v, i = x.t().sort(0)
        (v * lib.arange(12.).reshape(4, 3)).sum().backward()
        out += [v.stride(), i.stride(), x.grad.numpy()]
    assert got[:2] == ref[:2]
    np.testing.assert_allclose(got[2], ref[2])


def _layouts(x, y, z):
    a = x.t() + y
    return (a, llgrad.exp(z), z + 0.5, x.t().sort(0)[0], 2 ** x.t(), llgrad.erf(x.t()),
            llgrad.cummax(x.t(), 0)[0], (a * 2).sum())


@pytest.mark.parametrize("backend", [pytest.param("llvm", marks=pytest.mark.slow),
                                     "interpret", "python"])
def test_compiled_layouts_match_eager(backend):
    x = llgrad.arange(6.).reshape(2, 3).requires_grad_()
    y, z = llgrad.arange(6.).reshape(3, 2), llgrad.tensor([[1, 2, 3]]).expand(4, 3)
    ref = _layouts(x, y, z)
    ref[-1].backward()
    gx, x.grad = x.grad, None
    f = llgrad.compile(_layouts, backend=backend)
    for _ in range(2):
        out = f(x, y, z)
    for r, o in zip(ref, out):
        assert o.stride() == r.stride()
        np.testing.assert_allclose(o.detach().numpy(), r.detach().numpy(), rtol=1e-6)
    out[-1].backward()
    np.testing.assert_array_equal(x.grad.numpy(), gx.numpy())


@pytest.mark.parametrize("src", [
    "x = t.tensor(2., requires_grad=True); r = x.transpose(0, -1); r.backward(); "
    "r = (r, x.grad, r._base is x)",
    "x = t.tensor(3); r = (x.transpose_(0, 0), x._version)", "r = t.tensor(2.).swapaxes(-1, 0)",
    "r = t.tensor(2.).transpose(0, 1)",
])
def test_transpose_of_a_zero_dim_tensor(src):
    same(src)


@pytest.mark.parametrize("leaf", [
    "t.arange(3.).reshape(1, 3).expand(2, 3)", "t.arange(2.).reshape(2, 1).expand(2, 3)",
    "t.arange(24.).reshape(4, 6).t()[::2]", "t.arange(24.).reshape(2, 3, 4).permute(1, 2, 0)",
])
@pytest.mark.parametrize("use", ["a * 2", "a @ t.ones(a.shape[-1], 2)", "a.sin()"])
def test_new_grad_of_a_leaf_that_is_not_dense(leaf, use):
    same(f"a = {leaf}.detach().requires_grad_(); ({use}).sum().backward(); r = a.grad")


@pytest.mark.parametrize("src", [
    "r = t.addcdiv(t.ones(2), t.tensor([1, 2]), t.tensor([1, 2]))",
    "r = t.ones(2).addcdiv_(t.tensor([True, False]), t.tensor([1, 2]))",
    "r = t.addcdiv(t.tensor([1, 2]), t.tensor([1., 2.]), t.tensor([1, 2]))",
    "r = t.addcdiv(t.ones(2, dtype=t.float64), t.tensor([3, 2], dtype=t.int8), t.tensor([1, 2]))",
])
def test_addcdiv_of_integer_tensors_raises(src):
    same(src)


@pytest.mark.parametrize("w", ["t.tensor(2)", "t.tensor(3, dtype=t.int8)",
                               "t.tensor(0.5, dtype=t.float64)", "t.tensor([2, 1])",
                               "t.tensor([0.5, 1.], dtype=t.float64)"])
@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_lerp_takes_a_zero_dim_weight_of_any_dtype(w, dt):
    same(f"a = t.tensor([1., 2.], dtype=t.{dt}, requires_grad=True); "
         f"r = t.lerp(a, t.tensor([3., 5.], dtype=t.{dt}), {w}); r.sum().backward(); "
         "r = (r, a.grad)")
    same(f"r = t.lerp(t.tensor([1., 2.], dtype=t.{dt}), t.tensor([3., 5.], dtype=t.{dt}), "
         "t.tensor(True))")


@pytest.mark.parametrize("src", [
    "o = t.empty(2, 3); r = (t.arange(6, out=o), o)",
    "o = t.empty(3, 2).t(); r = (t.arange(6., out=o), o)",
    "o = t.empty(2, 3, dtype=t.float64); r = (t.linspace(0, 1, 6, out=o), o)",
    "o = t.empty(3, 2); r = (t.logspace(0, 1, 6, out=o), o)",
    "o = t.empty(2, 2); r = (t.linspace(0, 1, 6, out=o), o)",
    "o = t.empty(0); r = (t.arange(3, out=o), o)",
])
def test_range_factories_keep_the_out_shape_of_the_same_count(src):
    same(src)


def test_arange_into_an_out_of_another_count_warns_as_pytorch():
    msgs = []
    for lib in (torch, llgrad):
        with pytest.warns(UserWarning) as w:
            lib.arange(6, out=lib.empty(2, 2))
        msgs.append(str(w[0].message).replace("llgrad", "torch"))
    assert msgs[1] == msgs[0].split(" (Triggered")[0]


@pytest.mark.parametrize("op", ["fmod", "remainder"])
@pytest.mark.parametrize("dt", ["float32", "float64", "float16"])
@pytest.mark.parametrize("y", ["1.5", "-1.5", "t.tensor(1.5)", "t.tensor([1.5, -1.5, 2., 3., -3., 1.])"])
def test_zero_remainders_keep_the_sign_of_x(op, dt, y):
    src = (f"x = t.tensor([-3., 3., -0., 0., -4.5, 4.5], dtype=t.{dt}, requires_grad=True); "
           f"r = t.{op}(x, {y}); (r * t.arange(6.)).sum().backward(); r = (r, x.grad)")
    same(src)
    (_, tv), (_, lv) = run(torch, src), run(llgrad, src)
    np.testing.assert_array_equal(np.signbit(lv[0].detach().numpy()),
                                  np.signbit(tv[0].detach().numpy()))


@pytest.mark.parametrize("src", [
    "a = t.tensor([0.5, -1.5, 3.]); r = t.addcmul(a, a, a, value=t.tensor(2))",
    "a = t.tensor([0.5, -1.5, 3.]).half(); r = t.addcmul(a, a, a, value=t.tensor(3, dtype=t.int8))",
    "a = t.tensor([0.5, -1.5, 3.]); r = t.addcdiv(a, a, a, value=t.tensor(3.))",
    "a = t.tensor([0.5, -1.5, 3.]); r = a.addcmul_(a, a, value=t.tensor(1))",
    "a = t.tensor([1, 2]); r = t.addcmul(a, a, a, value=t.tensor(2))",
    "a = t.tensor([0.5, -1.5, 3.]); r = t.addcmul(a, a, a, value=t.tensor([1., 2.]))",
    "a = t.tensor([0.5, -1.5, 3.]); r = a.addcdiv_(a, a, value=t.tensor([1.]))",
])
def test_addcmul_value_as_a_tensor(src):
    same(src)


@pytest.mark.parametrize("src", [
    "x = t.tensor([[1.5, 2.], [3., 4.5]], requires_grad=True); r = x.t().mvlgamma(2); "
    "r.sum().backward(); r = (r, x.grad)",
    "x = t.tensor([[1.5, 2.], [3., 4.5]]); r = x.t().mvlgamma(1)",
    "x = t.arange(12.).reshape(3, 4).requires_grad_(); r = (t.trapezoid(x), t.trapz(x, dx=2.), "
    "t.trapezoid(x, t.arange(4.) ** 2))",
])
def test_mvlgamma_layout_and_trapezoid_nodes(src):
    same(src)


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<<", ">>",
                                "<", ">=", "@", "==", "!="])
@pytest.mark.parametrize("other", ["None", "'a'", "[1, 2]", "(1, 2)", "{1: 2}"])
def test_operators_refuse_objects_that_are_not_operands(op, other):
    same(f"x = t.tensor([1., 2.]); r = x {op} {other}")
    same(f"x = t.tensor([1, 2]); r = {other} {op} x")


@pytest.mark.parametrize("src", [
    "x = t.ones(2, 2); r = x @ 2", "x = t.ones(2, 2); r = 2.5 @ x", "x = t.ones(2, 2); y = x; x += None",
    "x = t.ones(2, 2); x %= [1]", "x = t.tensor([5., 7.]); r = (x % np.float32(2.5), x % np.int64(3))",
    "x = t.tensor([5, 7], dtype=t.int8); r = x % np.int64(3)",
])
def test_matmul_and_remainder_operators(src):
    same(src)


_Q = "t.arange(24.).reshape(4, 3, 2).permute(2, 1, 0)"      # (2, 3, 4) strides (1, 2, 6)


@pytest.mark.parametrize("idx", [
    "[[0, 1]]", "[:, [2, 0]]", "[..., [3, 0]]", "[t.tensor([[0, 1], [1, 0]])]", "[True]",
    "[t.tensor([True, False])]", "[:, t.tensor([True, False, True])]", "[[0], :, [1, 2]]",
    "[:, [0, 2], [1, 3]]", "[:, ::2, t.tensor([0, 3])]", "[t.tensor([0, 1], dtype=t.int32)]",
    "[0, [1, 2], 1:3]", "[x > 10]", "[t.tensor([0, 1]).reshape(2, 1), t.tensor([1, 2])]",
])
@pytest.mark.parametrize("x", [_Q, "t.arange(4.).reshape(1, 1, 4).expand(2, 3, 4)",
                               "t.arange(48.).reshape(2, 6, 4)[:, ::2]"])
def test_advanced_indexing_layout(x, idx):
    same(f"x = {x}; r = x{idx}")
    same(f"x = {x}.clone().requires_grad_(); r = x{idx}; r.sum().backward(); r = (r, x.grad)")


def test_advanced_indexing_layout_compiled_matches_eager():
    def f(x, i):
        return x.permute(2, 1, 0)[:, i] * 2, x.permute(2, 1, 0)[i]
    x, i = llgrad.arange(24.).reshape(4, 3, 2), llgrad.tensor([1, 0])
    ref = f(x, i)
    for backend in ("interpret", "python"):
        out = llgrad.compile(f, backend=backend)(x, i)
        for r, o in zip(ref, out):
            assert o.stride() == r.stride()
            np.testing.assert_array_equal(o.numpy(), r.numpy())


@pytest.mark.parametrize("src", [
    "r = t.tensordot(t.ones(2, 3), t.ones(3, 2, dtype=t.float64), 1)",
    "r = t.tensordot(t.ones(2, 3), t.ones(2, 2), 1)",
    "r = t.tensordot(t.ones(2, 3), t.ones(3, 2, dtype=t.int64), dims=([1], [0]))",
    "r = t.tensordot(t.ones(2, 3), t.ones(2, 2), dims=([-1], [0]))",
    "r = t.tensordot(t.ones(2, 3, 4), t.ones(3, 4, 5), 2)",
    "r = t.linalg.multi_dot([t.ones(2, 3), t.ones(3, 2, dtype=t.int64)])",
    "r = t.linalg.multi_dot([t.ones(2, 3), t.ones(3, 3), t.ones(3, dtype=t.float64)])",
    "r = t.linalg.multi_dot([t.ones(2, 3), t.ones(3, 3, dtype=t.float16), t.ones(3)])",
])
def test_tensordot_and_multi_dot_messages(src):
    same(src)


@pytest.mark.parametrize("src", [
    "x = t.tensor(3.); r = t.gather(x, -1, t.zeros_like(x, dtype=t.long))",
    "x = t.tensor(3., requires_grad=True); r = t.gather(x, 0, t.tensor(0)); r.backward(); "
    "r = (r, x.grad)",
    "x = t.tensor(3.); r = x.scatter(-1, t.zeros_like(x, dtype=t.long), 5)",
    "x = t.tensor(3., requires_grad=True); s = t.tensor(2., requires_grad=True); "
    "r = x.scatter_add(0, t.tensor(0), s); r.backward(); r = (r, x.grad, s.grad)",
    "x = t.tensor(3., requires_grad=True); s = t.tensor(2., requires_grad=True); "
    "r = x.scatter(0, t.tensor(0), s); r.backward(); r = (r, x.grad, s.grad)",
    "x = t.tensor(3.); r = x.scatter(0, t.tensor(1), 5.)",
    "x = t.tensor(3.); r = x.scatter_reduce(0, t.tensor(0), t.tensor(2.), 'sum')",
    "x = t.tensor(3.); r = x.scatter(0, t.tensor(0), 7., reduce='add')",
    "x = t.tensor(3); r = x.scatter_add_(0, t.tensor(0), t.tensor(4))",
])
def test_gather_and_scatter_of_a_zero_dim_tensor(src):
    same(src)


@pytest.mark.parametrize("index", [lambda x: x[[0, 0], None, 2], lambda x: x[[1, 0], None],
                                   lambda x: x[None, [0, 1], None, 1]])
def test_index_with_none_on_a_permuted_tensor(index):
    """A None after the index tensors, last among the dims (its unsqueeze stride was read
    past the strides' end: IndexError), gives torch's values."""
    a = np.random.default_rng(0).standard_normal((5, 4, 3)).astype(np.float32)
    want = index(torch.tensor(a).permute(2, 1, 0))
    got = index(llgrad.tensor(a).permute(2, 1, 0))
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
