"""str() / repr() / f-string text of real llgrad tensors against PyTorch's (s75, L): every
dtype, 0-d and empty shapes, the summarisation threshold, line wrapping, scientific notation,
-0.0 / nan / inf, autograd suffixes, views, Parameters, torch.Size / dtype / device, the print
options and format specs. Each case builds its value with `T` (llgrad or torch); the texts must
be equal with "torch." spelled "llgrad." (tests/runtime/test_repr.py covers the formatter on
stand-in arrays; this file goes through the public API)."""
import math

import pytest

import llgrad

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64", "complex64", "complex128"]
nan, inf = float("nan"), float("inf")


@pytest.fixture(autouse=True)
def _default_print_options():
    yield
    llgrad.set_printoptions(profile="default", sci_mode=None)
    torch = pytest.importorskip("torch")
    torch.set_printoptions(profile="default", sci_mode=None)


def _same(make):
    torch = pytest.importorskip("torch")
    want = make(torch).replace("torch.", "llgrad.")
    torch.set_printoptions(profile="default", sci_mode=None)
    got = make(llgrad)
    assert got == want


def _reprs(*makers):
    return lambda T: "\n".join(repr(m(T)) for m in makers)


def _with_options(options, make):
    def run(T):
        T.set_printoptions(**options)
        try:
            return make(T)
        finally:
            T.set_printoptions(profile="default", sci_mode=None)
    return run


def _sample(T):
    """Values whose text every print option changes."""
    x = T.tensor([[math.pi, 1e-3, 12345.678], [2.0, -0.5, 7.25]])
    return "\n".join(repr(v) for v in [
        x, T.arange(30.) / 7, T.arange(2000.), T.tensor([1.0, 2.0]), T.tensor(math.pi),
        T.tensor([1e-8, 1.0]), T.arange(12).reshape(3, 4), T.arange(24.).reshape(2, 3, 4) + .5,
        T.tensor([1.5, 2.5], dtype=T.float64, requires_grad=True) * 2])


CASES = {
    # ---- dtypes ----------------------------------------------------------------------------
    "every_dtype_vector_scalar_empty": lambda T: "\n".join(
        f"{getattr(T, d)} {T.tensor([1, 0, 3], dtype=getattr(T, d))!r} "
        f"{T.tensor(5, dtype=getattr(T, d))!r} {T.zeros(0, dtype=getattr(T, d))!r} "
        f"{T.zeros(2, 0, 3, dtype=getattr(T, d))!r}" for d in DTYPES),
    "float_dtypes_fractions": lambda T: "\n".join(
        f"{T.tensor([1.5, -0.25, 3.125], dtype=getattr(T, d))!r} "
        f"{T.tensor([1e-5, 1e3], dtype=getattr(T, d))!r}" for d in DTYPES[6:]),
    "half_bfloat16_edges": lambda T: "\n".join(
        repr(T.tensor(v, dtype=d)) for d in (T.float16, T.bfloat16)
        for v in ([65504., 1.], [1e-3, 3.3333], [1 / 3, 2 / 3, 1.], [256.5, 1000.25],
                  [1e-7, 1.0], [nan, 0.1])),
    "complex_values": _reprs(
        lambda T: T.tensor([1 + 2j, -3.5 - 0.5j]), lambda T: T.tensor([1e-6 + 1j, 2j]),
        lambda T: T.tensor([complex(nan, 1), complex(inf, -2)]), lambda T: T.tensor(1 + 1j),
        lambda T: T.tensor([[1 + 1j, 100 + 0.5j], [1e-5j, -2]]),
        lambda T: T.tensor([1 + 2j, 3 - 4j], dtype=T.complex128),
        lambda T: T.tensor([1 + 2j] * 30), lambda T: T.complex(T.arange(1200.), -T.arange(1200.) / 3)),
    "ints_wide_and_extreme": _reprs(
        lambda T: -T.arange(50) * 12345, lambda T: T.tensor([-2 ** 63, 2 ** 63 - 1]),
        lambda T: T.arange(40).reshape(2, 20) % 3 == 0,
        lambda T: T.tensor([-128, 5, 127], dtype=T.int8)),
    # ---- shapes and summarisation ----------------------------------------------------------
    "threshold_1000_1001": _reprs(
        lambda T: T.arange(1000.), lambda T: T.arange(1001.),
        lambda T: T.arange(1001).reshape(7, 143), lambda T: T.ones(1001, dtype=T.bool),
        lambda T: T.ones(1001, dtype=T.float16)),
    "edgeitems_boundary": _reprs(lambda T: T.arange(6), lambda T: T.arange(7),
                                 lambda T: T.arange(7 * 11 * 13).reshape(7, 11, 13),
                                 lambda T: T.arange(2000.).reshape(2, 500, 2)),
    "empty_shapes": _reprs(
        lambda T: T.zeros(0), lambda T: T.zeros(2, 0, 3), lambda T: T.zeros(0, dtype=T.int64),
        lambda T: T.zeros(0, 2, requires_grad=True) * 2, lambda T: T.tensor([]),
        lambda T: T.zeros(0, dtype=T.float64)),
    "zero_dim": _reprs(lambda T: T.tensor(3.25), lambda T: T.tensor(-7.), lambda T: T.tensor(2),
                       lambda T: T.tensor(True), lambda T: T.tensor(1.5e-7),
                       lambda T: T.tensor(0.1, dtype=T.float64), lambda T: T.tensor(-0.0)),
    # ---- values ----------------------------------------------------------------------------
    "neg_zero_nan_inf_tiny_huge": _reprs(
        lambda T: T.tensor([-0.0]), lambda T: T.tensor([-0.0, 1.5]), lambda T: T.tensor([nan]),
        lambda T: T.tensor([inf, -inf]), lambda T: T.tensor([1e-40, 1.0]),
        lambda T: T.tensor([3e38, 1.0]), lambda T: T.tensor([nan, 1., 2.]),
        lambda T: T.tensor([inf, 1e9]), lambda T: T.tensor([0.0, 1e-45])),
    "sci_switch_points": _reprs(
        lambda T: T.tensor([1e8, 2.]), lambda T: T.tensor([99999999.]),
        lambda T: T.tensor([1e3, 1e-1]), lambda T: T.tensor([1000.0, 0.999]),
        lambda T: T.tensor([1e-4]), lambda T: T.tensor([9.9e-5, 1.]),
        lambda T: T.tensor([123456.0, 1.0]), lambda T: T.tensor([100000.5])),
    "float64_extremes": _reprs(lambda T: T.tensor([1e-300, 1e300], dtype=T.float64),
                               lambda T: T.tensor([12345678.9], dtype=T.float64),
                               lambda T: T.tensor([1e16], dtype=T.float64)),
    "integers_stored_as_floats": _reprs(lambda T: T.tensor([1., 2.]),
                                        lambda T: T.tensor([1., 2.], dtype=T.float64),
                                        lambda T: T.arange(6.).reshape(2, 3) - 2),
    "wide_rows_wrap": _reprs(lambda T: T.arange(30.) / 7, lambda T: T.arange(100),
                             lambda T: T.arange(90).reshape(3, 30) * 1001,
                             lambda T: (T.arange(48.).reshape(4, 12) - 20) * 1e5),
    # ---- autograd, views, Parameters -------------------------------------------------------
    "requires_grad_and_grad_fn": lambda T: (lambda a: "\n".join(repr(v) for v in [
        a, a + 1, a * 2, (a ** 2).sum(), a.mean(), a.exp(), T.relu(a), a @ a, a.sigmoid(),
        T.cat([a, a]), T.stack([a, a]), a.detach(), a.to(T.float64), a.clone()]))(
            T.tensor([1., 2.], requires_grad=True)),
    "grad_fn_of_views": lambda T: (lambda x: "\n".join(repr(v) for v in [
        x.view(2, 3), x[1:4], x.reshape(3, 2).t(), x.narrow(0, 1, 2), x.unsqueeze(0),
        x.expand(2, 6), x.unbind(0)[0], x.split(3)[1], x.select(0, 2), x.squeeze()]))(
            T.arange(6., requires_grad=True)),
    "grad_and_no_grad": lambda T: _grad_and_no_grad(T),
    "views_without_grad": lambda T: (lambda x: "\n".join(repr(v) for v in [
        x.t(), x[:, 1], x[::2, ::3], x.permute(1, 0)[1:], x[0].expand(2, 4), x.diagonal(),
        x.narrow(1, 1, 2), x.unsqueeze(1), x.flip(0)]))(T.arange(12.).reshape(3, 4)),
    "parameter": _reprs(lambda T: T.nn.Parameter(T.tensor([1., 2.])),
                        lambda T: T.nn.Parameter(T.ones(2, 2), requires_grad=False),
                        lambda T: T.nn.Parameter(T.tensor([1., 2.], dtype=T.float64)),
                        lambda T: T.nn.Parameter(T.tensor(3.)),
                        lambda T: T.nn.Parameter(T.tensor([], dtype=T.float64))),
    "parameter_str_and_list": lambda T: (lambda m: "\n".join(str(v) for v in [
        list(m.parameters()), m.weight, m.weight.grad, m.bias, m.weight.data, m.weight * 2,
        m.weight[0], m.weight.T]))(_filled_linear(T)),
    # ---- Size, dtype, device, type ---------------------------------------------------------
    "size_dtype_device": lambda T: (lambda x: "\n".join(str(v) for v in [
        repr(x.shape), x.shape, x.size(), repr(T.Size([])), x.shape[1:], T.Size([2]) + (3,),
        repr(x.device), x.device, repr(x.dtype), T.device("cpu"), x.layout, x.stride(),
        T.finfo(T.float32), T.iinfo(T.int8), T.get_default_dtype(), x.type(),
        T.zeros(1, dtype=T.bfloat16).type()]))(T.zeros(2, 3)),
    "type_of_tensor_size_dtype": lambda T: "\n".join(
        str(type(v)) + " " + T.typename(v) for v in [
            T.zeros(2), T.Size([1]), T.float32, T.device("cpu"), T.finfo(T.float32),
            T.iinfo(T.int8), T.strided, T.contiguous_format]) + str(T.Tensor),
    # ---- format specs ----------------------------------------------------------------------
    "format_specs": lambda T: (lambda loss, x, i: "|".join([
        f"{loss:.4f}", f"{loss.item():>8.3f}", "{}".format(x), f"{x}", f"{loss}", f"{loss:}",
        "{:.2f}".format(loss), f"{i}", f"{i:d}", f"{i:5d}", f"{i:03d}", f"{i:x}", f"{loss:e}",
        f"{loss!r}", f"{loss:10.2f}", f"{loss:+.3e}", f"{loss:g}", f"{loss:%}", format(loss),
        "%.3f" % loss.item(), "%s" % x, f"{T.tensor(True)}",
        f"{T.tensor(1.5, requires_grad=True) * 2:.1f}"]))(
            T.tensor(0.123456), T.tensor([1.5, 2.5]), T.tensor(42)),
    "format_spec_errors": lambda T: "\n".join(_format_error(v, spec) for v, spec in [
        (T.tensor([1., 2.]), ".2f"), (T.tensor([[1]]), "d"), (T.tensor(1.5), "d"),
        (T.tensor(True), ".2f")]),
    "containers_and_items": lambda T: "\n".join(str(v) for v in [
        [T.tensor(1.), T.tensor([2, 3])], (T.tensor(0.5),), {"a": T.tensor([1.5])},
        T.tensor([0.1, 0.2]).tolist(), T.tensor(1.5).item(), T.tensor(2).item(),
        T.tensor(1 + 2j).item(), T.tensor(0.1, dtype=T.float16).item(),
        T.tensor([0.1], dtype=T.bfloat16).tolist()]),
    "return_types": lambda T: (lambda x: "\n".join(repr(v) for v in [
        x.max(dim=0), x.sort(), x.topk(1), x.median(0), x.aminmax(), T.var_mean(x, 0),
        x.unique(return_counts=True), T.linalg.eigh(x + x.T)]))(
            T.tensor([[1., 5.], [3., 2.]], requires_grad=True)),
    "sparse_coo": _reprs(
        lambda T: T.sparse_coo_tensor(T.tensor([[0, 1, 1], [2, 0, 2]]), T.tensor([3., 4., 5.]),
                                      (2, 3)),
        lambda T: T.sparse_coo_tensor(T.tensor([[0], [1]]), T.tensor([7]), (2, 2)),
        lambda T: T.tensor([[0., 2.], [3., 0.]], dtype=T.float64).to_sparse().requires_grad_(),
        lambda T: T.sparse_coo_tensor(T.tensor([[0, 1], [1, 0]]),
                                      T.tensor([[1., 2.], [3., 4.]]), (2, 2, 2)).coalesce()),
    # ---- print options ---------------------------------------------------------------------
    "opt_precision_2": _with_options({"precision": 2}, _sample),
    "opt_precision_0": _with_options({"precision": 0}, _sample),
    "opt_precision_8": _with_options({"precision": 8}, _sample),
    "opt_threshold_5": _with_options({"threshold": 5}, _sample),
    "opt_edgeitems_1": _with_options({"threshold": 5, "edgeitems": 1}, _sample),
    "opt_linewidth_40": _with_options({"linewidth": 40}, _sample),
    "opt_linewidth_20_suffix": _with_options({"linewidth": 20}, _sample),
    "opt_linewidth_200": _with_options({"linewidth": 200}, _sample),
    "opt_sci_true": _with_options({"sci_mode": True}, _sample),
    "opt_sci_false": _with_options({"sci_mode": False}, _sample),
    "opt_profile_full": _with_options({"profile": "full"}, _sample),
    "opt_profile_short": _with_options({"profile": "short"}, _sample),
    "opt_threshold_inf": _with_options({"threshold": math.inf},
                                       lambda T: repr(T.arange(1200).reshape(2, 600))),
    "opt_sci_then_precision": lambda T: (T.set_printoptions(sci_mode=True),
                                         T.set_printoptions(precision=3),
                                         repr(T.tensor([math.pi, 1.0])))[2],
    "opt_short_parameter": _with_options(
        {"profile": "short"}, lambda T: repr(T.nn.Parameter(T.arange(12.).reshape(3, 4) / 3))),
    "opt_sci_ints_zeros": _with_options({"precision": 2, "sci_mode": True}, _reprs(
        lambda T: T.tensor([1, 2]), lambda T: T.tensor([0., 0.]),
        lambda T: T.tensor([1.5, nan]), lambda T: T.tensor([1 + 2j, 3.5j]))),
}


def _filled_linear(T):
    m = T.nn.Linear(2, 1)
    with T.no_grad():
        m.weight.fill_(0.5)
        m.bias.fill_(-1.)
    m(T.ones(3, 2)).sum().backward()
    return m


def _grad_and_no_grad(T):
    x = T.tensor([1., 2.], requires_grad=True)
    (x * x).sum().backward()
    with T.no_grad():
        y = x * 2
    with T.inference_mode():
        z = T.ones(2) + 1
    return "\n".join(repr(v) for v in [x, x.grad, y, z, T.tensor([1.]).grad,
                                        x.detach().requires_grad_()])


def _format_error(v, spec):
    try:
        return format(v, spec)
    except Exception as e:          # noqa: BLE001  (the error's text is compared)
        return f"{type(e).__name__}: {e}"


@pytest.mark.filterwarnings("ignore:Sparse invariant checks")
@pytest.mark.parametrize("name", list(CASES))
def test_text_matches_torch(name):
    _same(CASES[name])


# ---- finding 1 (fixed): set_printoptions(edgeitems=0) -------------------------------------
# torch names the size of every non-empty tensor (`size=(2, 3)`, before `dtype=`) and a
# summarised tensor shows "[...]"; llgrad printed "[ ...]" and no size.
def test_edgeitems_zero_names_the_size():
    _same(_with_options({"edgeitems": 0}, _reprs(
        lambda T: T.arange(2000), lambda T: T.arange(2000.).reshape(40, 50),
        lambda T: T.tensor([1., 2.]), lambda T: T.tensor(True),
        lambda T: T.tensor([1.5], dtype=T.float64, requires_grad=True),
        lambda T: T.zeros(2, 0), lambda T: T.complex(T.arange(1200.), -T.arange(1200.) / 3))))


def test_edgeitems_zero_handwritten():
    llgrad.set_printoptions(edgeitems=0, threshold=5)
    assert repr(llgrad.arange(30.)) == "tensor([...], size=(30,))"
    assert repr(llgrad.arange(6).reshape(2, 3).to(llgrad.int32)) == \
        "tensor([...], size=(2, 3), dtype=llgrad.int32)"


# ---- finding 2 (fixed): type(x) printed <class 'llgrad.runtime.tensor.Tensor'> ---------------
def test_type_of_tensor_prints_like_torch():
    x = llgrad.zeros(2)
    assert str(type(x)) == "<class 'llgrad.Tensor'>"
    assert str(type(x.shape)) == "<class 'llgrad.Size'>"
    assert str(type(x.dtype)) == "<class 'llgrad.dtype'>"
    assert llgrad.typename(llgrad.Tensor) == "llgrad.Tensor"
