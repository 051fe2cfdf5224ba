# Samples of the nn.functional ops of issue 21 (llgrad/ir/ops_activations.py, ops_losses.py,
# ops_nn_more.py), exec'd in test_optable.py's namespace (S, Case, K, F, ...). They draw from
# a generator of their own, so that the other sample files' inputs stay as they were.
_nn_rng = np.random.default_rng(20261221)


def _nnR(*shape, lo=-1.5, hi=1.5):
    return np.asarray(_nn_rng.uniform(lo, hi, shape))


def _nnU(*shape):
    """In (0.1, 0.9): probabilities away from 0 and 1."""
    return _nnR(*shape, lo=0.1, hi=0.9)


def _nnAway(*shape, kinks=(0.0,), scale=1.0, gap=0.2):
    """Values in (-scale, scale) * 4 at least `gap` from every kink."""
    a = _nn_rng.uniform(-4 * scale, 4 * scale, shape)
    for k in kinks:
        near = np.abs(a - k) < gap
        a = np.where(near, k + np.sign(a - k + 1e-9) * gap * 2, a)
    return np.asarray(a)


# -- activations --
S("elu",
  Case("plain", lambda T, x: F(T).elu(x, 0.7), NZ_(3, 4), node="EluBackward0"),
  Case("selu_noncontig", lambda T, x: F(T).selu(x.t()), NZ_(4, 3), node="EluBackward0"),
  Case("scalar0d", lambda T, x: F(T).elu(x), NZ_(), node="EluBackward0"))
S("elu_",
  Case("inplace", lambda T, x: F(T).elu(x * 1, 1.3, inplace=True), NZ_(3, 4),
       node="EluBackward1"),
  Case("selu_inplace", lambda T, x: F(T).selu(x * 2, inplace=True), NZ_(2, 3),
       node="EluBackward1"))
S("celu",
  Case("plain", lambda T, x: F(T).celu(x, 0.5), NZ_(3, 4), node="CeluBackward0"),
  Case("noncontig", lambda T, x: F(T).celu(x.t()[::2], 2.0), NZ_(4, 3), node="CeluBackward0"))
S("celu_",
  Case("inplace", lambda T, x: F(T).celu(x * 1, 0.8, inplace=True), NZ_(3, 4),
       node="CeluBackward1"))
S("hardtanh",
  Case("plain", lambda T, x: F(T).hardtanh(x), _nnAway(3, 4, kinks=(-1, 1), scale=0.5),
       node="HardtanhBackward0"),
  Case("bounds", lambda T, x: F(T).hardtanh(x.t(), -0.5, 1.2),
       _nnAway(4, 3, kinks=(-0.5, 1.2), scale=0.5), node="HardtanhBackward0"),
  Case("relu6", lambda T, x: F(T).relu6(x), _nnAway(3, 4, kinks=(0, 6), scale=2),
       node="HardtanhBackward0"),
  Case("inplace", lambda T, x: F(T).hardtanh(x * 1, inplace=True),
       _nnAway(2, 3, kinks=(-1, 1), scale=0.5), node="HardtanhBackward0"))
S("logsigmoid",
  Case("plain", lambda T, x: F(T).logsigmoid(x), _nnR(3, 4), node="LogSigmoidBackward0"),
  Case("large", lambda T, x: F(T).logsigmoid(x), np.array([-40.0, -3.0, 3.0, 40.0]),
       node="LogSigmoidBackward0"),
  Case("noncontig", lambda T, x: F(T).logsigmoid(x.t()[:, 1:]), _nnR(3, 4),
       node="LogSigmoidBackward0"))
S("mish",
  Case("plain", lambda T, x: F(T).mish(x), _nnR(3, 4, lo=-4, hi=4), node="MishBackward0"),
  Case("noncontig_inplace", lambda T, x: F(T).mish(x.t() * 1, inplace=True), _nnR(4, 3),
       node="MishBackward0"))
S("hardswish",
  Case("plain", lambda T, x: F(T).hardswish(x), _nnAway(3, 4, kinks=(-3, 3)),
       node="HardswishBackward0"),
  Case("inplace", lambda T, x: F(T).hardswish(x.t() * 1, inplace=True),
       _nnAway(4, 3, kinks=(-3, 3)), node="HardswishBackward0"))
S("hardsigmoid",
  Case("plain", lambda T, x: F(T).hardsigmoid(x), _nnAway(3, 4, kinks=(-3, 3)),
       node="HardsigmoidBackward0"),
  Case("inplace", lambda T, x: F(T).hardsigmoid(x * 1, inplace=True),
       _nnAway(2, 3, kinks=(-3, 3)), node="HardsigmoidBackward0"))
S("threshold",
  Case("plain", lambda T, x: F(T).threshold(x, 0.1, 2.0), _nnAway(3, 4, kinks=(0.1,), scale=0.4),
       node="ThresholdBackward0"),
  Case("noncontig", lambda T, x: F(T).threshold(x.t(), -0.3, -1.0),
       _nnAway(4, 3, kinks=(-0.3,), scale=0.4), node="ThresholdBackward0"))
S("threshold_",
  Case("inplace", lambda T, x: F(T).threshold(x * 1, 0.1, -2.0, inplace=True),
       _nnAway(3, 4, kinks=(0.1,), scale=0.4), node="ThresholdBackward1"),
  # a written value above the threshold: the gradient is masked by the input, not the result
  Case("inplace_value_above", lambda T, x: F(T).threshold(x * 1, 0.1, 2.0, inplace=True),
       np.array([[-1.3, 0.6, -0.4, 1.1], [0.35, -0.05, 1.7, -0.9]]), node="ThresholdBackward1"))
S("glu",
  Case("last", lambda T, x: F(T).glu(x), _nnR(3, 4), node="GluBackward0"),
  Case("dim0_noncontig", lambda T, x: F(T).glu(x.t(), 0), _nnR(3, 4), node="GluBackward0"),
  Case("3d", lambda T, x: F(T).glu(x, 1), _nnR(2, 6, 2), node="GluBackward0"))

# -- losses --
S("smooth_l1_loss",
  Case("mean", lambda T, x, y: F(T).smooth_l1_loss(x, y), _nnR(3, 4), _nnR(3, 4),
       node="SmoothL1LossBackward0"),
  Case("none_beta", lambda T, x, y: F(T).smooth_l1_loss(x.t(), y, reduction="none", beta=0.5),
       _nnR(4, 3), _nnR(3, 4), node="SmoothL1LossBackward0"),
  Case("sum", lambda T, x, y: F(T).smooth_l1_loss(x, y, reduction="sum", beta=2.0),
       _nnR(2, 3), _nnR(2, 3), node="SmoothL1LossBackward0"))
S("huber_loss",
  Case("mean", lambda T, x, y: F(T).huber_loss(x, y), _nnR(3, 4), _nnR(3, 4),
       node="HuberLossBackward0"),
  Case("none_delta", lambda T, x, y: F(T).huber_loss(x, y.t(), reduction="none", delta=0.5),
       _nnR(3, 4), _nnR(4, 3), node="HuberLossBackward0"),
  Case("weight", lambda T, x, y, w: F(T).huber_loss(x, y, delta=0.7, weight=w), _nnR(2, 3),
       _nnR(2, 3), K(_nnU(2, 3)), node="MeanBackward0", top=False))
S("binary_cross_entropy",
  Case("mean", lambda T, x, t: F(T).binary_cross_entropy(x, t), _nnU(3, 4), _nnU(3, 4),
       node="BinaryCrossEntropyBackward0"),
  Case("weight_sum", lambda T, x, t, w: F(T).binary_cross_entropy(
      x, t.to(x.dtype), w.to(x.dtype), reduction="sum"),
       _nnU(3, 4), K(_nnU(3, 4)), K(_nnU(4)), node="BinaryCrossEntropyBackward0"),
  Case("none_noncontig", lambda T, x, t: F(T).binary_cross_entropy(x.t(), t, reduction="none"),
       _nnU(4, 3), _nnU(3, 4), node="BinaryCrossEntropyBackward0"))

# -- padding --
S("constant_pad_nd",
  Case("last", lambda T, x: F(T).pad(x, (1, 2)), _nnR(2, 3), node="ConstantPadNdBackward0"),
  Case("crop_value", lambda T, x: F(T).pad(x, (1, 2, -1, 1), value=0.5), _nnR(2, 3, 4),
       node="ConstantPadNdBackward0"),
  Case("three_dims_noncontig", lambda T, x: F(T).pad(x.transpose(0, 2), (0, 1, 1, 0, 2, 1)),
       _nnR(3, 2, 2), node="ConstantPadNdBackward0"))
S("reflection_pad",
  Case("1d", lambda T, x: F(T).pad(x, (2, 1), mode="reflect"), _nnR(2, 3, 4),
       node="ReflectionPad1DBackward0"),
  Case("2d_noncontig", lambda T, x: F(T).pad(x.transpose(1, 2), (1, 2, 2, 0), mode="reflect"),
       _nnR(2, 4, 3), node="ReflectionPad2DBackward0"),
  Case("3d", lambda T, x: F(T).pad(x, (1, 1, 0, 1, 1, 0), mode="reflect"), _nnR(1, 2, 2, 3),
       node="ReflectionPad3DBackward0"))
S("replication_pad",
  Case("1d", lambda T, x: F(T).pad(x, (3, 1), mode="replicate"), _nnR(2, 3),
       node="ReplicationPad1DBackward0"),
  Case("2d_crop", lambda T, x: F(T).pad(x.transpose(1, 2), (1, -1, 2, 1), mode="replicate"),
       _nnR(1, 4, 3), node="ReplicationPad2DBackward0"),
  Case("3d", lambda T, x: F(T).pad(x, (1, 0, 0, 1, 1, 1), mode="replicate"), _nnR(2, 2, 2, 2),
       node="ReplicationPad3DBackward0"))

# -- pooling and normalisation --
S("avg_pool2d",
  Case("plain", lambda T, x: F(T).avg_pool2d(x, 2), _nnR(2, 2, 4, 4), node="AvgPool2DBackward0"),
  Case("pad_ceil", lambda T, x: F(T).avg_pool2d(x, 3, 2, 1, ceil_mode=True), _nnR(1, 2, 5, 6),
       node="AvgPool2DBackward0"),
  Case("no_count", lambda T, x: F(T).avg_pool2d(x.transpose(2, 3), 3, 2, 1, ceil_mode=True,
                                                count_include_pad=False),
       _nnR(1, 2, 5, 4), node="AvgPool2DBackward0"),
  Case("overlap_divisor", lambda T, x: F(T).avg_pool2d(x, (2, 3), 1, divisor_override=4),
       _nnR(2, 4, 5), node="AvgPool2DBackward0"),
  Case("avg_pool1d", lambda T, x: F(T).avg_pool1d(x, 3, 2, 1), _nnR(2, 3, 6),
       node="SqueezeBackward1", top=False))
S("group_norm",
  Case("affine", lambda T, x, w, b: F(T).group_norm(x, 2, w, b), _nnR(2, 4, 3), _nnR(4),
       _nnR(4), node="NativeGroupNormBackward0"),
  Case("plain_4d", lambda T, x: F(T).group_norm(x, 3, eps=1e-3), _nnR(2, 3, 2, 2),
       node="NativeGroupNormBackward0"),
  Case("noncontig_weight", lambda T, x, w: F(T).group_norm(x.transpose(1, 2), 1, w),
       _nnR(2, 3, 2), _nnR(2), node="NativeGroupNormBackward0"))
