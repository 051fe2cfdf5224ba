# Samples of the convolution ops (llgrad/ir/ops_conv.py), exec'd in test_ir_core.py's
# namespace (S, X, SPECS, F, ...): padding, stride, dilation and groups all away from 1.
_CV_ATTRS = {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 2), "groups": 2}

SPECS.update({
    "convolution": S([X(2, 4, 6, 7), X(6, 2, 3, 2), X(6)], _CV_ATTRS,
                     lambda x, w, b: F.conv2d(x, w, b, (2, 1), (1, 2), (1, 2), 2)),
    "convolution_backward_input": S(
        [X(2, 6, 3, 9), X(6, 2, 3, 2)], dict(_CV_ATTRS, input_size=(6, 7)),
        lambda g, w: g._op("convolution_backward_input", w, input_size=(6, 7), **_CV_ATTRS)),
    "convolution_backward_weight": S(
        [X(2, 6, 3, 9), X(2, 4, 6, 7)], dict(_CV_ATTRS, weight_size=(6, 2, 3, 2)),
        lambda g, x: g._op("convolution_backward_weight", x, weight_size=(6, 2, 3, 2),
                           **_CV_ATTRS)),
})
