# Samples of the fused LSTM and GRU cells, the LSTM layer, and their backward ops
# (llgrad/ir/ops_rnn.py, ops_rnn_layer.py),
# exec'd in test_ir_core.py's namespace (S, X, SPECS, ...): two leading dims, so that every
# layout (transposed, sliced, stepped, broadcast) has a dim of every operand to act on.
SPECS.update({
    "fused_lstm_cell": S([X(2, 3, 12), X(2, 3, 3)], {},
                         lambda g, c: g._op("fused_lstm_cell", c)),
    "fused_lstm_cell_backward": S(
        [X(2, 3, 3), X(2, 3, 3), X(2, 3, 12), X(2, 3, 3), X(2, 3, 3)], {},
        lambda gh, gc, g, c, cy: gh._op("fused_lstm_cell_backward", gc, g, c, cy)),
    "fused_gru_cell": S([X(2, 3, 9), X(2, 3, 9), X(2, 3, 3)], {},
                        lambda x, y, h: x._op("fused_gru_cell", y, h)),
    "fused_gru_cell_backward": S([X(2, 3, 3), X(2, 3, 9), X(2, 3, 9), X(2, 3, 3)], {},
                                 lambda g, x, y, h: g._op("fused_gru_cell_backward", x, y, h)),
    "lstm_layer": S([X(3, 2, 3), X(8, 3), X(8, 2), X(8), X(8), X(2, 2), X(2, 2)],
                    {"reverse": True}, lambda x, wi, wh, bi, bh, h, c: x._op(
                        "lstm_layer", wi, wh, bi, bh, h, c, reverse=True)),
    "lstm_layer_backward": S(
        [X(3, 2, 2), X(2, 2), X(2, 2), X(3, 2, 8), X(3, 2, 2), X(3, 2, 3), X(8, 3), X(8, 2),
         X(2, 2), X(2, 2), X(3, 2, 2), X(3, 2, 8), X(3, 2, 2)], {"reverse": False},
        lambda *a: a[0]._op("lstm_layer_backward", *a[1:], reverse=False)),
})
