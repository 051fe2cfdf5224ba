# Samples of max pooling (llgrad/ir/ops_pool.py) and of average pooling's backward, exec'd
# in test_optable.py's namespace (S, Case, F, _grad, ...). They draw from a generator of their
# own, so that the other sample files' inputs stay as they were. Uniform values: no ties (no
# kink within eps).
_pool_rng = np.random.default_rng(20270105)


def _poolR(*shape):
    return np.asarray(_pool_rng.uniform(-1.5, 1.5, shape))


_MP = "MaxPool2DWithIndicesBackward0"
_MPB = "MaxPool2DWithIndicesBackwardBackward0"

S("max_pool2d_with_indices",
  Case("plain", lambda T, x: F(T).max_pool2d(x, 2), _poolR(2, 3, 4, 6), node=_MP),
  Case("pad_ceil_indices", lambda T, x: F(T).max_pool2d(x, 3, 2, 1, ceil_mode=True,
                                                         return_indices=True),
       _poolR(1, 2, 5, 6), node=_MP),
  Case("overlap", lambda T, x: F(T).max_pool2d(x, 3, 1, 1), _poolR(2, 2, 5, 4), node=_MP),
  Case("dilation_rect_noncontig",
       lambda T, x: F(T).max_pool2d(x.transpose(2, 3), (2, 3), (1, 2), (1, 1), dilation=(2, 1)),
       _poolR(1, 2, 6, 5), node=_MP),
  Case("unbatched_module", lambda T, x: T.nn.MaxPool2d(2, 1)(x), _poolR(3, 4, 5), node=_MP),
  # (its even windows are max_pool2d's here, under PyTorch's name)
  Case("adaptive_even", lambda T, x: F(T).adaptive_max_pool2d(x, (2, 3), return_indices=True),
       _poolR(2, 2, 4, 6), node="AdaptiveMaxPool2DBackward0"))
S("max_pool2d_with_indices_backward",
  Case("grad", lambda T, x, g: _grad(T, F(T).max_pool2d(x, 2), x, g), _poolR(2, 3, 4, 4),
       _poolR(2, 3, 2, 2), node=_MPB),
  Case("overlap_grad", lambda T, x, g: _grad(T, F(T).max_pool2d(x, 3, 1, 1, ceil_mode=True), x,
                                             g), _poolR(1, 2, 4, 5), _poolR(1, 2, 4, 5),
       node=_MPB),
  Case("stride_pad_grad", lambda T, x, g: _grad(T, F(T).max_pool2d(x, (3, 2), 2, (1, 0)), x, g),
       _poolR(2, 5, 4), _poolR(2, 3, 2), node=_MPB))

# Average pooling's backward (avg_pool2d_backward, ops_nn_more.py), from a generator of its
# own (the max-pool samples' inputs stay as they were): each gradient of a pool, with and
# without overlapping windows, padding, ceil_mode, count_include_pad and divisor_override.
_apool_rng = np.random.default_rng(20270211)


def _apoolR(*shape):
    return np.asarray(_apool_rng.uniform(-1.5, 1.5, shape))


_APB = "AvgPool2DBackwardBackward0"

S("avg_pool2d_backward",
  Case("grad", lambda T, x, g: _grad(T, F(T).avg_pool2d(x, 2), x, g), _apoolR(2, 3, 4, 4),
       _apoolR(2, 3, 2, 2), node=_APB),
  Case("overlap_pad_ceil_grad", lambda T, x, g: _grad(T, F(T).avg_pool2d(
      x, 3, 1, 1, ceil_mode=True, count_include_pad=False), x, g), _apoolR(1, 2, 4, 5),
      _apoolR(1, 2, 4, 5), node=_APB),
  Case("divisor_rect_unbatched_grad", lambda T, x, g: _grad(T, F(T).avg_pool2d(
      x, (3, 2), 2, (1, 0), divisor_override=3), x, g), _apoolR(2, 5, 4), _apoolR(2, 3, 2),
      node=_APB))
