"""The elementwise part of an LSTM step and of a GRU step, each one op of the table forward
and one backward, as PyTorch's _thnn_fused_lstm_cell / _thnn_fused_gru_cell (their nodes'
names: ThnnFusedLstmCellBackward0, ThnnFusedGruCellBackward0):

    fused_lstm_cell(gates (..., 4H), cx (..., H)) -> (hy, cy)             gates i, f, g, o
        cy = sigmoid(f) * cx + sigmoid(i) * tanh(g);   hy = tanh(cy) * sigmoid(o)
    fused_gru_cell(gx (..., 3H), gh (..., 3H), hx (..., H)) -> hy          gates r, z, n
        r = sigmoid(x_r + h_r);  z = sigmoid(x_z + h_z);  n = tanh(x_n + r * h_n)
        hy = (hx - n) * z + n       (gh = h @ W_hh^T + b_hh: b_hn inside r * (...), as PyTorch)

The backward ops (fused_lstm_cell_backward -> (grad_gates, grad_cx), fused_gru_cell_backward
-> (grad_gx, grad_gh, grad_hx)) recompute the activations from the saved inputs, as
layer_norm's backward recomputes its statistics: nothing but the step's operands is kept,
and in native code the recomputation is a few vector instructions of the backward's fused
loop. Their own VJPs are written with the Tensor API, so every order of gradient works.
Compiled, the LSTM cell is recompute=False: the backward's recomputed sigmoids and tanh of
the gates move into the forward (ir/forward_shared.py), which stores the activated gates in
place of the pre-activation ones (the same bytes, PyTorch's workspace), leaving one tanh of
the cell state per element to the backward. (The GRU cell stays as it is: its bias-added
h-gates are still read by the backward, and storing r, z, n beside them split the forward's
fused step and undid its in-place cats, a slower step.)

The NumPy implementations make few passes with in-place ufuncs and keep the dtype; sigmoid is
ops_elementwise's exp(-|x|) form bit for bit, its branch a maximum (NumPy's where with an
unpredictable mask costs ten times the arithmetic). Each op declares its decomposition into
the table's primitives (slice views, sigmoid, tanh, mul, add, sub, rsub, cat) in exactly the
operations and order of its implementation, so native code needs no lowering of its own,
fuses as before and agrees with eager down to the sign of zeros and the NaNs."""
import numpy as np

from . import sigmoid_np
from .optable import defop


def _hidden(k, big, small, *more):
    """H, checking big (..., k*H), small (..., H) and more (each small's shape); the
    dispatcher names the op in its RuntimeError."""
    h = small[-1] if small else -1
    if not (len(big) >= 1 and tuple(big[:-1]) == tuple(small[:-1]) and big[-1] == k * h
            and all(tuple(m) == tuple(small) for m in more)):
        raise ValueError(f"gates of shape {tuple(big)} do not fit a state of shape "
                         f"{tuple(small)} ({k} gates of its last size, the same leading "
                         f"dims){''.join(f', with {tuple(m)}' for m in more)}")
    return h


def _out(shape, *arrays):
    return np.empty(shape, dtype=np.result_type(*arrays))


_sigmoid_into = sigmoid_np.sigmoid_into


def _blocks(a, k, h):
    return [a[..., j * h:(j + 1) * h] for j in range(k)]


# ---- LSTM ----------------------------------------------------------------------------------------

def _lstm_acts(gates, h):
    """sigmoid(i), sigmoid(f), tanh(g), sigmoid(o) in one array (..., 4H)."""
    act = _sigmoid_into(gates, _out(gates.shape, gates))
    np.tanh(gates[..., 2 * h:3 * h], out=act[..., 2 * h:3 * h])
    return act


def _lstm_cell(gates, cx):
    h = _hidden(4, gates.shape, cx.shape)
    act = _lstm_acts(gates, h)
    i, f, g, o = _blocks(act, 4, h)
    cy = np.multiply(f, cx, out=_out(cx.shape, gates, cx))
    cy += np.multiply(i, g, out=i)
    hy = np.tanh(cy, out=np.empty_like(cy))
    hy *= o
    return hy, cy


def _lstm_cell_backward(grad_hy, grad_cy, gates, cx, cy):
    h = _hidden(4, gates.shape, cx.shape, grad_hy.shape, grad_cy.shape, cy.shape)
    act = _lstm_acts(gates, h)
    i, f, g, o = _blocks(act, 4, h)
    tc = np.tanh(cy, out=_out(cy.shape, cy, gates))
    dc = np.multiply(grad_hy, o, out=np.empty_like(tc))
    t = np.multiply(tc, tc)
    dc *= np.subtract(1, t, out=t)
    dc += grad_cy                               # dL/dcy: (gh * o) * (1 - tc^2) + gc
    grad = np.empty_like(act)
    gi, gf, gg, go = _blocks(grad, 4, h)
    np.multiply(dc, g, out=gi)
    np.multiply(dc, cx, out=gf)
    np.multiply(dc, i, out=gg)
    np.multiply(grad_hy, tc, out=go)
    grad_cx = np.multiply(dc, f, out=np.empty_like(dc))
    d = np.subtract(1, act)                     # (1 - s) * s; 1 - g * g for tanh's block
    d *= act
    dg = d[..., 2 * h:3 * h]
    np.subtract(1, np.multiply(g, g, out=dg), out=dg)
    grad *= d
    return grad, grad_cx


def _lstm_vjp(c, gs):
    gates, gcx = gs[0]._op("fused_lstm_cell_backward", gs[1], c.gates, c.cx, c.result1)
    return (gates if c.needs(0) else None, gcx if c.needs(1) else None)


def _lstm_backward_vjp(c, gs):
    """The backward's derivative (u, v: the cotangents of grad_gates and grad_cx):
    L = sum(dc * W + u_o * gh * tc * o'), W = u_i*g*i' + u_f*cx*f' + u_g*i*g' + v*f."""
    gh, gc, x, cx, cy = c.grad_hy, c.grad_cy, c.gates, c.cx, c.cy
    u, v = gs
    n = x.shape[-1] // 4
    xi, xf, xg, xo = (x.narrow(-1, k * n, n) for k in range(4))
    ui, uf, ug, uo = (u.narrow(-1, k * n, n) for k in range(4))
    i, f, g, o = xi.sigmoid(), xf.sigmoid(), xg.tanh(), xo.sigmoid()
    di, df, dg, do = i * (1 - i), f * (1 - f), 1 - g * g, o * (1 - o)
    tc = cy.tanh()
    dtc = 1 - tc * tc
    dc = gc + gh * o * dtc
    w = ui * g * di + uf * cx * df + ug * i * dg + v * f
    out = [None] * 5
    if c.needs(0):
        out[0] = w * o * dtc + uo * tc * do
    if c.needs(1):
        out[1] = w
    if c.needs(2):
        out[2] = (dc * di * (ui * g * (1 - 2 * i) + ug * dg))._op(
            "cat", dc * df * (uf * cx * (1 - 2 * f) + v), dc * dg * (ui * di - 2 * ug * i * g),
            do * gh * (w * dtc + uo * tc * (1 - 2 * o)), dim=x.dim() - 1)
    if c.needs(3):
        out[3] = dc * uf * df
    if c.needs(4):
        out[4] = dtc * gh * (uo * do - 2 * w * o * tc)
    return tuple(out)


# ---- decompositions (ir/decompose.py): the implementations' operations, in their order ----------

def _slices(emit, x, k):
    d, n = len(x.type.shape) - 1, x.type.shape[-1] // k
    return [emit("slice", [x], dim=d, start=j * n, end=(j + 1) * n, step=1) for j in range(k)]


def _one_minus(emit, x):
    return emit("rsub", [x, 1], alpha=1)


def _lstm_acts_primitives(emit, gates):
    xi, xf, xg, xo = _slices(emit, gates, 4)
    return (emit("sigmoid", [xi]), emit("sigmoid", [xf]), emit("tanh", [xg]),
            emit("sigmoid", [xo]))


def _lstm_primitives(node, emit):
    gates, cx = node.inputs
    i, f, g, o = _lstm_acts_primitives(emit, gates)
    cy = emit("add", [emit("mul", [f, cx]), emit("mul", [i, g])], alpha=1)
    return emit("mul", [emit("tanh", [cy]), o]), cy


def _lstm_backward_primitives(node, emit):
    gh, gc, gates, cx, cy = node.inputs
    i, f, g, o = _lstm_acts_primitives(emit, gates)
    tc = emit("tanh", [cy])
    dtc = _one_minus(emit, emit("mul", [tc, tc]))
    dc = emit("add", [emit("mul", [emit("mul", [gh, o]), dtc]), gc], alpha=1)
    sig = lambda s: emit("mul", [_one_minus(emit, s), s])  # noqa: E731
    parts = [emit("mul", [emit("mul", [dc, g]), sig(i)]),
             emit("mul", [emit("mul", [dc, cx]), sig(f)]),
             emit("mul", [emit("mul", [dc, i]), _one_minus(emit, emit("mul", [g, g]))]),
             emit("mul", [emit("mul", [gh, tc]), sig(o)])]
    grad_cx = emit("mul", [dc, f])      # (before the cat: one loop computes every result)
    return emit("cat", parts, dim=len(gates.type.shape) - 1), grad_cx


defop("fused_lstm_cell", _lstm_cell, args=("gates", "cx"), nout=2,
      save=("gates", "cx", "result1"), promote=(0, 1), float_out=True, cost=4,
      grad_fn="ThnnFusedLstmCellBackward0", vjp=_lstm_vjp, decompose=_lstm_primitives,
      eager_rows=True, recompute=False)
defop("fused_lstm_cell_backward", _lstm_cell_backward,
      args=("grad_hy", "grad_cy", "gates", "cx", "cy"), nout=2,
      save=("grad_hy", "grad_cy", "gates", "cx", "cy"), promote="all", float_out=True, cost=6,
      grad_fn="ThnnFusedLstmCellBackwardBackward0", vjp=_lstm_backward_vjp,
      decompose=_lstm_backward_primitives, eager_rows=True)


# ---- GRU -----------------------------------------------------------------------------------------

def _gru_acts(gx, gh, h):
    """(rz = sigmoid(x_rz + h_rz) (..., 2H), n = tanh(r * h_n + x_n) (..., H))."""
    rz = np.add(gx[..., :2 * h], gh[..., :2 * h], out=_out(gx.shape[:-1] + (2 * h,), gx, gh))
    _sigmoid_into(rz, rz)
    n = np.multiply(rz[..., :h], gh[..., 2 * h:], out=np.empty_like(rz[..., :h]))
    n += gx[..., 2 * h:]
    return rz, np.tanh(n, out=n)


def _gru_cell(gx, gh, hx):
    h = _hidden(3, gx.shape, hx.shape)
    _hidden(3, gh.shape, hx.shape)
    rz, n = _gru_acts(gx, gh, h)
    hy = np.subtract(hx, n, out=np.empty_like(n))
    hy *= rz[..., h:]
    hy += n
    return hy


def _gru_cell_backward(grad_hy, gx, gh, hx):
    h = _hidden(3, gx.shape, hx.shape, grad_hy.shape)
    _hidden(3, gh.shape, hx.shape)
    rz, n = _gru_acts(gx, gh, h)
    r, z = rz[..., :h], rz[..., h:]
    grad_hx = np.multiply(grad_hy, z, out=np.empty_like(n))
    grad_gx = _out(gx.shape, rz)
    dr, dz, dn = _blocks(grad_gx, 3, h)
    np.subtract(grad_hy, grad_hx, out=dn)       # (g - g * z) * (1 - n^2)
    t = np.multiply(n, n)
    dn *= np.subtract(1, t, out=t)
    np.subtract(hx, n, out=dz)                  # (hx - n) * g, then * sigmoid'
    dz *= grad_hy
    np.multiply(dn, gh[..., 2 * h:], out=dr)    # dn * h_n, then * sigmoid'
    d = np.subtract(1, rz)
    d *= rz
    grad_gx[..., :2 * h] *= d
    grad_gh = np.empty_like(grad_gx)
    grad_gh[..., :2 * h] = grad_gx[..., :2 * h]
    np.multiply(dn, r, out=grad_gh[..., 2 * h:])
    return grad_gx, grad_gh, grad_hx


def _gru_vjp(c, g):
    gx, gh, ghx = g._op("fused_gru_cell_backward", c.gx, c.gh, c.hx)
    return (gx if c.needs(0) else None, gh if c.needs(1) else None,
            ghx if c.needs(2) else None)


def _gru_backward_vjp(c, gs):
    """The backward's derivative: with dn = g (1 - z) n', the cotangents' sum is
    L = Q * dn + a_z * g * (hx - n) * z' + v * g * z, Q = a_r * h_n * r' + u_xn + u_hn * r
    (a_r, a_z: the r and z cotangents of grad_gx and grad_gh added)."""
    g, x, y, hx = c.grad_hy, c.gx, c.gh, c.hx
    ux, uh, v = gs
    m = x.shape[-1] // 3
    xr, xz, xn = (x.narrow(-1, k * m, m) for k in range(3))
    yr, yz, yn = (y.narrow(-1, k * m, m) for k in range(3))
    ar = ux.narrow(-1, 0, m) + uh.narrow(-1, 0, m)
    az = ux.narrow(-1, m, m) + uh.narrow(-1, m, m)
    uxn, uhn = ux.narrow(-1, 2 * m, m), uh.narrow(-1, 2 * m, m)
    r, z = (xr + yr).sigmoid(), (xz + yz).sigmoid()
    n = (xn + r * yn).tanh()
    dr, dz, dn = r * (1 - r), z * (1 - z), 1 - n * n
    dn_pre = g * (1 - z) * dn
    q = ar * yn * dr + uxn + uhn * r
    p_n = (-2 * n * q * g * (1 - z) - az * g * dz) * dn          # dL/d(x_n + r h_n)
    p_z = (-q * g * dn + az * g * (hx - n) * (1 - 2 * z) + v * g) * dz
    p_r = dr * (dn_pre * (ar * yn * (1 - 2 * r) + uhn) + p_n * yn)
    d = x.dim() - 1
    out = [None] * 4
    if c.needs(0):
        out[0] = q * (1 - z) * dn + az * (hx - n) * dz + v * z
    if c.needs(1):
        out[1] = p_r._op("cat", p_z, p_n, dim=d)
    if c.needs(2):
        out[2] = p_r._op("cat", p_z, ar * dr * dn_pre + p_n * r, dim=d)
    if c.needs(3):
        out[3] = az * g * dz
    return tuple(out)


def _gru_acts_primitives(emit, gx, gh):
    xr, xz, xn = _slices(emit, gx, 3)
    yr, yz, yn = _slices(emit, gh, 3)
    r = emit("sigmoid", [emit("add", [xr, yr], alpha=1)])
    z = emit("sigmoid", [emit("add", [xz, yz], alpha=1)])
    return r, z, emit("tanh", [emit("add", [emit("mul", [r, yn]), xn], alpha=1)]), yn


def _gru_primitives(node, emit):
    gx, gh, hx = node.inputs
    _, z, n, _ = _gru_acts_primitives(emit, gx, gh)
    return emit("add", [emit("mul", [emit("sub", [hx, n], alpha=1), z]), n], alpha=1)


def _gru_backward_primitives(node, emit):
    g, gx, gh, hx = node.inputs
    r, z, n, yn = _gru_acts_primitives(emit, gx, gh)
    sig = lambda s: emit("mul", [_one_minus(emit, s), s])  # noqa: E731
    grad_hx = emit("mul", [g, z])
    dn = emit("mul", [emit("sub", [g, grad_hx], alpha=1), _one_minus(emit, emit("mul", [n, n]))])
    dz_pre, sz = emit("mul", [emit("sub", [hx, n], alpha=1), g]), sig(z)
    dr_pre, sr = emit("mul", [dn, yn]), sig(r)
    dnr = emit("mul", [dn, r])          # (before the cats: one loop computes every result)
    d = len(gx.type.shape) - 1
    # each cat gets its own r and z blocks (the same products, operands swapped, so cse keeps
    # both): an operand read by two cats is written into neither (schedule/concat.py), and
    # both cats would then be copies, two per step; all before the cats, so one loop
    # writes every block
    blocks = [emit("mul", [dr_pre, sr]), emit("mul", [dz_pre, sz]),
              emit("mul", [sr, dr_pre]), emit("mul", [sz, dz_pre])]
    return (emit("cat", blocks[:2] + [dn], dim=d), emit("cat", blocks[2:] + [dnr], dim=d),
            grad_hx)


defop("fused_gru_cell", _gru_cell, args=("gx", "gh", "hx"), save=("gx", "gh", "hx"),
      promote=(0, 1, 2), float_out=True, cost=4, grad_fn="ThnnFusedGruCellBackward0",
      vjp=_gru_vjp, decompose=_gru_primitives, eager_rows=True)
defop("fused_gru_cell_backward", _gru_cell_backward, args=("grad_hy", "gx", "gh", "hx"), nout=3,
      save=("grad_hy", "gx", "gh", "hx"), promote="all", float_out=True, cost=6,
      grad_fn="ThnnFusedGruCellBackwardBackward0", vjp=_gru_backward_vjp,
      decompose=_gru_backward_primitives, eager_rows=True)
