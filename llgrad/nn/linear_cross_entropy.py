"""torch.nn.LinearCrossEntropyLoss and F.linear_cross_entropy (PyTorch 2.13): the cross
entropy of a linear projection's logits, with PyTorch's checks. PyTorch computes it in batch
chunks when options are given, to bound the logits' memory; llgrad computes the reference
composition, linear then cross_entropy (the same values up to rounding), and takes the
options for their checks."""
import dataclasses
import math
import warnings

from ..runtime import dtypes
from . import functional as F
from .layers import Linear
from .layers_loss import _WeightedLoss

_ACC_POLICIES = ("auto", "accurate", "balanced", "compact")


@dataclasses.dataclass(frozen=True)
class LinearCrossEntropyOptions:
    """As torch.nn.LinearCrossEntropyOptions: how PyTorch chunks the computation (checked;
    llgrad computes the reference composition whatever they say)."""
    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: object = None

    def __post_init__(self):
        if self.acc_policy not in _ACC_POLICIES:
            raise ValueError(f"invalid acc_policy: {self.acc_policy!r}")
        if self.chunking_method not in (None, "auto"):
            name, sep, factor = self.chunking_method.partition(":")
            factor = factor if sep else "1"
            if not (name == "aspect_ratio" and factor.isdigit() and int(factor) > 0):
                raise ValueError(f"invalid chunking_method: {self.chunking_method!r}")
        if not (self.batch_chunk_size is None or (isinstance(self.batch_chunk_size, int)
                                                  and self.batch_chunk_size > 0)):
            raise ValueError(f"batch_chunk_size must be positive int or None, got "
                             f"{self.batch_chunk_size!r}")
        if self.acc_dtype is not None and self.acc_dtype not in (
                dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64):
            raise ValueError(f"acc_dtype must be one of {{None, torch.float16, torch.bfloat16, "
                             f"torch.float32, torch.float64}}, got {self.acc_dtype!r}. Pass "
                             "acc_dtype=None to let the op pick automatically.")


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None,
                         reduction="mean", ignore_index=None, label_smoothing=0.0,
                         options=None):
    """As torch.nn.functional.linear_cross_entropy: cross_entropy(linear(input,
    linear_weight, linear_bias), target, ...); linear_weight is (C, *out_features, in) for a
    K-dimensional loss, and ignore_index None means -100."""
    if input.dim() < 1 or input.dim() > 2:
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError(f"expected linear_weight with dimensionality at least 2, got "
                           f"{linear_weight.dim()}")
    batches, in_features = tuple(input.shape[:-1]), input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError("expected equal input and linear_weight last dimensions "
                           f"(in_features), got {in_features} and {linear_weight.shape[-1]}, "
                           "respectively")
    classes, out_features = linear_weight.shape[0], tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (classes, *out_features):
        raise RuntimeError(f"expected linear_bias shape {(classes, *out_features)}, got "
                           f"{tuple(linear_bias.shape)}")
    if out_features and not batches:
        raise RuntimeError(f"K-dimensional loss defined by linear_weight shape "
                           f"{tuple(linear_weight.shape)} requires batched input, (N, "
                           f"{in_features}), got unbatched input with shape "
                           f"{tuple(input.shape)}")
    logits_shape = (*batches, classes, *out_features)
    if tuple(target.shape) == logits_shape and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains "
                           "probabilities")
    if options is not None and (out_features or reduction not in ("mean", "sum", "none")
                                or label_smoothing != 0.0 or target.dtype is not dtypes.int64):
        warnings.warn("linear_cross_entropy: ``options`` ignored; chunked path needs reduction "
                      "in {'mean','sum','none'}, label_smoothing == 0, target.dtype == int64, "
                      f"out_features == (). Got reduction={reduction!r}, label_smoothing="
                      f"{label_smoothing}, target.dtype={target.dtype}, out_features="
                      f"{out_features}, tracing=False, linear_bias.shape="
                      f"{tuple(linear_bias.shape) if linear_bias is not None else None}.",
                      stacklevel=2)
    if out_features:
        rows = math.prod(out_features, start=classes)
        linear_weight = linear_weight.reshape(rows, in_features)
        linear_bias = linear_bias.reshape(rows) if linear_bias is not None else None
    logits = F.linear(input, linear_weight, linear_bias).reshape(logits_shape)
    return F.cross_entropy(logits, target, weight=weight, reduction=reduction,
                           ignore_index=-100 if ignore_index is None else ignore_index,
                           label_smoothing=label_smoothing)


class LinearCrossEntropyLoss(_WeightedLoss):
    """As torch.nn.LinearCrossEntropyLoss: a Linear(in_features, num_classes *
    prod(out_features)) (`self.linear`, seeded as PyTorch's) whose logits go to the cross
    entropy."""

    def __init__(self, in_features, num_classes, *, out_features=(), bias=False, device=None,
                 dtype=None, reduction="mean", weight=None, ignore_index=None,
                 label_smoothing=0.0, options=None):
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise RuntimeError(f"expected weight shape to be {(num_classes,)}, got "
                               f"{tuple(weight.shape)}")
        if label_smoothing < 0 or label_smoothing > 1.0:
            raise RuntimeError(f"expected label_smoothing to be in range [0, 1], got "
                               f"{label_smoothing}")
        super().__init__(weight=weight, reduction=reduction)
        self.num_classes, self.out_features = num_classes, out_features
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing
        self.linear = Linear(in_features, math.prod(out_features, start=num_classes),
                             bias=bias, device=device, dtype=dtype)
        self.options = options

    def forward(self, input, target):
        w = self.linear.weight.reshape((self.num_classes, *self.out_features,
                                        self.linear.in_features))
        b = self.linear.bias.reshape((self.num_classes, *self.out_features)) \
            if self.linear.bias is not None else None
        return linear_cross_entropy(input, w, target, linear_bias=b, weight=self.weight,
                                    reduction=self.reduction, ignore_index=self.ignore_index,
                                    label_smoothing=self.label_smoothing, options=self.options)

    def extra_repr(self):
        return (f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
                f"out_features={self.out_features}, bias={self.linear.bias is not None}, "
                f"reduction={self.reduction}, ignore_index={self.ignore_index}, "
                f"label_smoothing={self.label_smoothing}, options={self.options}")
