"""NaN, inf and -0.0 at every lane of rows wide enough for the compiled kernels' vector
loops and their tails (37 and 67 columns): max/min/amax/argmax/sum/softmax/clamp/maximum/
cummax and their gradients; torch, llgrad eager and llgrad.compile
(adversarial_harness_s69_a10.check)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case; the fast regressions are in
# test_adversarial_regressions_s69_a10.py)

nan, inf = float("nan"), float("inf")


def _wide(cols, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((6, cols)).astype(np.float32)
    x[0, cols - 1] = nan            # (the last lane: a vector loop's tail)
    x[1, 0] = nan                   # (the first)
    x[1, 17] = inf
    x[2, 8:16] = nan                # (a whole vector of NaN)
    x[3, 5] = -inf
    x[3, 9] = inf
    x[4, :] = -inf                  # (a row of -inf)
    x[5, ::3] = -0.0
    x[5, 1::3] = 0.0
    x[5, 2::3] = -0.0
    return x


WIDE = [_wide(37, 0), _wide(67, 1)]


def reductions(torch, x):
    return (x.max(1), x.min(1), x.amax(1), x.amin(0), x.argmax(1), x.argmin(1), x.max(),
            x.sum(1), x.mean(0), x.nansum(1), x.prod(1))


def reductions_but_prod(torch, x):
    # (prod's gradient at NaN beside a zero: test_adversarial_regressions_s69_a10.py's xfail)
    return (x.max(1), x.min(1), x.amax(1), x.amin(0), x.argmax(1), x.max(), x.sum(1),
            x.mean(0), x.nansum(1))


def reductions_strided(torch, x):
    y = x.t()
    return y.amax(0), y.max(0), y.argmin(0), y[::2].amin(0), y.sum(0)


def elementwise(torch, x):
    return (torch.maximum(x, x.flip(1)), torch.minimum(x, torch.zeros_like(x)), torch.fmax(x, x.flip(0)),
            x.clamp(-0.5, 0.5), x.clamp(min=0.0), torch.relu(x), x.abs(), x.sign(), x.nan_to_num())


def scans_and_softmax(torch, x):
    return x.cummax(1), x.cummin(1), x.cumsum(1), torch.softmax(x, 1), torch.log_softmax(x, 1), x.logsumexp(1)


def order_stats(torch, x):
    return x.sort(1), x.topk(5, 1), x.topk(3, 1, largest=False), x.median(1), x.kthvalue(4, 1), x.argsort(1, descending=True)


def norms(torch, x):
    return x.norm(dim=1), torch.linalg.vector_norm(x, inf, 1), torch.linalg.vector_norm(x, -inf, 1), x.norm(p=1, dim=1)


def compares(torch, x):
    return x > 0, x == x, x != x.flip(1), x.isnan().sum(1), torch.isclose(x, x), (x == 0).sum(1)


CASES = [reductions, reductions_strided, elementwise, scans_and_softmax, order_stats, norms, compares]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("k", [0, 1], ids=["37", "67"])
def test_wide_rows(fn, k):
    check(fn, WIDE[k], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fn", [reductions_but_prod, elementwise, scans_and_softmax, order_stats, norms],
                         ids=lambda f: f.__name__)
def test_wide_rows_gradients(fn):
    check(fn, ("grad", WIDE[1]), atol=1e-5, rtol=1e-5)
