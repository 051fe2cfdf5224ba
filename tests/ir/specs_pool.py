# Samples of max pooling (llgrad/ir/ops_pool.py) and of average pooling's backward, exec'd
# in test_ir_core.py's namespace (S, X, I, SPECS, F, ...). The forward on small ints, so that
# ties test the first maximum; the backward with overlapping windows (its indices are
# arbitrary positions of the plane here, which repeat: the adds) and a 3-D gradient.
_MP_ATTRS = {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 1), "dilation": (1, 2),
             "ceil_mode": True}
_MPB_ATTRS = {"kernel_size": (3, 3), "stride": (1, 1), "padding": (1, 1), "dilation": (1, 1),
              "ceil_mode": False}

SPECS.update({
    "max_pool2d_with_indices": S([I(4, 2, 3, 5, 6)], _MP_ATTRS,
                                 lambda a: F.max_pool2d(a, (3, 2), (2, 1), (1, 1), (1, 2),
                                                        ceil_mode=True, return_indices=True)),
    "max_pool2d_with_indices_backward": S(
        [X(3, 4, 5), X(3, 4, 5), I(20, 3, 4, 5)], _MPB_ATTRS,
        lambda g, x, i: g._op("max_pool2d_with_indices_backward", x, i, **_MPB_ATTRS)),
})

# Average pooling's backward (ops_nn_more.py): overlapping windows in both dims (the adds),
# padding, ceil_mode and the divisor without the padding, over a 3-D gradient.
_APB_ATTRS = {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 1), "ceil_mode": True,
              "count_include_pad": False, "divisor_override": None}

SPECS.update({
    "avg_pool2d_backward": S([X(2, 3, 7), X(2, 5, 6)], _APB_ATTRS,
                             lambda g, x: g._op("avg_pool2d_backward", x, **_APB_ATTRS)),
})
