# Sample of batch_norm's backward op (llgrad/ir/ops_batch_norm.py), exec'd in test_ir_core.py's
# namespace (S, X, SPECS, ...): (grad_out, input, weight) with three dims, so that every layout
# (transposed, sliced, stepped, broadcast) has a dim of the per-element operands to act on.
SPECS.update({
    "batch_norm_backward": S([X(4, 3, 5), X(4, 3, 5), X(3)], {"eps": 1e-5},
                             lambda g, x, w: g._op("batch_norm_backward", x, w, eps=1e-5)),
})
