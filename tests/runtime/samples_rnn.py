# Samples of the fused LSTM and GRU cells (llgrad/ir/ops_rnn.py), exec'd in test_optable.py's
# namespace (S, Case, K, ...), from a generator of their own. The programs take the gates
# themselves (no matrix product: special values reach the cells as they are). PyTorch runs its
# CPU cells' composition (what torch.nn.LSTMCell / GRUCell compute on the CPU: its fused cells
# are CUDA's), so its node names differ (torch_name=False); values and gradients are compared.
# A constant (K) state is cast to the gates' dtype: a K stays float64 in the float32 passes, and
# a cell of mixed dtypes has no decomposition (it would run interpreted).
_rnn_rng = np.random.default_rng(20270301)


def _rnnR(*shape):
    return np.asarray(_rnn_rng.uniform(-2.5, 2.5, shape))


def _lstm(T, gates, c):
    """(hy, cy) of the gates (i, f, g, o on the last dim) and the cell state."""
    if T is llgrad:
        return gates._op("fused_lstm_cell", c)
    i, f, g, o = gates.chunk(4, -1)
    cy = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * cy.tanh(), cy


def _gru(T, gx, gh, h):
    """hy of the input's and the state's gates (r, z, n; gh holds b_hn) and the state."""
    if T is llgrad:
        return gx._op("fused_gru_cell", gh, h)
    xr, xz, xn = gx.chunk(3, -1)
    hr, hz, hn = gh.chunk(3, -1)
    r, z = (xr + hr).sigmoid(), (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    return (h - n) * z + n


def _vjp(T, outs, ins, grads):
    """The gradients of ins as differentiable functions (create_graph=True)."""
    return tuple(T.autograd.grad(outs, ins, grads, create_graph=True))


_LC, _LCB = "ThnnFusedLstmCellBackward0", "ThnnFusedLstmCellBackwardBackward0"
_GC, _GCB = "ThnnFusedGruCellBackward0", "ThnnFusedGruCellBackwardBackward0"

S("fused_lstm_cell",
  Case("plain", lambda T, x, c: _lstm(T, x, c), _rnnR(3, 8), _rnnR(3, 2), node=_LC,
       torch_name=False),
  Case("leading_dims_cy", lambda T, x, c: _lstm(T, x, c)[1], _rnnR(2, 3, 12), _rnnR(2, 3, 3),
       node=_LC, torch_name=False),
  Case("noncontig_const_state", lambda T, x, c: _lstm(T, x.t(), c[:, ::2].to(x.dtype)),
       _rnnR(8, 2), K(_rnnR(2, 4)), node=_LC, torch_name=False),
  Case("unbatched", lambda T, x, c: _lstm(T, x, c), _rnnR(4), _rnnR(1), node=_LC,
       torch_name=False))
S("fused_lstm_cell_backward",
  Case("vjp", lambda T, x, c, gh, gc: _vjp(T, _lstm(T, x, c), (x, c), (gh, gc)),
       _rnnR(3, 8), _rnnR(3, 2), _rnnR(3, 2), _rnnR(3, 2), node=_LCB, torch_name=False),
  Case("vjp_h_only", lambda T, x, c, gh: _vjp(T, _lstm(T, x, c)[0], x, gh),
       _rnnR(2, 12), _rnnR(2, 3), _rnnR(2, 3), node=_LCB, torch_name=False))
S("fused_gru_cell",
  Case("plain", lambda T, x, y, h: _gru(T, x, y, h), _rnnR(3, 6), _rnnR(3, 6), _rnnR(3, 2),
       node=_GC, torch_name=False),
  Case("leading_dims_noncontig", lambda T, x, y, h: _gru(T, x.transpose(0, 1), y, h[..., 1:]),
       _rnnR(3, 2, 9), _rnnR(2, 3, 9), _rnnR(2, 3, 4), node=_GC, torch_name=False),
  Case("const_state_gates", lambda T, x, y, h: _gru(T, x, y.to(x.dtype), h.to(x.dtype)),
       _rnnR(2, 6), K(_rnnR(2, 6)), K(_rnnR(2, 2)), node=_GC, torch_name=False))
S("fused_gru_cell_backward",
  Case("vjp", lambda T, x, y, h, g: _vjp(T, _gru(T, x, y, h), (x, y, h), g),
       _rnnR(3, 6), _rnnR(3, 6), _rnnR(3, 2), _rnnR(3, 2), node=_GCB, torch_name=False),
  Case("vjp_gates_only", lambda T, x, y, h, g: _vjp(T, _gru(T, x, y, h.to(x.dtype)), (x, y), g),
       _rnnR(2, 9), _rnnR(2, 9), K(_rnnR(2, 3)), _rnnR(2, 3), node=_GCB, torch_name=False))
