"""OpInfo sweep 13 (D): PyTorch's error_inputs over op_db, and the linalg / special ops'
forwards and float64 gradients, against torch. Found and fixed here (the first ones silently
gave a value where torch raises): convolutions with a negative or zero dilation, a negative
padding of the transposed ones (and a zero stride or groups: ZeroDivisionError);
index_add / index_copy of a source of fewer dims (broadcast into every slice, in place
too); layer_norm / rms_norm over normalized_shape () (all zeros / the input); avg_pool1d/2d's
negative padding; prelu's 2-d weight; roll((), ()) (unrolled); a write into an as_strided
view whose elements repeat (one of the values kept); multi_margin_loss's float target;
out= of another dtype for aminmax and multinomial; linspace / logspace of 1-d bounds
(NumPy's words); roll of a 0-d tensor's dim; diagonal over one dim twice and unbind of a
0-d tensor (NumPy's / Python's words); linalg.tensorsolve with dims (refused: "6 != 6"),
linalg.vander of a 0-d x (refused) and of a bool x (computed), pinv(hermitian=True) of an
empty matrix (IndexError).
Each case: torch's exception type and first line (or values), eagerly and compiled."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _outcome(fn, lib, compiled=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r = llgrad.compile(fn)(lib) if compiled else fn(lib)
        except Exception as e:      # noqa: BLE001 (the exception is what is compared)
            return type(e).__name__, (str(e).splitlines() or [""])[0].replace("llgrad", "torch")
    if isinstance(r, (tuple, list)):
        return "ok", [x.tolist() if hasattr(x, "tolist") else x for x in r]
    return "ok", r.tolist() if hasattr(r, "tolist") else r


def _same(fn, compiled=True):
    want = _outcome(fn, torch)
    assert _outcome(fn, llgrad) == want
    if compiled:
        assert _outcome(fn, llgrad, compiled=True) == want


def _F(t):
    return t.nn.functional


_X = np.random.default_rng(13).standard_normal((1, 2, 6, 6))
_W = np.random.default_rng(14).standard_normal((2, 2, 2, 2))


def _conv(name, **kw):
    def fn(t):
        x, w = t.tensor(_X), t.tensor(_W)
        if name.endswith("1d"):
            x, w = x[:, :, 0], w[:, :, 0]
        return getattr(_F(t), name)(x, w, **kw)
    return fn


_CONV = {f"{n}-{k}={v}": _conv(n, **{k: v})
         for n in ("conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d")
         for k, v in (("dilation", -1), ("dilation", 0), ("stride", 0), ("padding", -1),
                      ("groups", 0))}
_CONV["conv2d-dilation=(1,-1)"] = _conv("conv2d", dilation=(1, -1))
_CONV["conv_transpose2d-output_padding=-1"] = _conv("conv_transpose2d", output_padding=-1)
_CONV["conv2d-float32-dilation=0"] = lambda t: _F(t).conv2d(
    t.ones(1, 2, 4, 4), t.ones(2, 2, 2, 2), dilation=0)


@pytest.mark.parametrize("case", sorted(_CONV))
def test_conv_numbers_refused_as_torch(case):
    _same(_CONV[case], compiled=case.startswith("conv2d-dil"))


def test_conv_good_numbers_still_agree():
    fn = _conv("conv2d", dilation=2, stride=(1, 2), padding=1)
    got = _outcome(fn, llgrad)
    want = _outcome(fn, torch)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-10)


# ---- index_add / index_copy: source shapes ----------------------------------------------------
_M = [[1., 2.], [4., 5.], [7., 8.]]
_INDEX = {
    "index_add_1d_source": lambda t: t.tensor(_M).index_add(0, t.tensor([0, 2]),
                                                            t.tensor([2., 4.])),
    "index_add_0d_source": lambda t: t.tensor(_M).index_add(0, t.tensor([0]), t.tensor(2.)),
    "index_add_dim1_ok": lambda t: t.tensor(_M).index_add(1, t.tensor([1]), t.ones(3, 1)),
    "index_copy_1d_source": lambda t: t.tensor(_M).index_copy(0, t.tensor([0, 2]),
                                                               t.tensor([2., 4.])),
    "index_copy_0d_two_indices": lambda t: t.tensor(_M).index_copy(0, t.tensor([0, 2]),
                                                                    t.tensor(2.)),
    "index_copy_0d_source": lambda t: t.tensor(_M).index_copy(0, t.tensor([0]), t.tensor(2.)),
    "index_copy_slices": lambda t: t.zeros(3, 4, 5).index_copy(
        0, t.tensor([0, 1]), t.zeros(2, 4, 6)),
    "index_copy_count": lambda t: t.zeros(3, 2).index_copy(0, t.tensor([0, 1]),
                                                           t.ones(3, 2)),
    "index_copy_1d_self_0d_source": lambda t: t.zeros(3).index_copy(0, t.tensor([1]),
                                                                     t.tensor(2.)),
    "index_copy_ok": lambda t: t.zeros(3, 2).index_copy(0, t.tensor([2, 0]), t.ones(2, 2)),
}


@pytest.mark.parametrize("case", sorted(_INDEX))
def test_index_add_copy_source_shapes(case):
    _same(_INDEX[case], compiled=case == "index_add_1d_source")


@pytest.mark.parametrize("name", ["index_add_", "index_copy_"])
def test_inplace_refused_leaves_self_unchanged(name):
    for t in (torch, llgrad):
        x = t.tensor(_M)
        with pytest.raises((RuntimeError, IndexError)):
            getattr(x, name)(0, t.tensor([0, 2]), t.tensor([2., 4.]))
        assert x.tolist() == _M and x._version == 0


# ---- norms, pools, prelu ---------------------------------------------------------------------
_NN = {
    "layer_norm_empty_shape": lambda t: _F(t).layer_norm(t.ones(2, 3), ()),
    "native_layer_norm_empty_shape": lambda t: t.native_layer_norm(
        t.ones(2, 3), (), None, None, 1e-5)[0],
    "rms_norm_empty_shape": lambda t: _F(t).rms_norm(t.ones(2, 3), ()),
    "LayerNorm_empty_shape": lambda t: t.nn.LayerNorm(())(t.ones(2, 3)),
    "avg_pool1d_negative_pad": lambda t: _F(t).avg_pool1d(t.ones(1, 1, 9), 2, 1, -1),
    "avg_pool1d_negative_pad_empty": lambda t: _F(t).avg_pool1d(t.ones(0, 1, 49), 2, 50, -1),
    "avg_pool2d_negative_pad": lambda t: _F(t).avg_pool2d(t.ones(1, 1, 9, 9), 2, 1, (0, -1)),
    "prelu_2d_weight": lambda t: _F(t).prelu(t.ones(2, 8, 3), t.ones(2, 4)),
    "prelu_1x1_weight": lambda t: _F(t).prelu(t.ones(2, 2), t.ones(1, 1)),
    "prelu_0d_input": lambda t: _F(t).prelu(t.tensor(1.), t.ones(2)),
    "prelu_ok": lambda t: _F(t).prelu(t.tensor([[-1., 2.], [3., -4.]]), t.tensor([.5, .25])),
    "multi_margin_float_target": lambda t: _F(t).multi_margin_loss(t.ones(3, 4),
                                                                   t.tensor([1., 2., 0.])),
    "multi_margin_int32_target": lambda t: _F(t).multi_margin_loss(
        t.ones(3, 4), t.tensor([1, 2, 0], dtype=t.int32)),
}


@pytest.mark.parametrize("case", sorted(_NN))
def test_nn_functional_refusals(case):
    _same(_NN[case], compiled=case in ("layer_norm_empty_shape", "prelu_2d_weight",
                                       "avg_pool1d_negative_pad"))


# ---- shapes, ranges, out= ---------------------------------------------------------------------
_MISC = {
    "roll_no_shifts": lambda t: t.ones(3).roll((), ()),
    "roll_0d_dim": lambda t: t.tensor(1.).roll(1, 0),
    "roll_0d_flat": lambda t: t.tensor(1.).roll(1),
    "roll_one_shift_no_dims": lambda t: t.arange(4).reshape(2, 2).roll(1, ()),
    "linspace_1d_bounds": lambda t: t.linspace(t.tensor([1., 2.]), t.tensor([3., 4.]), 5),
    "linspace_1d_end": lambda t: t.linspace(0, t.tensor([[3.]]), 5),
    "linspace_0d_bounds": lambda t: t.linspace(t.tensor(1.), t.tensor(3.), 3),
    "logspace_1d_start": lambda t: t.logspace(t.tensor([1.]), 3, 5),
    "aminmax_out_dtype": lambda t: t.aminmax(t.ones(4, 4), dim=0,
                                             out=(t.zeros(4), t.zeros(4, dtype=t.float64))),
    "multinomial_out_dtype": lambda t: t.multinomial(t.ones(1, 2), 2,
                                                     out=t.zeros(1, 2, dtype=t.float64)),
    "multinomial_out_int32": lambda t: t.multinomial(t.ones(1, 2), 2,
                                                     out=t.zeros(1, 2, dtype=t.int32)),
}


@pytest.mark.parametrize("case", sorted(_MISC))
def test_shapes_ranges_out_refusals(case):
    _same(_MISC[case], compiled=case in ("roll_no_shifts", "roll_0d_dim"))


# ---- linalg ----------------------------------------------------------------------------------
_LA = np.random.default_rng(15)
_A3, _B2 = _LA.standard_normal((2, 3, 6)), _LA.standard_normal((2, 3))
_A4, _B34 = _LA.standard_normal((3, 4, 4, 3)), _LA.standard_normal((3, 4))


def _close(fn, compiled=False):
    want = fn(torch)
    got = (llgrad.compile(fn) if compiled else fn)(llgrad)
    assert tuple(got.shape) == tuple(want.shape) and str(got.dtype)[7:] == str(want.dtype)[6:]
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-9,
                               atol=1e-12)


def test_tensorsolve_dims():
    _close(lambda t: t.linalg.tensorsolve(t.tensor(_A3), t.tensor(_B2), dims=(0, 2)))
    _close(lambda t: t.linalg.tensorsolve(t.tensor(_A4), t.tensor(_B34), dims=(0, 2)))
    _same(lambda t: t.linalg.tensorsolve(t.tensor(_A3), t.tensor(_B2).reshape(3, 2)).shape,
          compiled=False)
    _same(lambda t: t.linalg.tensorsolve(t.ones(6, 2, 3), t.ones(4, 2)), compiled=False)


def test_tensorsolve_dims_gradient():
    def fn(t):
        a = t.tensor(_A3, requires_grad=True)
        b = t.tensor(_B2, requires_grad=True)
        x = t.linalg.tensorsolve(a, b, dims=(0, 2))
        return t.autograd.grad((x * t.arange(6.).double()).sum(), [a, b])
    for w, g in zip(fn(torch), fn(llgrad)):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("case", ["0d", "bool", "uint8", "N1"])
def test_vander(case):
    x = {"0d": lambda t: t.tensor(2.), "bool": lambda t: t.tensor([True, False]),
         "uint8": lambda t: t.tensor([2, 3], dtype=t.uint8), "N1": lambda t: t.ones(2)}[case]
    _same(lambda t: t.linalg.vander(x(t), N=1 if case == "N1" else 3), compiled=False)
    if case == "uint8":
        assert llgrad.linalg.vander(x(llgrad), N=3).dtype == llgrad.int64


@pytest.mark.parametrize("shape", [(0, 0), (3, 0), (2, 0, 0)])
def test_pinv_hermitian_empty(shape):
    _same(lambda t: list(t.linalg.pinv(t.zeros(shape, dtype=t.float64), hermitian=True).shape),
          compiled=False)


@pytest.mark.slow
def test_pinv_hermitian_gradient():
    a = np.random.default_rng(16).standard_normal((4, 4))
    a = a + a.T
    g = np.random.default_rng(17).standard_normal((4, 4))

    def grad(t):
        x = t.tensor(a, requires_grad=True)
        return t.autograd.grad(t.linalg.pinv(x, hermitian=True), x, t.tensor(g))[0].numpy()
    np.testing.assert_allclose(grad(llgrad), grad(torch), rtol=1e-8, atol=1e-10)


# ---- writes into a view whose elements repeat (as_strided with a zero stride) -----------------
_REPEATED = {
    "add_": lambda t, v: v.add_(1),
    "out=": lambda t, v: t.add(t.ones(3), 1, out=v),
    "copy_": lambda t, v: v.copy_(t.ones(3)),
    "clamp_": lambda t, v: v.clamp_(0, 1),
    "fill_": lambda t, v: v.fill_(2),
    "zero_": lambda t, v: v.zero_(),
    "one_element": lambda t, v: v[0].add_(1),
}


@pytest.mark.parametrize("case", sorted(_REPEATED))
def test_write_into_repeated_elements(case):
    def fn(t):
        b = t.zeros(2)
        _REPEATED[case](t, b.as_strided((3,), (0,)))
        return b
    _same(fn, compiled=False)
    if case == "add_":      # (the same check inside a compiled function)
        b = llgrad.zeros(2)
        with pytest.raises(RuntimeError, match="more than one element of the written-to"):
            llgrad.compile(lambda v: v.add_(1))(b.as_strided((3,), (0,)))
        assert b.tolist() == [0.0, 0.0]


_VIEWS = {
    "diagonal_same_dims": lambda t: t.ones(3, 3).diagonal(0, 1, 1),
    "linalg_diagonal_same_dims": lambda t: t.linalg.diagonal(t.ones(2, 2), dim1=0, dim2=0),
    "unbind_0d": lambda t: t.tensor(1.).unbind(0),
}


@pytest.mark.parametrize("case", sorted(_VIEWS))
def test_view_refusals(case):
    _same(_VIEWS[case], compiled=case == "unbind_0d")
