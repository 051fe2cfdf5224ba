"""The fast part of the s69 a10 adversarial sweep (the sweep itself, marked slow, is in
tests/programs/test_adversarial_*_s69_a10.py): the bugs it found, each against torch,
llgrad eager and llgrad.compile (adversarial_harness_s69_a10.check), and what it left."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

nan, inf = float("nan"), float("inf")
LOGITS = np.array([[2.0, -1.0, 0.5, 0.0], [-inf, 1.0, -inf, 3.0], [0.0, 0.0, 0.0, 0.0],
                   [100.0, -100.0, 50.0, 1.0]], np.float32)
ROWS = np.array([[1., nan, 3., 3.], [-inf, 2., inf, 2.], [0., -0., 5., nan], [4., 4., 4., 4.]],
                np.float32)


def ce_ignored_targets(torch, x):
    F = torch.nn.functional
    t = torch.tensor([-100, -100, -100, -100])
    w = torch.tensor([1.0, 0.0, 2.0, 0.5])
    return (F.cross_entropy(x, t, reduction="sum"), F.cross_entropy(x, t, reduction="none"),
            F.cross_entropy(x, torch.tensor([0, 3, 2, 1]), weight=w, ignore_index=3,
                            reduction="none"))


def test_cross_entropy_ignores_a_target_whose_class_0_logit_is_minus_inf():
    """An ignored target read class 0's log-probability and multiplied it by weight 0: -inf
    * 0 = NaN where PyTorch's loss is 0 (eager's op and the LLVM kernel both)."""
    check(ce_ignored_targets, ("grad", LOGITS))


def cumprod_nan(torch, x):
    return x.cumprod(0), x.cumprod(1), x.flip(0).cumprod(0)


def test_cumprod_gradient_leaves_out_products_past_a_zero():
    """The gradient summed products past a slice's zero (0 * NaN, 0 * inf: NaN) and
    multiplied the first zero by NaN where the slice held a NaN: PyTorch's cumprod_backward
    leaves those products out (0 after the zero, finite before it)."""
    check(cumprod_nan, ("grad", ROWS))


def prod_nan(torch, x):
    return x.prod(1), x.prod(0)


def test_prod_gradient_with_nan_beside_a_zero():
    """PyTorch's prod backward takes the products of the other elements (exclusive cumprods)
    for every element once the tensor has a zero anywhere (g * result / x only when it has
    none), so a NaN element of a row without zeros gets a finite gradient; the rule divided
    the result by x there (NaN) (ir/prod_grad.py)."""
    check(prod_nan, ("grad", ROWS))


def sigmoid_underflow(torch, x):
    p = torch.sigmoid(x)
    return p, torch.nn.functional.binary_cross_entropy(p, torch.ones_like(p), reduction="none")


def test_sigmoid_of_large_negative_flushes_to_zero_as_torch():
    """PyTorch's float32 sigmoid is 1 / (1 + exp(-x)): 0 once exp(-x) overflows (x <=
    -88.7228); the exp(-|x|) form gave the subnormal (sigmoid(-100) = 3.8e-44), so a BCE on
    it read log(3.8e-44) = -99.98 where PyTorch clamps log(0) to -100 (ir/sigmoid_np.py)."""
    check(sigmoid_underflow, np.array([-100.0, -89.0, -95.0, 1.0], np.float32), atol=0)
