"""Op-level parity with torch found by the s65 t1 sweep (ties, integer scalars, dtypes of
small functions), eager and compiled:

- sort without stable=True orders equal values as PyTorch's std::sort does (its insertion
  sort is stable up to 16 elements, its introsort is not beyond): the indices, and so the
  gradient each tied element receives, were a stable sort's (eager and the native merge
  sort of compiled code);
- F.threshold / F.hardtanh read their numbers as the input's dtype, as ATen's kernels do:
  threshold -2.5 of an int8 tensor is -2, -3 of a uint8 tensor 253, with PyTorch's
  overflow error (threshold compared the raw Python number: silently other values);
- margin_ranking_loss of integer inputs is float32 (ATen's margin is a double);
  hinge_embedding_loss of integer inputs stays integer (ATen fills a tensor like input with
  the margin); soft_margin_loss of integer inputs raises PyTorch's cast error;
- adaptive_avg_pool3d of bfloat16 with uneven windows ran into NumPy's missing bfloat16;
  float16 and bfloat16 adaptive pools average in float32 as PyTorch's kernels;
- tensordot over a size-1 dim of int32 or uint8 tensors raised (a sum promoted to int64);
- igamma / igammac with a NaN operand follow PyTorch's order of special cases."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _ties(n, rows=3, seed=0):
    return np.random.RandomState(seed).randint(0, 4, (rows, n))


@pytest.mark.parametrize("dt", ["int64", "float32", "float16", "uint8", "bool"])
def test_sort_indices_among_ties(dt):
    for n in (5, 16, 17, 40, 300):
        x = _ties(n)
        t = torch.tensor(x).to(getattr(torch, dt))
        l_ = llgrad.tensor(x).to(getattr(llgrad, dt))
        if dt.startswith("float"):
            t[..., ::7] = float("nan")
            l_[..., ::7] = float("nan")
        for kw in ({}, {"descending": True}, {"stable": True},
                   {"stable": False, "descending": True}, {"dim": 0}):
            np.testing.assert_array_equal(l_.sort(**kw)[1].numpy(), t.sort(**kw)[1].numpy())
            kw_a = {k: v for k, v in kw.items() if k != "stable" or v}
            np.testing.assert_array_equal(l_.argsort(**kw_a).numpy(),
                                          t.argsort(**kw_a).numpy())


def test_sort_of_a_long_1d_integer_tensor_is_radix_stable():
    # ATen sorts 1-d integer tensors of 32768+ ascending with a (stable) radix sort
    x = np.random.RandomState(1).randint(0, 5, 32768)
    for desc in (False, True):
        want = torch.tensor(x).sort(descending=desc)[1].numpy()
        np.testing.assert_array_equal(llgrad.tensor(x).sort(descending=desc)[1].numpy(), want)


@pytest.mark.parametrize("kw", [{}, {"dim": 0}])
def test_sort_gradient_among_ties_compiled(kw):
    x = _ties(40).astype(np.float32)

    def f(L, a):
        v, i = a.sort(**kw)
        return (v * L.arange(1., v.numel() + 1).reshape(v.shape)).sum(), i

    tt = torch.tensor(x, requires_grad=True)
    tl, ti = f(torch, tt)
    tl.backward()
    cf = llgrad.compile(lambda a: f(llgrad, a))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)     # (no fallback to eager)
        for _ in range(2):
            la = llgrad.tensor(x, requires_grad=True)
            ll, li = cf(la)
            ll.backward()
            np.testing.assert_array_equal(li.numpy(), ti.numpy())
            np.testing.assert_array_equal(la.grad.numpy(), tt.grad.numpy())
    assert cf.n_traces == 1


THRESHOLDS = [("int8", -2.5, 9), ("int8", 2.7, 9), ("uint8", 2, -9), ("uint8", -3, 9),
              ("int64", 1, 2.9), ("int8", 200, 1), ("uint8", 2, -300), ("int32", 1.5, -1.5),
              ("float16", 1, 70000.), ("uint8", -2.5, 1), ("float32", 0.5, float("inf"))]


def _outcome(fn):
    try:
        r = fn()
    except Exception as e:      # noqa: BLE001 -- the error is the observation
        return type(e).__name__, str(e)
    return str(r.dtype).split(".")[-1], r.tolist()


def _data(L, dt):
    if dt == "uint8":
        return L.tensor([0, 1, 2, 3, 200], dtype=L.uint8)
    return L.tensor([-3, -2, 1, 2, 3], dtype=getattr(L, dt))


@pytest.mark.parametrize("dt,thr,value", THRESHOLDS)
def test_threshold_reads_its_numbers_as_the_input_dtype(dt, thr, value):
    want = _outcome(lambda: torch.nn.functional.threshold(_data(torch, dt), thr, value))
    got = _outcome(lambda: llgrad.nn.functional.threshold(_data(llgrad, dt), thr, value))
    assert got == want


def test_threshold_of_integers_compiled():
    cf = llgrad.compile(lambda x: llgrad.nn.functional.threshold(x, -2.5, 9))
    want = torch.nn.functional.threshold(_data(torch, "int8"), -2.5, 9).tolist()
    with warnings.catch_warnings():     # (integer threshold runs on the interpreter, warned)
        warnings.simplefilter("ignore")
        for _ in range(2):
            assert cf(_data(llgrad, "int8")).tolist() == want


@pytest.mark.parametrize("dt,lo,hi", [("int8", -200, 2), ("float16", -1e6, 2.5),
                                      ("int8", -2.5, 2.5), ("uint8", -1, 2)])
def test_hardtanh_overflow_error(dt, lo, hi):
    want = _outcome(lambda: torch.nn.functional.hardtanh(_data(torch, dt), lo, hi))
    got = _outcome(lambda: llgrad.nn.functional.hardtanh(_data(llgrad, dt), lo, hi))
    assert got == want


def _losses(L):
    F = L.nn.functional
    a, b, y = L.tensor([1, 2, 3]), L.tensor([3, 2, 1]), L.tensor([1, -1, 1])
    return {
        "mrl": lambda: F.margin_ranking_loss(a, b, y),
        "mrl_none": lambda: F.margin_ranking_loss(a, b, y, margin=1, reduction="none"),
        "mrl_aten": lambda: L.margin_ranking_loss(a, b, y, 1, 0),
        "hinge": lambda: F.hinge_embedding_loss(a, y, reduction="none"),
        "hinge_margin": lambda: F.hinge_embedding_loss(a, -y, margin=2.7, reduction="none"),
        "hinge_float": lambda: F.hinge_embedding_loss(a.float(), y, margin=2.5,
                                                      reduction="none"),
        "soft_margin": lambda: F.soft_margin_loss(a, y, reduction="none"),
    }


@pytest.mark.parametrize("name", sorted(_losses(torch)))
def test_losses_of_integer_inputs(name):
    assert _outcome(_losses(llgrad)[name]) == _outcome(_losses(torch)[name])


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("nd", [2, 3])
def test_adaptive_avg_pool_of_half_types(dt, nd):
    x = np.random.RandomState(0).randn(*(2, 3, 5, 7, 6)[5 - 2 - nd:]).astype(np.float32) * 10
    name = f"adaptive_avg_pool{nd}d"
    tx = torch.tensor(x).to(getattr(torch, dt))
    want = getattr(torch.nn.functional, name)(tx, 3).float().numpy()
    got = getattr(llgrad.nn.functional, name)(llgrad.tensor(x).to(getattr(llgrad, dt)), 3)
    assert str(got.dtype) == f"llgrad.{dt}"
    if (nd, dt) == (2, "float16"):      # (elsewhere within one rounding: the 3-d kernel
        # sums in the half type itself, bfloat16's 2-d divides in another order)
        np.testing.assert_array_equal(got.float().numpy(), want)
    else:
        np.testing.assert_allclose(got.float().numpy(), want, rtol=1e-2, atol=0.07)


@pytest.mark.parametrize("dt", ["int32", "uint8", "float16"])
def test_tensordot_over_a_size_one_dim_keeps_the_dtype(dt):
    # (the other operand summed over the size-1 dim stays in its dtype: an int32 sum was
    # int64, and the mm of int32 by int64 raised)
    def run(L):
        a = L.tensor([[[200]], [[100]]]).to(getattr(L, dt))
        b = L.tensor([[[3, 1]]]).to(getattr(L, dt))
        return [_outcome(lambda: L.tensordot(a, b, dims=d))
                for d in (([0], [0]), ([2], [1]), ([1], [2]))]
    assert run(llgrad) == run(torch)


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_igamma_special_cases_in_pytorchs_order(name):
    # (a NaN operand falls through PyTorch's cases: P(inf, nan) = 0, P(nan, inf) = 1,
    # P(nan, 0) = 0; they were all nan)
    vals = [float("inf"), -float("inf"), float("nan"), 0., 1., 2.5, -1., 1e6]
    a, x = np.meshgrid(vals, vals)
    want = getattr(torch, name)(torch.tensor(a), torch.tensor(x)).numpy()
    got = getattr(llgrad, name)(llgrad.tensor(a), llgrad.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, equal_nan=True)
