# Recipes of the tensor ops of issue 21 (llgrad/ir/ops_tensor.py, ops_linalg.py, ops_sort.py,
# ops_fill.py). Exec'd in tests/fuzz/programs.py's namespace (Gen, UNARY, RECIPES, ...).

# ceil / trunc / frac join r_unary as value-discontinuous ops (they read exact values only)
UNARY.update({"ceil": ("any", False, ()), "trunc": ("any", False, ()),
              "frac": ("any", False, ())})
DISCONTINUOUS |= {"ceil", "trunc", "frac"}
EXACT_UNARY |= {"ceil", "trunc"}


def r_positional(g):
    """tril/triu, flip, roll, repeat, diag/diag_embed, unfold (a view), cumprod."""
    x = g.need(lambda v: v.float and v.shape)
    s, nd = x.shape, len(x.shape)
    form = g.int(0, 6)
    base = overlap = None
    exact = x.exact
    if form == 0:
        if nd < 2:
            return False
        name, k = g.choice(["tril", "triu"]), g.int(-2, 2)
        text, shape, op = g.choice([f"{x}.{name}({k})", f"llgrad.{name}({x}, diagonal={k})"]), \
            s, name
    elif form == 1:
        dims = [d - nd if g.chance(30) else d for d in range(nd) if g.chance(50)] or [0]
        text = g.choice([f"{x}.flip({', '.join(map(str, dims))})", f"llgrad.flip({x}, {dims})"])
        shape, op = s, "flip"
    elif form == 2:
        if g.chance(30):
            text = f"{x}.roll({g.int(-7, 7)})"
        else:
            dims = sorted({g.int(0, nd - 1) for _ in range(g.int(1, 2))})
            shifts = tuple(g.int(-4, 4) for _ in dims)
            text = g.choice([f"{x}.roll({shifts}, {tuple(dims)})",
                             f"llgrad.roll({x}, {shifts[0]}, {dims[0]})"])
        shape, op = s, "roll"
    elif form == 3:
        reps = tuple(g.choice((1, 2, 3, 0)) for _ in range(nd + g.int(0, 1)))
        padded = (1,) * (len(reps) - nd) + s
        text, shape, op = f"{x}.repeat{reps}", tuple(r * n for r, n in zip(reps, padded)), \
            "repeat"
    elif form == 4:
        k = g.int(-2, 2)
        if nd == 1:
            m = s[0] + abs(k)
            text, shape, op = f"llgrad.diag({x}, {k})", (m, m), "diag_embed"
        elif nd == 2 and g.chance(50):
            n = max(min(s[0] - max(-k, 0), s[1] - max(k, 0)), 0)
            text, shape, op = f"{x}.diag({k})", (n,), "diagonal_copy"
        else:
            m = s[-1] + abs(k)
            text, shape, op = f"{x}.diag_embed({k})", s[:-1] + (m, m), "diag_embed"
    elif form == 5:
        d = g.int(0, nd - 1)
        size, step = g.int(0, s[d]), g.int(1, 3)
        count = (s[d] - size) // step + 1
        text, op = f"{x}.unfold({d}, {size}, {step})", "unfold"
        shape = s[:d] + (count,) + s[d + 1:] + (size,)
        base, overlap = x, x.overlap or (step < size and count > 1)
    else:
        d = g.int(-nd, nd - 1)
        text = g.choice([f"{x}.cumprod({d})", f"llgrad.cumprod({x}, {d})"])
        shape, op, exact = s, "cumprod", False
    v = g.new(shape, x.dtype, rg=x.rg, exact=exact, base=base, overlap=bool(overlap))
    g.emit(f"{v} = {text}", x)
    g.op(op)


def r_norm_round(g):
    """Vector norms (ord 2 and 3 are smooth) and round(decimals=) (of exact values)."""
    if g.chance(25):
        if g.smooth:
            return False
        x = g.need(lambda v: v.float and v.exact)
        v = g.new(x.shape, x.dtype, rg=x.rg)
        g.emit(f"{v} = {x}.round(decimals={g.choice((1, 2, 0, -1))})", x)
        g.op("round_decimals")
        return
    ords = (2, 3) if g.smooth else (2, 3, 1, 1.5, 0.5, "inf", "-inf", 0)
    p = g.choice(ords)
    x = g.need(lambda v: v.float and (v.exact or p not in (0, "inf", "-inf")))
    dims = _dims(g, x.shape)
    if p in ("inf", "-inf") and not _nonempty(x.shape, dims):
        return False
    keep = g.chance(30)
    nd = len(x.shape)
    shape = reduced(x.shape, _dims_list(dims, nd), keep)
    kw = f", keepdim={keep}"
    text = g.choice([f"{x}.norm({p}, {dims}{kw})",
                     f"llgrad.linalg.vector_norm({x}, {p}, {dims}{kw})",
                     f"llgrad.norm({x}, p={p}, dim={dims}{kw})"])
    v = g.new(shape, x.dtype, rg=x.rg, exact=x.exact and p in ("inf", "-inf"))
    g.emit(f"{v} = {text}", x)
    g.op("linalg_vector_norm")


def _rows_literal(g, shape, dim, hi, unique):
    """An int64 index literal of shape with values in [0, hi) along dim: distinct along dim
    at each position of the other dims when unique (scatter's repeated writes are undefined
    in PyTorch)."""
    rng = np.random.default_rng(g.seed())
    if numel(shape) == 0 or hi == 0:
        return f"llgrad.zeros({tuple(shape)!r}, dtype=llgrad.int64)"
    if not unique:
        return f"llgrad.tensor({rng.integers(0, hi, shape).tolist()!r})"
    moved = (shape[dim],) + shape[:dim] + shape[dim + 1:]
    cols = [rng.permutation(hi)[:shape[dim]] for _ in range(numel(moved[1:]))]
    arr = np.stack(cols, axis=-1).reshape(moved) if cols else np.zeros(moved, np.int64)
    return f"llgrad.tensor({np.moveaxis(arr, 0, dim).tolist()!r})"


def r_sort_scatter(g):
    """sort / topk / argsort (of exact values: ties keep their order) and scatter /
    scatter_reduce."""
    form = g.int(0, 2)
    if form == 0:
        if g.smooth:
            return False
        x = g.need(lambda v: v.float and v.exact)
        nd = len(x.shape)
        d = g.int(-max(nd, 1), max(nd, 1) - 1)
        n = extent(x.shape, d)
        kind = g.int(0, 3)
        if kind == 3 and nd:        # (ties picked as PyTorch's kernels pick them)
            k = g.int(1, n) if n else 0
            if not k:
                return False
            shape = x.shape[:norm(d, nd)] + x.shape[norm(d, nd) + 1:]
            vv = g.new(shape, x.dtype, rg=x.rg, exact=True)
            vi = g.new(shape, "int64", hi=n, exact=True)
            name = g.choice(("kthvalue", "mode"))
            g.emit(f"{vv}, {vi} = {x}.kthvalue({k}, {d})" if name == "kthvalue" else
                   f"{vv}, {vi} = {x}.mode({d})", x)
            g.op(name)
            return None
        if kind == 0:
            desc = g.choice(["", ", descending=True", ", stable=True"])
            vv = g.new(x.shape, x.dtype, rg=x.rg, exact=True)
            vi = g.new(x.shape, "int64", hi=n, exact=True)
            # (torch's stable= overload takes dim by keyword only: sort(0, stable=True) raises)
            dim = f"dim={d}" if desc == ", stable=True" else f"{d}"
            g.emit(f"{vv}, {vi} = {x}.sort({dim}{desc})", x)
            g.op("sort")
        elif kind == 1 and nd:
            k = g.int(0, n)
            shape = x.shape[:norm(d, nd)] + (k,) + x.shape[norm(d, nd) + 1:]
            vv = g.new(shape, x.dtype, rg=x.rg, exact=True)
            vi = g.new(shape, "int64", hi=n, exact=True)
            g.emit(f"{vv}, {vi} = {x}.topk({k}, {d}{g.choice(['', ', largest=False'])})", x)
            g.op("topk")
        else:
            v = g.new(x.shape, "int64", hi=n, exact=True)
            g.emit(f"{v} = llgrad.argsort({x}, {d}{g.choice(['', ', descending=True'])})", x)
            g.op("sort")
        return
    x = g.need(lambda v: v.float and v.shape)
    nd = len(x.shape)
    d = g.int(0, nd - 1)
    n = x.shape[d]
    accumulate = form == 2
    ishape = tuple(g.int(0 if m == 0 else 1, m) if i != d else g.int(0, 3 if accumulate else n)
                   for i, m in enumerate(x.shape))
    if n == 0 and ishape[d]:
        return False
    idx = _rows_literal(g, ishape, d, n, unique=not accumulate)
    src = g.pick(lambda v: v.float and v.dtype == x.dtype and v.shape == ishape) or \
        g.input(ishape, x.dtype)
    if not accumulate:
        if g.chance(25):
            v = g.new(x.shape, x.dtype, rg=x.rg, exact=x.exact)
            g.emit(f"{v} = {x}.scatter({d}, {idx}, {g.scalar()})", x)
        else:
            v = g.new(x.shape, x.dtype, rg=rg_of(x, src), exact=ex(x, src))
            g.emit(f"{v} = " + g.choice([f"{x}.scatter({d}, {idx}, {src})",
                                         f"llgrad.scatter({x}, {d}, {idx}, {src})"]), x, src)
        g.op("scatter")
        return
    reduce = g.choice(["sum", "mean", "prod"] + ([] if g.smooth else ["amax", "amin"]))
    inc = g.choice(["", ", include_self=False"])
    v = g.new(x.shape, x.dtype, rg=rg_of(x, src),
              exact=reduce in ("amax", "amin") and ex(x, src))
    g.emit(f"{v} = {x}.scatter_reduce({d}, {idx}, {src}, {reduce!r}{inc})", x, src)
    g.op("scatter_reduce")


def r_baddbmm(g):
    x = g.need(lambda v: v.float and 1 <= len(v.shape) <= 3)
    s = x.shape
    b, n, m = (1, 1) + s if len(s) == 1 else (1,) + s if len(s) == 2 else s
    k = g.choice((2, 3, 1))
    b1, b2 = g.input((b, n, k), x.dtype), g.input((b, k, m), x.dtype)
    scale = g.choice(["", ", beta=0.5", ", alpha=2.0", ", beta=0, alpha=-1.5"])
    v = g.new((b, n, m), x.dtype, rg=rg_of(x, b1, b2))
    g.emit(f"{v} = " + g.choice([f"{x}.baddbmm({b1}, {b2}{scale})",
                                 f"llgrad.baddbmm({x}, {b1}, {b2}{scale})"]), x, b1, b2)
    g.op("baddbmm")


def r_fill(g):
    """Random fills of a fresh copy (draws from llgrad's generator: the backends replay the
    same numbers) and bernoulli of exact probabilities."""
    if g.smooth:
        return False
    x = g.need(lambda v: v.float)
    form = g.int(0, 3)
    if form == 3:
        v = g.new(x.shape, x.dtype, rg=x.rg)
        g.emit(f"{v} = llgrad.bernoulli(({x} > 0).to({x}.dtype) * 0.5 + 0.25)", x)
        g.op("bernoulli", "gt", "to_dtype", "mul", "add")
        return
    call, op = [(".uniform_(-1.0, 2.0)", "uniform"), (".normal_(0.5, 2.0)", "normal"),
                (g.choice([".bernoulli_(0.5)", ".bernoulli_()"]), "bernoulli_p")][form]
    v = g.new(x.shape, x.dtype, rg=x.rg)
    g.emit(f"{v} = ({x} * 1){call}", x)
    g.op(op, "mul")


RECIPES[r_positional] = (3, {"tril", "triu", "flip", "roll", "repeat", "diag_embed",
                             "diagonal_copy", "unfold", "cumprod"})
RECIPES[r_norm_round] = (1, {"linalg_vector_norm", "round_decimals"})
RECIPES[r_sort_scatter] = (2, {"sort", "topk", "kthvalue", "mode", "scatter", "scatter_reduce"})
RECIPES[r_baddbmm] = (1, {"baddbmm"})
RECIPES[r_fill] = (1, {"uniform", "normal", "bernoulli_p", "bernoulli"})
