"""tensor_repr against PyTorch's own repr, on a stand-in tensor (no llgrad Tensor needed)."""
import numpy as np
import pytest

from llgrad.runtime.formatting import tensor_repr

nan, inf = float("nan"), float("inf")


class _DType:
    def __init__(self, npdt):
        self.name = np.dtype(npdt).name
        self.is_floating_point = np.dtype(npdt).kind == "f"


class _Stub:
    """Just the attributes tensor_repr reads."""

    def __init__(self, data, requires_grad=False, grad_fn_name=None):
        self._data = data
        self._dtype = _DType(data.dtype)
        self.requires_grad = requires_grad
        self.grad_fn = None if grad_fn_name is None else type(grad_fn_name, (), {})()
        self.is_leaf = self.grad_fn is None

    def is_inference(self):
        return False


def R(data, **kw):
    return tensor_repr(_Stub(np.asarray(data), **kw))


# ---- hand-written expectations (no torch needed) ------------------------------------------
@pytest.mark.parametrize("stub, expected", [
    (lambda: R(np.array([0.4, 12.0], np.float32)), "tensor([ 0.4000, 12.0000])"),
    (lambda: R(np.array(2.0, np.float32)), "tensor(2.)"),
    (lambda: R(np.array([1, 2])), "tensor([1, 2])"),
    (lambda: R(np.array([1.0, 2.0])), "tensor([1., 2.], dtype=llgrad.float64)"),
    (lambda: R(np.array([True, False])), "tensor([ True, False])"),
    (lambda: R(np.zeros(0, np.float32)), "tensor([])"),
    (lambda: R(np.zeros((0, 3), np.int64)), "tensor([], size=(0, 3), dtype=llgrad.int64)"),
    (lambda: R(np.array([1e-5, 1.0], np.float32)), "tensor([1.0000e-05, 1.0000e+00])"),
    (lambda: R(np.array([nan, -inf, 1.5], np.float32)), "tensor([   nan,   -inf, 1.5000])"),
    (lambda: R(np.array([[1, -2], [3, 4]], np.int32)),
     "tensor([[ 1, -2],\n        [ 3,  4]], dtype=llgrad.int32)"),
    (lambda: R(np.array([1.0, 2.0], np.float32), requires_grad=True),
     "tensor([1., 2.], requires_grad=True)"),
    (lambda: R(np.array([2.0, 4.0], np.float32), requires_grad=True, grad_fn_name="MulBackward0"),
     "tensor([2., 4.], grad_fn=<MulBackward0>)"),
    (lambda: R(np.arange(2000, dtype=np.int64)), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"),
])
def test_handwritten(stub, expected):
    assert stub() == expected


# ---- against torch ------------------------------------------------------------------------
rng = np.random.default_rng(0)
f32, f64 = np.float32, np.float64

ARRAYS = {
    "scalar_f32": np.array(3.25, f32),
    "scalar_neg_int_float": np.array(-7.0, f32),
    "scalar_f64": np.array(0.1, f64),
    "scalar_int": np.array(-42),
    "scalar_bool": np.array(True),
    "scalar_nan": np.array(nan, f32),
    "scalar_sci": np.array(1.5e-7, f32),
    "scalar_neg_zero": np.array(-0.0, f32),
    "vec_int_valued": np.array([1.0, 2.0, -3.0], f32),
    "vec_mixed": np.array([0.5, -1.25, 100.0], f32),
    "vec_random": rng.standard_normal(7).astype(f32),
    "vec_f64_random": rng.standard_normal(5),
    "vec_f16": np.array([0.1, 2.5, -3.0], np.float16),
    "vec_sci_large": np.array([1e9, 1.0, 2.5], f32),
    "vec_sci_ratio": np.array([0.001, 5.0], f32),
    "vec_sci_int_valued": np.array([1e10, 3.0], f32),
    "vec_huge_f64": np.array([1e300, 1e-300]),
    "vec_nan_inf": np.array([nan, inf, -inf, 1.0], f32),
    "vec_all_nonfinite": np.array([nan, inf], f32),
    "vec_zeros": np.zeros(4, f32),
    "vec_neg_zero": np.array([-0.0, 0.0, 1.5], f32),
    "vec_bool": np.array([True, False, True]),
    "vec_uint8": np.array([0, 255, 7], np.uint8),
    "vec_int8": np.array([-128, 5, 127], np.int8),
    "vec_int16": np.array([-1, 300], np.int16),
    "vec_big_int": np.array([2**62, -1]),
    "vec_wrap_float": rng.standard_normal(40).astype(f32) * 100,
    "vec_wrap_int": np.arange(100),
    "vec_wrap_bool": rng.random(50) > 0.5,
    "vec_summarised": np.linspace(-1, 1, 2001, dtype=f32),
    "vec_summarised_f64": np.arange(5000) * 0.5,
    "mat_small": np.arange(6, dtype=f32).reshape(2, 3) / 4,
    "mat_transposed": (np.arange(12, dtype=f32).reshape(3, 4) - 5).T,
    "mat_wide_wrap": rng.standard_normal((3, 30)).astype(f32),
    "mat_int_wide": np.arange(90).reshape(3, 30) * 1001,
    "mat_sci": np.array([[1e-8, 1.0], [2.0, 3.0]], f32),
    "mat_nan": np.array([[nan, 1.0], [2.5, -inf]], f32),
    "mat_summarised": rng.standard_normal((40, 40)).astype(f32),
    "mat_summarised_rows_only": np.arange(3000, dtype=f32).reshape(1000, 3),
    "mat_summarised_cols_only": np.arange(3000).reshape(3, 1000),
    "mat_bool": np.eye(3, dtype=bool),
    "t3": np.arange(24, dtype=f32).reshape(2, 3, 4) - 10,
    "t3_summarised": rng.standard_normal((10, 11, 12)).astype(f32),
    "t4": np.arange(16).reshape(2, 2, 2, 2),
    "t4_f64": np.arange(16, dtype=f64).reshape(2, 2, 2, 2) / 3,
    "t4_summarised": np.arange(8 * 8 * 4 * 5, dtype=f32).reshape(8, 8, 4, 5),
    "strided_view": np.arange(20, dtype=f32)[::3],
    "size1_dims": np.array([[[5.5]]], f32),
    # "torch." is one char shorter than "llgrad.": the dtype suffix must still stay on this line
    "suffix_boundary_f16": np.array([[-0., inf, -0., -0., 0., -0., -0., -0., -0., 0.]], np.float16),
    "empty_f32": np.zeros(0, f32),
    "empty_f64": np.zeros(0, f64),
    "empty_int": np.zeros(0, np.int64),
    "empty_bool": np.zeros(0, bool),
    "empty_2d": np.zeros((0, 3), f32),
    "empty_3d_int32": np.zeros((2, 0, 4), np.int32),
}


def _torch_repr(tt):
    return repr(tt).replace("torch.", "llgrad.")


@pytest.mark.parametrize("name", list(ARRAYS))
def test_matches_torch(name):
    torch = pytest.importorskip("torch")
    a = ARRAYS[name]
    tt = torch.from_numpy(np.array(a, order="C"))   # a C-ordered copy, 0-d kept
    assert R(a) == _torch_repr(tt)


# Autograd suffixes: build the tensor in torch, then mirror its state in the stub.
GRAD_CASES = {
    "leaf_requires_grad": lambda t: t.tensor([1.0, 2.5], requires_grad=True),
    "leaf_f64": lambda t: t.tensor([1.0, 2.0], dtype=t.float64, requires_grad=True),
    "mul": lambda t: t.tensor([1.0, 2.0], requires_grad=True) * 2,
    "mul_f64": lambda t: t.tensor([0.5, 2.0], dtype=t.float64, requires_grad=True) * 3,
    "sum_scalar": lambda t: t.tensor([1.0, 2.0], requires_grad=True).sum(),
    "add_matrix": lambda t: t.ones(3, 4, requires_grad=True) + 0.5,
    "wide_suffix_newline": lambda t: t.linspace(0, 1, 9, requires_grad=True) * 1.234567,
    "wide_dtype_and_grad": lambda t: t.linspace(0, 1, 8, dtype=t.float64,
                                                requires_grad=True) * 1.234567,
    "view_grad_fn": lambda t: t.arange(6.0, requires_grad=True).view(2, 3),
    "summarised_grad": lambda t: t.arange(2000.0, requires_grad=True) * 0.001,
    "empty_grad": lambda t: t.zeros(0, 2, requires_grad=True) * 2,
    "detached": lambda t: (t.tensor([1.0], requires_grad=True) * 2).detach(),
}


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_matches_torch_autograd(name):
    torch = pytest.importorskip("torch")
    tt = GRAD_CASES[name](torch)
    fn = None if tt.grad_fn is None else type(tt.grad_fn).__name__
    stub = _Stub(tt.detach().numpy(), requires_grad=tt.requires_grad, grad_fn_name=fn)
    assert tensor_repr(stub) == _torch_repr(tt)


def test_suffix_wraps_to_new_line():
    torch = pytest.importorskip("torch")
    tt = torch.linspace(0, 1, 9, requires_grad=True) * 1.234567
    assert "\n       grad_fn=<MulBackward0>)" in _torch_repr(tt)   # the case really wraps
