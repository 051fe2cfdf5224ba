"""Sweep 9: F.linear's argument checks, weight normalisation (the fused node's name, the
dims it normalises over, its range check) and torch.nn.utils.stateless, against torch: the
same script run with each library."""
import warnings

import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _text(x):
    return str(x).replace("torch", "llgrad")


def _outcome(fn):
    try:
        return _text(fn())
    except Exception as e:      # noqa: BLE001 (compared with torch's)
        return type(e).__name__, _text(e)


def _linear_errors(lib):
    F = lib.nn.functional
    x, w = lib.ones(2, 2), lib.ones(3, 2)
    m = lib.nn.Linear(2, 2)
    m.weight = None
    return [_outcome(f) for f in (
        lambda: F.linear(x, None), lambda: F.linear([1., 2.], w), lambda: F.linear(x, w, 3),
        lambda: F.linear(x, w, [1., 1., 1.]), lambda: F.linear(x, 2), lambda: m(x),
        lambda: F.linear(x, w, lib.zeros(3)).shape)]


def test_linear_rejects_non_tensors_as_torch():
    assert _linear_errors(llgrad) == _linear_errors(torch)


def _weight_norm(lib):
    out = []
    nn = lib.nn
    for dim in (0, 1, 2, -1, -2, -3, None, 3):
        for make in (lambda: nn.Linear(3, 2), lambda: nn.Conv1d(2, 3, 2)):
            lib.manual_seed(0)
            try:
                m = nn.utils.parametrizations.weight_norm(make(), dim=dim)
                w = m.weight
                out.append((dim, type(w.grad_fn).__name__,
                            tuple(m.parametrizations.weight.original0.shape),
                            [round(v, 4) for v in w.flatten().tolist()]))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m = nn.utils.weight_norm(make(), dim=dim)
                out.append((type(m.weight.grad_fn).__name__, tuple(m.weight_g.shape)))
            except Exception as e:      # noqa: BLE001 (compared with torch's)
                out.append((dim, type(e).__name__, str(e)))
    return out


def test_weight_norm_node_and_dims_as_torch():
    assert _text(_weight_norm(llgrad)) == _text(_weight_norm(torch))


def _stateless(lib):
    m = lib.nn.Linear(2, 1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = lib.nn.utils.stateless.functional_call(
            m, {"weight": lib.ones(1, 2), "bias": lib.zeros(1)}, (lib.ones(1, 2),))
    return y.tolist(), [(x.category.__name__, str(x.message)) for x in w]


def test_stateless_functional_call_as_torch():
    assert _text(_stateless(llgrad)) == _text(_stateless(torch))


def _packed_casts(lib):
    rnn = lib.nn.utils.rnn
    p = rnn.pack_sequence([lib.tensor([1.5, -2., 3]), lib.tensor([4.])], enforce_sorted=False)
    out = []
    for name in ("half", "int", "short", "char", "byte", "long", "double", "float", "cpu"):
        q = getattr(p, name)()
        out.append((name, repr(q), q is p))
    return out


def test_packed_sequence_casts_as_torch():
    assert _text(_packed_casts(llgrad)) == _text(_packed_casts(torch))


def _native_channel_shuffle_and_empty_stacks(lib):
    F = lib.nn.functional
    x = lib.arange(16.).view(1, 4, 4).requires_grad_()
    y = F.native_channel_shuffle(x, 2)
    out = [y.tolist(), type(y.grad_fn).__name__, y.grad_fn.name()]
    for f in (lambda: y.sum().backward(), lambda: F.native_channel_shuffle(lib.ones(2, 4), 2),
              lambda: F.native_channel_shuffle(lib.ones(1, 4, 2), 3),
              lambda: lib.nn.TransformerEncoder(lib.nn.TransformerEncoderLayer(4, 2, 8), 0)(
                  lib.ones(2, 2, 4)),
              lambda: lib.nn.TransformerDecoder(lib.nn.TransformerDecoderLayer(4, 2, 8), 0)(
                  lib.ones(2, 2, 4), lib.ones(2, 2, 4))):
        try:
            f()
        except (RuntimeError, IndexError) as e:
            out.append((type(e).__name__, str(e)))
    return out


def test_native_channel_shuffle_and_layerless_transformers_as_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _text(_native_channel_shuffle_and_empty_stacks(llgrad)) == \
            _text(_native_channel_shuffle_and_empty_stacks(torch))
