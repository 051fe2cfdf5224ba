"""The batch statistics of an eager training batch norm as one native loop per dtype:

    void bn_stats_<dtype>(ptr mean, ptr ss, ptr x, i64 n, i64 c, i64 l)

x is a C-contiguous (n, c, l) float32 or float64 array; per channel, mean[ch] = sum(x) / (n l)
and ss[ch] = sum((x - mean)^2), both float64 (two passes: no cancellation), the NumPy
implementation's statistics (ir/ops_batch_norm.batch_stats) up to the order of the sums.
Where l is 1 (BatchNorm1d's (N, C) batch), the passes go along the rows, accumulating every
channel at once in mean and ss (a channel's values are a column: channel by channel, each
load was a stride of c apart and nothing vectorised, 3x torch's whole forward).

Why: the eager forward runs on its shaped kernel (eager_shaped.py), which leaves no statistics
behind, so F.batch_norm's update of the running ones computed them in NumPy: a float64 copy
and four passes, 1.5x the forward kernel itself. One loop serves every shape."""
from llvmlite import ir

from .lowerings.loops import for_range
from .lowerings.scalar import F64, I64, PTR
from .native import jit, keys

ENTRIES = ("bn_stats_float32", "bn_stats_float64")


def _function(mod, name, elem):
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, I64, I64, I64]), name)
    mean, ss, x, n, c, l = fn.args
    for p in (mean, ss, x):
        p.add_attribute("noalias")
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    acc = b.alloca(F64, name="acc")
    count = b.sitofp(b.mul(n, l), F64)

    def over(body):             # every element of channel ch, as float64
        with for_range(b, 0, n, name="i") as i:
            base = b.mul(b.add(b.mul(i, c), ch), l)
            with for_range(b, 0, l, name="j") as j:
                v = b.load(b.gep(x, [b.add(base, j)], inbounds=True, source_etype=elem),
                           typ=elem)
                body(b.fpext(v, F64) if elem != F64 else v)

    def add(v):                 # (reassociated: the sums vectorise)
        b.store(b.fadd(b.load(acc, typ=F64), v, flags=("reassoc",)), acc)

    rows, columns, after = (fn.append_basic_block(s) for s in ("rows", "columns", "after"))
    b.cbranch(b.icmp_signed("==", l, ir.Constant(I64, 1)), rows, columns)
    b.position_at_end(rows)
    _by_rows(b, mean, ss, x, n, c, count, elem)
    b.branch(after)
    b.position_at_end(columns)
    with for_range(b, 0, c, name="ch") as ch:
        b.store(ir.Constant(F64, 0.0), acc)
        over(add)
        mu = b.fdiv(b.load(acc, typ=F64), count)
        b.store(ir.Constant(F64, 0.0), acc)
        over(lambda v: add(b.fmul(b.fsub(v, mu), b.fsub(v, mu))))
        b.store(mu, b.gep(mean, [ch], inbounds=True, source_etype=F64))
        b.store(b.load(acc, typ=F64), b.gep(ss, [ch], inbounds=True, source_etype=F64))
    b.branch(after)
    b.position_at_end(after)
    b.ret_void()


def _by_rows(b, mean, ss, x, n, c, count, elem):
    """The statistics of an (n, c) x, row by row: each channel's sums in mean[ch] and
    ss[ch] (the inner loop over the channels is contiguous: it vectorises without
    reassociating anything)."""
    def at(p, ch):
        return b.gep(p, [ch], inbounds=True, source_etype=F64)

    def value(i, ch):
        v = b.load(b.gep(x, [b.add(b.mul(i, c), ch)], inbounds=True, source_etype=elem),
                   typ=elem)
        return b.fpext(v, F64) if elem != F64 else v

    with for_range(b, 0, c, name="z") as ch:
        b.store(ir.Constant(F64, 0.0), at(mean, ch))
        b.store(ir.Constant(F64, 0.0), at(ss, ch))
    with for_range(b, 0, n, name="i") as i:
        with for_range(b, 0, c, name="ch") as ch:
            b.store(b.fadd(b.load(at(mean, ch), typ=F64), value(i, ch)), at(mean, ch))
    with for_range(b, 0, c, name="m") as ch:
        b.store(b.fdiv(b.load(at(mean, ch), typ=F64), count), at(mean, ch))
    with for_range(b, 0, n, name="r") as i:
        with for_range(b, 0, c, name="s") as ch:
            d = b.fsub(value(i, ch), b.load(at(mean, ch), typ=F64))
            b.store(b.fadd(b.load(at(ss, ch), typ=F64), b.fmul(d, d)), at(ss, ch))


def build():
    """{entry name: its address (a jit.CodeAddress: it keeps the code loaded)}, from memory,
    the disk cache or LLVM."""
    key = keys.key_for("batch-norm-stats-2", "bn_stats")
    compiled = jit.lookup(key, ENTRIES[0], also=ENTRIES[1:])
    if compiled is None:
        mod = jit.new_module("bn_stats")
        _function(mod, ENTRIES[0], ir.FloatType())
        _function(mod, ENTRIES[1], F64)
        compiled = jit.compile_module(mod, list(ENTRIES), key=key)
    return {name: compiled.address(name) for name in ENTRIES}
