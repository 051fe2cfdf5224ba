# Samples of ctc_loss's ops (llgrad/ir/ops_ctc.py), exec'd in test_ir_core.py's namespace
# (S, T, X, SPECS, ...): log_probs (T=6, N=3, C=4), padded targets (3, 2) in [0, 4), input
# lengths in [0, 6], target lengths in [0, 2]; the backward op's nll and log-alpha operands
# are any values of their shapes (its impl reads them as they come).
def _ctc_int(*shape, high):
    return T(shape, "int64", gen="int", high=high)


_CTC_ATTRS = {"blank": 0, "zero_infinity": False}
SPECS.update({
    "ctc_loss": S([X(6, 3, 4), _ctc_int(3, 2, high=4), _ctc_int(3, high=7),
                   _ctc_int(3, high=3)], _CTC_ATTRS,
                  lambda lp, t, il, tl: lp._op("ctc_loss", t, il, tl, **_CTC_ATTRS)),
    "ctc_loss_backward": S([X(3), X(6, 3, 4), _ctc_int(3, 2, high=4), _ctc_int(3, high=7),
                            _ctc_int(3, high=3), X(3), X(3, 6, 5)], _CTC_ATTRS,
                           lambda g, lp, t, il, tl, nll, la: g._op(
                               "ctc_loss_backward", lp, t, il, tl, nll, la, **_CTC_ATTRS)),
})
