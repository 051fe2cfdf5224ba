"""PyTorch's Mersenne Twister (MT19937) as native loops: the raw draws and the uniforms that
ir/torch_random.py makes of them, bit for bit.

The twister is a recurrence (each draw follows the last), so NumPy can only run it a block
of 624 words at a time, plus a pass per step of each distribution's transformation: a
dropout mask (one 64-bit uniform per element) cost ~25 ns an element, 5x PyTorch's. Here each
function draws, tempers and transforms in one loop (~3 ns an element):

    i64 mt_u32(ptr key, i64 pos, ptr out, i64 n)     out: uint64[n], one raw 32-bit draw each
    i64 mt_unit64(ptr key, i64 pos, ptr out, i64 n)  out: float64[n], uniform_real_distribution
                                                     <double>: two draws (the first the high
                                                     half), 53 bits, times 2**-53
    i64 mt_unit32(ptr key, i64 pos, ptr out, i64 n)  out: float32[n]: 24 bits times 2**-24

key is the twister's 624 words (uint32, regenerated in place when they run out) and pos the
next word's index (624: regenerate first); each returns the new index. The regeneration is
MT19937's sequential loop, whose order ir/torch_random._twist reproduces in blocks."""
from llvmlite import ir

from .lowerings.loops import for_range
from .native import jit, keys

ENTRIES = ("mt_u32", "mt_unit64", "mt_unit32")
_N, _M = 624, 397
I32, I64 = ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()


def _c32(v):
    return ir.Constant(I32, v)


def _twist_function(mod):
    """void mt_twist(ptr key): the 624 words regenerated in MT19937's order."""
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR]), "mt_twist")
    fn.linkage = "internal"
    key = fn.args[0]
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def word(i):
        return b.gep(key, [i], inbounds=True, source_etype=I32)

    def step(i, nxt, src):
        y = b.or_(b.and_(b.load(word(i), typ=I32), _c32(0x80000000)),
                  b.and_(b.load(word(nxt), typ=I32), _c32(0x7FFFFFFF)))
        mag = b.mul(b.and_(y, _c32(1)), _c32(0x9908B0DF))
        v = b.xor(b.xor(b.load(word(src), typ=I32), b.lshr(y, _c32(1))), mag)
        b.store(v, word(i))

    one, back = ir.Constant(I64, 1), ir.Constant(I64, _N - _M)
    with for_range(b, 0, _N - _M, name="lo") as i:      # word i reads word i + 397
        step(i, b.add(i, one), b.add(i, ir.Constant(I64, _M)))
    with for_range(b, _N - _M, _N - 1, name="hi") as i:  # word i reads the new word i - 227
        step(i, b.add(i, one), b.sub(i, back))
    step(ir.Constant(I64, _N - 1), ir.Constant(I64, 0), ir.Constant(I64, _M - 1))
    b.ret_void()
    return fn


def _temper(b, y):
    y = b.xor(y, b.lshr(y, _c32(11)))
    y = b.xor(y, b.and_(b.shl(y, _c32(7)), _c32(0x9D2C5680)))
    y = b.xor(y, b.and_(b.shl(y, _c32(15)), _c32(0xEFC60000)))
    return b.xor(y, b.lshr(y, _c32(18)))


def _draw_function(mod, name, twist, per_value, value):
    """i64 name(ptr key, i64 pos, ptr out, i64 n): per_value draws for each of n values,
    value(b, draws) -> (the value, its type) stored at out[i]. The values a block of words
    still holds are made by a loop with no regeneration test in it (the vectoriser's); a
    value whose draws straddle two blocks is made on its own."""
    fn = ir.Function(mod, ir.FunctionType(I64, [PTR, I64, PTR, I64]), name)
    key, pos0, out, n = fn.args
    out.add_attribute("noalias")
    key.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    pos_slot, done_slot = b.alloca(I64, name="pos"), b.alloca(I64, name="done")
    b.store(pos0, pos_slot)
    b.store(ir.Constant(I64, 0), done_slot)
    per = ir.Constant(I64, per_value)
    head, body, tail = (fn.append_basic_block(s) for s in ("head", "body", "tail"))
    b.branch(head)
    b.position_at_end(head)
    b.cbranch(b.icmp_signed("<", b.load(done_slot, typ=I64), n), body, tail)
    b.position_at_end(body)

    def draw(pos):
        return _temper(b, b.load(b.gep(key, [pos], inbounds=True, source_etype=I32), typ=I32))

    def store(i, draws):
        v, typ = value(b, draws)
        b.store(v, b.gep(out, [i], inbounds=True, source_etype=typ))

    with b.if_then(b.icmp_signed(">=", b.load(pos_slot, typ=I64), ir.Constant(I64, _N)),
                   likely=False):
        b.call(twist, [key])
        b.store(ir.Constant(I64, 0), pos_slot)
    pos, done = b.load(pos_slot, typ=I64), b.load(done_slot, typ=I64)
    fit = b.sdiv(b.sub(ir.Constant(I64, _N), pos), per)     # values the block still holds
    left = b.sub(n, done)
    count = b.select(b.icmp_signed("<", fit, left), fit, left)
    with b.if_else(b.icmp_signed(">", count, ir.Constant(I64, 0))) as (whole, straddling):
        with whole:
            with for_range(b, 0, count, name="j") as j:
                first = b.add(pos, b.mul(j, per))
                store(b.add(done, j), [draw(b.add(first, ir.Constant(I64, k)))
                                       for k in range(per_value)])
            b.store(b.add(pos, b.mul(count, per)), pos_slot)
            b.store(b.add(done, count), done_slot)
        with straddling:            # (two draws a value, one word left: pos is 623)
            hi = draw(pos)
            b.call(twist, [key])
            store(done, [hi, draw(ir.Constant(I64, 0))])
            b.store(ir.Constant(I64, 1), pos_slot)
            b.store(b.add(done, ir.Constant(I64, 1)), done_slot)
    b.branch(head)
    b.position_at_end(tail)
    b.ret(b.load(pos_slot, typ=I64))
    return fn


def _raw(b, draws):
    return b.zext(draws[0], I64), I64


def _unit64(b, draws):
    hi, lo = (b.zext(d, I64) for d in draws)
    bits = b.and_(b.or_(b.shl(hi, ir.Constant(I64, 32)), lo), ir.Constant(I64, (1 << 53) - 1))
    f = ir.DoubleType()
    return b.fmul(b.uitofp(bits, f), ir.Constant(f, 2.0 ** -53)), f


def _unit32(b, draws):
    f = ir.FloatType()
    bits = b.and_(draws[0], _c32((1 << 24) - 1))
    return b.fmul(b.uitofp(bits, f), ir.Constant(f, 2.0 ** -24)), f


def module():
    """The llvmlite module of the three draw functions."""
    mod = jit.new_module("mt19937")
    twist = _twist_function(mod)
    for name, per_value, value in zip(ENTRIES, (1, 2, 1), (_raw, _unit64, _unit32)):
        _draw_function(mod, name, twist, per_value, value)
    return mod


def build():
    """{entry name: its address (a jit.CodeAddress: it keeps the code loaded)}, from memory,
    the disk cache or LLVM."""
    key = keys.key_for("mt19937-draws-2", "twister")
    compiled = jit.lookup(key, ENTRIES[0], also=ENTRIES[1:])
    if compiled is None:
        compiled = jit.compile_module(module(), list(ENTRIES), key=key)
    return {name: compiled.address(name) for name in ENTRIES}
