"""Loss and distance modules: L1Loss, SmoothL1Loss, HuberLoss, BCELoss, KLDivLoss, CTCLoss,
CosineSimilarity, PairwiseDistance (PyTorch's signatures; BCELoss's weight is a buffer, as
in PyTorch), and the deprecated NLLLoss2d."""
import warnings

from . import functional as F
from .layers_loss import NLLLoss, _Loss, _WeightedLoss
from .module import Module

__all__ = ["L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "KLDivLoss", "CTCLoss",
           "CosineSimilarity", "PairwiseDistance", "NLLLoss2d"]


class NLLLoss2d(NLLLoss):
    """As torch.nn.NLLLoss2d: NLLLoss under its old name, which warns when made."""
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean"):
        warnings.warn("`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a drop-in "
                      "replacement and see https://pytorch.org/docs/main/nn.html#torch.nn.NLLLoss "
                      "for more details.", FutureWarning, stacklevel=2)
        super().__init__(weight, size_average, ignore_index, reduce, reduction)


class L1Loss(_Loss):
    """As torch.nn.L1Loss."""
    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """As torch.nn.SmoothL1Loss."""
    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """As torch.nn.HuberLoss."""
    def __init__(self, reduction="mean", delta=1.0):
        if not isinstance(delta, (float, int)):
            raise TypeError(f"delta must be a float or int, got: {type(delta)}")
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCELoss(_WeightedLoss):
    """As torch.nn.BCELoss."""
    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class KLDivLoss(_Loss):
    """As torch.nn.KLDivLoss."""
    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class CTCLoss(_Loss):
    """As torch.nn.CTCLoss."""
    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                          self.reduction, self.zero_infinity)


class CosineSimilarity(Module):
    """As torch.nn.CosineSimilarity."""
    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """As torch.nn.PairwiseDistance."""
    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
