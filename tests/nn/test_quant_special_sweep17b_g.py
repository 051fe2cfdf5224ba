"""Quantized tensors, dynamic quantization and torch.special's new functions at their edges,
against torch: NaN / inf / tiny scales, qint32's own rounding, zero points at and past the
range ends, per-channel checks, float-qparams, 0-d tensors, comparisons and views, NaN
activations in a dynamic Linear, the fp16 GEMM's order of sums, qconfig attributes, rank
errors, and out= of the special functions."""
import io
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")

_RANGES = {"qint8": (-128, 127), "quint8": (0, 255), "qint32": (-2 ** 31, 2 ** 31 - 1)}


def _np(t):
    return t.detach().numpy()


def _both(fn):
    """fn(torch) and fn(llgrad): each a value, or the exception's type and message."""
    out = []
    for m in (torch, llgrad):
        try:
            out.append(fn(m))
        except Exception as e:      # noqa: BLE001 (the error is what is compared)
            out.append((type(e), str(e).split("\n")[0]))
    return out


def _same_error(fn):
    a, b = _both(fn)
    assert isinstance(a, tuple) and a == b, (a, b)


@pytest.mark.parametrize("dt", ["qint8", "quint8", "qint32"])
def test_quantize_per_tensor_nan_inf_and_extreme_scales(dt):
    x = np.array([0, 1, -1, 2.5, -2.5, 1e10, -1e10, np.inf, -np.inf, np.nan, 1e-30, 3.14159],
                 np.float32)
    lo, hi = _RANGES[dt]
    for scale in (0.1, 1e-10, 1e10, 3e-38, 1e-45, 0.0, -1.0, float("inf"), float("nan")):
        for zp in sorted({lo, hi, 0, -1 if lo < 0 else 1}):
            a, b = (m.quantize_per_tensor(m.tensor(x), scale, zp, getattr(m, dt))
                    for m in (torch, llgrad))
            np.testing.assert_array_equal(_np(b.int_repr()), _np(a.int_repr()),
                                          err_msg=f"{scale} {zp}")
            np.testing.assert_array_equal(_np(b.dequantize()), _np(a.dequantize()))


def test_qint32_rounding_and_dequantize_bit_for_bit():
    rs = np.random.RandomState(0)
    for _ in range(40):
        x = (rs.randn(30, 3) * 10 ** rs.uniform(-2, 9)).astype(np.float32)
        scale, zp = float(10 ** rs.uniform(-4, 1)), int(rs.randint(-10 ** 6, 10 ** 6))
        scales, zps = 10 ** rs.uniform(-4, 1, size=3), rs.randint(-10 ** 6, 10 ** 6, size=3)
        for m_args in ((scale, zp), (scales, zps)):
            got = []
            for m in (torch, llgrad):
                if m_args[0] is scale:
                    q = m.quantize_per_tensor(m.tensor(x), scale, zp, m.qint32)
                else:
                    q = m.quantize_per_channel(m.tensor(x), m.tensor(scales), m.tensor(zps), 1,
                                               m.qint32)
                got.append((_np(q.int_repr()), _np(q.dequantize())))
            np.testing.assert_array_equal(got[1][0], got[0][0])
            np.testing.assert_array_equal(got[1][1], got[0][1])


def test_zero_points_outside_the_dtype_are_refused():
    _same_error(lambda m: m.quantize_per_tensor(m.ones(3), 0.1, 255, m.qint8))
    _same_error(lambda m: m.quantize_per_tensor(m.ones(3), 0.1, -1, m.quint8))
    _same_error(lambda m: m.quantize_per_tensor(m.ones(3), 0.1, 2 ** 31 - 1, m.qint8))
    _same_error(lambda m: m.quantize_per_channel(m.ones(2, 3), m.tensor([0.1] * 3),
                                                 m.tensor([0, 300, 0]), 1, m.quint8))


def test_per_channel_axis_and_parameter_checks():
    w = np.random.RandomState(1).randn(3, 4, 5).astype(np.float32)
    for axis in (-1, -3, 3):
        _same_error(lambda m: m.quantize_per_channel(m.tensor(w), m.tensor([0.1] * 5),
                                                     m.tensor([0] * 5), axis, m.qint8))
    _same_error(lambda m: m.quantize_per_channel(m.tensor(1.0), m.tensor([0.1]), m.tensor([0]),
                                                 0, m.qint8))
    _same_error(lambda m: m.quantize_per_channel(m.tensor(w), m.tensor([0.1] * 3),
                                                 m.tensor([0] * 4), 1, m.qint8))
    _same_error(lambda m: m.quantize_per_channel(m.tensor(w), m.tensor([0.1] * 3),
                                                 m.tensor([0] * 3), 1, m.qint8))
    _same_error(lambda m: m.quantize_per_channel(m.tensor(w), m.tensor([[0.1] * 4]),
                                                 m.tensor([[0] * 4]), 1, m.qint8))
    _same_error(lambda m: m.quantize_per_channel(m.tensor(w), [0.1] * 4, [0] * 4, 1, m.qint8))
    a, b = (m.quantize_per_channel(m.tensor(w), m.tensor([0.5, 0.1, 0.2, 1.0]),
                                   m.tensor([0, 5, -7, 3]), 1, m.qint8) for m in (torch, llgrad))
    np.testing.assert_array_equal(_np(b.int_repr()), _np(a.int_repr()))
    nan = np.array([[np.nan, np.nan]], np.float32)
    for dt in ("qint8", "quint8", "qint32"):      # (per channel a NaN is 0 / the minimum)
        a, b = (m.quantize_per_channel(m.tensor(nan), m.tensor([1.0, 0.5]), m.tensor([5, 9]), 1,
                                       getattr(m, dt)) for m in (torch, llgrad))
        np.testing.assert_array_equal(_np(b.int_repr()), _np(a.int_repr()))


def test_float_zero_points_make_float_qparams_as_torch():
    rs = np.random.RandomState(2)
    x = (rs.randn(40, 3) * 10 ** rs.uniform(-2, 8, size=(40, 1))).astype(np.float32)
    x[0] = [np.nan, np.inf, -np.inf]
    for dt in ("qint8", "quint8"):
        lo, hi = _RANGES[dt]
        sc, zp = 10 ** rs.uniform(-4, 1, size=3), rs.uniform(lo, hi, size=3)
        a, b = (m.quantize_per_channel(m.tensor(x), m.tensor(sc), m.tensor(zp), 1,
                                       getattr(m, dt)) for m in (torch, llgrad))
        assert str(b.qscheme()).split(".")[-1] == str(a.qscheme()).split(".")[-1] == \
            "per_channel_affine_float_qparams"
        np.testing.assert_array_equal(_np(b.int_repr()), _np(a.int_repr()))
        np.testing.assert_array_equal(_np(b.dequantize()), _np(a.dequantize()))
        np.testing.assert_array_equal(_np(b.q_per_channel_zero_points()),
                                      _np(a.q_per_channel_zero_points()))
        buf = io.BytesIO()          # (torch saves them as per_channel_affine, float zero points)
        torch.save(a, buf)
        buf.seek(0)
        r = llgrad.load(buf)
        assert r.qscheme() is llgrad.per_channel_affine_float_qparams
        np.testing.assert_array_equal(_np(r.dequantize()), _np(a.dequantize()))


def test_zero_dim_and_empty_quantized_tensors():
    for shape_of in (lambda m: m.tensor(1.3), lambda m: m.zeros(0, 3)):
        a, b = (m.quantize_per_tensor(shape_of(m), 0.1, 2, m.quint8) for m in (torch, llgrad))
        assert tuple(b.shape) == tuple(a.shape)
        assert tuple(b.int_repr().shape) == tuple(a.int_repr().shape)
        assert repr(b).replace("llgrad.", "") == repr(a).replace("torch.", "")
    a, b = (m.quantize_per_tensor(m.tensor(1.3), 0.1, 2, m.quint8).item() for m in (torch, llgrad))
    assert a == b


def test_comparisons_views_and_dequantize_of_quantized_tensors():
    def q(m, scale=0.1):
        return m.quantize_per_tensor(m.arange(12.0).reshape(3, 4) / 3, scale, 2, m.quint8)
    for fn in (lambda m: q(m) == q(m), lambda m: q(m) != q(m, 0.2), lambda m: q(m) == 1.0,
               lambda m: q(m).view(4, 3).int_repr(), lambda m: q(m).reshape(-1).int_repr(),
               lambda m: q(m).t().int_repr(), lambda m: q(m).permute(1, 0).int_repr(),
               lambda m: q(m).transpose(0, 1).int_repr(), lambda m: q(m).flatten().int_repr(),
               lambda m: q(m)[1, 2].int_repr(), lambda m: q(m).unsqueeze(0).int_repr(),
               lambda m: m.dequantize(q(m)), lambda m: m.dequantize([q(m), q(m, 0.3)])[1]):
        a, b = _both(fn)
        np.testing.assert_array_equal(_np(b), _np(a))
        assert tuple(b.shape) == tuple(a.shape)
    for fn in (lambda m: q(m).equal(q(m).clone()), lambda m: q(m).equal(q(m, 0.2)),
               lambda m: q(m)[1, 2].item()):
        a, b = _both(fn)
        assert a == b
    _same_error(lambda m: m.quantize_per_channel(m.ones(2, 3), m.tensor([0.1, 0.2, 0.3]),
                                                 m.tensor([0, 1, 2]), 1, m.qint8).t())


def _linear_pair(n_in, n_out, dtype="qint8"):
    torch.manual_seed(0)
    mt = torch.nn.Linear(n_in, n_out)
    ml = llgrad.nn.Linear(n_in, n_out)
    ml.load_state_dict({k: llgrad.tensor(_np(v)) for k, v in mt.state_dict().items()})
    return [m.ao.quantization.quantize_dynamic(m.nn.Sequential(mod), dtype=getattr(m, dtype))
            for m, mod in ((torch, mt), (llgrad, ml))]


def test_dynamic_linear_with_nan_activations_as_fbgemm():
    qt, ql = _linear_pair(12, 3)
    rs = np.random.RandomState(2)
    for _ in range(60):
        x = rs.randn(rs.randint(1, 6), 12).astype(np.float32) * 3
        x.reshape(-1)[rs.randint(0, x.size, size=rs.randint(1, 4))] = np.nan
        a, b = _both(lambda m: (qt if m is torch else ql)(m.tensor(x)))
        if isinstance(a, tuple):
            assert a == b
        else:
            np.testing.assert_array_equal(_np(b), _np(a))
    x = np.full((2, 12), np.nan, np.float32)
    _same_error(lambda m: (qt if m is torch else ql)(m.tensor(x)))


@pytest.mark.parametrize("k", [64, 128, 300])
def test_float16_dynamic_linear_sums_in_fbgemm_order(k):
    qt, ql = _linear_pair(k, 24, "float16")
    x = np.random.RandomState(1).randn(5, k).astype(np.float32)
    np.testing.assert_array_equal(_np(ql(llgrad.tensor(x))), _np(qt(torch.tensor(x))))


def test_a_qconfig_the_module_already_has_wins():
    swapped = []
    for m in (torch, llgrad):
        s = m.nn.Sequential(m.nn.Linear(4, 4), m.nn.Linear(4, 4))
        s[0].qconfig = None
        q = m.ao.quantization.quantize_dynamic(s)
        swapped.append([hasattr(c, "_packed_params") for c in q])
        assert not hasattr(q[1], "qconfig")
    assert swapped[0] == swapped[1] == [False, True]


def test_dynamic_rnn_and_cell_rank_errors_as_torch():
    def mods(m):
        return m.ao.quantization.quantize_dynamic(m.nn.ModuleList([m.nn.GRU(4, 6),
                                                                   m.nn.LSTMCell(4, 6)]))
    for shape in ((4,), (2, 3, 4, 5), (3, 4)):
        _same_error(lambda m: mods(m)[0](m.ones(*shape)))
    for shape in ((3,), (2, 3, 4), (2, 3)):
        _same_error(lambda m: mods(m)[1](m.ones(*shape)))


@pytest.mark.parametrize("name", ["bessel_j0", "i1e", "modified_bessel_k1"])
def test_special_out_argument_as_torch(name):
    _same_error(lambda m: getattr(m.special, name)(m.tensor([1.0, 2.0]),
                                                   out=m.empty(2, dtype=m.int64)))
    grad_x = (lambda m: getattr(m.special, name)(m.tensor([1.0, 2.0], requires_grad=True),
                                                 out=m.empty(2)))
    a, b = _both(grad_x)        # (refused only where the function has a derivative)
    if isinstance(a, tuple):
        assert a == b
    else:
        np.testing.assert_array_equal(_np(b), _np(a))
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        a, b = (getattr(m.special, name)(m.tensor([1.0, 2.0]), out=m.empty(3))
                for m in (torch, llgrad))
    np.testing.assert_array_equal(_np(b), _np(a))
    a, b = (getattr(m.special, name)(m.tensor([1, 2]), out=m.empty(2, dtype=m.float64))
            for m in (torch, llgrad))
    assert b.dtype is llgrad.float64
    np.testing.assert_array_equal(_np(b), _np(a))
    _same_error(lambda m: m.special.chebyshev_polynomial_t(m.tensor([0.3]), m.tensor([4]),
                                                           out=m.empty(1, dtype=m.int32)))


@pytest.mark.xfail(strict=True, reason="a torch quantized LSTM checkpoint's CellParams "
                   "(torch.ScriptObject state) are rebuilt by real torch, which refuses "
                   "llgrad's quantized tensors")
def test_torch_quantized_lstm_checkpoint_loads():
    torch.manual_seed(0)
    qt = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(torch.nn.LSTM(8, 6)))
    buf = io.BytesIO()
    torch.save(qt.state_dict(), buf)
    buf.seek(0)
    ql = llgrad.ao.quantization.quantize_dynamic(llgrad.nn.Sequential(llgrad.nn.LSTM(8, 6)))
    ql.load_state_dict(llgrad.load(buf, weights_only=False))


@pytest.mark.xfail(strict=True, reason="ATen's sigmoid / tanh in the quantized LSTM cell use "
                   "SLEEF's exp / tanh on 16-wide blocks and glibc's on the rest; rnn.py rounds "
                   "both correctly, an ulp off now and then")
def test_quantized_lstm_states_bit_for_bit_rare_ulp():
    torch.manual_seed(0)
    torch.nn.LSTM(4, 6)
    mt = torch.nn.ModuleList([torch.nn.LSTM(4, 6)])
    ml = llgrad.nn.ModuleList([llgrad.nn.LSTM(4, 6)])
    ml.load_state_dict({k: llgrad.tensor(_np(v)) for k, v in mt.state_dict().items()})
    x = np.random.RandomState(0).randn(5, 3, 4).astype(np.float32)
    a = torch.ao.quantization.quantize_dynamic(mt, dtype=torch.float16)[0](torch.tensor(x))[0]
    b = llgrad.ao.quantization.quantize_dynamic(ml, dtype=llgrad.float16)[0](llgrad.tensor(x))[0]
    np.testing.assert_array_equal(_np(b), _np(a))


@pytest.mark.xfail(strict=True, reason="torch's i0e on float16 computes in half arithmetic on "
                   "its scalar path (short or strided tensors) and in float32 when vectorised; "
                   "llgrad follows the vectorised one")
def test_i0e_float16_short_tensor():
    x = np.array([1.0, 50.0, 0.5, 2.0], np.float16)
    np.testing.assert_array_equal(_np(llgrad.special.i0e(llgrad.tensor(x))),
                                  _np(torch.special.i0e(torch.tensor(x))))


def test_quantize_per_tensor_dynamic_as_torch():
    rs = np.random.RandomState(0)
    for it in range(60):
        x = (rs.randn(rs.randint(1, 30)) * 10 ** rs.uniform(-8, 4)).astype(np.float32)
        x = np.abs(x) if it % 3 == 0 else -np.abs(x) if it % 3 == 1 else x
        for dt in ("qint8", "quint8"):
            for reduce_range in (False, True):
                a, b = (m.quantize_per_tensor_dynamic(m.tensor(x), getattr(m, dt), reduce_range)
                        for m in (torch, llgrad))
                assert (b.q_scale(), b.q_zero_point()) == (a.q_scale(), a.q_zero_point())
                np.testing.assert_array_equal(_np(b.int_repr()), _np(a.int_repr()))
    _same_error(lambda m: m.quantize_per_tensor_dynamic(m.tensor([1.0, float("nan")]), m.quint8,
                                                        False))
    _same_error(lambda m: m.quantize_per_tensor_dynamic(m.ones(3, dtype=m.float64), m.quint8,
                                                        False))


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_dynamic_rnn_empty_sequence_and_empty_batch(kind, batch_first):
    def run(m, shape):
        q = m.ao.quantization.quantize_dynamic(
            m.nn.ModuleList([getattr(m.nn, kind)(4, 6, batch_first=batch_first)]))
        out, h = q[0](m.zeros(*shape))
        return tuple(out.shape), tuple((h[0] if kind == "LSTM" else h).shape)
    seq_first = (0, 3, 4) if not batch_first else (3, 0, 4)
    _same_error(lambda m: run(m, seq_first))
    empty_batch = (5, 0, 4) if not batch_first else (0, 5, 4)
    a, b = (run(m, empty_batch) for m in (torch, llgrad))
    assert a == b
