# Fuzz recipes of the special functions and the bitwise ops (llgrad/ir/ops_special.py,
# ops_bitwise.py), exec'd in programs.py's namespace (Gen, dom, UNARY, RECIPES, ...).
# The unary functions join r_unary with their domains (the probe would feed asin values up
# to 2); atan2 joins r_binary by itself. The bitwise ops take integers: r_bitwise makes them
# from fresh int64 inputs and from exact floats (x > 0), and leaves r_binary (whose operands
# are floats) without them.
_unary_table().update({
    "asin": ("unit", True, ()), "acos": ("unit", True, ()), "erfinv": ("unit", True, ()),
    "atan": ("any", True, ()), "erfc": ("any", True, ()),
    "lgamma": ("pos", True, ()), "digamma": ("pos", True, ()),
})
_BITWISE = ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
            "bitwise_right_shift", "gcd", "lcm")
for _n in _BITWISE:
    _binary_table().pop(_n, None)


def r_polygamma(g):
    """polygamma(n, x) for x > 0: n = 1 (native) or 2 (Cephes' zeta, interpreted)."""
    x = g.need(lambda v: v.float)
    n = g.choice((1, 2, 0))
    xe = dom(g, x, "pos")
    text = g.choice([f"llgrad.polygamma({n}, {xe})", f"{xe}.polygamma({n})"])
    v = g.new(x.shape, x.dtype, rg=x.rg)
    g.emit(f"{v} = {text}", x)
    g.op("polygamma")


def r_polygamma_(g):
    """x.polygamma_(n) on a fresh clone (x > 0)."""
    x = g.need(lambda v: v.float)
    v = g.new(x.shape, x.dtype, rg=x.rg)
    g.emit(f"{v} = {dom(g, x, 'pos')}.clone()", x)
    g.emit(f"{v}.polygamma_({g.choice((1, 0))})")
    g.op("polygamma_")


_SYMBOLS = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^",
            "bitwise_left_shift": "<<", "bitwise_right_shift": ">>"}


def r_bitwise(g):
    """An int64 value from bitwise ops of a fresh int64 input (in [-70, 70): shift amounts
    out of range both ways) and an int64 made of an exact float (x > 0) or a number."""
    if g.smooth:
        return False
    x = g.need(lambda v: v.float and v.exact)
    a = g.input(x.shape, "int64", rg=False, low=-70, high=70)
    name = g.choice(_BITWISE + ("bitwise_not", "div_int"))
    k = g.int(0, 9)
    b = f"(({x} > 0).long() * {k} - 3)"
    if name == "div_int":           # (an odd divisor: never 0)
        d = f"({b} | 1)"
        text = g.choice([f"{a} // {d}", f"{a}.div({d}, rounding_mode='trunc')",
                         f"llgrad.floor_divide({a}, {d})", f"{a} % {d}", f"{a}.fmod({d})"])
    elif name == "bitwise_not":
        text = g.choice([f"~{a}", f"{a}.bitwise_not()", f"llgrad.bitwise_not({b})"])
    elif name in ("gcd", "lcm"):
        text = g.choice([f"llgrad.{name}({a}, {b})", f"{b}.{name}({a})"])
    else:
        sym = _SYMBOLS[name]
        text = g.choice([f"{a} {sym} {b}", f"{b} {sym} {a}", f"{a}.{name}({b})",
                         f"llgrad.{name}({a}, {k})", f"{k} {sym} {a}"])
    v = g.new(x.shape, "int64", exact=True)
    g.emit(f"{v} = {text}", x, a)
    g.op(name)


def r_bitwise_bool(g):
    """bitwise and/or/xor/not of bool masks (the logical ops' values, the bitwise ops)."""
    if g.smooth:
        return False
    x = g.need(lambda v: v.float and v.exact)
    name = g.choice(("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"))
    if name == "bitwise_not":
        text = f"llgrad.bitwise_not({x} > 0)"
    else:
        text = g.choice([f"llgrad.{name}({x} > 0, {x} < 0.5)", f"({x} < 0).{name}_({x} > -1)"])
    v = g.new(x.shape, "bool", exact=True)
    g.emit(f"{v} = {text}", x)
    g.op(name)


def r_fmod(g):
    """fmod / remainder of floats (C's fmod: fmod_float, remainder_float) by a divisor kept
    from 0 (a tensor of |x| + 0.5, or a number); not where gradients are checked (the
    derivative in the divisor jumps)."""
    if g.smooth:
        return False
    x = g.need(lambda v: v.float)
    d = g.choice([f"({x}.abs() + 0.5)", "1.5", "-0.75"])
    name = g.choice(("fmod_float", "remainder_float"))
    text = g.choice([f"{x}.fmod({d})", f"llgrad.fmod({x}, {d})"] if name == "fmod_float" else
                    [f"{x} % {d}", f"llgrad.remainder({x}, {d})"])
    v = g.new(x.shape, x.dtype, rg=x.rg)
    g.emit(f"{v} = {text}", x)
    g.op(name)


def r_xlogy(g):
    """xlogy / xlog1py of a float tensor by a positive one (their gradients' edges at 0 are
    tests/runtime/test_torch_adversary_sweep59.py's)."""
    x = g.need(lambda v: v.float)
    name = g.choice(("xlogy_float", "xlog1py_float"))
    y = f"({x}.abs() + 0.5)"
    v = g.new(x.shape, x.dtype, rg=x.rg)
    g.emit(f"{v} = {x}.xlogy({y})" if name == "xlogy_float" else
           f"{v} = llgrad.special.xlog1py({x}, {y})", x)
    g.op(name)


RECIPES.update({
    r_xlogy: (1, {"xlogy_float", "xlog1py_float"}),
    r_fmod: (1, {"fmod_float", "remainder_float"}),
    r_polygamma: (1, {"polygamma"}),
    r_polygamma_: (1, {"polygamma_"}),
    r_bitwise: (2, set(_BITWISE) | {"bitwise_not", "div_int"}),
    r_bitwise_bool: (1, {"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"}),
})


def r_fill_more(g):
    """More random fills of a fresh copy, and normal(mean, std) of tensors (draws from
    llgrad's generator: the backends replay the same numbers)."""
    if g.smooth:
        return False
    x = g.need(lambda v: v.float)
    form = g.int(0, 6)
    if form == 6:
        v = g.new(x.shape, x.dtype, rg=x.rg)
        call = g.choice([f"llgrad.normal({x}, 0.5)", f"llgrad.normal(1.0, {x}.abs())",
                         f"llgrad.normal({x}, {x}.abs())"])
        g.emit(f"{v} = {call}", x)
        g.op("normal_tensor")
        return
    call, op = [(g.choice([".random_()", ".random_(7)", ".random_(-3, 5)"]), "random_"),
                (".exponential_(2.0)", "exponential"), (".geometric_(0.3)", "geometric"),
                (".log_normal_(0.5, 0.25)", "log_normal"), (".cauchy_(1.0, 2.0)", "cauchy"),
                (".random_(2)", "random_")][form]
    v = g.new(x.shape, x.dtype, rg=x.rg)
    g.emit(f"{v} = ({x} * 1){call}", x)
    g.op(op, "mul", *(("rng_integers",) if op == "random_" else ()))


RECIPES[r_fill_more] = (1, {"random_", "rng_integers", "exponential", "geometric", "log_normal", "cauchy",
                            "normal_tensor"})


def r_randperm(g):
    """A row shuffle by a permutation drawn from llgrad's generator (mixup's randperm: the
    backends replay the same draw)."""
    if g.smooth:
        return False
    x = g.need(lambda v: len(v.shape) >= 1 and v.shape[0] > 0)
    v = g.new(x.shape, x.dtype, rg=x.rg, exact=x.exact)
    g.emit(f"{v} = {x}[llgrad.randperm({x.shape[0]})]", x)
    g.op("rng_randperm", "index")


RECIPES[r_randperm] = (1, {"rng_randperm", "index"})


def r_matrix(g):
    """inverse, det, slogdet / logdet of square matrices made well-conditioned (3 I + x)."""
    x = g.pick(lambda v: v.float and len(v.shape) >= 2 and v.shape[-1] == v.shape[-2]
               and v.shape[-1] > 0)
    if x is None:
        n = g.int(1, 3)
        x = g.input(g.variant((2, n, n))[:-2] + (n, n) if g.chance(50) else (n, n))
    n = x.shape[-1]
    a = f"({x} + 3 * llgrad.eye({n}, dtype={x}.dtype))"
    form = g.int(0, 3)
    if form == 0:
        v = g.new(x.shape, x.dtype, rg=x.rg)
        g.emit(f"{v} = {g.choice([f'{a}.inverse()', f'llgrad.linalg.inv({a})'])}", x)
        g.op("linalg_inv_ex")
        return
    v = g.new(x.shape[:-2], x.dtype, rg=x.rg)
    text, op = [(f"llgrad.det({a})", "linalg_det"), (f"{a}.slogdet().logabsdet", "linalg_slogdet"),
                (f"llgrad.logdet({a})", "linalg_slogdet")][form - 1]
    g.emit(f"{v} = {text}", x)
    g.op(op)


RECIPES[r_matrix] = (1, {"linalg_inv_ex", "linalg_det", "linalg_slogdet"})
