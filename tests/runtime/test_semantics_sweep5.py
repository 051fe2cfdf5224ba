"""Differential checks against PyTorch, fifth sweep: small programs run in torch and in
llgrad whose values, dtypes, shapes, strides (where PyTorch's are contiguous and a later
.view() depends on it), requires_grad, grad_fn names, warnings, or exception types and first
lines must agree. Each table holds cases that failed before their fix (and neighbours that
pin the rule): the layout of reductions, cat / stack, scans, softmax and indexing of a
transposed input (and kthvalue / median's), view(dtype), expand's errors, all / any over
dim=(), exact integer floor / trunc division (not through float64) and its in-place cast
errors, inference_mode(False) and enable_grad inside inference mode, in-place copies into
integer tensors, index errors (integer indices, index_add / index_copy / index_fill),
SumBackward1 for dim=() and quantile's SqueezeBackward4, is_grads_batched, backward's
create_graph warning, bool kernels PyTorch lacks (clamp, pow, fmod, remainder, //), lerp's and
clamp_'s checks, ints beyond int64 in torch.tensor, and x == None (False, not a tensor)."""
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


def _run(lib, src):
    env = {"t": lib}
    try:
        exec(src, env)
        return "ok", env["r"]
    except Exception as e:      # noqa: BLE001 (the exception is what is compared)
        return "raise", (type(e).__name__, _first_line(str(e)))


def _name(d):
    return str(d).split(".")[-1]


def same(src, strides=True):
    """src (which sets r) in torch and in llgrad (as `t`): the same tensors (values, shapes,
    dtypes, strides, requires_grad, grad_fn names), Python values, or exception."""
    (tk, tv), (lk, lv) = _run(torch, src), _run(llgrad, src)
    assert tk == lk, (tv, lv)
    if tk == "raise":
        assert tv == lv
        return
    for a, b in zip(_tensors(tv), _tensors(lv), strict=True):
        if isinstance(a, torch.Tensor):
            assert isinstance(b, llgrad.Tensor), type(b)
            assert tuple(b.shape) == tuple(a.shape), (b.shape, a.shape)
            assert _name(b.dtype) == _name(a.dtype), (b.dtype, a.dtype)
            if strides:
                assert b.stride() == a.stride(), (b.stride(), a.stride())
            assert b.is_contiguous() == a.is_contiguous()
            assert b.requires_grad == a.requires_grad
            assert type(b.grad_fn).__name__ == type(a.grad_fn).__name__, (b.grad_fn, a.grad_fn)
            np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-6)
        else:
            assert type(b) is type(a) and b == a, (a, b)


# ---- layouts: PyTorch's reductions, cat, scans ... are contiguous whatever their input's ----

_M = "m = t.arange(12.).reshape(3, 4).T; a = t.arange(24.).reshape(2, 3, 4).permute(2, 0, 1)\n"


@pytest.mark.parametrize("expr", [
    "t.cat([m, m])", "t.cat([m, m], 1)", "t.stack([m, m])", "t.stack([m, m], 2)",
    "m.softmax(0)", "m.log_softmax(1)", "m.cumsum(0)", "m.cumprod(1)", "m.logcumsumexp(0)",
    "m.cummax(0)", "m.roll(1, 0)", "m[:, [0, 1]]", "m.scatter(0, t.zeros(1, 3, dtype=t.long), 1.)",
    "m.index_add(0, t.tensor([0]), t.ones(1, 3))", "a.sum(1)", "a.amax(2)", "a.std(1)",
    "a.logsumexp(1)", "a.prod(1)", "a.any(1)", "a.sum(1, keepdim=True)", "a.mode(1)",
    "a.nansum(1)", "a.kthvalue(1, 1)", "a.median(1)", "a.long().median(1)",
    "t.nn.functional.layer_norm(a, (3,))",
    # (and those that keep their input's layout in both)
    "m.flip(0)", "m.rot90()", "m + 1", "m.exp()", "m.tril()",
])
def test_layout_of_results(expr):
    same(_M + f"r = {expr}")


@pytest.mark.parametrize("expr", ["t.cat([m, m]).view(-1)", "t.stack([m, m]).view(-1)",
                                  "m.softmax(0).view(-1)", "a.sum(1).view(-1)"])
def test_view_of_a_contiguous_result(expr):
    same(_M + f"r = {expr}")


@pytest.mark.parametrize("src", [
    "x = t.tensor([[1., 2., 3.], [4., 5., 6.]]); r = x.view(t.int32)",
    "x = t.arange(6.).reshape(2, 3); r = x.view(t.float16)",
    "x = t.arange(6.).reshape(2, 3); r = x.view(dtype=t.int8)",
    "x = t.arange(8.).reshape(2, 4); r = x.view(t.float64)",
    "x = t.arange(6.).reshape(2, 3); r = x.view(t.float64)",
    "x = t.arange(12.).reshape(2, 6); r = x[:, 1:5].view(t.float64)",
    "x = t.arange(6.).reshape(2, 3); r = x[:, :2].view(t.float64)",
    "x = t.arange(6.).reshape(2, 3); r = x.T.view(t.int16)",
    "r = t.tensor(1.).view(t.float64)",
    "r = t.tensor(1.).view(t.int32)",
    "r = t.tensor([1, 0, 2], dtype=t.uint8).view(t.bool)",
    "x = t.ones(3, requires_grad=True); y = (x * 2).view(t.int32); r = (y, y.is_leaf)",
    "x = t.ones(3, requires_grad=True); r = x.view(t.float32)",
    "x = t.zeros(4); y = x.view(t.int32); y[0] = 1065353216; r = (x, x._version)",
])
def test_view_dtype(src):
    same(src)


@pytest.mark.parametrize("expr", [
    "m.expand(3, 4, 2)", "m.expand(-1, -1, 2)", "m.expand(3, 5)", "m.expand(2, -1, 4).shape",
    "m[:, :1].expand(3, -1, 4)", "t.tensor(1.).expand(2, 3)", "m.expand(-1, 3, 4)",
])
def test_expand_errors(expr):
    same(f"m = t.arange(12.).reshape(3, 4); r = {expr}")


# ---- reductions ---------------------------------------------------------------------------

@pytest.mark.parametrize("expr", [
    "y.any(())", "y.all(dim=())", "y.int().any(())", "y.to(t.uint8).all(())", "y.any(dim=[])",
    "t.any(y, ())", "y.any((0,))", "y.all(())",
])
def test_all_any_over_no_dims(expr):
    same(f"y = t.tensor([[1., 0, float('nan')], [2, 3, 0]], requires_grad=True); r = {expr}")


# ---- integer division: exact (not through float64), PyTorch's errors ------------------------

_BIG = "a = t.tensor([2**62 + 1, -(2**62 + 1), 2**53 + 1, -7, 7]); b = t.tensor([3, 3, 2, 2, -2])\n"


@pytest.mark.parametrize("expr", [
    "a // b", "a // 3", "a.div(b, rounding_mode='trunc')", "a.div(-3, rounding_mode='floor')",
    "a % b", "a % -3", "a.fmod(b)", "a.remainder(3)", "a.floor_divide(b)", "7 // a", "-7 % a",
    "a.to(t.int8) // -1", "a.to(t.uint8) // 3", "a.to(t.uint8) % 3", "a.to(t.int32) // 3",
    "a // t.tensor(3, dtype=t.int8)", "a // 2.5", "a // 0", "a // t.tensor([0])",
    "a.bool() // True", "a.bool().div(a.bool(), rounding_mode='trunc')", "a.bool() // 2",
])
def test_integer_division(expr):
    same(_BIG + f"r = {expr}")


@pytest.mark.parametrize("stmt", [
    "r = a.clone(); r //= 3", "r = a.clone(); r //= 2.5", "r = a.clone(); r %= 3",
    "r = a.clone(); r.div_(b, rounding_mode='trunc')", "r = a.clone(); r.floor_divide_(3.5)",
    "r = a.clone(); r //= t.tensor(1.5)", "r = a.clone().bool(); r.floor_divide_(True)",
    "r = a.clone(); r.div_(2, rounding_mode=None)", "r = a.clone().to(t.int8); r //= 3",
    "r = a.clone(); r.div_(0, rounding_mode='floor')", "r = a.float(); r //= 2",
])
def test_integer_division_in_place(stmt):
    same(_BIG + stmt)


def test_compiled_integer_division_is_exact():
    def f(a, b):
        return a // b, a.div(b, rounding_mode="trunc"), a % b, a.char() // -1

    a = [2**62 + 1, -(2**62 + 1), 2**53 + 1, -7, 7, -128]
    b = [3, 3, -2, 2, -2, -1]
    want = [x.tolist() for x in f(torch.tensor(a), torch.tensor(b))]
    got = llgrad.compile(f, fullgraph=True)(llgrad.tensor(a), llgrad.tensor(b))
    assert [x.tolist() for x in got] == want


# ---- grad modes -----------------------------------------------------------------------------

@pytest.mark.parametrize("src", [
    "x = t.ones(3, requires_grad=True)\n"
    "with t.inference_mode():\n"
    "    y = x * 2\n"
    "    with t.inference_mode(False):\n"
    "        z = x * 2\n"
    "        g = t.is_grad_enabled()\n"
    "r = (y.requires_grad, z.requires_grad, y.is_inference(), z.is_inference(), g)",
    "x = t.ones(3, requires_grad=True)\n"
    "with t.no_grad():\n"
    "    with t.inference_mode(False):\n"
    "        r = (t.is_grad_enabled(), (x * 2).requires_grad, t.is_inference_mode_enabled())",
    "x = t.ones(3, requires_grad=True)\n"
    "with t.inference_mode():\n"
    "    with t.enable_grad():\n"
    "        y = x * 2\n"
    "        g = t.is_grad_enabled()\n"
    "    with t.set_grad_enabled(True):\n"
    "        z = x * 2\n"
    "    h = t.is_grad_enabled()\n"
    "r = (y.requires_grad, y.is_inference(), g, z.requires_grad, h, t.is_grad_enabled())",
    "x = t.ones(3, requires_grad=True)\n"
    "with t.inference_mode():\n"
    "    t.set_grad_enabled(True)\n"
    "    r = (t.is_grad_enabled(), (x * 2).requires_grad)\n"
    "r = r + (t.is_grad_enabled(), (x * 2).requires_grad)",
    "x = t.ones(3, requires_grad=True)\n"
    "with t.no_grad():\n"
    "    with t.inference_mode():\n"
    "        with t.enable_grad():\n"
    "            y = x * 2\n"
    "r = (y.requires_grad, y.is_inference(), t.is_grad_enabled())",
])
def test_grad_modes_and_inference_mode(src):
    same(src)


# ---- in-place writes into integer tensors record nothing ----------------------------------

@pytest.mark.parametrize("stmt", [
    "y = t.zeros(2, dtype=t.long); y.copy_(x); r = y",
    "y = t.zeros(3, 2, dtype=t.long); y[0].copy_(x); r = y",
    "y = t.zeros(2, dtype=t.long); y[0] = x[1]; r = y",
    "y = t.zeros(2, dtype=t.int32); y.index_put_((t.tensor([0]),), x[:1]); r = y",
    "y = t.zeros(2, dtype=t.float64); y.copy_(x); r = y",
])
def test_copy_into_an_integer_tensor(stmt):
    same("x = t.tensor([1., 2.], requires_grad=True)\n" + stmt)


# ---- indexing and index ops: PyTorch's errors ------------------------------------------------

@pytest.mark.parametrize("expr", [
    "m[0, 0, 4]", "m[1, 7]", "m[:, 7]", "m[None, 0, 5]", "m[..., 9]", "m[0, ..., 9]", "m[0][9]",
    "m[..., 1, 2]", "m[1, -4]", "m[5]",
    "t.zeros(5).index_add_(0, t.tensor([0, 0, 5]), t.tensor([1., 2, 3]))",
    "t.zeros(5).index_add(0, t.tensor([-1]), t.tensor([1.]))",
    "t.zeros(5).index_copy(0, t.tensor([-1]), t.tensor([1.]))",
    "t.zeros(5).index_copy_(0, t.tensor([5]), t.tensor([1.]))",
    "t.zeros(3, 4).index_copy(1, t.tensor([0, 3]), t.ones(3, 2))",
    "t.zeros(3, 4).index_fill(1, t.tensor([-5]), 1.)", "t.zeros(3, 4).index_fill(1, t.tensor([4]), 1.)",
    "t.zeros(3, 4).index_fill(1, t.tensor([-4]), 1.)", "t.zeros(5).index_fill(0, t.tensor([-1]), 1.)",
    "t.zeros(3, 4).index_fill(0, t.tensor([1]), t.tensor([2.]))",
    "t.zeros(3, 4).index_fill_(1, t.tensor([3, -1]), t.tensor(2.))",
    "t.zeros(2, 3).scatter_add_(1, t.tensor([[0, 0]]), t.tensor([[1, 2]]))",
    "t.zeros(2, 3).int().scatter_reduce(0, t.tensor([[0, 1]]), t.tensor([[5, 6]]), 'mean')",
])
def test_index_errors(expr):
    same(f"m = t.zeros(2, 3, 4); r = {expr}")


# ---- grad_fn names --------------------------------------------------------------------------

@pytest.mark.parametrize("expr", [
    "x.sum(())", "x.mean(())", "x.sum([])", "x.mean(dim=[])", "t.sum(x, ())", "x.amax(())",
    "x.nansum(())", "x.quantile(0.3)", "x.quantile(0.3, dim=1, keepdim=True)",
    "x.quantile(t.tensor([0.3, 0.5]), dim=0)", "x.nanquantile(0.5, 1)",
    "x.quantile(0.5, interpolation='lower')", "t.vdot(x[0], x[1])",
])
def test_grad_fn_names(expr):
    same(f"x = t.arange(12.).reshape(3, 4).requires_grad_(); r = {expr}")


@pytest.mark.parametrize("expr", [
    "m.double(memory_format=t.preserve_format)", "m.float(memory_format=t.contiguous_format)",
    "m.byte(memory_format=t.preserve_format)",
    "t.meshgrid(t.arange(2), t.arange(3.), indexing='ij')", "t.meshgrid(indexing='ij')",
])
def test_casts_and_meshgrid(expr):
    same(f"m = t.arange(6.).reshape(2, 3); r = {expr}")


# ---- autograd API ---------------------------------------------------------------------------

@pytest.mark.parametrize("src", [
    "r = t.autograd.grad(x * 2, x, is_grads_batched=True, grad_outputs=t.eye(2))",
    "w = t.ones(2, requires_grad=True); r = t.autograd.grad([x * 2, (x * w).sum()], [x, w], "
    "is_grads_batched=True, grad_outputs=[t.eye(2), t.tensor([1., 2.])])",
    "w = t.ones(2, requires_grad=True); r = t.autograd.grad(x * 2, [x, w], "
    "is_grads_batched=True, grad_outputs=t.eye(2), allow_unused=True)",
    "r = t.autograd.functional.jacobian(lambda a: a ** 2, x, vectorize=True)",
])
def test_grads_batched(src):
    same("x = t.tensor([1., 3.], requires_grad=True)\n" + src)


def test_backward_with_create_graph_warns_once():
    for lib in (torch, llgrad):
        if lib is llgrad:
            llgrad.runtime.functions_settings._Settings.warned_once.discard(
                "backward_create_graph")
        x = lib.ones(2, requires_grad=True)
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            for _ in range(2):
                (x ** 2).sum().backward(create_graph=True)
            lib.autograd.grad((x ** 2).sum(), x, create_graph=True)
        msgs = [str(w.message) for w in rec if "reference cycle" in str(w.message)]
        assert len(msgs) <= 1
        if lib is llgrad:
            assert len(msgs) == 1 and msgs[0].startswith(
                "Using backward() with create_graph=True will create a reference cycle")


# ---- bools: PyTorch has no bool kernel for these ------------------------------------------

@pytest.mark.parametrize("expr", [
    "b.clamp(True, True)", "b.clamp(max=False)", "b.clamp(0, 1)", "b.clamp(min=0.5)",
    "b.clamp_min(1)", "b.clamp(b, b)", "b.clip(True)", "b.clamp_(True)", "b.clamp(b)",
    "b.clamp(max=b)", "b ** True", "b ** False", "b ** 2", "b ** 1.0", "True ** b", "2 ** b",
    "b.pow(b)", "t.pow(True, b)", "b.pow_(True)", "b.fmod(b)", "b.fmod(True)", "b.fmod(2)",
    "b.remainder(True)", "b.remainder(b)", "b % b", "True % b", "b.float() ** b", "b // b",
    "b.div(True, rounding_mode='floor')",
])
def test_bool_kernels(expr):
    same(f"b = t.tensor([True, False, True]); r = {expr}")


# ---- checks in PyTorch's order and words ------------------------------------------------------

@pytest.mark.parametrize("expr", [
    "i.lerp(i, 0.5)", "i.lerp_(i, 0.5)", "i.lerp(f, 0.5)", "i.lerp_(f, 0.5)", "f.lerp(i, 0.5)",
    "f.lerp_(f, f.double())", "f.double().lerp_(f, 0.5)", "i.lerp(i, f)",
    "i.clamp_(1.5)", "i.clamp_(t.tensor(1.5))", "i.clamp_min_(1.5)", "i.clamp_max_(t.tensor(1.5))",
    "i.clamp_(1, 2.5)", "i.int().clamp_(1.5)", "i.bool().clamp_(1)", "i.clamp_(1, 2)",
    "t.tensor(2**63)", "t.tensor([1, 2**63])", "t.tensor(2**64)", "t.tensor([True, 2**63])",
    "t.tensor(2**63, dtype=t.float32)", "t.tensor([1, 2**63], dtype=t.float64)",
    "t.tensor([1.5, 2**63])", "t.tensor(-2**63 - 1, dtype=t.float64)", "t.tensor(-2**63)",
])
def test_argument_checks(expr):
    same(f"i = t.tensor([1, 2, 3]); f = t.tensor([1., 2., 3.]); r = {expr}")


# ---- comparisons with what is not a tensor or a number: NotImplemented, as PyTorch's -------

@pytest.mark.parametrize("expr", [
    "f == None", "f != None", "f == 'a'", "f == [1.5, -2.]", "f < None", "f == (1.5, 2)",
    "f > 'a'", "[1.5, -2.] == f", "f in [None]", "None in [f]", "f in (1, 'a')", "f == 1.5",
    "f != f", "0 < f", "1 == f", "f >= t.tensor(1)", "f <= True",
])
def test_comparison_with_other_objects(expr):
    same(f"f = t.tensor([1.5, -2.]); r = {expr}")
