"""One LSTM layer and direction over a whole sequence, one op forward and one backward, as
PyTorch's CPU LSTM runs it (mkldnn_rnn_layer; its node: MkldnnRnnLayerBackward0, its inputs in
PyTorch's order, so next_functions are PyTorch's):

    lstm_layer(input (T, B, I), weight_ih (4H, I), weight_hh (4H, H), bias_ih, bias_hh (4H,) or
               None, hx (B, H), cx (B, H), reverse) -> (output (T, B, H), hy, cy,
               gates (T, B, 4H), cells (T, B, H))

The forward makes the input's projection for every step as one matrix product, then runs the
recurrence: each step one product with W_hh added to its row of the projection (the gates
before their activations, kept in `gates`) and fused_lstm_cell (ops_rnn.py), whose cell state
is kept in `cells`: the formulas and roundings of nn.LSTM's per-step path (addmm, then the
fused cell). The backward op (lstm_layer_backward -> (grad_input, grad_weight_ih,
grad_weight_hh, grad_bias, grad_hx, grad_cx)) runs the recurrence backwards, one
fused_lstm_cell_backward and one product with W_hh per step, then each weight's gradient as
ONE product over all the steps. `reverse` runs the steps from the last to the first.

gates and cells are results so that the backward can save them; gradients reaching them are
honoured (a gates gradient adds to the step's gate gradient, a cells one to its cell state's).
Eagerly the steps' cells run on their native row kernels (the table's `eager_steps`: the
dispatcher's hook passes `rows`, compile/eager_steps.py), the steps after the first on one
kernel bound per layer and called on addresses, and so do their products with W_hh (the
forward's added into the step's gates by the BLAS); the IR interpreter runs the NumPy
implementations. In nn.LSTM nothing reaches gates and cells: their gradients come as
stride-0 zeros (the table's broadcast_zero_grads), which the backward does not add. The
decompositions are the per-step ops nn.LSTM traces (compile sees primitives only). The
backward's VJP differentiates its recurrence step by step with fused_lstm_cell_backward's own
VJP rule, so every order of gradient works (and forward mode, by the double-VJP trick)."""
import numpy as np

from .np_address import data_pointer
from .np_matmul import matmul
from .np_sums import cascade_sum
from .ops_rnn import _lstm_backward_primitives, _lstm_backward_vjp, _lstm_cell, \
    _lstm_cell_backward, _lstm_primitives
from .optable import defop


def _order(n, reverse):
    """The time indices in the order the forward runs them."""
    return list(range(n - 1, -1, -1) if reverse else range(n))


def _cell(rows, name, impl, outs, *arrays):
    """impl(*arrays) written into outs: by rows (the native row kernel) where it runs."""
    if rows is None or rows(name, arrays, outs) is None:
        for o, r in zip(outs, impl(*arrays)):
            o[...] = r
    return outs


def _check(x, w_ih, w_hh, hx, cx):
    h = cx.shape[-1] if cx.ndim == 2 else -1
    if not (x.ndim == 3 and x.shape[0] > 0 and w_ih.shape == (4 * h, x.shape[2])
            and w_hh.shape == (4 * h, h) and hx.shape == (x.shape[1], h) and cx.shape == hx.shape):
        raise ValueError(f"an LSTM layer of input {tuple(x.shape)}, weight_ih "
                         f"{tuple(w_ih.shape)}, weight_hh {tuple(w_hh.shape)}, hx "
                         f"{tuple(hx.shape)}, cx {tuple(cx.shape)}: expected (T, B, I) with T "
                         "> 0, (4H, I), (4H, H), (B, H), (B, H)")
    return h


def _bound(rows, name, arrays, outs):
    """rows.bind's kernel of name for steps laid out as arrays and outs (compile/
    eager_steps.py: called on addresses), or None (each step goes through _cell)."""
    bind = getattr(rows, "bind", None)
    return None if bind is None else bind(name, arrays, outs)


def _product(rows, a, b, out, beta=0.0):
    """rows.product's out = a @ b + beta * out for steps laid out as these, as a function
    of the three addresses (compile/eager_gemm_bound.py), or None (each step calls
    matmul)."""
    product = getattr(rows, "product", None)
    return None if product is None else product(a, b, out, beta)


def _zero(a):
    """Whether a is a stride-0 zero: the gradient of a result nothing reached (the table's
    broadcast_zero_grads), whose addition the backward skips."""
    return a.size == 0 or not any(a.strides) and not a.flat[0]


def _layer(x, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse=False, rows=None):
    n, b, i = x.shape
    h = _check(x, w_ih, w_hh, hx, cx)
    gates = matmul(x.reshape(n * b, i), w_ih.T)      # F.linear's addmm: one product
    bias = b_ih + b_hh if b_ih is not None and b_hh is not None else \
        b_ih if b_ih is not None else b_hh
    if bias is not None:
        np.add(gates, bias, out=gates, casting="unsafe")
    gates = gates.reshape(n, b, 4 * h)
    y = np.empty((n, b, h), gates.dtype)
    cells = np.empty_like(y)
    # (W_hh^T contiguous: the steps' small products run faster on it)
    w_hh_t, tmp = np.ascontiguousarray(w_hh.T), np.empty((b, 4 * h), gates.dtype)
    order = _order(n, reverse)
    # steps after the first read the previous step's cells: one layout, one bound kernel
    cell = _bound(rows, "fused_lstm_cell", (gates[0], cells[0]), (y[0], cells[0])) \
        if n > 1 else None
    # and their products, each added into its gates by the BLAS (beta 1: the same sum)
    prod = _product(rows, y[0], w_hh_t, gates[0], 1.0) if n > 1 else None
    pg, py, pc = data_pointer(gates), data_pointer(y), data_pointer(cells)
    sg, sy, pw = gates.strides[0], y.strides[0], data_pointer(w_hh_t)
    hy, cy = hx, cx
    for k, t in enumerate(order):
        g = gates[t]
        if k and prod is not None:
            prod(py + order[k - 1] * sy, pw, pg + t * sg)
        else:
            matmul(hy, w_hh_t, out=tmp)              # addmm: the product, then its bias
            np.add(tmp, g, out=g)
        if k and cell is not None:
            cell(py + t * sy, pc + t * sy, pg + t * sg, pc + order[k - 1] * sy)
            hy = y[t]
        else:
            hy, cy = _cell(rows, "fused_lstm_cell", _lstm_cell, (y[t], cells[t]), g, cy)
    last = order[-1]
    return y, y[last].copy(), cells[last].copy(), gates, cells


def _layer_backward(gy, ghy, gcy, ggates, gcells, x, w_ih, w_hh, hx, cx, y, gates, cells,
                    reverse=False, rows=None):
    n, b, i = x.shape
    h = _check(x, w_ih, w_hh, hx, cx)
    order = _order(n, reverse)
    d = np.empty(gates.shape, np.result_type(gy, gates))
    skip_g, skip_c = _zero(ggates), _zero(gcells)
    a, e, dh_next = (np.empty(ghy.shape, d.dtype) for _ in range(3))
    # the cell state's gradient alternates between two buffers: a step reads the one the
    # step after it wrote (when no gcells is added into e) and writes the other
    dcs = (np.empty(ghy.shape, d.dtype), np.empty(ghy.shape, d.dtype))
    cell = _bound(rows, "fused_lstm_cell_backward", (a, e, gates[0], cells[0], cells[0]),
                  (d[0], dcs[0])) if n > 2 else None
    prod = _product(rows, d[0], w_hh, dh_next)
    pd, pg, pc = data_pointer(d), data_pointer(gates), data_pointer(cells)
    sd, sg, sc, pa = d.strides[0], gates.strides[0], cells.strides[0], data_pointer(a)
    pdc, pe = tuple(data_pointer(v) for v in dcs), data_pointer(e)
    pw, pdh = data_pointer(w_hh), data_pointer(dh_next)
    dh, dc = ghy, gcy
    for k in range(n - 1, -1, -1):
        t = order[k]
        np.add(dh, gy[t], out=a)
        into = k % 2
        if k == n - 1 or not skip_c:
            np.add(dc, gcells[t], out=e)
        if cell is not None and 0 < k < n - 1:      # (the first and last: _cell's checks)
            cell(pd + t * sd, pdc[into], pa, pe if not skip_c else pdc[1 - into],
                 pg + t * sg, pc + order[k - 1] * sc, pc + t * sc)
            dc = dcs[into]
        else:
            cprev = cells[order[k - 1]] if k else cx
            _, dc = _cell(rows, "fused_lstm_cell_backward", _lstm_cell_backward,
                          (d[t], dcs[into]), a, e if k == n - 1 or not skip_c else dc,
                          gates[t], cprev, cells[t])
        if not skip_g:
            d[t] += ggates[t]
        if prod is not None:
            prod(pd + t * sd, pw, pdh)
            dh = dh_next
        else:
            dh = matmul(d[t], w_hh, out=dh_next)
    hprev = np.empty((n, b, h), d.dtype)      # (each step's h before it, in time order)
    first, rest, prev = (n - 1, slice(0, n - 1), slice(1, n)) if reverse else \
        (0, slice(1, n), slice(0, n - 1))
    hprev[first] = hx
    hprev[rest] = y[prev]
    d2 = d.reshape(n * b, 4 * h)
    dx = matmul(d2, w_ih).reshape(n, b, i)
    dw_ih = matmul(d2.T, x.reshape(n * b, i))
    dw_hh = matmul(d2.T, hprev.reshape(n * b, h))
    db = cascade_sum(d2, (0,), False)     # (the n * b rows in blocks, as PyTorch's sum)
    if db is None:
        db = np.add.reduce(d2, axis=0)
    return dx, dw_ih, dw_hh, db, dh, dc


def _layer_vjp(c, gs):
    gx, gwi, gwh, gb, ghx, gcx = gs[0]._op(
        "lstm_layer_backward", gs[1], gs[2], gs[3], gs[4], c.input, c.weight_ih, c.weight_hh,
        c.hx, c.cx, c.result0, c.result3, c.result4, reverse=c.reverse)
    return tuple(g if c.needs(k) else None
                 for k, g in enumerate((gx, gwi, gwh, gb, gb, ghx, gcx)))


class _Step:
    """What _lstm_backward_vjp reads of its node (one step of the backward's recurrence), and
    what the cells' decompositions read (the operands)."""

    def __init__(self, *inputs):
        self.inputs = list(inputs)
        self.grad_hy, self.grad_cy, self.gates, self.cx, self.cy = (inputs + (None,) * 5)[:5]

    def needs(self, i):
        return True


def _stack(ts):
    return ts[0]._op("stack", *ts[1:], dim=0)


def _backward_vjp(c, us):
    """The cotangents (u) of the backward's results, taken back through its recurrence: the
    recurrence again (its per-step gate gradients d_t and the state gradients a_t, e_t that
    reach each step), then forward in time, each step's d_t cotangent from the products that
    read d_t, and fused_lstm_cell_backward's VJP for the step."""
    u_dx, u_wih, u_whh, u_db, u_dh, u_dc = us
    gy, gg, gcs = c.grad_output.unbind(0), c.grad_gates.unbind(0), c.grad_cells.unbind(0)
    xs, ys, gts, cls = c.input.unbind(0), c.output.unbind(0), c.gates.unbind(0), \
        c.cells.unbind(0)
    w_ih, w_hh, hx, cx = c.weight_ih, c.weight_hh, c.hx, c.cx
    n = len(gts)
    order = _order(n, c.reverse)
    step = [None] * n
    d = [None] * n
    dh, dc = c.grad_hy, c.grad_cy
    for k in range(n - 1, -1, -1):
        t = order[k]
        step[t] = _Step(dh + gy[t], dc + gcs[t], gts[t], cls[order[k - 1]] if k else cx, cls[t])
        q, dc = step[t].grad_hy._op("fused_lstm_cell_backward", *step[t].inputs[1:])
        d[t] = q + gg[t]
        dh = d[t].mm(w_hh)
    bar = {name: [None] * n for name in ("gy", "gg", "gcs", "x", "y", "gates", "cells")}

    def add(name, t, v):
        old = bar[name][t]
        bar[name][t] = v if old is None else old + v
    ubh, ubc, g_wih, g_whh = u_dh, u_dc, None, None
    g_hx = g_cx = None
    for k, t in enumerate(order):
        hprev = ys[order[k - 1]] if k else hx
        dbar = u_dx[t].mm(w_ih.t()) + xs[t].mm(u_wih.t()) + hprev.mm(u_whh.t()) + u_db + \
            ubh.mm(w_hh.t())
        g_whh = d[t].t().mm(ubh) if g_whh is None else g_whh + d[t].t().mm(ubh)
        g_wih = d[t].t().mm(u_dx[t]) if g_wih is None else g_wih + d[t].t().mm(u_dx[t])
        add("gg", t, dbar)
        add("x", t, d[t].mm(u_wih))
        gh, gc, g_gates, g_cprev, g_cy = _lstm_backward_vjp(step[t], (dbar, ubc))
        add("gy", t, gh)
        add("gcs", t, gc)
        add("gates", t, g_gates)
        add("cells", t, g_cy)
        if k:
            add("y", order[k - 1], d[t].mm(u_whh))
            add("cells", order[k - 1], g_cprev)
        else:
            g_hx, g_cx = d[t].mm(u_whh), g_cprev
        ubh, ubc = gh, gc
    like = {"gy": gy, "gg": gg, "gcs": gcs, "x": xs, "y": ys, "gates": gts, "cells": cls}
    out = {}
    for name, vs in bar.items():
        out[name] = _stack([v if v is not None else like[name][t].new_zeros(
            tuple(like[name][t].shape)) for t, v in enumerate(vs)])
    return (out["gy"], ubh, ubc, out["gg"], out["gcs"], out["x"], g_wih, g_whh, g_hx, g_cx,
            out["y"], out["gates"], out["cells"])


# ---- decompositions (ir/decompose.py): nn.LSTM's per-step ops, the cells' primitives ----------

def _layer_primitives(node, emit):
    x, w_ih, w_hh, b_ih, b_hh, hx, cx = node.inputs
    n = x.type.shape[0]
    gx = emit("matmul", [x, emit("transpose", [w_ih], dim0=0, dim1=1)])
    bias = emit("add", [b_ih, b_hh], alpha=1) if b_ih is not None and b_hh is not None else \
        b_ih if b_ih is not None else b_hh
    if bias is not None:
        gx = emit("add", [gx, bias], alpha=1)
    w_hh_t = emit("transpose", [w_hh], dim0=0, dim1=1)
    ys, gates, cells = [None] * n, [None] * n, [None] * n
    hy, cy = hx, cx
    for t in _order(n, node.attrs.get("reverse", False)):
        g = emit("add", [emit("mm", [hy, w_hh_t]), emit("select", [gx], dim=0, index=t)],
                 alpha=1)
        hy, cy = _lstm_primitives(_Step(g, cy), emit)
        ys[t], gates[t], cells[t] = hy, g, cy
    return (emit("stack", ys, dim=0), hy, cy, emit("stack", gates, dim=0),
            emit("stack", cells, dim=0))


def _layer_backward_primitives(node, emit):
    gy, ghy, gcy, gg, gcs, x, w_ih, w_hh, hx, cx, y, gates, cells = node.inputs
    n = x.type.shape[0]
    order = _order(n, node.attrs.get("reverse", False))

    def sel(v, t):
        return emit("select", [v], dim=0, index=t)

    def add(a, b):
        return emit("add", [a, b], alpha=1)
    d, hprev = [None] * n, [None] * n
    dh, dc = ghy, gcy
    for k in range(n - 1, -1, -1):
        t = order[k]
        cprev = sel(cells, order[k - 1]) if k else cx
        q, dc = _lstm_backward_primitives(
            _Step(add(dh, sel(gy, t)), add(dc, sel(gcs, t)), sel(gates, t), cprev,
                  sel(cells, t)), emit)
        d[t] = add(q, sel(gg, t))
        dh = emit("mm", [d[t], w_hh])
        hprev[t] = sel(y, order[k - 1]) if k else hx
    big = emit("stack", d, dim=0)
    big_t = emit("transpose", [big], dim0=1, dim1=2)
    dx = emit("matmul", [big, w_ih])
    dw_ih = emit("sum", [emit("matmul", [big_t, x])], dim=(0,), keepdim=False)
    dw_hh = emit("sum", [emit("matmul", [big_t, emit("stack", hprev, dim=0)])], dim=(0,),
                 keepdim=False)
    return dx, dw_ih, dw_hh, emit("sum", [big], dim=(0, 1), keepdim=False), dh, dc


defop("lstm_layer", _layer,
      args=("input", "weight_ih", "weight_hh", "bias_ih", "bias_hh", "hx", "cx"), nout=5,
      save=("input", "weight_ih", "weight_hh", "hx", "cx", "result0", "result3", "result4"),
      promote="all", float_out=True, cost=8, grad_fn="MkldnnRnnLayerBackward0",
      vjp=_layer_vjp, decompose=_layer_primitives, eager_steps=("fused_lstm_cell",),
      autocast="lower", broadcast_zero_grads=True)
defop("lstm_layer_backward", _layer_backward,
      args=("grad_output", "grad_hy", "grad_cy", "grad_gates", "grad_cells", "input",
            "weight_ih", "weight_hh", "hx", "cx", "output", "gates", "cells"), nout=6,
      save=("grad_output", "grad_hy", "grad_cy", "grad_gates", "grad_cells", "input",
            "weight_ih", "weight_hh", "hx", "cx", "output", "gates", "cells"),
      promote="all", float_out=True, cost=12, grad_fn="MkldnnRnnLayerBackwardBackward0",
      vjp=_backward_vjp, decompose=_layer_backward_primitives,
      eager_steps=("fused_lstm_cell_backward",))
