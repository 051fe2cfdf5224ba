# Samples of ctc_loss's ops (llgrad/ir/ops_ctc.py: ctc_loss, PyTorch's _ctc_loss, and its
# backward op), exec'd in test_optable.py's namespace (S, Case, I, F, EXEMPT, ...). The
# log-probabilities come from log_softmax, as PyTorch's gradient formula assumes (its
# gradient with respect to log_probs is exp(log_probs) - posterior: the derivative through
# log_softmax's logits, which gradcheck then checks).
_ctc_rng = np.random.default_rng(75)     # (its own: the other files' R_ draws stay as they were)


def _ctc_r(*shape):
    return _ctc_rng.uniform(-1.5, 1.5, shape)


def _ctc(T, x, targets, input_lengths, target_lengths, **kw):
    return F(T).ctc_loss(x.log_softmax(2), targets, input_lengths, target_lengths, **kw)


S("ctc_loss",
  Case("padded_none", lambda T, x, t, il, tl: _ctc(T, x, t, il, tl, reduction="none"),
       _ctc_r(6, 3, 4), I([1, 2, 2], [3, 1, 0], [2, 3, 1]), I(6, 5, 4), I(3, 2, 1),
       node="CtcLossBackward0"),
  Case("concat_mean_blank2", lambda T, x, t: _ctc(T, x, t, (5, 4), (2, 3), blank=2),
       _ctc_r(5, 2, 3), I(0, 1, 1, 0, 1), node="MeanBackward0", top=False))
# (PyTorch's _ctc_loss_backward has no derivative: neither has the op, like PyTorch's)
NOT_TWICE_DIFFERENTIABLE["ctc_loss"] = "PyTorch's _ctc_loss_backward is not differentiable"


def _ctc_grad(T, x):
    loss = _ctc(T, x, T.tensor([[1, 2], [2, 2]]), T.tensor([4, 3]), T.tensor([2, 1]),
                reduction="sum")
    return T.autograd.grad(loss, x)[0]


EXEMPT["ctc_loss_backward"] = Exempt(
    "ctc_loss's backward (PyTorch's _ctc_loss_backward: no derivative of its own)",
    _ctc_grad, (_ctc_r(4, 2, 3),))
FLOAT_WITHOUT_DERIVATIVE.add("ctc_loss_backward")
