"""bfloat16 against PyTorch where the sweep found it apart: functions that built a NumPy
array of the tensor's dtype by name (adaptive_avg_pool2d, affine_grid, logspace), PyTorch's
messages naming BFloat16 (name tables without it raised KeyError), storages, resize_,
DLPack export, and the overflow checks of numbers stored into a bfloat16 tensor."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as LF

torch = pytest.importorskip("torch")
TF = torch.nn.functional

X = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)


def _same(got, want):
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_array_equal(got.detach().float().numpy(), want.detach().float().numpy())


@pytest.mark.parametrize("size", [3, (5, 3), (3, 8), 1])
def test_adaptive_avg_pool2d_sums_in_float32_and_rounds_once(size):
    got = llgrad.tensor(X).bfloat16().requires_grad_()
    want = torch.tensor(X).bfloat16().requires_grad_()
    y, w = LF.adaptive_avg_pool2d(got, size), TF.adaptive_avg_pool2d(want, size)
    _same(y, w)
    y.backward(llgrad.ones_like(y) / 3)
    w.backward(torch.ones_like(w) / 3)
    # (PyTorch's backward kernel adds each window's share in bfloat16: a few roundings)
    np.testing.assert_allclose(got.grad.float().numpy(), want.grad.float().numpy(),
                               rtol=2 ** -7, atol=0)


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 3, 7, 3)])
def test_affine_grid_of_bfloat16_theta(size, align):
    theta = X[:, 0, :2, :3]
    got = LF.affine_grid(llgrad.tensor(theta).bfloat16(), size, align_corners=align)
    _same(got, TF.affine_grid(torch.tensor(theta).bfloat16(), size, align_corners=align))


@pytest.mark.parametrize("args", [(0, 2, 5), (0.1, 3.3, 17), (-3.7, 5.1, 33, 2.0), (1, 1, 1)])
def test_logspace_bfloat16_is_bfloat16(args):
    base = args[3] if len(args) > 3 else 10.0
    _same(llgrad.logspace(*args[:3], base=base, dtype=llgrad.bfloat16),
          torch.logspace(*args[:3], base=base, dtype=torch.bfloat16))


def _error(M, fn):
    with pytest.raises(Exception) as e:
        fn(M)
    return type(e.value).__name__, str(e.value).split(" (at ")[0]


@pytest.mark.parametrize("fn", [
    lambda M: M.lerp(M.ones(2).bfloat16(), M.ones(2), 0.5),
    lambda M: M.mm(M.ones(2, 2).bfloat16(), M.ones(2, 2).bfloat16(), out=M.zeros(2, 2)),
    lambda M: M.nn.functional.binary_cross_entropy(M.ones(3).bfloat16() / 2, M.ones(3) / 2),
    lambda M: M.nn.functional.grid_sample(M.ones(1, 1, 3, 3).bfloat16(), M.zeros(1, 2, 2, 2),
                                          align_corners=False),
    lambda M: M.where(M.ones(3).bfloat16(), M.ones(3), M.ones(3)),
    lambda M: M.ones(2).bfloat16().fill_(1e39),
    lambda M: M.full((2,), -3.4e38, dtype=M.bfloat16),
    lambda M: M.ones(2).bfloat16().clamp(max=1e39),
    lambda M: M.ones(2).bfloat16().pow(1e39),
], ids=["lerp", "out", "bce", "grid_sample", "where", "fill_", "full", "clamp", "pow"])
def test_errors_name_bfloat16_as_torch(fn):
    assert _error(llgrad, fn) == _error(torch, fn)


def test_numbers_in_range_and_setitem_do_not_raise():
    for M in (llgrad, torch):
        x = M.ones(3, dtype=M.bfloat16)
        x[0] = 1e39                         # (copy_ rounds it: inf, as PyTorch's)
        x.fill_(3.3895313892515355e38)      # (bfloat16's largest value)
        assert x[0].item() == 3.3895313892515355e38


def test_storage_of_a_bfloat16_tensor():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for_both = [(M, M.ones(3).bfloat16()) for M in (llgrad, torch)]
        got = []
        for M, t in for_both:
            s = t.storage()
            s[0] = 1.23456                  # (rounded as PyTorch's: the memory holds bfloat16)
            got.append((s.tolist(), t.float().tolist(), s.element_size(),
                        t.storage_type().__name__, M.BFloat16Storage([1 / 3]).tolist()))
    assert got[0] == got[1]


def test_random_of_bfloat16():
    got = []
    for M in (llgrad, torch):
        M.manual_seed(0)
        t = M.empty(6, dtype=M.bfloat16)
        got.append((t.random_().tolist(), t.random_(10).tolist(),
                    M.randint_like(t, 7).tolist()))
    assert got[0] == got[1]


def test_resize_of_bfloat16():
    got = []
    for M in (llgrad, torch):
        t = (M.arange(6.0) * 1.1).bfloat16()
        t.resize_(2, 2)
        got.append(t.float().tolist())
    assert got[0] == got[1]


def test_dlpack_export_of_bfloat16_raises_in_llgrad_s_words():
    with pytest.raises(NotImplementedError, match="BFloat16"):
        torch.from_dlpack(llgrad.ones(2).bfloat16())
    assert torch.from_dlpack(llgrad.ones(2)).tolist() == [1.0, 1.0]


@pytest.mark.parametrize("fn", [
    lambda M, x: x.contiguous(memory_format=M.channels_last),
    lambda M, x: x.clone(memory_format=M.channels_last),
    lambda M, x: x.to(memory_format=M.channels_last),
    lambda M, x: x.float().to(memory_format=M.channels_last).bfloat16(),
], ids=["contiguous", "clone", "to", "cast"])
def test_channels_last_bfloat16_keeps_its_layout(fn):
    got, want = fn(llgrad, llgrad.tensor(X).bfloat16()), fn(torch, torch.tensor(X).bfloat16())
    assert got.stride() == want.stride()
    _same(got, want)


@pytest.mark.parametrize("dtype", ["bfloat16", "float64"])
def test_logspace_out_computes_in_out_s_dtype(dtype):
    got = llgrad.logspace(0, 1.0019, 5, out=llgrad.empty(5, dtype=getattr(llgrad, dtype)))
    _same(got, torch.logspace(0, 1.0019, 5, out=torch.empty(5, dtype=getattr(torch, dtype))))
