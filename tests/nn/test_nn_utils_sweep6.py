"""Sweep 6 of llgrad.nn.utils against torch.nn.utils: clip_grad_norm_ (every norm type,
foreach, a single tensor, no grads, non-finite norms, a tensor max_norm), clip_grad_value_,
get_total_norm / clip_grads_with_norm_, parameters_to_vector / vector_to_parameters and
their errors, the rnn utilities (pad, pack, unpack, unpad; sorted or not, lengths as tensors,
a zero length, total_length), fuse_conv_bn_eval / fuse_linear_bn_eval and
func.functional_call: values, dtypes, shapes, warnings and errors."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(0)
A = [_RNG.standard_normal(s).astype(np.float32) for s in [(3, 4), (4,), (2, 2)]]
_W = _RNG.standard_normal((3, 2, 2, 2)).astype(np.float32)


def _ps(lib, grads=True):
    out = [lib.nn.Parameter(lib.tensor(a)) for a in A]
    if grads:
        for p, a in zip(out, A):
            p.grad = lib.tensor(a * 2)
    return out


def _r(x):
    if hasattr(x, "detach"):
        return ("tensor", str(x.dtype).split(".")[-1], tuple(x.shape),
                x.detach().numpy().astype(float))
    if isinstance(x, (list, tuple)):
        return [_r(y) for y in x]
    return x


def _run(lib, f):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=RuntimeWarning,
                                module=r"llgrad\.(ir|runtime)\.")   # (silenced by llgrad)
        try:
            out = _r(f(lib))
        except Exception as e:      # noqa: BLE001 (compared with torch's)
            out = (type(e).__name__, str(e).split("\n")[0].replace("torch", "LIB")
                   .replace("llgrad", "LIB"))
    return out, [(x.category.__name__, str(x.message)) for x in w]


def _close(a, b):
    if isinstance(b, tuple) and b and b[0] == "tensor":
        assert a[:3] == b[:3]
        np.testing.assert_allclose(a[3], b[3], rtol=1e-5, atol=1e-6)
    elif isinstance(b, list):
        assert isinstance(a, list) and len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)
    else:
        assert a == b


def _clip_norm(nt, fe):
    def f(lib):
        p = _ps(lib)
        n = lib.nn.utils.clip_grad_norm_(p, 1.0, norm_type=nt, foreach=fe)
        return [n] + [q.grad for q in p]
    return f


def _nonfinite(value, error):
    def f(lib):
        p = _ps(lib)
        p[0].grad[0, 0] = value
        n = lib.nn.utils.clip_grad_norm_(p, 1.0, error_if_nonfinite=error)
        return [n, p[1].grad]
    return f


def _v2p(lib):
    p = _ps(lib, False)
    lib.nn.utils.vector_to_parameters(lib.arange(20.0), p)
    return p


def _seqs(lib):
    return [lib.tensor(A[0]), lib.tensor(A[0][:2]), lib.tensor(A[0][:1])]


def _fuse_conv(lib):
    conv, bn = lib.nn.Conv2d(2, 3, 2), lib.nn.BatchNorm2d(3)
    with lib.no_grad():
        conv.weight.copy_(lib.tensor(_W))
        conv.bias.copy_(lib.tensor([0.1, 0.2, 0.3]))
        bn.running_mean.copy_(lib.tensor([0.5, -1, 2.0]))
        bn.running_var.copy_(lib.tensor([1.5, 0.5, 2.0]))
        bn.weight.copy_(lib.tensor([1.0, 2, 3]))
        bn.bias.copy_(lib.tensor([0.0, 1, -1]))
    conv.eval()
    bn.eval()
    f = lib.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)
    return [f.weight, f.bias, type(f).__name__, f.weight.requires_grad]


def _fuse_linear(lib):
    lin, bn = lib.nn.Linear(3, 3), lib.nn.BatchNorm1d(3)
    with lib.no_grad():
        lin.weight.copy_(lib.tensor(np.eye(3, dtype=np.float32)))
        lin.bias.fill_(0.5)
        bn.running_var.fill_(4.0)
    lin.eval()
    bn.eval()
    f = lib.nn.utils.fusion.fuse_linear_bn_eval(lin, bn)
    return [f.weight, f.bias]


def _functional_call(params, strict=False):
    def f(lib):
        m = lib.nn.Linear(3, 2)
        with lib.no_grad():
            m.weight.fill_(1.0)
            m.bias.fill_(0.0)
        return lib.func.functional_call(m, {k: v(lib) for k, v in params.items()},
                                        (lib.ones(1, 3),), strict=strict)
    return f


CASES = [(f"clip_norm-{nt}-{fe}", _clip_norm(nt, fe))
         for nt in [2, 1, 3.5, float("inf"), 0, -1, float("-inf")] for fe in [None, False]] + [
    ("clip_norm-single", lambda lib: (lambda p: [lib.nn.utils.clip_grad_norm_(p[0], 0.5),
                                                 p[0].grad])(_ps(lib))),
    ("clip_norm-no-grads", lambda lib: lib.nn.utils.clip_grad_norm_(_ps(lib, False), 0.5)),
    ("clip_norm-empty", lambda lib: lib.nn.utils.clip_grad_norm_([], 0.5)),
    ("clip_norm-nan-error", _nonfinite(float("nan"), True)),
    ("clip_norm-inf", _nonfinite(float("inf"), False)),
    ("clip_norm-tensor-max", lambda lib: (lambda p: [
        lib.nn.utils.clip_grad_norm_(p, lib.tensor(0.5)), p[1].grad])(_ps(lib))),
    ("clip_value", lambda lib: (lambda p: [lib.nn.utils.clip_grad_value_(p, 0.3), p[0].grad])(
        _ps(lib))),
    ("clip_value-foreach", lambda lib: (lambda p: [
        lib.nn.utils.clip_grad_value_(p, 0.3, foreach=False), p[2].grad])(_ps(lib))),
    ("get_total_norm", lambda lib: lib.nn.utils.get_total_norm([q.grad for q in _ps(lib)], 2.0)),
    ("get_total_norm-inf", lambda lib: lib.nn.utils.get_total_norm(
        [q.grad for q in _ps(lib)], float("inf"), error_if_nonfinite=True)),
    ("clip_grads_with_norm_", lambda lib: (lambda p: [
        lib.nn.utils.clip_grads_with_norm_(p, 1.0, lib.tensor(5.0)), p[0].grad])(_ps(lib))),
    ("parameters_to_vector", lambda lib: lib.nn.utils.parameters_to_vector(_ps(lib, False))),
    ("parameters_to_vector-not-a-tensor",
     lambda lib: lib.nn.utils.parameters_to_vector([lib.ones(2), "x"])),
    ("vector_to_parameters", _v2p),
    ("vector_to_parameters-2d", lambda lib: lib.nn.utils.vector_to_parameters(
        lib.arange(20.0).reshape(4, 5), _ps(lib, False))),
    ("vector_to_parameters-short", lambda lib: lib.nn.utils.vector_to_parameters(
        lib.arange(10.0), _ps(lib, False))),
    ("pad_sequence", lambda lib: lib.nn.utils.rnn.pad_sequence(_seqs(lib))),
    ("pad_sequence-batch-first", lambda lib: lib.nn.utils.rnn.pad_sequence(
        _seqs(lib), batch_first=True, padding_value=-1.0)),
    ("pad_sequence-left", lambda lib: lib.nn.utils.rnn.pad_sequence(
        _seqs(lib), batch_first=True, padding_side="left")),
    ("pack_sequence", lambda lib: list(lib.nn.utils.rnn.pack_sequence(_seqs(lib)))),
    ("pack_sequence-unsorted", lambda lib: list(lib.nn.utils.rnn.pack_sequence(
        _seqs(lib)[::-1], enforce_sorted=False))),
    ("pack_sequence-unsorted-enforced", lambda lib: list(lib.nn.utils.rnn.pack_sequence(
        _seqs(lib)[::-1]))),
    ("pack_padded", lambda lib: list(lib.nn.utils.rnn.pack_padded_sequence(
        lib.nn.utils.rnn.pad_sequence(_seqs(lib)), [3, 2, 1]))),
    ("pack_padded-tensor-lengths", lambda lib: list(lib.nn.utils.rnn.pack_padded_sequence(
        lib.nn.utils.rnn.pad_sequence(_seqs(lib), True), lib.tensor([1, 3, 2]),
        batch_first=True, enforce_sorted=False))),
    ("pack_padded-zero-length", lambda lib: list(lib.nn.utils.rnn.pack_padded_sequence(
        lib.nn.utils.rnn.pad_sequence(_seqs(lib)), [3, 2, 0]))),
    ("pad_packed", lambda lib: list(lib.nn.utils.rnn.pad_packed_sequence(
        lib.nn.utils.rnn.pack_sequence(_seqs(lib)), batch_first=True, total_length=5))),
    ("pad_packed-short-total", lambda lib: list(lib.nn.utils.rnn.pad_packed_sequence(
        lib.nn.utils.rnn.pack_sequence(_seqs(lib)), total_length=2))),
    ("unpad_sequence", lambda lib: lib.nn.utils.rnn.unpad_sequence(
        lib.nn.utils.rnn.pad_sequence(_seqs(lib)), lib.tensor([3, 2, 1]))),
    ("unpack_sequence", lambda lib: lib.nn.utils.rnn.unpack_sequence(
        lib.nn.utils.rnn.pack_sequence(_seqs(lib)))),
    ("fuse_conv_bn_eval", _fuse_conv),
    ("fuse_linear_bn_eval", _fuse_linear),
    ("functional_call", _functional_call({"weight": lambda lib: lib.ones(2, 3) * 2})),
    ("functional_call-strict", _functional_call(
        {"weight": lambda lib: lib.ones(2, 3) * 2, "bias": lambda lib: lib.zeros(2),
         "extra": lambda lib: lib.ones(1)}, strict=True)),
]


@pytest.mark.parametrize("name, fn", CASES, ids=[c[0] for c in CASES])
def test_nn_utils_against_torch(name, fn):
    (got, gw), (want, ww) = _run(llgrad, fn), _run(torch, fn)
    _close(got, want)
    assert gw == ww
