"""Differential checks against PyTorch, tenth sweep (sweep7_harness.same: dtypes, values,
strides, grad_fn names and errors): in-place binary ops check that the operand broadcasts
into self before their dtype and kernel errors, and name themselves in their TypeErrors;
shift counts wrap into the dtype; a 0-dim bool tensor indexes as a bool; masks' errors name
the sliced shape; x[True] / x[False] = v; index_put's masked_fill path and value checks;
take_along_dim wraps indices; index_add / index_reduce bounds errors; numbers that overflow
float16 / float32 where PyTorch checks them (masked_fill(-1e9) on half); amax / argmax
errors; ravel and .T views; cat's out= TypeError; creation from ranges and None leaves;
special.entr of integers, bools and halves."""
import pytest

torch = pytest.importorskip("torch")

from sweep7_harness import same  # noqa: E402

_X = {"f": "t.tensor([1.5, -2.0])", "i": "t.tensor([1, 2])", "b": "t.tensor([True, False])",
      "z": "t.tensor(3)", "zb": "t.tensor(True)", "zf": "t.tensor(3.)"}


@pytest.mark.parametrize("op", ["floor_divide_", "__imod__", "fmod_", "remainder_",
                                "bitwise_and_", "__ixor__", "__ilshift__", "pow_",
                                "copysign_", "xlogy_", "hypot_", "igamma_", "nextafter_",
                                "logical_or_", "gcd_", "div_"])
@pytest.mark.parametrize("x,y", [("z", "t.tensor([-3, 0, 2])"), ("zf", "t.tensor([1, 0])"),
                                 ("zb", "t.tensor([True, False])"),
                                 ("i", "t.tensor([[1.], [2.]])"),
                                 ("b", "t.tensor([[1.], [0.]])")])
def test_inplace_checks_the_broadcast_first(op, x, y):
    same(f"x = {_X[x]}; r = (x.{op}({y}), x)")


@pytest.mark.parametrize("op", ["hypot_", "igamma_", "igammac_", "nextafter_", "ldexp_",
                                "logical_and_", "logical_xor_", "gcd_", "lcm_"])
@pytest.mark.parametrize("x", ["f", "i", "b"])
@pytest.mark.parametrize("y", ["2", "2.5", "True", "t.tensor(2)"])
def test_inplace_binary_operand_checks(op, x, y):
    same(f"x = {_X[x]}; r = (x.{op}({y}), x)")


def test_ldexp_cast_error_names_ldexp():
    same("r = t.ldexp(t.tensor([1, 2]), t.tensor(2), out=t.empty(2, dtype=t.long))")


@pytest.mark.parametrize("dt", ["int8", "uint8", "int32"])
@pytest.mark.parametrize("src", ["t.bitwise_left_shift(x, 2 ** 40)", "x >> 2 ** 40",
                                 "x.bitwise_right_shift(2 ** 33)", "x.__ilshift__(2 ** 40)",
                                 "2 ** 40 << x"])
def test_shift_counts_wrap_into_the_dtype(dt, src):
    same(f"x = t.tensor([-7, -1, 0, 1, 7, 127]).to(t.{dt}); r = ({src}, x)")


@pytest.mark.parametrize("idx", ["::2, 1, t.tensor(False)", ":, t.tensor(True), t.tensor(1), 1",
                                 "t.tensor([True, False]), 1, t.tensor(True)",
                                 "t.tensor(1), ..., t.tensor(1), t.tensor(False)",
                                 "t.tensor([0, 1]), t.tensor(True), False",
                                 "t.tensor(True), t.tensor([True, False, True])"])
def test_zero_dim_bool_tensor_index_among_others(idx):
    same(f"x = t.arange(120.).reshape(2, 3, 4, 5).requires_grad_(); y = x[{idx}]; "
         "y.sum().backward(); r = (y, x.grad)", strides=False)


@pytest.mark.parametrize("idx", ["1:, t.tensor([True, False])", "::2, 0, [True, False, True]",
                                 "t.tensor([True, False, True]), ::2, True",
                                 "2:0, t.tensor([[1], [0]]), t.tensor([True, False])"])
def test_mask_error_names_the_sliced_shape(idx):
    same(f"x = t.arange(120.).reshape(2, 3, 4, 5); r = x[{idx}]")


@pytest.mark.parametrize("src", [
    "x[True] = t.tensor([[1, 2, 3]])", "x[True] = t.tensor(3)", "x[False] = t.tensor(3)",
    "x[False] = t.tensor([1, 2])", "x[True, 0] = t.tensor(3)",
    "x[t.tensor([0, 1]), t.tensor([0, 1, 1])] = t.tensor(3)",
    "x[[0, 1], t.tensor([True, False, True]), ] = t.tensor([1, 2])"])
def test_setitem_of_a_lone_bool_and_index_shapes_first(src):
    same(f"x = t.arange(6.).reshape(2, 3); {src}; r = x")


def test_nonzero_of_a_vector_is_laid_out_as_pytorch():
    same("r = t.nonzero(t.tensor([1., 0., 2.]))")


@pytest.mark.parametrize("idx,dim", [("[[5]]", 1), ("[[-1, 0]]", 1), ("[[-5, 9, 100]]", -1),
                                     ("[[5]]", 0), ("[[0, 1, 2, 0], [2, 2, 0, 1]]", 1),
                                     ("[[3, 0]]", 0), ("[[-5, 9]]", None)])
def test_take_along_dim_wraps_and_broadcasts_as_pytorch(idx, dim):
    same(f"x = t.arange(12.).reshape(3, 4).requires_grad_(); "
         f"y = t.take_along_dim(x, t.tensor({idx}), {dim}); y.sum().backward(); r = (y, x.grad)")


@pytest.mark.parametrize("idx", ["(t.tensor([True, False, True]),)",
                                 "(t.tensor([[True, False, True, False]] * 3),)",
                                 "(t.tensor([0, 0, 2]),)", "(t.tensor([0, 0]), t.tensor([1, 1]))"])
@pytest.mark.parametrize("v", ["t.tensor(1)", "t.tensor([5., 6.])", "t.tensor([1., 2., 3., 4.])",
                               "t.arange(3.).reshape(3, 1)", "t.tensor(300, dtype=t.int16)"])
def test_index_put_value_checks(idx, v):
    same(f"x = t.arange(12.).reshape(3, 4); r = (x.index_put_({idx}, {v}), x)")
    same(f"x = t.arange(12).reshape(3, 4).to(t.int8); r = x.index_put({idx}, {v})")


@pytest.mark.parametrize("shape,dim", [((5,), 0), ((3, 4), 0), ((3, 4), 1), ((3, 4, 2), 1),
                                       ((3, 4, 2), 2), ((2, 2, 2, 2), 2)])
@pytest.mark.parametrize("i", [0, -1])
@pytest.mark.parametrize("call", ["index_add(d, i, s)", "index_add(d, i, s, alpha=2)",
                                  "index_reduce(d, i, s, 'prod', include_self=False)",
                                  "index_reduce(d, i, s, 'amax')"])
def test_index_add_and_index_reduce_bounds_errors(shape, dim, i, call):
    ss = [1 if k == dim else n for k, n in enumerate(shape)]
    same(f"x = t.zeros({shape}); s = t.ones({ss}); d = {dim}; "
         f"i = t.tensor([{shape[dim] if i == 0 else -shape[dim] - 1}]); r = x.{call}")


_H, _M = "t.zeros(2).half()", "t.tensor([True, False])"


@pytest.mark.parametrize("v", ["-1e9", "65504.", "65505.", "70000", "float('inf')", "t.tensor(1e9)"])
@pytest.mark.parametrize("src", [
    f"{_H}.masked_fill({_M}, v)", f"{_H}.masked_fill_({_M}, v)", f"{_H}.fill_(v)",
    "t.full((2,), v, dtype=t.float16)", f"{_H}.new_full((2,), v)", f"t.full_like({_H}, v)",
    f"{_H}.index_fill(0, t.tensor([0]), v)", f"{_H}.scatter(0, t.tensor([0]), v)",
    f"{_H}.clamp(min=v)", f"{_H}.clamp_max(v)", f"{_H} ** v", f"{_H}.pow_(v)",
    f"t.where({_M}, {_H}, v)", f"t.nan_to_num({_H}, nan=v)", f"{_H} + v",
    f"{_H}.index_put(({_M},), t.as_tensor(v))"])
def test_numbers_that_overflow_float16(src, v):
    same(f"v = {v}; r = {src}")


@pytest.mark.parametrize("src", [
    "x = t.zeros(2).half(); x[0] = -1e9; r = x", "x = t.zeros(2).half(); x[:] = 7e4; r = x",
    "r = t.zeros(2).masked_fill(t.tensor([True, False]), 1e39)",
    "r = t.zeros(2).clamp(min=1e39)", "r = t.zeros(2) ** 1e39",
    "r = t.zeros(2).add(t.zeros(2), alpha=1e39)", "r = t.zeros(2).half().sub(1., alpha=7e4)",
    "r = t.zeros(2).index_fill(0, t.tensor([0]), 1e39)",
    "r = t.zeros(2, dtype=t.int8).scatter(0, t.tensor([0]), 300)",
    "r = t.zeros(2, dtype=t.int8).fill_(t.tensor(300))",
    "r = t.tensor([1, 2], dtype=t.int8) ** 300.5", "r = t.tensor([1, 2], dtype=t.int8) ** 300",
    "r = t.tensor([1, 2], dtype=t.int8).clamp(min=1e30)"])
def test_numbers_that_overflow_float32_and_settings_that_do_not_check(src):
    same(src)


@pytest.mark.parametrize("src", ["t.amax(t.empty(0, 3), [])", "t.amin(t.empty(2, 0), [])",
                                 "t.amax(t.ones(2, 3), [])", "t.amin(t.ones(2, 3), [], True)",
                                 "t.argmax(t.ones(2, 3).bool(), 2)", "t.argmin(t.ones(2).bool(), 1)"])
def test_reduction_errors_in_pytorchs_order(src):
    same(f"r = {src}")


@pytest.mark.parametrize("x", ["t.arange(24.).reshape(2, 3, 4).transpose(0, 2)",
                               "t.arange(6.)[::2]", "t.arange(6.).reshape(2, 3)", "t.tensor(5.)"])
@pytest.mark.parametrize("op", ["x.ravel()", "t.ravel(x)", "x.T"])
def test_ravel_and_T_make_pytorchs_views(x, op):
    same(f"import warnings; warnings.simplefilter('ignore'); x = ({x}).requires_grad_(); "
         f"y = {op}; (y * t.arange(float(y.numel())).reshape(y.shape)).sum().backward(); "
         f"r = (y, x.grad, y._base is x)")


@pytest.mark.parametrize("fn", ["cat", "concat", "concatenate"])
@pytest.mark.parametrize("out", ["t.empty(3, dtype=t.long)", "t.empty(2, dtype=t.bool)",
                                 "t.empty(0)"])
def test_cat_out_cast_error_is_a_type_error(fn, out):
    same(f"o = {out}; r = (t.{fn}([t.tensor([1.5]), t.tensor([2.])], out=o), o)")


@pytest.mark.parametrize("src", [
    "t.tensor([None], dtype=t.float32)", "t.tensor([1., None], dtype=t.float64)",
    "t.tensor([[None]], dtype=t.int8)", "t.tensor([None], dtype=t.bool)",
    "t.tensor([[1, 2.5]], dtype=t.int32)", "t.Tensor(range(3))", "t.LongTensor(range(2, 5))",
    "t.zeros(2).new(range(3))"])
def test_creation_from_sequences(src):
    same(f"r = {src}")


@pytest.mark.parametrize("dt", ["uint8", "int8", "int64", "bool", "float16", "float64"])
def test_special_entr_of_integers_bools_and_halves(dt):
    same(f"r = t.special.entr(t.tensor([-3, 0, 1, 2, 127]).to(t.{dt}))")
