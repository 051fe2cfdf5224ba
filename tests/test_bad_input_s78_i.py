"""Bad input, sweep 78 (I): torch 2.13 as the oracle, eagerly and inside llgrad.compile (the
same exception type and first line, the user's line the innermost frame of this file, the
compiled function usable afterwards). Found and fixed here: MultiheadAttention with kdim /
vdim given a key or value of another width (linear's RuntimeError, not PyTorch's
AssertionError), Bilinear(0, ...) (ZeroDivisionError), replicate padding of a tensor with
an empty dimension (NumPy's IndexError), scaled_dot_product_attention with an empty head
dimension (ZeroDivisionError where PyTorch returns the mean of the values), and PyTorch's
words for a reshape to a negative size, unflatten of such sizes, Tensor.new_* of negative
sizes, device strings that are not of the form type[:index] (x.to("float32")), a BCE weight
that does not broadcast, and max_pool1d of an empty channel or length."""
import itertools
import traceback
import warnings

import pytest

import llgrad

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _outcome(fn, lib, compiled=False):
    """("ok", value) or (exception type name, first line read as torch's, user line)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r = fn(lib, llgrad.compile if compiled else (lambda f: f))
        except Exception as e:      # noqa: BLE001 (the exception is what is compared)
            frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == __file__]
            return (type(e).__name__, (str(e).splitlines() or [""])[0].replace("llgrad", "torch"),
                    frames[-1].lineno if frames else None)
    if isinstance(r, tuple):
        return "ok", [x.tolist() if hasattr(x, "tolist") else x for x in r]
    return "ok", r.tolist() if hasattr(r, "tolist") else r


def _same(fn, compiled=True):
    want = _outcome(fn, torch)
    assert _outcome(fn, llgrad) == want
    if compiled:
        assert _outcome(fn, llgrad, compiled=True) == want
    return want


def _mha(t, c, q, k, v, **kw):
    t.manual_seed(0)
    m = t.nn.MultiheadAttention(8, 2, **kw)
    return c(lambda q, k, v: m(q, k, v)[0].sum())(t.ones(*q), t.ones(*k), t.ones(*v))


@pytest.mark.parametrize("kw,q,k,v", [
    (dict(kdim=4, vdim=4), (3, 2, 8), (4, 2, 5), (4, 2, 4)),        # key of another width
    (dict(kdim=4, vdim=4), (3, 2, 8), (4, 2, 4), (4, 2, 5)),        # value
    (dict(kdim=4, vdim=4, bias=False), (3, 8), (4, 5), (4, 4)),     # unbatched, no bias
    (dict(kdim=4, vdim=4, batch_first=True), (2, 3, 8), (2, 4, 5), (2, 4, 4)),
    (dict(), (3, 2, 8), (4, 2, 5), (4, 2, 5)),      # packed weights: linear's RuntimeError
])
def test_mha_key_value_width(kw, q, k, v):
    # (before: linear's RuntimeError "mat1 and mat2 shapes cannot be multiplied" for all)
    want = _same(lambda t, c: _mha(t, c, q, k, v, **kw))
    assert want[0] == ("RuntimeError" if not kw else "AssertionError")


@pytest.mark.slow
def test_mha_compiled_usable_after_the_error():
    """The error on the cached (native) path, then a good call: the same kernel's result."""
    llgrad.manual_seed(0)
    m = llgrad.nn.MultiheadAttention(8, 2, kdim=4, vdim=4)
    f = llgrad.compile(lambda q, k, v: m(q, k, v)[0].sum())
    good = (llgrad.ones(3, 2, 8), llgrad.ones(4, 2, 4), llgrad.ones(4, 2, 4))
    want = m(*good)[0].sum().item()
    assert f(*good).item() == pytest.approx(want)
    f.wait()                # (LLGRAD_COMPILE=background: the kernel is built by now)
    assert f(*good).item() == pytest.approx(want)
    assert f.n_traces == 1
    with pytest.raises(AssertionError, match=r"expecting key weights shape of \(8, 5\)"):
        f(llgrad.ones(3, 2, 8), llgrad.ones(4, 2, 5), llgrad.ones(4, 2, 4))
    assert f(*good).item() == pytest.approx(want)


def test_bilinear_without_first_features():
    # (before: ZeroDivisionError from the initialisation bound)
    for args in ((0, 2, 2), (2, 0, 2), (2, 2, 0), (-1, 2, 2)):
        _same(lambda t, c: tuple(t.nn.Bilinear(*args).weight.shape), compiled=False)


@pytest.mark.parametrize("mode", ["replicate", "reflect", "circular"])
def test_index_padding_of_empty_dimensions(mode):
    # (replicate before: NumPy's "cannot do a non-empty take from an empty axes" IndexError)
    cases = [(shape, pad) for k in (1, 2) for nd in (k + 1, k + 2)
             for shape in itertools.product((0, 2), repeat=nd)
             for pad in ((1,) * 2 * k, (0,) * 2 * k)]
    for shape, pad in cases:
        _same(lambda t, c: tuple(t.nn.functional.pad(t.ones(*shape), pad, mode=mode).shape),
              compiled=False)
    for shape, pad in ((2, 1, 0), (1, 1)), ((1, 2, 0, 2), (1, 1, 0, 0)):
        _same(lambda t, c: c(lambda x: t.nn.functional.pad(x, pad, mode=mode))(t.ones(*shape)))


def test_attention_of_an_empty_head_dimension():
    # (before: ZeroDivisionError computing 1 / sqrt(E); PyTorch's scores are 0: mean of v)
    for causal in (False, True):
        _same(lambda t, c: c(lambda q, k, v: t.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=causal))(t.ones(1, 2, 0), t.ones(1, 2, 0),
                                        t.arange(6.).view(1, 2, 3)))


@pytest.mark.parametrize("shape", [(-2, 3), (-1, -2), (-2, -1), (-1, -1, -2), (-1, -2, -1),
                                   (2, -3), (-1, 0), (4, -1)])
def test_reshape_to_negative_sizes(shape):
    # (before: "invalid shape dimension -2", and two -1 reported before a -2 ahead of them)
    _same(lambda t, c: c(lambda x: x.reshape(shape))(t.ones(6)))
    _same(lambda t, c: c(lambda x: x.view(*shape))(t.ones(6)))


@pytest.mark.parametrize("sizes", [(-1, -1), (-2, 3), (-1, -2, -1), (4, -1), (4, 2)])
def test_unflatten_to_bad_sizes(sizes):
    _same(lambda t, c: c(lambda x: x.unflatten(0, sizes))(t.ones(6)))


@pytest.mark.parametrize("src", ["x.new_empty(-1)", "x.new_zeros(2, -1)", "x.new_ones((-1,))",
                                 "x.new_full((-1,), 1.)", "x.new_zeros(2, 3)"])
def test_new_tensor_of_negative_size(src):
    # (before: "full: negative dimensions are not allowed", NumPy's words)
    _same(lambda t, c: c(lambda x: eval(src))(t.ones(2)))


@pytest.mark.parametrize("s", ["float32", "cuda:01", "cuda:-1", "cuda:", ":0", "cpu:0:1",
                               " cpu", "cpu1", "CPU", "gpu", "a:0", "ort", "cpu", "cuda:1"])
def test_device_strings(s):
    # (before: "float32" and "cpu1" got the list of device types, "ort" was accepted)
    _same(lambda t, c: repr(t.device(s)), compiled=False)


def test_moving_to_a_dtype_named_as_a_device():
    assert _same(lambda t, c: c(lambda x: x.to("float32"))(t.ones(2)))[1] == \
        "Invalid device string: 'float32'"


def test_bce_weight_that_does_not_broadcast():
    # (before: the words of broadcasting two tensors, not torch.broadcast_shapes')
    _same(lambda t, c: c(lambda x, y, w: t.nn.functional.binary_cross_entropy(x, y, w))(
        t.ones(2) * 0.5, t.ones(2), t.ones(3)))
    for args in (((2,), (3,)), ([2], [3]), (2, 3)):
        _same(lambda t, c: t.broadcast_shapes(*args), compiled=False)
    _same(lambda t, c: t.broadcast_shapes(t.Size([2]), t.Size([3])), compiled=False)


@pytest.mark.parametrize("shape", [(1, 0, 3), (0, 3), (2, 0), (0, 0, 3), (0, 2, 3), (1, 2, 0)])
def test_max_pool1d_of_an_empty_channel_or_length(shape):
    _same(lambda t, c: c(lambda x: t.nn.functional.max_pool1d(x, 1))(t.ones(*shape)))
