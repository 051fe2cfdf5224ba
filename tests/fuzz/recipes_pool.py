# Fuzz recipe of max pooling (exec'd in programs.py's namespace: Gen, rg_of, RECIPES, ...).
# Its backward op (max_pool2d_with_indices_backward) runs wherever the program's gradients
# are compared: the recipe covers both. Not smooth (a max): no gradcheck programs.
from llgrad.ir.ops_pool import out_size as _pool_out_size, valid_outputs as _pool_valid


def _pool_reads_everywhere(n, o, k, p, s, d):
    """Every window along a dim reads some input (else PyTorch's index is past it)."""
    seen = set()
    for i in range(k):
        seen.update(range(*_pool_valid(o, n, s, p, i * d)))
    return len(seen) == o


def r_max_pool(g):
    """F.max_pool2d (or nn.MaxPool2d) of a 3-D or 4-D value: kernel, stride, padding,
    dilation and ceil_mode drawn; the indices too when every backend computes the value
    exactly (else a last-bit difference could move a maximum)."""
    if g.smooth:
        return False
    x = g.need(lambda v: v.dtype in FLOATS + ("int64",) and len(v.shape) in (3, 4)
               and 0 not in v.shape)
    hw = x.shape[-2:]
    k = (g.int(1, 3), g.int(1, 3))
    s = (g.int(1, 3), g.int(1, 2))
    p = tuple(g.int(0, kk // 2) for kk in k)
    d = (g.int(1, 2), g.int(1, 2))
    ceil = g.chance(30)
    out = [_pool_out_size(n, kk, pp, ss, dd, ceil) for n, kk, pp, ss, dd in zip(hw, k, p, s, d)]
    if min(out) < 1:
        return False
    # a window that reads nothing gives the lowest value and an index past the plane
    everywhere = all(_pool_reads_everywhere(*a) for a in zip(hw, out, k, p, s, d))
    if x.dtype == "int64" and not everywhere:
        return False            # (int64 values are indices in [0, hi) to later steps)
    shape = x.shape[:-2] + tuple(out)
    v = g.new(shape, x.dtype, rg=x.rg, exact=x.exact, hi=x.hi)
    if x.exact and everywhere and g.chance(40):
        i = g.new(shape, "int64", hi=hw[0] * hw[1], exact=True)
        g.emit(f"{v}, {i} = F.max_pool2d({x}, {k}, {s}, {p}, {d}, {ceil}, True)", x)
    elif g.chance(30):
        g.emit(f"{v} = llgrad.nn.MaxPool2d({k}, {s}, {p}, {d}, ceil_mode={ceil})({x})", x)
    else:
        g.emit(f"{v} = F.max_pool2d({x}, {k}, {s}, {p}, {d}, ceil_mode={ceil})", x)
    g.op("max_pool2d_with_indices")


RECIPES.update({
    r_max_pool: (1, {"max_pool2d_with_indices", "max_pool2d_with_indices_backward"}),
})
