"""torch.histc with its range given (a calibration plot's histc(conf, bins, 0, 1)) inside
llgrad.compile: traced, not a fallback to eager, and the same counts as PyTorch's, also
at the bin edges, at max itself, for NaN, inf and elements outside the range. Over the
data's own range (min == max) it still runs eagerly with the warning."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _histc(x, bins, lo, hi):
    return llgrad.histc(x, bins=bins, min=lo, max=hi)


@pytest.mark.parametrize("dtype, bins, lo, hi", [("float32", 5, 0.0, 1.0),
                                                  ("float32", 6, 0.1, 0.7),
                                                  ("float64", 7, -1.0, 0.5)])
def test_histc_with_range_compiles_and_equals_torch(dtype, bins, lo, hi):
    rng = np.random.default_rng(bins)
    cf = llgrad.compile(_histc)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            a = rng.standard_normal(64).astype(dtype)
            a[:5] = [lo, hi, np.nan, np.inf, -np.inf]
            a[5:5 + bins + 1] = lo + (hi - lo) * np.arange(bins + 1) / bins   # (the edges)
            want = torch.histc(torch.tensor(a), bins, lo, hi).numpy()
            got = cf(llgrad.tensor(a), bins, lo, hi).numpy()
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    assert cf.entries and not cf.graph_breaks


def test_histc_in_a_training_step_has_no_gradient_and_compiles():
    w = llgrad.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)

    def step(x):
        conf = llgrad.softmax(x @ w, 1).max(1).values
        loss = conf.sum()
        loss.backward()
        return loss.detach(), llgrad.histc(conf, 4, 0, 1)

    cf = llgrad.compile(step)
    x = np.array([[1.0, 2.0], [0.0, -1.0], [3.0, 0.5]], np.float32)
    tw = torch.tensor(w.detach().numpy(), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, counts = cf(llgrad.tensor(x))
    tconf = torch.softmax(torch.tensor(x) @ tw, 1).max(1).values
    tconf.sum().backward()
    np.testing.assert_array_equal(counts.numpy(), torch.histc(tconf.detach(), 4, 0, 1).numpy())
    assert not counts.requires_grad
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-7)
    assert cf.entries


def test_histc_over_the_datas_range_still_falls_back_with_a_warning():
    cf = llgrad.compile(lambda x: x.histc(4))
    x = llgrad.tensor([0.0, 1.0, 2.0, 3.5])
    with pytest.warns(UserWarning, match="histc"):
        got = cf(x)
    np.testing.assert_array_equal(got.numpy(), torch.tensor(x.numpy()).histc(4).numpy())
