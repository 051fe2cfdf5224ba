"""Modules over functional_extra and functional_loss_margin: MaxPool1d, the channel-wise and
alpha dropouts, Unfold / Fold, Softmax2d, and the margin, embedding and likelihood losses
(PyTorch's constructor arguments, defaults, checks and extra_repr)."""
from . import functional_extra as FX
from . import functional_loss_margin as FL
from .layers_loss import _Loss, _WeightedLoss
from .layers_loss_more import PairwiseDistance
from .module import Module

__all__ = ["MaxPool1d", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
           "FeatureAlphaDropout", "Unfold", "Fold", "Softmax2d", "MarginRankingLoss",
           "HingeEmbeddingLoss", "CosineEmbeddingLoss", "SoftMarginLoss",
           "MultiLabelSoftMarginLoss", "MultiLabelMarginLoss", "MultiMarginLoss",
           "TripletMarginLoss", "TripletMarginWithDistanceLoss", "PoissonNLLLoss",
           "GaussianNLLLoss"]


class MaxPool1d(Module):
    """As torch.nn.MaxPool1d."""
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return FX.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                             ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self):
        return ("kernel_size={kernel_size}, stride={stride}, padding={padding}, "
                "dilation={dilation}, ceil_mode={ceil_mode}".format(**self.__dict__))


class _DropoutNd(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """As torch.nn.Dropout1d (masks from llgrad's generator)."""
    def forward(self, input):
        return FX.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """As torch.nn.Dropout2d (masks from llgrad's generator)."""
    def forward(self, input):
        return FX.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """As torch.nn.Dropout3d (masks from llgrad's generator)."""
    def forward(self, input):
        return FX.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """As torch.nn.AlphaDropout (masks from llgrad's generator)."""
    def forward(self, input):
        return FX.alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(_DropoutNd):
    """As torch.nn.FeatureAlphaDropout (masks from llgrad's generator)."""
    def forward(self, input):
        return FX.feature_alpha_dropout(input, self.p, self.training)


class Unfold(Module):
    """As torch.nn.Unfold (im2col)."""
    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input):
        return FX.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return ("kernel_size={kernel_size}, dilation={dilation}, padding={padding}, "
                "stride={stride}".format(**self.__dict__))


class Fold(Module):
    """As torch.nn.Fold (col2im)."""
    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return FX.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                       self.stride)

    def extra_repr(self):
        return ("output_size={output_size}, kernel_size={kernel_size}, dilation={dilation}, "
                "padding={padding}, stride={stride}".format(**self.__dict__))


class Softmax2d(Module):
    """Softmax over the channels of (N, C, H, W) or (C, H, W) inputs."""
    def forward(self, input):
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D "
                             "instead")
        return input.softmax(-3)


class MarginRankingLoss(_Loss):
    """As torch.nn.MarginRankingLoss."""
    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return FL.margin_ranking_loss(input1, input2, target, margin=self.margin,
                                      reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """As torch.nn.HingeEmbeddingLoss."""
    def __init__(self, margin=1.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input, target):
        return FL.hinge_embedding_loss(input, target, margin=self.margin,
                                       reduction=self.reduction)


class CosineEmbeddingLoss(_Loss):
    """As torch.nn.CosineEmbeddingLoss."""
    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return FL.cosine_embedding_loss(input1, input2, target, margin=self.margin,
                                        reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """As torch.nn.SoftMarginLoss."""
    def forward(self, input, target):
        return FL.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """As torch.nn.MultiLabelSoftMarginLoss (weight is a buffer)."""
    def forward(self, input, target):
        return FL.multilabel_soft_margin_loss(input, target, weight=self.weight,
                                              reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """As torch.nn.MultiLabelMarginLoss: the hinge loss between each target class (the target
    row up to its first -1) and each other class."""
    def forward(self, input, target):
        return FL.multilabel_margin_loss(input, target, reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """As torch.nn.MultiMarginLoss (weight is a buffer)."""
    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        if weight is not None and weight.dim() != 1:
            raise ValueError(f"MultiMarginLoss: expected weight to be None or 1D tensor, got "
                             f"{weight.dim()}D instead")
        self.p, self.margin = p, margin

    def forward(self, input, target):
        return FL.multi_margin_loss(input, target, p=self.p, margin=self.margin,
                                    weight=self.weight, reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """As torch.nn.TripletMarginLoss."""
    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got "
                             f"{margin} instead")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor, positive, negative):
        return FL.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p,
                                      eps=self.eps, swap=self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """As torch.nn.TripletMarginWithDistanceLoss."""
    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(size_average=None, reduce=None, reduction=reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than "
                             f"0, got {margin} instead")
        self.distance_function = distance_function if distance_function is not None \
            else PairwiseDistance()
        self.margin, self.swap = margin, swap

    def forward(self, anchor, positive, negative):
        return FL.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    """As torch.nn.PoissonNLLLoss."""
    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                 reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input, target):
        return FL.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full,
                                   eps=self.eps, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """As torch.nn.GaussianNLLLoss."""
    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(None, None, reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):
        return FL.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                    reduction=self.reduction)
