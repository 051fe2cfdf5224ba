"""Two eager savings on the training step, each the same numbers as before: a packed
nn.RNN / nn.LSTM / nn.GRU skips the state-keeping where() on the steps every sequence has
(layers_rnn_packed.step_masks: the shortest sequence's steps), and a BatchNorm's running
statistics take their fused multiply-add from the native axpy kernel at any size
(buffer_update.blend), bitwise NumPy's exact emulation. Checked against torch (packed
outputs, h_n, every gradient; running statistics) and against the code path they replace."""
import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_axpy, eager_builds
from llgrad.ir import fused_madd
from llgrad.runtime import buffer_update

LENS = [6, 6, 4, 3]     # the first 3 steps are every sequence's; steps 3..5 are not


def _torch():
    return pytest.importorskip("torch")


def _where_nodes(t):
    """How many WhereBackward0 nodes the graph behind t holds."""
    seen, stack, n = set(), [t.grad_fn], 0
    while stack:
        f = stack.pop()
        if f is None or id(f) in seen:
            continue
        seen.add(id(f))
        n += type(f).__name__ == "WhereBackward0"
        stack.extend(g for g, _ in f.next_functions)
    return n


def _packed_run(lib, kind, lens, source=None):
    rng = np.random.default_rng(3)
    m = getattr(lib.nn, kind)(3, 5, bidirectional=True).double()
    if source is not None:
        m.load_state_dict({k: lib.tensor(v.detach().numpy()) for k, v in source.items()})
    seqs = [lib.tensor(rng.standard_normal((n, 3)), requires_grad=True) for n in lens]
    packed = lib.nn.utils.rnn.pack_sequence(seqs, enforce_sorted=False)
    out, state = m(packed)
    h = state[0] if kind == "LSTM" else state
    loss = out.data.pow(2).sum() + h.pow(3).sum() + (state[1].sum() if kind == "LSTM" else 0)
    grads_of = [*seqs, *m.parameters()]
    got = dict(data=out.data.detach().numpy(), h=h.detach().numpy(),
               wheres=_where_nodes(loss) if lib is llgrad else None)
    loss.backward()
    got["grads"] = [t.grad.numpy() for t in grads_of]
    return m, got


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("lens", [LENS, [4, 4, 4]], ids=["ragged", "equal"])
def test_packed_skips_full_steps_and_matches_torch(kind, lens):
    torch = _torch()
    tm, theirs = _packed_run(torch, kind, lens)
    _, ours = _packed_run(llgrad, kind, lens, tm.state_dict())
    np.testing.assert_allclose(ours["data"], theirs["data"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours["h"], theirs["h"], rtol=1e-10, atol=1e-12)
    for g, w in zip(ours["grads"], theirs["grads"]):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-11)
    # a where per state per step that some sequence lacks, both directions: none for steps
    # every sequence has (before: one per step, 6 or 4 steps)
    partial = max(lens) - min(lens)
    assert ours["wheres"] == 2 * partial * (2 if kind == "LSTM" else 1)


def test_packed_compiled_equals_eager():
    m = llgrad.nn.GRU(3, 4)
    rng = np.random.default_rng(5)
    xs = [llgrad.tensor(rng.standard_normal((n, 3)), dtype=llgrad.float32) for n in LENS]

    def f(*xs):
        out, h = m(llgrad.nn.utils.rnn.pack_sequence(list(xs), enforce_sorted=False))
        return out.data.sum() + h.sum()

    want = float(f(*xs).detach())
    cf = llgrad.compile(f)
    for _ in range(2):      # (the compiled sums may add in another order: test_rnn_packed's rtol)
        np.testing.assert_allclose(float(cf(*xs).detach()), want, rtol=1e-5)


def _blend_both(buf, stat, momentum):
    """blend's result with the native kernel (once built) and with NumPy's emulation."""
    if fused_madd.native_axpy() is None:
        pytest.skip("the native eager kernels are off (LLGRAD_EAGER_NATIVE=0)")
    one = llgrad.tensor(buf.copy())
    buffer_update.blend(one, stat, momentum)        # (starts the build)
    eager_builds.wait()
    native = llgrad.tensor(buf.copy())
    calls = eager_axpy.stats["calls"]
    assert buffer_update.blend(native, stat, momentum)
    assert eager_axpy.stats["calls"] == calls + 1       # (the kernel ran, whatever the size)
    prev = fused_madd.native_axpy()
    fused_madd.set_native_axpy(None)
    try:
        emulated = llgrad.tensor(buf.copy())
        assert buffer_update.blend(emulated, stat, momentum)
    finally:
        fused_madd.set_native_axpy(prev)
    return native._data, emulated._data


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 7, 64, 300])
@pytest.mark.parametrize("momentum", [0.1, 1 / 3, 0.01])
def test_running_stats_blend_bitwise_the_emulation(dtype, n, momentum):
    rng = np.random.default_rng(n)
    buf = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 1e3], n)).astype(dtype)
    stat = rng.standard_normal(n).astype(dtype)
    native, emulated = _blend_both(buf, stat, momentum)
    np.testing.assert_array_equal(native.view(np.uint8), emulated.view(np.uint8))
    # and the emulation is the single rounding of buf * (1 - m) + stat * m's product
    scaled = (buf * dtype(1 - momentum)).astype(dtype)
    want = np.asarray(fused_madd.fma(stat, momentum, scaled, np.dtype(dtype)))
    np.testing.assert_array_equal(emulated.view(np.uint8), want.view(np.uint8))


def test_batchnorm_running_stats_match_torch():
    torch = _torch()
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((16, 8)).astype(np.float32) * 3 + 1 for _ in range(5)]
    tb, lb = torch.nn.BatchNorm1d(8), llgrad.nn.BatchNorm1d(8)
    for x in xs:
        tb(torch.tensor(x))
        lb(llgrad.tensor(x))
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(getattr(lb, name).numpy(), getattr(tb, name).numpy(),
                                   rtol=2e-6, atol=1e-7)
