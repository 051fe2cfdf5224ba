# Samples of batch_norm's backward op in training mode (llgrad/ir/ops_batch_norm.py), exec'd
# in test_optable.py's namespace (S, Case, R, F, ...): the gradients of a training-mode
# batch_norm as differentiable functions (create_graph=True), so that gradcheck and
# gradgradcheck differentiate the op itself, and PyTorch's NativeBatchNormBackwardBackward0.
_BNB = "NativeBatchNormBackwardBackward0"


def _bn_grads(T, x, w, b, g, wrt):
    y = F(T).batch_norm(x, None, None, w, b, training=True)
    return tuple(T.autograd.grad(y, wrt, g, create_graph=True))


S("batch_norm_backward",
  Case("affine_3d", lambda T, x, w, b, g: _bn_grads(T, x, w, b, g, (x, w, b)),
       R(4, 3, 2), R(3), R(3), R(4, 3, 2), node=_BNB),
  Case("no_weight_2d", lambda T, x, g: _bn_grads(T, x, None, None, g, (x,)), R(5, 3), R(5, 3),
       node=_BNB),
  Case("weight_only_4d", lambda T, x, w, g: _bn_grads(T, x, w, None, g, (w,)),
       R(3, 2, 2, 2), R(2), R(3, 2, 2, 2), node=_BNB),
  Case("noncontig", lambda T, x, w, g: _bn_grads(T, x.transpose(0, 2), w, None, g, (w, x)),
       R(2, 3, 4), R(3), R(4, 3, 2), node=_BNB))
