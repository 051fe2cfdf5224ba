# Samples of the convolution ops (llgrad/ir/ops_conv.py), exec'd in test_optable.py's
# namespace (S, Case, F, _grad, ...), from a generator of their own.
_cv_rng = np.random.default_rng(20261201)


def _cvR(*shape):
    return np.asarray(_cv_rng.uniform(-1.5, 1.5, shape))


S("convolution",
  Case("pad_bias", lambda T, x, w, b: F(T).conv2d(x, w, b, 1, 1), _cvR(2, 3, 5, 6),
       _cvR(4, 3, 3, 3), _cvR(4), node="ConvolutionBackward0"),
  Case("stride_groups", lambda T, x, w: F(T).conv2d(x, w, None, 2, 0, 1, 2), _cvR(2, 4, 7, 6),
       _cvR(6, 2, 3, 2), node="ConvolutionBackward0"),
  Case("dilation_uneven", lambda T, x, w, b: F(T).conv2d(x, w, b, (3, 2), (2, 1), (2, 1)),
       _cvR(1, 2, 9, 8), _cvR(3, 2, 2, 3), _cvR(3), node="ConvolutionBackward0"),
  Case("noncontig", lambda T, x, w: F(T).conv2d(x.transpose(2, 3), w.permute(3, 0, 1, 2),
                                                None, 1, 1).permute(0, 1, 3, 2),
       _cvR(2, 3, 6, 5), _cvR(3, 3, 3, 4), node="PermuteBackward0", top=False),
  Case("same_even", lambda T, x, w: F(T).conv2d(x, w, None, padding="same"),
       _cvR(1, 2, 5, 5), _cvR(2, 2, 2, 2), node="ConvolutionBackward0"),
  Case("unbatched_1x1", lambda T, x, w, b: F(T).conv2d(x, w, b), _cvR(3, 4, 4),
       _cvR(5, 3, 1, 1), _cvR(5), node="SqueezeBackward1", top=False))
S("convolution_backward_input",
  Case("vjp", lambda T, x, w, g: _grad(T, F(T).conv2d(x, w, None, 2, 1), x, g),
       _cvR(2, 2, 5, 6), _cvR(3, 2, 3, 3), _cvR(2, 3, 3, 3),
       node="ConvolutionBackwardBackward0"),
  Case("groups_dilation", lambda T, x, w, g: _grad(T, F(T).conv2d(x, w, None, 1, 2, 2, 2), x,
                                                   g),
       _cvR(1, 4, 5, 5), _cvR(2, 2, 2, 3), _cvR(1, 2, 7, 5),
       node="ConvolutionBackwardBackward0"))
S("convolution_backward_weight",
  Case("vjp", lambda T, x, w, g: _grad(T, F(T).conv2d(x, w, None, 2, 1), w, g),
       _cvR(2, 2, 5, 6), _cvR(3, 2, 3, 3), _cvR(2, 3, 3, 3),
       node="ConvolutionBackwardBackward0"),
  Case("groups_noncontig", lambda T, x, w, g: _grad(
      T, F(T).conv2d(x.transpose(2, 3), w, None, 1, 1, 1, 2), w, g.transpose(2, 3)),
      _cvR(2, 4, 4, 5), _cvR(4, 2, 3, 3), _cvR(2, 4, 4, 5),
      node="ConvolutionBackwardBackward0"))
