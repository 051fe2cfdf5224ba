# Samples of the 3-D convolution and pooling ops (llgrad/ir/ops_conv3d.py, ops_pool3d.py),
# exec'd in test_ir_core.py's namespace (S, X, I, SPECS, F, ...): stride, padding, dilation
# and groups away from 1; max pooling on small ints (ties: the first maximum), with ceil_mode
# and padding; average pooling with overlapping windows, the divisor without the padding.
_CV3_ATTRS = {"stride": (2, 1, 1), "padding": (1, 0, 1), "dilation": (1, 2, 1), "groups": 2}
_MP3_ATTRS = {"kernel_size": (2, 3, 2), "stride": (1, 2, 1), "padding": (1, 1, 0),
              "dilation": (2, 1, 1), "ceil_mode": True}
_AP3_ATTRS = {"kernel_size": (3, 2, 2), "stride": (2, 1, 2), "padding": (1, 1, 0),
              "ceil_mode": True, "count_include_pad": False, "divisor_override": None}

SPECS.update({
    "convolution3d": S([X(2, 4, 5, 6, 4), X(6, 2, 3, 2, 2), X(6)], _CV3_ATTRS,
                       lambda x, w, b: F.conv3d(x, w, b, (2, 1, 1), (1, 0, 1), (1, 2, 1), 2)),
    "max_pool3d_with_indices": S([I(4, 2, 3, 5, 6, 4)], _MP3_ATTRS,
                                 lambda a: F.max_pool3d(a, (2, 3, 2), (1, 2, 1), (1, 1, 0),
                                                        (2, 1, 1), ceil_mode=True,
                                                        return_indices=True)),
    "avg_pool3d": S([X(2, 3, 5, 4, 6)], _AP3_ATTRS,
                    lambda a: F.avg_pool3d(a, (3, 2, 2), (2, 1, 2), (1, 1, 0), True, False)),
})
