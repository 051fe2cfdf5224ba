"""The fused LSTM and GRU cells (forward and backward) on their native row kernels
(compile/eager_native.py, codegen/eager_row_kernels.py): against the ops' NumPy
implementations and against torch's maths, for several hidden sizes and row counts, with
NaN, infinities and large values; the calls that must stay on NumPy; the hook switched off;
and an nn.LSTM / nn.GRU's gradients with and without the native path."""
import math

import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_native
from llgrad.ir import OPS

# (NumPy's implementation on NaN and infinities, as the dispatcher silences it outside pytest)
pytestmark = [pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
              pytest.mark.skipif(not eager_native.ENABLED, reason="LLGRAD_EAGER_NATIVE=0")]
ROW_OPS = sorted(name for name, op in OPS.items() if op.eager_rows)
# the block widths of each op's operands, in units of H
WIDTHS = {"fused_lstm_cell": (4, 1), "fused_lstm_cell_backward": (1, 1, 4, 1, 1),
          "fused_gru_cell": (3, 3, 1), "fused_gru_cell_backward": (1, 3, 3, 1)}
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 1e-30, 20.0, -20.0, 88.0, -88.0,
           709.0, -709.0, 0.5, -0.5]
HS = [1, 7, 64, 100]


@pytest.fixture(autouse=True)
def _builds_before_the_call(monkeypatch):
    """These tests look at the native path on the first call: kernels build on the caller's
    thread (test_background_builds_never_block checks the default)."""
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")


def _rows_for(name, h, extra):
    """A row count that takes the native path (the widest operand of MIN_ELEMENTS or more)."""
    return math.ceil(eager_native.MIN_ELEMENTS / (max(WIDTHS[name]) * h)) + extra


def _operands(name, dtype, lead, h, seed=0, special=True):
    """The op's operands (lead + (w * H,)), normal * 3 with SPECIAL spread over them."""
    rng = np.random.default_rng(seed)
    out = []
    for k, w in enumerate(WIDTHS[name]):
        a = rng.standard_normal(lead + (w * h,)) * 3
        if special:
            flat = a.reshape(-1)
            at = rng.choice(flat.size, size=min(flat.size // 4, 4 * len(SPECIAL)), replace=False)
            flat[at] = np.resize(SPECIAL, len(at))
        with np.errstate(over="ignore"):
            out.append(a.astype(dtype))
    return out


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _call(name, arrays, view=None):
    """The op through the dispatcher (the native path where it qualifies) on tensors of
    arrays (each made view(tensor) first, where given: llgrad.tensor copies): its results."""
    ts = [llgrad.tensor(a) if view is None else view(llgrad.tensor(a)) for a in arrays]
    return tuple(t.numpy() for t in _as_tuple(ts[0]._op(name, *ts[1:])))


def _scale(name, arrays, h):
    """Per result, the magnitude its rounding errors are relative to (the products of the
    operands' sizes that enter it), broadcast to the result's shape: where a result is far
    smaller than its terms (a sigmoid's (1 - s) * s near s = 1) the two methods differ by
    an ulp of the terms."""
    a = [np.abs(x.astype(np.float64)) for x in arrays]
    with np.errstate(all="ignore"):
        return _scale_of(name, a, h)


def _scale_of(name, a, h):
    rep = lambda v, k: np.concatenate([v] * k, axis=-1)  # noqa: E731
    if name == "fused_lstm_cell":
        s = 1 + a[1]
        return s, s
    if name == "fused_lstm_cell_backward":
        s = (a[0] + a[1]) * (1 + a[3])
        return rep(s, 4), s
    if name == "fused_gru_cell":
        return (1 + a[2],)
    hn = a[2][..., 2 * h:]
    s = a[0] * (1 + a[3]) * (1 + hn)
    return rep(s, 3), rep(s, 3), a[0]


def _close(got, want, scale, dtype, ulps=8):
    """Within ulps of the larger of the result and its scale, the same NaNs and infinities
    (and the same dtype and shape)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), (got[np.isnan(got) != nan][:5],
                                                want[np.isnan(got) != nan][:5])
    inf = np.isinf(want)
    assert np.array_equal(np.isinf(got), inf) and np.array_equal(got[inf], want[inf])
    ok = ~nan & ~inf
    g, w = got[ok].astype(np.float64), want[ok].astype(np.float64)
    s = np.nan_to_num(scale[ok], nan=np.inf, posinf=np.inf)
    bound = ulps * np.finfo(dtype).eps * np.maximum(np.maximum(np.abs(w), s),
                                                    np.finfo(dtype).tiny)
    bad = np.abs(g - w) > bound
    assert not bad.any(), (g[bad][:5], w[bad][:5], bound[bad][:5])


def test_the_table_marks_the_four_cells():
    assert ROW_OPS == sorted(WIDTHS)
    assert not any(OPS[n].eager_native for n in ROW_OPS)   # (the one-operand path's tests)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("h", HS)
@pytest.mark.parametrize("name", ROW_OPS)
def test_native_cells_match_the_numpy_implementation(name, h, dtype):
    op = OPS[name]
    for extra, lead3 in ((0, False), (5, False), (3, True)):
        rows = _rows_for(name, h, extra)
        lead = (2, (rows + 1) // 2) if lead3 else (rows,)
        arrays = _operands(name, dtype, lead, h, seed=h + extra)
        before = eager_native.stats["calls"]
        got = _call(name, arrays)
        assert eager_native.stats["calls"] == before + 1, "the native kernel did not run"
        with np.errstate(all="ignore"):
            want = _as_tuple(op.impl(*arrays))
        assert len(got) == len(want) == op.nout
        for g, w, s in zip(got, want, _scale(name, arrays, h)):
            assert g.flags.c_contiguous
            _close(g, w, s, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ROW_OPS)
def test_native_cells_give_the_compiled_paths_results(name, dtype):
    """The same decomposition through the same lowerings: bit for bit, NaNs and all."""
    h = 64
    arrays = _operands(name, dtype, (_rows_for(name, h, 1),), h)
    f = llgrad.compile(lambda *ts: ts[0]._op(name, *ts[1:]), fullgraph=True)
    ts = [llgrad.tensor(a) for a in arrays]
    f(*ts)                                  # (traced: the ops run eagerly on the examples)
    before = eager_native.stats["calls"]
    compiled = [t.numpy() for t in _as_tuple(f(*ts))]
    assert eager_native.stats["calls"] == before, "the compiled call ran eagerly"
    got = _call(name, arrays)
    assert eager_native.stats["calls"] == before + 1
    for g, c in zip(got, compiled):
        assert np.array_equal(g, c, equal_nan=True)


def _torch_cell(name, arrays, h):
    """The op's results by torch's autograd on LSTMCell / GRUCell's maths (float64)."""
    torch = pytest.importorskip("torch")
    ts = [torch.tensor(a, dtype=torch.float64) for a in arrays]

    def lstm(gates, cx):
        i, f, g, o = gates.chunk(4, -1)
        cy = torch.sigmoid(f) * cx + torch.sigmoid(i) * torch.tanh(g)
        return torch.tanh(cy) * torch.sigmoid(o), cy

    def gru(gx, gh, hx):
        xr, xz, xn = gx.chunk(3, -1)
        hr, hz, hn = gh.chunk(3, -1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        return ((1 - z) * n + z * hx,)

    if name == "fused_lstm_cell":
        return tuple(t.numpy() for t in lstm(*ts))
    if name == "fused_gru_cell":
        return tuple(t.numpy() for t in gru(*ts))
    if name == "fused_lstm_cell_backward":
        gh, gc, gates, cx, _ = ts
        ins = [gates.requires_grad_(), cx.requires_grad_()]
        return tuple(t.numpy() for t in torch.autograd.grad(lstm(*ins), ins, (gh, gc)))
    g, *ins = ts
    ins = [t.requires_grad_() for t in ins]
    return tuple(t.numpy() for t in torch.autograd.grad(gru(*ins), ins, (g,)))


@pytest.mark.parametrize("h", [7, 64])
@pytest.mark.parametrize("name", ROW_OPS)
def test_native_cells_match_torch(name, h):
    """On finite float64 operands (torch's own edge cases differ): to rounding."""
    rows = _rows_for(name, h, 3)
    arrays = _operands(name, np.float64, (rows,), h, seed=11, special=False)
    if name == "fused_lstm_cell_backward":        # (cy: the forward's, as autograd saves it)
        arrays[4] = OPS["fused_lstm_cell"].impl(arrays[2], arrays[3])[1]
    want = _torch_cell(name, arrays, h)
    before = eager_native.stats["calls"]
    got = _call(name, arrays)
    assert eager_native.stats["calls"] == before + 1
    for g, w, s in zip(got, want, _scale(name, arrays, h)):
        _close(g, w, s, np.float64, ulps=64)


def _numpy_only(name, arrays, view=None):
    """The op on view(tensor of a) for a in arrays stays on NumPy, giving its result exactly."""
    before = eager_native.stats["calls"]
    got = _call(name, arrays, view)
    assert eager_native.stats["calls"] == before, "a call off the native path ran natively"
    seen = [view(llgrad.tensor(a)).numpy() if view else a for a in arrays]
    with np.errstate(all="ignore"):
        want = _as_tuple(OPS[name].impl(*seen))
    for g, w in zip(got, want):
        assert np.array_equal(g, w, equal_nan=True)


@pytest.mark.parametrize("name", ROW_OPS)
def test_strided_small_and_float16_calls_run_the_numpy_implementation(name):
    h = 16
    rows = _rows_for(name, h, 2)
    arrays = _operands(name, np.float32, (rows,), h)
    # columns strided: every other column of a tensor twice as wide
    wide = [np.repeat(a, 2, axis=-1) for a in arrays]
    _numpy_only(name, wide, lambda t: t[:, ::2])
    # rows not contiguous: the transpose of a (W, rows) tensor
    _numpy_only(name, [np.ascontiguousarray(a.T) for a in arrays], lambda t: t.t())
    # leading dims that do not collapse into evenly spaced rows
    pairs = [np.stack([a[:rows // 2 * 2:2], a[1:rows // 2 * 2:2]], 1) for a in arrays]
    _numpy_only(name, pairs, lambda t: t.transpose(0, 1))
    _numpy_only(name, [a[:3] for a in arrays])                             # (small)
    _numpy_only(name, [a.astype(np.float16) for a in arrays])              # (not float32/64)


@pytest.mark.parametrize("name", ROW_OPS)
def test_evenly_spaced_rows_run_natively(name):
    """A time step of a batch-first sequence ((B, T, G)[:, t]: rows T*G apart) needs no copy."""
    h, t = 32, 3
    rows = _rows_for(name, h, 1)
    arrays = _operands(name, np.float64, (rows,), h)
    seqs = [np.stack([np.full_like(a, 7.0)] * t + [a] + [np.full_like(a, -7.0)], 1)
            for a in arrays]
    before = eager_native.stats["calls"]
    got = _call(name, seqs, lambda s: s[:, t])
    assert eager_native.stats["calls"] == before + 1
    want = _call(name, arrays)
    for g, w in zip(got, want):
        assert np.array_equal(g, w, equal_nan=True)


@pytest.mark.parametrize("gate_width", [3 * 64, 4 * 64 + 2])
def test_operands_that_do_not_fit_raise_as_numpy_does(gate_width):
    rng = np.random.default_rng(0)
    gates, cx = rng.standard_normal((100, gate_width)), rng.standard_normal((100, 64))
    before = eager_native.stats["calls"]
    for _ in range(2):                      # (the second: the refused kernel remembered)
        with pytest.raises(RuntimeError, match="fused_lstm_cell: gates of shape"):
            llgrad.tensor(gates)._op("fused_lstm_cell", llgrad.tensor(cx))
    assert eager_native.stats["calls"] == before


def test_mixed_dtypes_promote_then_run_natively():
    h, rows = 32, 64
    gates, cx = _operands("fused_lstm_cell", np.float32, (rows,), h, special=False)
    before = eager_native.stats["calls"]
    hy, cy = llgrad.tensor(gates)._op("fused_lstm_cell", llgrad.tensor(cx.astype(np.float64)))
    assert hy.dtype == llgrad.float64 and eager_native.stats["calls"] == before + 1
    want = OPS["fused_lstm_cell"].impl(gates.astype(np.float64), cx.astype(np.float64))
    _close(hy.numpy(), want[0], 1 + np.abs(cx), np.float64)


def test_switching_the_hook_off_gives_numpy_exactly():
    name, h = "fused_gru_cell_backward", 64
    arrays = _operands(name, np.float32, (_rows_for(name, h, 0),), h)
    eager_native.install(False)
    try:
        _numpy_only(name, arrays)
    finally:
        eager_native.install(True)


def test_background_builds_never_block(cold_kernels):
    name, h = "fused_lstm_cell", 64
    arrays = _operands(name, np.float32, (_rows_for(name, h, 0),), h, special=False)
    first = _call(name, arrays)
    assert eager_native.stats["calls"] == 0, "the first call waited for its kernel"
    eager_native.wait()
    assert eager_native.stats["built"] == 1
    second = _call(name, arrays)
    assert eager_native.stats["calls"] == 1
    for a, b, s in zip(second, first, _scale(name, arrays, h)):
        _close(a, b, s, np.float32)


def test_one_kernel_serves_every_hidden_size_and_row_count():
    eager_native.reset()
    name = "fused_gru_cell"
    for h, rows in ((64, 100), (100, 50), (7, 700), (1, 5000)):
        _call(name, _operands(name, np.float32, (rows,), h))
    assert eager_native.stats == {"calls": 4, "built": 1, "vjp_calls": 0, "vjp_built": 0}


# ---- whole layers: the gradients with the native cells and without -----------------------------

def _layer_grads(mode, dtype, native):
    llgrad.manual_seed(0)
    kind = {"lstm": llgrad.nn.LSTM, "gru": llgrad.nn.GRU}[mode]
    layer = kind(24, 96, num_layers=2, batch_first=True).to(dtype)
    x = llgrad.tensor(np.random.default_rng(3).standard_normal((48, 6, 24)), dtype=dtype,
                      requires_grad=True)
    eager_native.install(native)
    try:
        before = eager_native.stats["calls"]
        out, _ = layer(x)
        (out * out).sum().backward()
        calls = eager_native.stats["calls"] - before
    finally:
        eager_native.install(True)
    grads = [x.grad.numpy()] + [p.grad.numpy() for p in layer.parameters()]
    return out.detach().numpy(), grads, calls


@pytest.mark.parametrize("dtype", [llgrad.float32, llgrad.float64])
@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_layer_gradients_match_the_numpy_cells(mode, dtype):
    out, grads, calls = _layer_grads(mode, dtype, True)
    out_np, grads_np, calls_np = _layer_grads(mode, dtype, False)
    assert calls == 2 * 2 * 6 and calls_np == 0      # (2 layers, 6 steps, forward + backward)
    tol = 2e-5 if dtype == llgrad.float32 else 1e-12
    np.testing.assert_allclose(out, out_np, rtol=tol, atol=tol)
    for g, w in zip(grads, grads_np):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * max(1.0, np.abs(w).max()))
