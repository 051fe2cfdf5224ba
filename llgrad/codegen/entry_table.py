"""The entry of a plan with many groups as one loop over a call table, data the Kernel
hands it, in place of one call instruction per group.

A deep model's entry called its ~550 groups one by one: 2,800 lines of LLVM IR that
llvmlite formats in Python and LLVM parses and compiles, growing with the depth though the
groups it calls are a few functions shared by every layer (schedule/dedupe.py). Here the
module holds those functions, a constant array of their addresses, and an entry that walks
the table:

    header   [main start, main end, tail start, tail end]   (word offsets)
    per call [function index, n args, n checks, (slot, byte offset) * (args + checks)]

A slot >= 0 is an entry of the pointer array (bufs), a slot < 0 the module constant
-slot - 1; the byte offset is where the group reads from (a slice of a concatenation, a
read base). After a call, a check word that is nonzero (an index out of range) returns at
once, as the call-by-call entry does. The table lives in NumPy memory owned by the plan;
the Kernel's launch contexts put its address in bufs[plan.nslots] (launch.py), a slot past
the plan's own. So the module no longer changes with the depth, and its numbers no longer
change with a batch size either (code shared between sizes, size_params.py).

The entry gathers a row's pointers into an array, then calls the row's function with as
many arguments as it takes: one call instruction per arity the functions have (a `switch`
on the row's count). (An adapter function per shared function, `void adapter(ptr args)`
loading the pointers and calling it, cost LLVM ~1 ms each: ~20 ms a module at 12
transformer layers.)

Entries of up to TABLE_CALLS groups keep their calls (no loads of a table on a small
graph's call, and LLVM optimises them)."""
import numpy as np
from llvmlite import ir

from .lowerings.plain_threads import Callee
from .lowerings.scalar import I8, I64, ITEMSIZE, PTR

TABLE_CALLS = 32            # an entry calling more groups than this runs them from a table
HEADER = 4


def uses_table(plan):
    return len(plan.groups) > TABLE_CALLS


def call_table(plan, calls, fn_index, split):
    """The table (an int64 array) of calls [(function key, buffers, bases, checks)] in
    order, fn_index mapping a key to its function's index; split: the tail's first call."""
    const_index = {id(b): k for k, b in enumerate(
        b for b in plan.buffers.values() if b.role == "constant")}
    words = [0] * HEADER
    starts = []
    for key, bufs, bases, checks in calls:
        starts.append(len(words))
        words += [fn_index[key], len(bufs), len(checks)]
        for buf in bufs:
            slot, off = _where(buf, const_index)
            words += [slot, off + bases.get(id(buf), 0) * ITEMSIZE[buf.dtype]]
        for flag in checks:
            words += list(_where(flag, const_index))
    cut = starts[split] if split else len(words)
    words[:HEADER] = [HEADER, cut, cut, len(words)]
    return np.array(words, dtype=np.int64)


def _where(buf, const_index):
    """(slot, byte offset) of a buffer's first element: a slice's is its parent's slot
    and its place in the parent (schedule/concat.py)."""
    off = 0
    while buf.role == "slice":
        off += buf.base * ITEMSIZE[buf.dtype]
        buf = buf.parent
    if buf.role == "constant":
        return -(const_index[id(buf)] + 1), off
    return buf.slot, off


def emit_table_entry(mod, name, fns, consts, table_slot, tail=None):
    """The entry `name` (and `tail`, the split kernel's second part) walking the table:
    fns the groups' distinct functions in the table's numbering, consts the module's
    constant globals in the table's order."""
    for fn in fns:
        if any(a.type != PTR for a in fn.args):
            raise TypeError(f"{fn.name}: a group function takes pointers only")
    fns_t = ir.ArrayType(PTR, len(fns))
    table_fns = ir.GlobalVariable(mod, fns_t, name=f"{name}.functions")
    table_fns.initializer = ir.Constant(fns_t, list(fns))
    table_fns.global_constant, table_fns.linkage = True, "private"
    items = consts or [ir.Constant(PTR, None)]
    consts_t = ir.ArrayType(PTR, len(items))
    table_consts = ir.GlobalVariable(mod, consts_t, name=f"{name}.consts")
    table_consts.initializer = ir.Constant(consts_t, items)
    table_consts.global_constant, table_consts.linkage = True, "private"
    arities = sorted({len(fn.args) for fn in fns})
    entry = _loop(mod, name, 0, table_fns, table_consts, table_slot, arities)
    if tail is not None:
        _loop(mod, tail, 2, table_fns, table_consts, table_slot, arities)
    return entry


def _loop(mod, name, at, table_fns, table_consts, table_slot, arities):
    """void name(ptr bufs): for each row of the table from word table[at] to table[at + 1],
    the row's pointers into an array, its function called with them (arities: the
    functions' argument counts), its checks read."""
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR]), name=name)
    fn.attributes.add("nounwind")
    bufs = fn.args[0]
    bufs.name = "bufs"
    blocks = {k: fn.append_basic_block(k) for k in (
        "entry", "row", "call", "args", "arg", "checks", "called", "check", "ok", "next",
        "out")}
    b = ir.IRBuilder(blocks["entry"])
    argv = b.alloca(PTR, size=ir.Constant(I64, max(arities + [1])), name="argv")
    table = b.load(b.gep(bufs, [_c(table_slot)], inbounds=True, source_etype=PTR), typ=PTR,
                   name="table")

    def word(k):
        return b.load(b.gep(table, [k], inbounds=True, source_etype=I64), typ=I64)

    def pointer(k):         # the pointer (slot, byte offset) at words k, k + 1 give
        slot, off = word(k), word(b.add(k, _c(1)))
        is_buf = b.icmp_signed(">=", slot, _c(0))
        const = b.sub(_c(-1), slot)
        in_bufs = b.gep(bufs, [slot], source_etype=PTR)
        in_consts = b.gep(table_consts, [_c(0), const], source_etype=table_consts.value_type)
        base = b.load(b.select(is_buf, in_bufs, in_consts), typ=PTR)
        return b.gep(base, [off], source_etype=I8)

    start, end = word(_c(at)), word(_c(at + 1))
    b.branch(blocks["row"])
    b.position_at_end(blocks["row"])             # for each row i
    i = b.phi(I64, "i")
    i.add_incoming(start, blocks["entry"])
    b.cbranch(b.icmp_signed("<", i, end), blocks["call"], blocks["out"])
    b.position_at_end(blocks["call"])
    index, nargs, nchecks = word(i), word(b.add(i, _c(1))), word(b.add(i, _c(2)))
    first = b.add(i, _c(3))
    b.branch(blocks["args"])
    b.position_at_end(blocks["args"])            # argv[j] for j < nargs
    j = b.phi(I64, "j")
    j.add_incoming(_c(0), blocks["call"])
    b.cbranch(b.icmp_signed("<", j, nargs), blocks["arg"], blocks["checks"])
    b.position_at_end(blocks["arg"])
    p = pointer(b.add(first, b.shl(j, _c(1))))
    b.store(p, b.gep(argv, [j], inbounds=True, source_etype=PTR))
    j.add_incoming(b.add(j, _c(1)), blocks["arg"])
    b.branch(blocks["args"])
    b.position_at_end(blocks["checks"])
    callee = b.load(b.gep(table_fns, [_c(0), index], inbounds=True,
                          source_etype=table_fns.value_type), typ=PTR)
    # (a row's count is its function's: the default, no function of that arity, is
    # never taken)
    switch = b.switch(nargs, blocks["called"])
    for n in arities:
        block = fn.append_basic_block(f"call{n}")
        switch.add_case(_c(n), block)
        b.position_at_end(block)
        args = [b.load(b.gep(argv, [_c(k)], inbounds=True, source_etype=PTR), typ=PTR)
                for k in range(n)]
        b.call(Callee(callee, ir.FunctionType(ir.VoidType(), [PTR] * n)), args)
        b.branch(blocks["called"])
    b.position_at_end(blocks["called"])
    flags = b.add(first, b.shl(nargs, _c(1)))
    b.branch(blocks["check"])
    b.position_at_end(blocks["check"])           # a nonzero check word: return
    k = b.phi(I64, "k")
    k.add_incoming(_c(0), blocks["called"])
    b.cbranch(b.icmp_signed("<", k, nchecks), blocks["ok"], blocks["next"])
    b.position_at_end(blocks["ok"])
    flag = b.load(pointer(b.add(flags, b.shl(k, _c(1)))), typ=I64)
    raised = b.icmp_signed("!=", flag, _c(0))
    k.add_incoming(b.add(k, _c(1)), blocks["ok"])
    b.cbranch(raised, blocks["out"], blocks["check"])
    b.position_at_end(blocks["next"])
    i.add_incoming(b.add(flags, b.shl(nchecks, _c(1))), blocks["next"])
    b.branch(blocks["row"])
    b.position_at_end(blocks["out"])
    b.ret_void()
    return fn


def _c(v):
    return ir.Constant(I64, v)
