"""The meta device reviewed against PyTorch's: functions that read values with NumPy give
meta results (not CPU tensors of made-up values) or PyTorch's errors, composites whose
own CPU constants meet meta tensors (interpolate, adaptive pooling, embedding_bag, cummax,
quantile, RNN cells, packed sequences) run, backward's given gradients on the wrong device,
boolean-mask writes, reprs wrapped as PyTorch's, and the CPU path unchanged afterwards."""
import io
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime import meta_dispatch

torch = pytest.importorskip("torch")

M = "meta"


@pytest.fixture(autouse=True, scope="module")
def _meta_hook_out_afterwards():
    yield
    meta_dispatch.uninstall()


def _norm(x):
    if isinstance(x, (list, tuple)) and not isinstance(x, (torch.Size, llgrad.Size)):
        return [_norm(v) for v in x]
    if isinstance(x, (torch.Tensor, llgrad.Tensor)):
        return ("T", tuple(x.shape), str(x.dtype).split(".")[-1], x.device.type,
                x.requires_grad)
    if isinstance(x, str):
        return x.replace("llgrad.", "torch.")
    return x


def _run(fn, lib):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ("ok", _norm(fn(lib)))
    except Exception as e:      # noqa: BLE001 (the error type is compared)
        return ("error", type(e).__name__)


def same(fn):
    got, want = _run(fn, llgrad), _run(fn, torch)
    assert got == want, (got, want)
    return got


def E(lib, *shape, **kw):
    return lib.empty(*shape, device=M, **kw)


@pytest.mark.parametrize("fn", [
    lambda L: L.frexp(E(L, 3, 4)), lambda L: E(L, 3, dtype=L.float64).frexp(),
    lambda L: L.nextafter(E(L, 3, 1), E(L, 4, dtype=L.float64)),
    lambda L: L.igamma(E(L, 3, 1), E(L, 4)), lambda L: E(L, 2).igammac(E(L, 2)),
    lambda L: L.special.gammainc(E(L, 3), E(L, 3)),
    lambda L: L.special.gammaincc(E(L, 3, 1), E(L, 2)),
    lambda L: E(L, 7).histc(10), lambda L: L.histc(E(L, 7, dtype=L.float64)),
    lambda L: L.searchsorted(E(L, 5), E(L, 3, 2), out_int32=True),
    lambda L: L.searchsorted(L.arange(5.0), E(L, 3, 2)),
    lambda L: L.poisson(E(L, 5)),
    lambda L: E(L, 3, 4).masked_scatter(E(L, 3, 4, dtype=L.bool), E(L, 12)),
    lambda L: E(L, 3, 4).new(), lambda L: E(L, 3, 4).new(2, 3), lambda L: E(L, 3).set_(),
    lambda L: L.frexp(E(L, 5, requires_grad=True)),
], ids=range(17))
def test_value_reading_functions_give_meta_results(fn):
    assert same(fn)[0] == "ok"


@pytest.mark.parametrize("fn", [
    lambda L: L.binomial(E(L, 5), E(L, 5)), lambda L: L.histogram(E(L, 5)),
    lambda L: E(L, 5).histogram(3), lambda L: L.histogramdd(E(L, 5, 2), bins=3),
    lambda L: E(L, 3).to_sparse_coo(),
    lambda L: E(L, 3).repeat_interleave(E(L, 3, dtype=L.int64)),
    lambda L: L.repeat_interleave(E(L, 3, dtype=L.int64)),
    lambda L: L.frexp(E(L, 3, dtype=L.int64)),
], ids=range(8))
def test_value_reading_functions_raise_as_torch(fn):
    assert same(fn)[0] == "error"


def test_value_reading_on_meta_takes_no_draw_and_keeps_history():
    def f(lib):
        lib.manual_seed(0)
        lib.poisson(E(lib, 5))
        x = E(lib, 5, requires_grad=True)
        m, e = lib.frexp(x)
        m.sum().backward()
        return lib.rand(3).tolist(), m.grad_fn is not None, x.grad, e
    assert same(f)[1][1] is True       # (the draws after it: the seed's first, as torch's)


@pytest.mark.parametrize("fn", [
    lambda L: L.nn.functional.interpolate(E(L, 2, 3, 5, 5), scale_factor=2, mode="bilinear"),
    lambda L: L.nn.functional.interpolate(E(L, 2, 3, 5, 5), size=(7, 9), mode="bicubic",
                                          align_corners=True),
    lambda L: L.nn.functional.interpolate(E(L, 2, 3, 5), size=8, mode="linear"),
    lambda L: L.nn.functional.adaptive_avg_pool2d(E(L, 2, 3, 9, 9), (2, 3)),
    lambda L: L.nn.functional.adaptive_avg_pool1d(E(L, 2, 3, 10), 3),
    lambda L: L.nn.functional.adaptive_avg_pool3d(E(L, 2, 3, 5, 5, 5), 3),
    lambda L: L.nn.functional.fold(E(L, 2, 27, 49), (9, 9), 3),
    lambda L: L.nn.functional.affine_grid(E(L, 2, 2, 3), (2, 3, 4, 4), align_corners=False),
    lambda L: L.nn.functional.ctc_loss(E(L, 5, 2, 4).log_softmax(2),
                                       L.ones(2, 3, dtype=L.int64), [5, 5], [3, 3]),
    lambda L: L.nn.functional.embedding_bag(L.tensor([0, 1, 2, 3]), E(L, 5, 3),
                                            L.tensor([0, 2])),
    lambda L: L.cummax(E(L, 3, 4), 1), lambda L: E(L, 3, 4).cummin(0),
    lambda L: E(L, 3, 4).logcumsumexp(1), lambda L: E(L, 3, 4).mode(1),
    lambda L: E(L, 3, 4).quantile(0.5, dim=1), lambda L: E(L, 3, 4).nanquantile(0.5),
], ids=range(16))
def test_composites_with_cpu_constants_run_on_meta(fn):
    assert same(fn)[0] == "ok"


def test_mixing_devices_in_a_composite_result_still_raises():
    same(lambda L: L.nn.functional.interpolate(E(L, 2, 3, 5, 5), size=(7, 9),
                                               mode="bilinear") + L.ones(2, 3, 7, 9))


def test_models_with_composites_build_and_backpropagate_on_meta():
    def f(lib):
        nn = lib.nn
        with lib.device(M):
            vgg = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d((7, 7)), nn.Flatten(),
                                nn.Linear(196, 3))
            up = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1),
                               nn.Upsample(scale_factor=2, mode="bilinear"))
            bag = nn.EmbeddingBag(10, 3, mode="mean")
        out = [vgg(E(lib, 2, 3, 14, 14)), up(E(lib, 2, 3, 5, 5)),
               bag(lib.tensor([1, 2, 3, 4]), lib.tensor([0, 2]))]
        sum(o.sum() for o in out).backward()
        return out + [p.grad for m in (vgg, up, bag) for p in m.parameters()]
    same(f)


def test_rnn_cells_and_packed_sequences_on_meta():
    def f(lib):
        nn = lib.nn
        with lib.device(M):
            cells = [nn.LSTMCell(3, 4), nn.GRUCell(3, 4), nn.RNNCell(3, 4)]
            gru, lstm = nn.GRU(3, 4), nn.LSTM(3, 4, bidirectional=True)
        x = E(lib, 2, 3)
        out = [c(x) for c in cells]
        packed = nn.utils.rnn.pack_padded_sequence(E(lib, 5, 2, 3), [5, 3])
        o, h = gru(packed)
        o2, (h2, c2) = lstm(nn.utils.rnn.pack_padded_sequence(E(lib, 5, 2, 3), [3, 5],
                                                              enforce_sorted=False))
        seq = nn.utils.rnn.pad_sequence([E(lib, 3, 2), E(lib, 5, 2)])
        return out + [o.data, h, o2.data, h2, c2, seq]
    same(f)


@pytest.mark.parametrize("fn", [
    lambda L: (lambda x: (x.sum().backward(L.ones(())), x.grad)[1])(E(L, 3, requires_grad=True)),
    lambda L: (lambda x: (x * 2).backward(L.ones(3)))(E(L, 3, requires_grad=True)),
    lambda L: (lambda x: L.autograd.grad(x * 2, x, L.ones(3)))(E(L, 3, requires_grad=True)),
    lambda L: (lambda x: x.sum().backward(E(L, ())))(L.ones(3, requires_grad=True)),
], ids=range(4))
def test_backward_given_gradients_on_another_device(fn):
    same(fn)


def test_boolean_mask_writes_into_meta_tensors():
    def f(lib):
        t = E(lib, 5, 6)
        t[E(lib, 5, 6, dtype=lib.bool)] = 1.0
        t[E(lib, 5, 6, dtype=lib.bool)] = E(lib, 7)
        t[E(lib, 5, dtype=lib.bool)] = E(lib, 6)
        t[t.new_zeros(5, dtype=lib.bool)] = 2.0
        return t._version, t
    same(f)


def test_meta_repr_wraps_as_torch():
    def f(lib):
        x = E(lib, 2, 4, 10, 10, requires_grad=True)
        out = [repr(x * 2), repr(E(lib, 3, 1000, 20000, 40, dtype=lib.float64,
                                   requires_grad=True)),
               str(lib.nn.Parameter(E(lib, 1000, 1000, 1000))), f"{E(lib, 2)}"]
        lib.set_printoptions(linewidth=40)
        try:
            out.append(repr(x))
        finally:
            lib.set_printoptions(linewidth=80)
        return out
    same(f)


def test_cpu_results_unchanged_after_meta_tensors():
    E(llgrad, 2) + 1        # (the dispatcher's meta hook is in)
    rng = np.random.RandomState(0)
    a = rng.rand(4, 5).astype(np.float32) * 3
    img = rng.rand(2, 3, 5, 5).astype(np.float32)

    def f(lib):
        x, im = lib.tensor(a), lib.tensor(img)
        lib.manual_seed(0)
        cell = lib.nn.LSTMCell(5, 3)
        gru = lib.nn.GRU(5, 3)
        packed = lib.nn.utils.rnn.pack_padded_sequence(x.reshape(2, 2, 5), [2, 1])
        return [lib.frexp(x)[0], lib.frexp(x)[1], x.histc(7), lib.igamma(x, x + 1),
                lib.searchsorted(lib.arange(5.0), x), lib.cummax(x, 1)[1],
                x.quantile(0.3, dim=0), lib.nextafter(x, lib.zeros(())),
                lib.nn.functional.interpolate(im, scale_factor=2, mode="bilinear"),
                lib.nn.functional.adaptive_avg_pool2d(im, (2, 3)), cell(x)[1],
                gru(packed)[1], x.new(2).shape, x.repeat_interleave(lib.tensor([1, 2, 0, 1]),
                                                                    dim=0)]
    for g, w in zip(f(llgrad), f(torch)):
        if isinstance(w, torch.Tensor):
            assert g.device.type == "cpu" and str(g.dtype)[7:] == str(w.dtype)[6:]
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-5,
                                       atol=1e-6)
        else:
            assert tuple(g) == tuple(w)


def test_compiled_calls_with_meta_inputs_and_cpu_afterwards():
    def fn(x, w):
        return (x @ w).relu().sum(-1)
    cf = llgrad.compile(fn)
    rng = np.random.RandomState(1)
    x, w = rng.randn(3, 4).astype(np.float32), rng.randn(4, 5).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = cf(E(llgrad, 3, 4), E(llgrad, 4, 5))
        assert r.is_meta and tuple(r.shape) == (3,)
        got = cf(llgrad.tensor(x), llgrad.tensor(w))
    np.testing.assert_allclose(got.numpy(), fn(torch.tensor(x), torch.tensor(w)).numpy(),
                               rtol=1e-5)


def test_checkpoint_of_meta_state_dict_roundtrips():
    def f(lib):
        with lib.device(M):
            m = lib.nn.GRU(3, 4)
        buf = io.BytesIO()
        lib.save(m.state_dict(), buf)
        buf.seek(0)
        return sorted((k, _norm(v)) for k, v in lib.load(buf).items())
    same(f)


@pytest.mark.parametrize("fn", [
    lambda L: L.tensor(E(L, 3), device="cpu"), lambda L: L.as_tensor(E(L, 3), device="cpu"),
    lambda L: L.asarray(E(L, 3), device="cpu"), lambda L: L.asarray(L.ones(3), device=M),
    lambda L: L.as_tensor(E(L, 3), dtype=L.float64), lambda L: L.tensor(L.ones(2), device=M),
], ids=range(6))
def test_tensors_from_data_across_devices(fn):
    same(fn)


@pytest.mark.parametrize("fn", [
    lambda L: L.normal(E(L, 3), 1.0), lambda L: L.normal(E(L, 3), E(L, 2, 1)),
    lambda L: L.normal(0.0, 1.0, (3,), device=M),
    lambda L: L.nn.functional.rrelu(E(L, 5), training=True),
    lambda L: L.nn.functional.adaptive_max_pool2d(E(L, 1, 2, 7, 7), 3, return_indices=True),
    lambda L: L.nn.functional.fractional_max_pool2d(E(L, 1, 2, 8, 8), 2, output_size=4),
    lambda L: L.nn.functional.embedding(L.tensor([0, 1]), E(L, 4, 3), max_norm=1.0),
], ids=range(7))
def test_random_and_pooling_functions_on_meta(fn):
    def f(lib):
        lib.manual_seed(0)
        return fn(lib), lib.rand(2).tolist()     # (no draw taken on the meta device)
    assert same(f)[0] == "ok"


def test_meta_gradients_never_reach_cpu_tensors():
    def f(lib):
        s = lib.tensor(2.0, requires_grad=True)
        x = E(lib, 3, requires_grad=True)
        return lib.autograd.grad((x * s).sum(), s)

    def g(lib):
        s = lib.tensor(2.0, requires_grad=True)
        (E(lib, 3, requires_grad=True) * s).sum().backward()
    assert same(f)[0] == same(g)[0] == "error"


def test_cpu_programs_inside_a_meta_device_block():
    def f(lib):
        img = lib.arange(18.0, device="cpu").reshape(1, 2, 3, 3)
        p = lib.nn.Parameter(lib.arange(3.0, device="cpu"))
        with lib.device(M):
            up = lib.nn.functional.interpolate(img, scale_factor=2, mode="bilinear")
            opt = lib.optim.AdamW([p], lr=0.1)
            (p * p).sum().backward()
            opt.step()
        return up.device.type, [up.sum().item()] + p.detach().tolist()
    got, want = f(llgrad), f(torch)
    assert got[0] == want[0] and np.allclose(got[1], want[1], rtol=1e-6)


def test_interpolate_on_meta_keeps_torch_history():
    def f(lib):
        x = E(lib, 2, 3, 9, 9, requires_grad=True)
        return [repr(lib.nn.functional.interpolate(x, scale_factor=2, mode=m)) for m in
                ("bilinear", "bicubic")]
    same(f)


@pytest.mark.parametrize("fn", [
    lambda L: E(L, 3).untyped_storage().tolist(), lambda L: E(L, 3).untyped_storage()[0],
    lambda L: list(E(L, 3).untyped_storage()), lambda L: E(L, 3).storage().tolist(),
    lambda L: E(L, 3).storage()[1], lambda L: E(L, 3).untyped_storage().cpu(),
], ids=range(6))
def test_meta_storages_have_no_values_to_read(fn):
    assert same(fn)[0] == "error"


def test_cpu_storages_read_as_before():
    E(llgrad, 1)
    same(lambda L: (L.arange(3.0).untyped_storage().tolist(), L.arange(3.0).storage().tolist(),
                    L.arange(3.0).storage()[1]))


def test_resize_of_meta_tensors():
    def f(lib):
        t = E(lib, 3)
        v = t[:2]
        t.resize_(4, 5)
        u = E(lib, 2).resize_as_(E(lib, 3, 2))
        return (t, t.stride(), t._version, v, t.untyped_storage().nbytes(), u, u.stride())
    same(f)
