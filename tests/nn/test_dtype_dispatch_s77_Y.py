"""nn.functional against PyTorch on the dtypes ATen's kernels dispatch over.
multi_margin_loss / multilabel_margin_loss take float and double inputs only and read the
class weight with the input's type (a weight of another dtype is an error when the batch is
not empty), checking target size, dtype dispatch, target type, weight type, target range in
that order; binary_cross_entropy refuses integer inputs, pdist half ones (with two rows or
more), antialiased interpolate half ones unless the size is unchanged. Also eager ==
compiled == PyTorch on values and gradients of a valid weighted multi_margin_loss."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _outcome(f, lib):
    try:
        f(lib)
    except Exception as e:              # noqa: BLE001 (the comparison is the point)
        return type(e).__name__, str(e).split("\n")[0].replace("torch", "llgrad")
    return "ok", None


def _same_as_torch(f):
    assert _outcome(f, llgrad) == _outcome(f, torch)


def _mm(dt, tgt=(0, 1), wdt=None, n=2, tgt_dt=None):
    def f(L):
        d = getattr(L, dt)
        w = None if wdt is None else L.ones(3, dtype=getattr(L, wdt))
        t = L.tensor(list(tgt)[:n], dtype=getattr(L, tgt_dt or "int64"))
        return L.nn.functional.multi_margin_loss(L.zeros(n, 3, dtype=d), t, weight=w)
    return f


@pytest.mark.parametrize("f", [
    _mm("float16"), _mm("bfloat16"), _mm("int64"), _mm("float64"),
    _mm("float32", wdt="float64"), _mm("float64", wdt="float32"), _mm("float64", wdt="int64"),
    _mm("float32", wdt="float16"), _mm("int64", wdt="int64"),
    _mm("float32", wdt="float64", tgt_dt="float32"),   # the target's type is checked first
    _mm("float16", tgt=(0, 7)),                         # dispatch before the range check
    _mm("float32", tgt=(0, 7), wdt="float64"),          # the weight's type before the range
    _mm("float32", wdt="float64", n=0),                 # an empty batch reads no weight
], ids=lambda f: "")
def test_multi_margin_loss_dtype_checks_match_torch(f):
    _same_as_torch(f)


def _mlm(dt, tgt=((0, 1, -1), (2, -1, 0)), tgt_dt="int64"):
    return lambda L: L.nn.functional.multilabel_margin_loss(
        L.zeros(2, 3, dtype=getattr(L, dt)), L.tensor(tgt, dtype=getattr(L, tgt_dt)))


@pytest.mark.parametrize("f", [
    _mlm("float16"), _mlm("bfloat16"), _mlm("int64"), _mlm("float64"), _mlm("float32"),
    _mlm("float16", tgt_dt="float32"),                  # dispatch before the target's type
    _mlm("int64", tgt=((0, 1, -1), (2, -1, 9))),        # the range before the dispatch
    _mlm("float32", tgt_dt="float32"),
], ids=lambda f: "")
def test_multilabel_margin_loss_dtype_checks_match_torch(f):
    _same_as_torch(f)


def test_half_inputs_still_run_under_autocast():
    # (autocast's float32 policy casts them before the dispatch, in both libraries)
    for L in (torch, llgrad):
        with L.autocast("cpu", dtype=L.bfloat16):
            out = L.nn.functional.multi_margin_loss(L.zeros(2, 3, dtype=L.bfloat16),
                                                    L.tensor([0, 1]))
        assert out.dtype == L.float32


def test_weighted_multi_margin_loss_eager_compiled_and_torch_agree():
    rs = np.random.RandomState(0)
    x0, w0 = rs.randn(5, 4), rs.rand(4) + 0.5
    y0 = np.array([0, 3, 1, 1, 2])

    def loss(L, x, y, w):
        return L.nn.functional.multi_margin_loss(x, y, p=2, margin=0.7, weight=w,
                                                 reduction="sum")

    tx = torch.tensor(x0, requires_grad=True)
    want = loss(torch, tx, torch.tensor(y0), torch.tensor(w0))
    want.backward()
    compiled = llgrad.compile(lambda *a: loss(llgrad, *a))
    for run in (lambda *a: loss(llgrad, *a), compiled, compiled):
        lx = llgrad.tensor(x0, requires_grad=True)
        got = run(lx, llgrad.tensor(y0), llgrad.tensor(w0))
        got.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
        np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-14)
        if run is compiled:
            compiled.wait()
    assert compiled.n_traces == 1
    with pytest.raises(RuntimeError, match="expected scalar type Double but found Float"):
        compiled(llgrad.tensor(x0), llgrad.tensor(y0), llgrad.tensor(w0, dtype=llgrad.float32))


def _bce(dt, fill=0, tdt=None):
    return lambda L: L.nn.functional.binary_cross_entropy(
        L.full((2, 3), fill, dtype=getattr(L, dt)),
        L.full((2, 3), fill, dtype=getattr(L, tdt or dt)))


def _pdist(dt, n, m, p=2.0):
    return lambda L: L.nn.functional.pdist(L.ones(n, m, dtype=getattr(L, dt)), p=p)


def _aa(dt, size, mode="bilinear"):
    return lambda L: L.nn.functional.interpolate(L.ones(1, 2, 4, 4, dtype=getattr(L, dt)),
                                                 size=size, mode=mode, antialias=True)


@pytest.mark.parametrize("f", [
    _bce("int64"), _bce("int32"), _bce("int64", fill=2), _bce("bool"), _bce("int64", tdt="float32"),
    _bce("float16"), _bce("float64"),
    _pdist("float16", 3, 2), _pdist("bfloat16", 3, 2), _pdist("float16", 1, 3),
    _pdist("float16", 3, 0), _pdist("float16", 3, 2, p=-1.0), _pdist("float16", 3, 2, p=0.0),
    _pdist("float32", 3, 2),
    _aa("bfloat16", 3), _aa("bfloat16", (4, 5)), _aa("float16", (4, 3), "bicubic"),
    _aa("float16", 4), _aa("bfloat16", (4, 4), "bicubic"),
], ids=lambda f: "")
def test_kernel_dtype_dispatch_matches_torch(f):
    _same_as_torch(f)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_unresized_half_antialias_forward_is_a_copy_as_in_torch(dt):
    # (PyTorch's backward then has no half kernel: that error is not mirrored)
    x0 = np.random.RandomState(0).randn(1, 2, 4, 3)
    outs = []
    for L in (torch, llgrad):
        out = L.nn.functional.interpolate(L.tensor(x0, dtype=getattr(L, dt)), size=(4, 3),
                                          mode="bilinear", antialias=True)
        outs.append((out.float().numpy(), str(out.dtype).split(".")[-1]))
    np.testing.assert_array_equal(outs[1][0], outs[0][0])
    assert outs[1][1] == outs[0][1]
