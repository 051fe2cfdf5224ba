# Fuzz recipes of the fused LSTM and GRU cells (llgrad/ir/ops_rnn.py; exec'd in programs.py's
# namespace: Gen, rg_of, RECIPES, ...) and of the LSTM layer (ops_rnn_layer.py): a value of the
# pool as the gates (the layer's input), the states (and the
# GRU's state gates) fresh inputs of its dtype (a cell of mixed dtypes runs interpreted). The
# backward ops run wherever the program's gradients are compared: each recipe covers both.
# The spelling is the op's own (nn.LSTM's steps call it so: llgrad/nn/layers_rnn_cell.py).


def r_lstm_cell(g):
    """(hy, cy) of gates (..., 4H) and a cell state (..., H)."""
    x = g.need(lambda v: v.float and v.shape and v.shape[-1] % 4 == 0)
    state = x.shape[:-1] + (x.shape[-1] // 4,)
    c = g.pick(lambda v: v.dtype == x.dtype and v.shape == state) or g.input(state, x.dtype)
    rg = rg_of(x, c)
    h, c2 = g.new(state, x.dtype, rg=rg), g.new(state, x.dtype, rg=rg)
    g.emit(f"{h}, {c2} = {x}._op('fused_lstm_cell', {c})", x, c)
    g.op("fused_lstm_cell")


def r_gru_cell(g):
    """hy of input gates (..., 3H), state gates (..., 3H) and a state (..., H)."""
    x = g.need(lambda v: v.float and v.shape and v.shape[-1] % 3 == 0)
    state = x.shape[:-1] + (x.shape[-1] // 3,)
    y = g.pick(lambda v: v.dtype == x.dtype and v.shape == x.shape and v is not x) or \
        g.input(x.shape, x.dtype)
    h = g.pick(lambda v: v.dtype == x.dtype and v.shape == state) or g.input(state, x.dtype)
    v = g.new(state, x.dtype, rg=rg_of(x, y, h))
    g.emit(f"{v} = {x}._op('fused_gru_cell', {y}, {h})", x, y, h)
    g.op("fused_gru_cell")


def r_lstm_layer(g):
    """A whole LSTM layer (output, hy, cy, gates, cells) of a 3-D value as the time-major
    input, its weights, biases (or None) and states fresh inputs of its dtype."""
    x = g.need(lambda v: v.float and len(v.shape) == 3 and all(v.shape))
    n, b, i = x.shape
    h = g.int(1, 3)
    w = [g.input((4 * h, i), x.dtype), g.input((4 * h, h), x.dtype)]
    bias = [g.input((4 * h,), x.dtype), g.input((4 * h,), x.dtype)] if g.chance(70) else []
    hx, cx = g.input((b, h), x.dtype), g.input((b, h), x.dtype)
    rg = rg_of(x, *w, *bias, hx, cx)
    outs = [g.new(s, x.dtype, rg=rg) for s in ((n, b, h), (b, h), (b, h), (n, b, 4 * h),
                                                (n, b, h))]
    args = ", ".join(str(v) for v in w + (bias or ["None", "None"]) + [hx, cx])
    g.emit(f"{', '.join(str(v) for v in outs)} = {x}._op('lstm_layer', {args}, "
           f"reverse={g.chance(50)})", x, *w, *bias, hx, cx)
    g.op("lstm_layer")


RECIPES.update({
    r_lstm_layer: (1, {"lstm_layer", "lstm_layer_backward"}),
    r_lstm_cell: (1, {"fused_lstm_cell", "fused_lstm_cell_backward"}),
    r_gru_cell: (1, {"fused_gru_cell", "fused_gru_cell_backward"}),
})
