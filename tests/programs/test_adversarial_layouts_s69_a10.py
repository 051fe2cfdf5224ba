"""NaN, ties and signed zeros through non-contiguous inputs (transposed, stepped, expanded
with 0 strides, a narrow of a wider base, a diagonal) to order statistics, reductions,
in-place writes and indexing, values and the base leaf's .grad: torch, llgrad eager and
llgrad.compile (adversarial_harness_s69_a10.check)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case; the fast regressions are in
# test_adversarial_regressions_s69_a10.py)

nan, inf = float("nan"), float("inf")
rng = np.random.default_rng(7)
BASE = rng.standard_normal((9, 40)).astype(np.float32)
BASE[0, 3] = nan
BASE[4, 17] = nan
BASE[2, :] = 1.0                  # (a row of ties)
BASE[5, 6] = inf
BASE[6, 1::2] = -0.0
BASE[6, ::2] = 0.0

LAYOUTS = {
    "transposed": lambda t: t.t(),
    "stepped": lambda t: t[::2, 1::3],
    "expanded": lambda t: t[3:4].expand(5, 40),
    "narrow": lambda t: t.narrow(1, 5, 33),
    "diagonal_rows": lambda t: t[:, :9].diagonal().unsqueeze(0).expand(3, 9),
    "flipped": lambda t: t.flip(1)[:, 2:],
}


def order_stats(torch, x):
    return (x.max(1), x.amin(0), x.argmax(0), x.sort(1).values, x.topk(3, 1), x.median(1),
            x.cummax(1).values, x.kthvalue(2, 0))


def reductions(torch, x):
    return x.sum(1), x.mean(0), x.std(1), x.logsumexp(1), x.norm(dim=0), torch.softmax(x, 1), x.nansum()


def elementwise(torch, x):
    return x * 2 + 1, x.clamp(-0.5, 0.5), torch.where(x > 0, x, x.exp()), x.abs().sqrt(), torch.maximum(x, x.flip(0))


def writes_to_a_copy(torch, x):
    y = x.clone()
    y[y > 0.5] = 0.5
    y.mul_(2)[:, ::2] += 1
    y.t().clamp_(max=1.5)
    return y, y.sum(0)


def indexing(torch, x):
    i = torch.tensor([0, -1, 1, 0])
    return x[i], x[:, i], x[x > 1], x.gather(1, i.abs().unsqueeze(0).expand(x.shape[0], 4)), x.index_select(1, i.abs())


CASES = [order_stats, reductions, elementwise, writes_to_a_copy, indexing]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("grad", [False, True])
def test_non_contiguous_inputs(fn, layout, grad):
    check(fn, ("view", BASE, grad, LAYOUTS[layout]), atol=1e-5, rtol=1e-5)
