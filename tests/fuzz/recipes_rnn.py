# Fuzz recipes of the fused LSTM and GRU cells (llgrad/ir/ops_rnn.py; exec'd in programs.py's
# namespace: Gen, rg_of, RECIPES, ...): a value of the pool as the gates, the states (and the
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


RECIPES.update({
    r_lstm_cell: (1, {"fused_lstm_cell", "fused_lstm_cell_backward"}),
    r_gru_cell: (1, {"fused_gru_cell", "fused_gru_cell_backward"}),
})
