# Fuzz recipes of the nn.functional ops of issue 21 (exec'd in programs.py's namespace: Gen,
# dom, rg_of, result_dtype, RECIPES, UNARY, ...). The unary activations join r_unary through
# UNARY (their domains, smoothness and argument variants); glu, the losses, the pads,
# avg_pool2d, group_norm and the in-place activations get recipes of their own.
from llgrad.ir.ops_nn_more import pool_out as _nn_pool_out

UNARY.update({
    "elu": ("any", False, ("alpha=0.5",)), "celu": ("any", False, ("alpha=2.0",)),
    "hardtanh": ("any", False, ("-0.5, 0.8",)), "logsigmoid": ("any", True, ()),
    "mish": ("any", True, ()), "hardswish": ("any", False, ()),
    "hardsigmoid": ("any", False, ()),
})
UNARY_ELSEWHERE.update({"elu_", "celu_", "threshold", "threshold_", "leaky_relu_"})
_unary_table.cache_clear()
RECIPES[r_unary] = (RECIPES[r_unary][0], set(_unary_table()))


def r_nn_activation(g):
    """threshold (it takes its arguments) and the in-place activations: on a clone, or on
    a writable intermediate value (its aliases then hold the written values)."""
    if g.smooth:
        return False
    form = g.choice(["threshold", "elu_", "celu_", "threshold_", "leaky_relu_"])
    call = {"threshold": "F.threshold({x}, 0.1, 2.0{ip})", "threshold_": "F.threshold({x}, "
            "-0.2, 0.5{ip})", "elu_": "F.elu({x}, 0.7{ip})", "celu_": "F.celu({x}, 1.5{ip})",
            "leaky_relu_": "F.leaky_relu({x}, 0.2{ip})"}
    if form == "threshold" or g.chance(50):
        x = g.need(lambda v: v.float)
        inplace = form != "threshold"
        v = g.new(x.shape, x.dtype, rg=x.rg)
        text = call[form].format(x=f"{x}.clone()" if inplace else x,
                                 ip=", inplace=True" if inplace else "")
        g.emit(f"{v} = {text}", x)
        g.op(form)
        return
    t = g.need(lambda v: v.writable and not v.is_input)
    g.emit(call[form].format(x=t, ip=", inplace=True"), t)
    g.op(form)
    g.step.writes = t
    g.step.result = t
    for v in g.pool:
        if v.root is t.root:
            v.exact = False


def r_nn_glu(g):
    x = g.need(lambda v: v.float and any(n and n % 2 == 0 for n in v.shape))
    dims = [d for d, n in enumerate(x.shape) if n and n % 2 == 0]
    d = g.choice(dims)
    spell = g.choice([f"F.glu({x}, {d})", f"F.glu({x}, {d - len(x.shape)})"] +
                     ([f"F.glu({x})"] if d == len(x.shape) - 1 else []))
    shape = tuple(n // 2 if i == d else n for i, n in enumerate(x.shape))
    v = g.new(shape, x.dtype, rg=x.rg)
    g.emit(f"{v} = {spell}", x)
    g.op("glu")


def r_nn_loss(g):
    x = g.need(lambda v: v.float and v.shape)
    red = g.choice(["mean", "sum", "none"])
    name = g.choice(["smooth_l1_loss", "huber_loss", "binary_cross_entropy"])
    if name == "binary_cross_entropy":
        # (inputs only: PyTorch refuses NaN probabilities, which a var of one element makes)
        x = g.pick(lambda v: v.is_input and v.float and v.shape) or g.input(x.shape)
        t = g.pick(lambda v: v.is_input and v.shape == x.shape and v.dtype == x.dtype
                   and v is not x) or g.input(x.shape, x.dtype)
        w = g.const_input(g.variant(x.shape), x.dtype, low=0.5, high=2.0) if g.chance(40) \
            else None
        v = g.new(() if red != "none" else x.shape, x.dtype, rg=rg_of(x, t))
        g.emit(f"{v} = F.binary_cross_entropy({dom(g, x, 'unit')}, {dom(g, t, 'unit')}, {w}, "
               f"reduction={red!r})", x, t, w)
    else:
        # (huber_loss's backward refuses a target of another dtype, and so its forward when
        # a gradient will be asked for: one dtype there)
        same = name == "huber_loss"
        y = g.pick(lambda v: v.float and v.shape == x.shape and v is not x and
                   (not same or v.dtype == x.dtype)) or \
            g.input(x.shape, x.dtype if same else None)
        arg = g.choice(["", ", beta=0.5", ", beta=2.0"] if name == "smooth_l1_loss" else
                       ["", ", delta=0.5", ", delta=3.0"])
        v = g.new(() if red != "none" else x.shape, result_dtype(x, y), rg=rg_of(x, y))
        g.emit(f"{v} = F.{name}({x}, {y}, reduction={red!r}{arg})", x, y)
    g.op(name)


def r_nn_pad(g):
    x = g.need(lambda v: v.float and v.shape)
    nd = len(x.shape)
    mode = g.choice(["constant", "reflect", "replicate", "circular"])
    if mode == "constant":
        k = g.int(1, min(nd, 3))
        pads = []
        shape = list(x.shape)
        for i in range(k):
            d = nd - 1 - i
            lo, hi = g.choice((1, 0, 2, -1)), g.choice((2, 0, 1, -1))
            if shape[d] + min(lo, 0) + min(hi, 0) < 0:
                lo, hi = max(lo, 0), max(hi, 0)
            pads += [lo, hi]
            shape[d] += lo + hi
        value = g.choice(["", ", value=0.5", ", value=-2.0"])
        v = g.new(tuple(shape), x.dtype, rg=x.rg, exact=x.exact)
        g.emit(f"{v} = F.pad({x}, {tuple(pads)!r}{value})", x)
        g.op("constant_pad_nd")
        return
    k = g.int(1, 3)
    if not k + 1 <= nd <= k + 2 or any(n == 0 for n in x.shape[1:]) or x.shape[0] == 0 and \
            nd == k + 1:
        return False
    pads, shape = [], list(x.shape)
    for i in range(k):
        d = nd - 1 - i
        n = shape[d]
        lim = n - 1 if mode == "reflect" else n
        lo, hi = (g.choice((1, 0, 2, -1)) for _ in range(2))
        lo, hi = min(lo, lim), min(hi, lim)
        if mode == "reflect" or n + lo + hi < 1:
            lo, hi = max(lo, 0), max(hi, 0)
        pads += [lo, hi]
        shape[d] += lo + hi
    v = g.new(tuple(shape), x.dtype, rg=x.rg, exact=x.exact)
    g.emit(f"{v} = F.pad({x}, {tuple(pads)!r}, mode={mode!r})", x)
    g.op({"reflect": "reflection_pad", "replicate": "replication_pad"}.get(mode, "copy"))


def r_nn_pool_norm(g):
    x = g.need(lambda v: v.float and len(v.shape) in (2, 3, 4))
    shape, nd = x.shape, len(x.shape)
    if g.chance(50) and nd >= 2 and shape[1]:                     # group_norm
        c = shape[1]
        groups = g.choice([d for d in range(1, c + 1) if c % d == 0])
        if shape[0] * (c // groups) * numel(shape[2:]) == 1:
            return False
        w = g.input((c,), x.dtype) if g.chance(50) else None
        b = g.input((c,), x.dtype) if g.chance(50) else None
        eps = g.choice(["", ", eps=1e-3"])
        v = g.new(shape, x.dtype, rg=rg_of(x, w, b))
        g.emit(f"{v} = F.group_norm({x}, {groups}, {w}, {b}{eps})", x, w, b)
        g.op("group_norm")
        return
    if nd < 3 or 0 in shape[-3:] or nd == 3 and shape[0] == 0:
        return False
    k = (g.int(1, 3), g.int(1, 3))
    s = (g.int(1, 3), g.int(1, 2))
    p = tuple(g.int(0, kk // 2) for kk in k)
    ceil = g.chance(30)
    out = [_nn_pool_out(n, kk, pp, ss, ceil) for n, kk, pp, ss in zip(shape[-2:], k, p, s)]
    if min(out) < 1:
        return False
    extra = g.choice(["", ", count_include_pad=False", ", divisor_override=3"])
    v = g.new(shape[:-2] + tuple(out), x.dtype, rg=x.rg)
    g.emit(f"{v} = F.avg_pool2d({x}, {k}, {s}, {p}, ceil_mode={ceil}{extra})", x)
    g.op("avg_pool2d")


RECIPES.update({
    r_nn_activation: (1, {"threshold", "threshold_", "elu_", "celu_", "leaky_relu_"}),
    r_nn_glu: (1, {"glu"}),
    r_nn_loss: (1, {"smooth_l1_loss", "huber_loss", "binary_cross_entropy"}),
    r_nn_pad: (1, {"constant_pad_nd", "reflection_pad", "replication_pad"}),
    # (avg_pool2d_backward runs wherever the program's gradients are compared)
    r_nn_pool_norm: (1, {"avg_pool2d", "avg_pool2d_backward", "group_norm"}),
})
