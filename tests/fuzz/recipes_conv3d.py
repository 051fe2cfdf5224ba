# Fuzz recipes of 3-D convolution and pooling (exec'd in programs.py's namespace: Gen, rg_of,
# RECIPES, ...), on a 3-D value (as one channel, unsqueezed) or a 4-D one (C, D, H, W), both
# unbatched inputs of the 3-D functions. convolution3d's VJP (the 2-D backward ops, an
# index_add) runs wherever the program's gradients are compared.
from llgrad.ir.ops_conv3d import depth_out as _c3_out
from llgrad.ir.ops_nn_more import pool_out as _p3_avg_out
from llgrad.ir.ops_pool import out_size as _p3_max_out, valid_outputs as _p3_valid


def _vol(g, pred=lambda v: True):
    """(expression, Val, (C, D, H, W)) of a 3-D or 4-D float value with no empty dim."""
    x = g.need(lambda v: v.float and len(v.shape) in (3, 4) and 0 not in v.shape and pred(v))
    if len(x.shape) == 3:
        return f"{x}.unsqueeze(0)", x, (1,) + tuple(x.shape)
    return f"{x}", x, tuple(x.shape)


def r_conv3d(g):
    """F.conv3d of an unbatched volume with a fresh weight (and bias): kernel, stride,
    padding, dilation and groups drawn; 'same' padding sometimes."""
    expr, x, shape = _vol(g)
    c, dhw = shape[0], shape[1:]
    groups = g.choice([d for d in range(1, c + 1) if c % d == 0])
    o = groups * g.int(1, 2)
    k = tuple(g.int(1, 2) for _ in range(3))
    dil = tuple(g.int(1, 2) for _ in range(3))
    if g.chance(20) and all(d * (kk - 1) % 2 == 0 for d, kk in zip(dil, k)):
        stride, text_pad, out = (1, 1, 1), "'same'", dhw
    else:
        stride = tuple(g.int(1, 2) for _ in range(3))
        pad = tuple(g.int(0, 1) for _ in range(3))
        text_pad = repr(pad)
        out = tuple(_c3_out(n, kk, s, p, d) for n, kk, s, p, d in zip(dhw, k, stride, pad, dil))
    if min(out) < 1:
        return False
    w = g.input((o, c // groups) + k, x.dtype)
    b = g.input((o,), x.dtype) if g.chance(50) else None
    v = g.new((o,) + tuple(out), x.dtype, rg=rg_of(x, w, b))
    g.emit(f"{v} = F.conv3d({expr}, {w}, {b}, {stride!r}, {text_pad}, {dil!r}, {groups})",
           x, w, b)
    g.op("convolution3d")


def _reads_everywhere(n, o, k, p, s, d):
    seen = set()
    for i in range(k):
        seen.update(range(*_p3_valid(o, n, s, p, i * d)))
    return len(seen) == o


def r_pool3d(g):
    """F.avg_pool3d (count_include_pad, divisor_override drawn) or, outside gradcheck
    programs, F.max_pool3d (dilation drawn; the indices too when the values are exact) of an
    unbatched volume; kernel, stride, padding and ceil_mode drawn."""
    expr, x, shape = _vol(g)
    dhw = shape[1:]
    k = tuple(g.int(1, 2) for _ in range(3))
    s = tuple(g.int(1, 2) for _ in range(3))
    p = tuple(g.int(0, kk // 2) for kk in k)
    ceil = g.chance(30)
    if g.smooth or g.chance(50):
        out = [_p3_avg_out(n, kk, pp, ss, ceil) for n, kk, pp, ss in zip(dhw, k, p, s)]
        # (avg_pool3d also refuses a dim smaller than its kernel before padding, as torch's
        # pool3d_shape_check does: "input image ... smaller than kernel size")
        if min(out) < 1 or any(n < kk for n, kk in zip(dhw, k)):
            return False
        extra = g.choice(["", ", count_include_pad=False", ", divisor_override=3"])
        v = g.new(shape[:1] + tuple(out), x.dtype, rg=x.rg)
        g.emit(f"{v} = F.avg_pool3d({expr}, {k}, {s}, {p}, ceil_mode={ceil}{extra})", x)
        g.op("avg_pool3d")
        return
    d = tuple(g.int(1, 2) for _ in range(3))
    out = [_p3_max_out(n, kk, pp, ss, dd, ceil) for n, kk, pp, ss, dd in zip(dhw, k, p, s, d)]
    if min(out) < 1:
        return False
    everywhere = all(_reads_everywhere(*a) for a in zip(dhw, out, k, p, s, d))
    v = g.new(shape[:1] + tuple(out), x.dtype, rg=x.rg, exact=x.exact)
    if x.exact and everywhere and g.chance(40):
        i = g.new(shape[:1] + tuple(out), "int64", hi=dhw[0] * dhw[1] * dhw[2], exact=True)
        g.emit(f"{v}, {i} = F.max_pool3d({expr}, {k}, {s}, {p}, {d}, {ceil}, True)", x)
    else:
        g.emit(f"{v} = F.max_pool3d({expr}, {k}, {s}, {p}, {d}, ceil_mode={ceil})", x)
    g.op("max_pool3d_with_indices")


RECIPES.update({
    r_conv3d: (1, {"convolution3d"}),
    r_pool3d: (1, {"avg_pool3d", "max_pool3d_with_indices"}),
})
