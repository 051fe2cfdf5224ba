"""More torch.* functions that are torch.nn.functional's under ATen's argument orders: the
3-D convolutions and pools, max_pool1d (+ with_indices), convolution, and the losses with
ATen's reduction numbers (0 none, 1 mean, 2 sum; any other none). torch 2.13 binds the
losses' reduction default as none (torch.cosine_embedding_loss(a, b, t) is unreduced, as
torch.kl_div's), so these defaults are 0."""
from .nn import functional as F

__all__ = ["conv3d", "conv_transpose3d", "max_pool3d", "max_pool1d", "max_pool1d_with_indices",
           "convolution", "cosine_embedding_loss", "hinge_embedding_loss",
           "margin_ranking_loss", "triplet_margin_loss", "poisson_nll_loss"]

_REDUCTION = {1: "mean", 2: "sum"}


_POSITION = {"cosine_embedding_loss": 5, "hinge_embedding_loss": 4, "margin_ranking_loss": 5,
             "triplet_margin_loss": 8, "poisson_nll_loss": 6}


def _reduction(reduction, fn):
    if isinstance(reduction, bool) or not isinstance(reduction, int):
        raise TypeError(f"{fn}(): argument 'reduction' (position {_POSITION[fn]}) must be int, "
                        f"not {type(reduction).__name__}")
    return _REDUCTION.get(reduction, "none")


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """As torch.conv3d (torch.nn.functional.conv3d)."""
    return F.conv3d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """As torch.conv_transpose3d (torch.nn.functional.conv_transpose3d)."""
    return F.conv_transpose3d(input, weight, bias, stride, padding, output_padding, groups,
                              dilation)


def _stride(stride):
    return None if stride is None or (isinstance(stride, (tuple, list)) and not stride) \
        else stride


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """As torch.max_pool3d (F.max_pool3d; an empty stride is the kernel size)."""
    return F.max_pool3d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """As torch.max_pool1d (F.max_pool1d; an empty stride is the kernel size)."""
    return F.max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1,
                            ceil_mode=False):
    """As torch.max_pool1d_with_indices: (values, indices) of F.max_pool1d."""
    return F.max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode, True)


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups):
    """As torch.convolution (aten::convolution): the 1-, 2- or 3-D convolution of a batched
    input, or the transposed one, by the weight's rank."""
    for name, v in (("stride", stride), ("padding", padding), ("dilation", dilation),
                    ("output_padding", output_padding)):
        if not isinstance(v, (tuple, list)):
            pos = {"stride": 4, "padding": 5, "dilation": 6, "output_padding": 8}[name]
            raise TypeError(f"convolution(): argument '{name}' (position {pos}) must be tuple "
                            f"of ints, not {type(v).__name__}")
    if weight.dim() < 3:
        raise RuntimeError("weight should have at least three dimensions")
    n = weight.dim() - 2
    if input.dim() != weight.dim():
        raise RuntimeError(f"Expected {weight.dim()}-dimensional input for {weight.dim()}-"
                           f"dimensional weight {list(weight.shape)}, but got {input.dim()}-"
                           f"dimensional input of size {list(input.shape)} instead")
    if n > 3:
        raise RuntimeError(f"convolution: {n}-D convolutions are not supported")
    if transposed:
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[n - 1]
        return fn(input, weight, bias, list(stride), list(padding), list(output_padding),
                  groups, list(dilation))
    fn = (F.conv1d, F.conv2d, F.conv3d)[n - 1]
    return fn(input, weight, bias, list(stride), list(padding), list(dilation), groups)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    """As torch.cosine_embedding_loss (F's, with ATen's reduction number)."""
    return F.cosine_embedding_loss(input1, input2, target, margin,
                                   reduction=_reduction(reduction, "cosine_embedding_loss"))


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    """As torch.hinge_embedding_loss (F's, with ATen's reduction number)."""
    return F.hinge_embedding_loss(input, target, margin,
                                  reduction=_reduction(reduction, "hinge_embedding_loss"))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    """As torch.margin_ranking_loss (F's, with ATen's reduction number)."""
    return F.margin_ranking_loss(input1, input2, target, margin,
                                 reduction=_reduction(reduction, "margin_ranking_loss"))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-06, swap=False,
                        reduction=0):
    """As torch.triplet_margin_loss (F's, with ATen's reduction number)."""
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                 reduction=_reduction(reduction, "triplet_margin_loss"))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    """As torch.poisson_nll_loss(input, target, log_input, full, eps, reduction): every
    argument required, as ATen's."""
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps,
                              reduction=_reduction(reduction, "poisson_nll_loss"))
