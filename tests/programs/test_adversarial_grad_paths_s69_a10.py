"""Which leaves get a .grad (None kept apart from zeros) when inputs are unused, reach the
result only through a zero, a detach, a mask, an index or a copy_, for each combination of
inputs requiring grad: torch, llgrad eager and llgrad.compile
(adversarial_harness_s69_a10.check)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

pytestmark = pytest.mark.slow       # (~1 s a case: a compile each; the fast regressions are
# in test_adversarial_regressions_s69_a10.py)

A = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
B = np.array([[0.0, 1.0], [2.0, -1.0]], np.float32)


def unused_input(torch, x, y):
    return x * 2


def zero_grad_path(torch, x, y):
    return x * 2 + y * 0, (y > 0).float() * x


def detached_path(torch, x, y):
    return x + y.detach(), y.detach() * 3


def where_branches(torch, x, y):
    return torch.where(x > y, x, y), torch.where(x > 0, y, 0.0)


def index_by_other(torch, x, y):
    return x[y.long().clamp(0, 1)], x.gather(0, y.long().clamp(0, 1))


def int_outputs_beside(torch, x, y):
    return x.argmax(), (x + y).sum(), y.sign()


def masked_by_eq(torch, x, y):
    return (x == x.max()).float() * y, x.max() * y


def max_between(torch, x, y):
    return torch.max(x, y), torch.min(x, x), torch.maximum(y, y)


def copy_into(torch, x, y):
    z = torch.zeros_like(x)
    z.copy_(y)
    z[0] = x[1]
    return z


def stack_same(torch, x, y):
    return torch.stack([x, x, y]), torch.cat([y, y], 1), x.expand(2, 2, 2).sum(0)


CASES = [unused_input, zero_grad_path, detached_path, where_branches, index_by_other,
         int_outputs_beside, masked_by_eq, max_between, copy_into, stack_same]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("grads", [(True, True), (True, False), (False, True)],
                         ids=["both", "x", "y"])
def test_grad_paths(fn, grads):
    check(fn, ("grad", A) if grads[0] else A, ("grad", B) if grads[1] else B)
