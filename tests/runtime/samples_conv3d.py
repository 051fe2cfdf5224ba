# Samples of the 3-D convolution and pooling ops (llgrad/ir/ops_conv3d.py, ops_pool3d.py),
# exec'd in test_optable.py's namespace (S, Case, F, ...), from a generator of their own.
# Uniform values: no ties in max pooling (no kink within eps).
_c3_rng = np.random.default_rng(20270401)


def _c3R(*shape):
    return np.asarray(_c3_rng.uniform(-1.5, 1.5, shape))


_CV = "ConvolutionBackward0"
S("convolution3d",
  Case("pad_bias", lambda T, x, w, b: F(T).conv3d(x, w, b, 1, 1), _c3R(1, 2, 3, 4, 3),
       _c3R(3, 2, 2, 2, 2), _c3R(3), node=_CV),
  Case("stride_groups_dilation", lambda T, x, w: F(T).conv3d(x, w, None, (2, 1, 1), (1, 0, 1),
                                                             (1, 2, 1), 2),
       _c3R(2, 4, 4, 5, 3), _c3R(4, 2, 2, 2, 2), node=_CV),
  Case("noncontig", lambda T, x, w: F(T).conv3d(x.transpose(2, 4), w, None, 1, (0, 1, 0)),
       _c3R(1, 2, 3, 4, 4), _c3R(2, 2, 2, 2, 2), node=_CV),
  Case("same_unbatched", lambda T, x, w, b: F(T).conv3d(x, w, b, padding="same"),
       _c3R(2, 3, 4, 3), _c3R(2, 2, 3, 1, 3), _c3R(2), node="SqueezeBackward1", top=False),
  Case("transposed", lambda T, x, w, b: F(T).conv_transpose3d(x, w, b, 2, 1, 1),
       _c3R(1, 2, 2, 3, 2), _c3R(2, 3, 2, 2, 3), _c3R(3), node=_CV, top=False))

_MP3 = "MaxPool3DWithIndicesBackward0"
S("max_pool3d_with_indices",
  Case("plain", lambda T, x: F(T).max_pool3d(x, 2), _c3R(2, 2, 4, 4, 4), node=_MP3),
  Case("pad_ceil_dilation_indices", lambda T, x: F(T).max_pool3d(
      x, (2, 3, 2), (1, 2, 1), (1, 1, 0), (2, 1, 1), ceil_mode=True, return_indices=True),
      _c3R(1, 2, 4, 5, 4), node=_MP3),
  Case("overlap_noncontig", lambda T, x: F(T).max_pool3d(x.transpose(2, 4), 3, 1, 1),
       _c3R(1, 2, 3, 4, 4), node=_MP3),
  Case("unbatched_module", lambda T, x: T.nn.MaxPool3d(2, 1)(x), _c3R(2, 3, 4, 3), node=_MP3),
  # (its even windows are max_pool3d's here, under PyTorch's name)
  Case("adaptive_even", lambda T, x: F(T).adaptive_max_pool3d(x, (2, 2, 3), return_indices=True),
       _c3R(1, 2, 4, 4, 3), node="AdaptiveMaxPool3DBackward0"),
  Case("lp_inf", lambda T, x: F(T).lp_pool3d(x, float("inf"), 2), _c3R(1, 2, 4, 4, 4),
       node=_MP3))

_AP3 = "AvgPool3DBackward0"
S("avg_pool3d",
  Case("plain", lambda T, x: F(T).avg_pool3d(x, 2), _c3R(2, 2, 4, 4, 4), node=_AP3),
  Case("overlap_pad_ceil_nopad", lambda T, x: F(T).avg_pool3d(x, 3, 1, 1, True, False),
       _c3R(1, 2, 3, 4, 5), node=_AP3),
  Case("divisor_rect_unbatched", lambda T, x: F(T).avg_pool3d(x, (3, 2, 2), 2, (1, 0, 1),
                                                               divisor_override=3),
       _c3R(2, 5, 4, 4), node=_AP3),
  Case("noncontig_module", lambda T, x: T.nn.AvgPool3d((2, 1, 2), 1)(x.permute(0, 1, 4, 3, 2)),
       _c3R(1, 2, 3, 4, 5), node=_AP3),
  Case("lp_pool", lambda T, x: F(T).lp_pool3d(x, 2, 2), _c3R(1, 2, 4, 4, 4),
       node="PowBackward0", top=False))
