"""In-place ops against torch: on leaves requiring grad, on views of leaves, on views
produced in no_grad, on tensors saved for backward (the version-counter error), on
overlapping views of an intermediate; the error type torch raises or the values and
gradients it gives: torch, llgrad eager and llgrad.compile (adversarial_harness_s69_a10.check)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case; the fast regressions are in
# test_adversarial_regressions_s69_a10.py)

X = (np.arange(12, dtype=np.float32).reshape(3, 4) - 5) / 4


def inplace_on_leaf(torch, x):
    x.add_(1)
    return x


def inplace_on_view_of_leaf(torch, x):
    x[0].mul_(2)
    return x


def setitem_on_leaf(torch, x):
    x[0, 0] = 3.0
    return x


def inplace_on_leaf_no_grad(torch, x):
    with torch.no_grad():
        x.add_(1)
    return x * 2


def view_in_no_grad_then_inplace(torch, x):
    y = x * 1
    with torch.no_grad():
        v = y[0]
    v.mul_(2)
    return y


def unbind_view_inplace(torch, x):
    y = x * 1
    a, b, c = y.unbind(0)
    a.add_(1)
    return y


def split_view_inplace(torch, x):
    y = x * 1
    p, q = y.split(2, 1)
    p.mul_(3)
    return y


def saved_tensor_modified(torch, x):
    y = x * 1
    z = y.exp()
    y.add_(1)
    return z


def saved_tensor_modified_sigmoid(torch, x):
    y = x * 2
    z = y.sigmoid()
    z.mul_(2)
    return z


def saved_input_pow_modified(torch, x):
    y = x + 1
    z = y ** 2
    y.zero_()
    return z, y


def inplace_ok_after_save_not_needed(torch, x):
    y = x * 1
    z = y + 2           # (add saves nothing: changing y after is fine)
    y.mul_(5)
    return z, y


def inplace_chain_on_intermediate(torch, x):
    y = x * 1
    y.add_(1).mul_(2).clamp_(max=3.0).neg_()
    y[1:, ::2] += y[:2, 1::2]
    return y


def inplace_overlapping_views(torch, x):
    y = (x * 1).flatten()
    y[1:].add_(y[:-1])                   # (the views overlap: elementwise order, as torch)
    return y


def copy_overlapping(torch, x):
    y = x.reshape(-1) * 1
    y[2:].copy_(y[:-2].clone())
    return y


def expanded_inplace_raises(torch, x):
    y = (x * 1)[:1].expand(3, 4)
    y.add_(1)
    return y


def detach_then_inplace(torch, x):
    y = x * 2
    d = y.detach()
    d.add_(1)
    return y


def detach_inplace_saved(torch, x):
    y = x * 1
    z = y.exp()
    y.detach().add_(1)                     # (bumps the shared version: backward raises)
    return z


def data_inplace_saved(torch, x):
    y = x * 1
    z = y.exp()
    y.data.add_(1)                         # (.data does not share the version counter)
    return z


def out_argument_on_leaf(torch, x):
    torch.add(x, 1, out=x)
    return x


def out_argument_resize(torch, x):
    o = torch.empty(0)
    torch.mul(x, 2, out=o)
    return o


def requires_grad_on_non_leaf(torch, x):
    y = x * 2
    y.requires_grad_(False)
    return y


def inplace_dtype_change_raises(torch, x):
    i = (x * 0).long()
    i.add_(x)
    return i


def inplace_broadcast_raises(torch, x):
    y = (x * 1)[:, :1]
    y.add_(x)
    return y


# cases compile gives to eager, with a warning naming the reason (warned once per line, so
# the second parametrisation may see none)
_EAGER = {inplace_on_leaf_no_grad: "modified in place", out_argument_resize: "resize_",
          saved_tensor_modified_sigmoid: "the backward needs", saved_input_pow_modified:
          "the backward needs"}

LEAF_CASES = [inplace_on_leaf, inplace_on_view_of_leaf, setitem_on_leaf, inplace_on_leaf_no_grad,
              out_argument_on_leaf, requires_grad_on_non_leaf]
CASES = [view_in_no_grad_then_inplace, unbind_view_inplace, split_view_inplace,
         saved_tensor_modified, saved_tensor_modified_sigmoid, saved_input_pow_modified,
         inplace_ok_after_save_not_needed, inplace_chain_on_intermediate,
         inplace_overlapping_views, copy_overlapping, expanded_inplace_raises,
         detach_then_inplace, detach_inplace_saved, data_inplace_saved, out_argument_resize,
         inplace_dtype_change_raises, inplace_broadcast_raises]


@pytest.mark.parametrize("fn", LEAF_CASES, ids=lambda f: f.__name__)
def test_inplace_on_leaves_requiring_grad(fn):
    check(fn, ("grad", X), compiled_warns=_EAGER.get(fn))


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("grad", [False, True])
def test_inplace(fn, grad):
    check(fn, ("grad", X) if grad else X, compiled_warns=_EAGER.get(fn))
