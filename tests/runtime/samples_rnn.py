# Samples of the fused LSTM and GRU cells (llgrad/ir/ops_rnn.py) and of the whole LSTM layer
# (ops_rnn_layer.py, PyTorch: its per-step composition), exec'd in test_optable.py's
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


def _layer(T, x, wi, wh, bi, bh, h, c, reverse=False):
    """A whole LSTM layer (output, hy, cy, gates, cells); PyTorch: its per-step composition."""
    if T is llgrad:
        return x._op("lstm_layer", wi, wh, bi, bh, h, c, reverse=reverse)
    n = x.shape[0]
    gx = x.matmul(wi.t()) + (bi + bh if bi is not None else 0)
    ys, gs, cs = [None] * n, [None] * n, [None] * n
    for t in (range(n - 1, -1, -1) if reverse else range(n)):
        gs[t] = gx[t] + h.mm(wh.t())
        h, c = _lstm(T, gs[t], c)
        ys[t], cs[t] = h, c
    return T.stack(ys), h, c, T.stack(gs), T.stack(cs)


def _layer_inputs(n, b, i, h, bias=True):
    w = [_rnnR(4 * h, i) * 0.5, _rnnR(4 * h, h) * 0.5]
    w += [_rnnR(4 * h) * 0.5, _rnnR(4 * h) * 0.5] if bias else []
    return [_rnnR(n, b, i)] + w + [_rnnR(b, h), _rnnR(b, h)]


_LL, _LLB = "MkldnnRnnLayerBackward0", "MkldnnRnnLayerBackwardBackward0"
S("lstm_layer",
  Case("plain", lambda T, x, wi, wh, bi, bh, h, c: _layer(T, x, wi, wh, bi, bh, h, c),
       *_layer_inputs(3, 2, 3, 2), node=_LL, torch_name=False),
  Case("reverse_no_bias", lambda T, x, wi, wh, h, c: _layer(T, x, wi, wh, None, None, h, c,
                                                            True)[:3],
       *_layer_inputs(4, 1, 2, 3, bias=False), node=_LL, torch_name=False),
  Case("noncontig_const_state", lambda T, x, wi, wh, bi, bh, h, c: _layer(
      T, x.transpose(0, 1), wi, wh, bi, bh, h.to(x.dtype), c[:, ::2].to(x.dtype), True)[0],
      *(lambda a: [_rnnR(2, 3, 3)] + a[1:5] + [K(a[5]), K(_rnnR(2, 4))])(
          _layer_inputs(3, 2, 3, 2)), node=_LL, torch_name=False))
S("lstm_layer_backward",
  Case("vjp", lambda T, x, wi, wh, bi, bh, h, c, gy, ghy, gcy, gg, gcs: _vjp(
      T, _layer(T, x, wi, wh, bi, bh, h, c), (x, wi, wh, bi, bh, h, c), (gy, ghy, gcy, gg, gcs)),
      *_layer_inputs(3, 2, 2, 2), _rnnR(3, 2, 2), _rnnR(2, 2), _rnnR(2, 2), _rnnR(3, 2, 8),
      _rnnR(3, 2, 2), node=_LLB, torch_name=False),
  Case("vjp_reverse_output_only", lambda T, x, wi, wh, h, c, gy: _vjp(
      T, _layer(T, x, wi, wh, None, None, h, c, True)[0], (x, wi, wh, h, c), gy),
      *_layer_inputs(2, 2, 2, 2, bias=False), _rnnR(2, 2, 2), node=_LLB, torch_name=False))
