"""Writes to the inputs with NaN, inf and repeated indices about (clamp_, nan_to_num_,
masked_fill_, index_put_ with accumulate, setitem through transposed and stepped views of
an input, copy_ from a broadcast, an input written then read): the inputs' values after
each call, the results and gradients; torch, llgrad eager and llgrad.compile
(adversarial_harness_s69_a10.check observes the inputs after the call)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case; the fast regressions are in
# test_adversarial_regressions_s69_a10.py)

nan, inf = float("nan"), float("inf")
X = np.array([[1.0, nan, -inf, 0.5], [inf, -2.0, 0.0, nan], [3.0, -0.0, 7.5, -1.0]], np.float32)
W = np.array([[0.5, -1.0, 2.0, 1.0], [1.5, 0.25, -0.5, 2.0], [1.0, 1.0, -1.0, 0.0]], np.float32)


def clamp_and_nan_to_num_inputs(torch, x, w):
    x.clamp_(-1.0, 2.0)
    x.nan_to_num_(nan=0.25)
    return (x * w).sum(1)


def masked_fill_input(torch, x, w):
    x.masked_fill_(x != x, -5.0)
    x[x.isinf()] = 9.0
    return x @ w.t()


def index_put_accumulate_input(torch, x, w):
    i = torch.tensor([0, 2, 0, 2])
    x.index_put_((i, torch.tensor([1, 1, 1, 3])), torch.tensor([1.0, 2.0, 3.0, inf]), accumulate=True)
    return x.nansum() * w.sum()


def setitem_through_views_of_input(torch, x, w):
    x.t()[1:3] = w[:, :2].t() * 2
    x[::2, ::3] += 1
    return x.sum(0) * w[0]


def copy_broadcast_into_input(torch, x, w):
    x[1:].copy_(w[0])
    return (x + w).amax(1)


def write_then_read_input(torch, x, w):
    y = x * w
    x.mul_(0)
    return y, x + w


_EAGER_WITH_GRAD = {setitem_through_views_of_input: "autograd history",
                    copy_broadcast_into_input: "autograd history",
                    write_then_read_input: "the backward needs"}

CASES = [clamp_and_nan_to_num_inputs, masked_fill_input, index_put_accumulate_input,
         setitem_through_views_of_input, copy_broadcast_into_input, write_then_read_input]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("w_grad", [False, True])
def test_writes_to_inputs(fn, w_grad):
    # (an input given history by a write, or a saved input written later: compile runs
    # those eagerly, with a warning naming the reason)
    warns = _EAGER_WITH_GRAD.get(fn) if w_grad else None
    check(fn, X, ("grad", W) if w_grad else W, compiled_warns=warns)
