"""One native module for every size a graph comes in: the sizes become run-time values.

A graph traced again at a new batch size lowers to an LLVM module that differs from the
old one only in its numbers: loop bounds, strides, arena offsets, a mean's 1/N. Two such
modules, walked side by side (`derive`), give the operands that differ; the module of the
new size, with each of those constants replaced by a load from a table the caller fills
(`parametrize`), is compiled once and serves every later size (`match`).

Sound by construction: a module at a third size is used only if, once the template's own
numbers are put back at the parameter positions, its text is exactly the template's; the
numbers it had there are what the shared code loads. Whatever else changes with size (a
loop the pool splits past a threshold, a GEMM path picked by shape, an unrolled tail)
changes the text, and the size is compiled on its own, as before.

A module shared between sizes is emitted in a form whose structure does not change with
them (`threads_by_size` on the module, parallel.py): every loop that may thread has its
thread count computed at run time from its (parameter) trip count.

The text is what LLVM compiles, so comparing texts is the check; an operand llvmlite does not
print (as a GEP's, which prints its own copy: _set_operand keeps both) would fail closed,
its number showing in the text where the template's is expected.

The table is a global of the module, written through `<entry>_sizes(ptr)` before each call
(`bind`), under a lock: Kernels of different sizes share the code."""
import hashlib
import os
import struct
import threading
import weakref

import numpy as np
from llvmlite import ir

from .lowerings.scalar import I64, PTR

SETTER = "_sizes"        # the exported function that fills the table: entry + SETTER
TABLE = "_size_table"

_SCALARS = (ir.IntType, ir.FloatType, ir.DoubleType)


_BLANKED = b"0123456789 "


def family_text(graph_text):
    """A graph's IR text without its digits (and spaces: columns align by width): graphs
    that differ only in sizes (and other numbers) share it, and may share code. (A family
    only names candidates: derive and match compare whole texts, so texts that would also
    share it cost a failed comparison, never a wrong kernel; bytes.translate, not a regex:
    ~15x faster on a deep model's 150 kB text.)"""
    return graph_text.encode().translate(None, _BLANKED).decode()


class Template:
    """A compiled module whose size-dependent constants are loads from a table.

    digest: the SHA-256 of the text of the module it was made from (its own numbers at the
    positions);
    positions: ((function, block, instruction), operand, the constant the text has there)
    of each parameter;
    slots: each position's slot of the table (positions whose numbers were equal at both
    sizes it was derived from share one, and a later size matches only where they are equal
    again)."""

    def __init__(self, name, text, positions, slots):
        # (the text's digest, not the text: a large module's text is megabytes)
        self.name, self.digest, self.positions = name, _digest(text), positions
        self.slots, self.n_slots = slots, max(slots, default=-1) + 1
        self._code = None
        self.lock = threading.Lock()
        _templates.add(self)

    @property
    def compiled(self):
        """The compiled code, or None once nothing uses it: held weakly, as every kernel's
        code is (the Kernels running it and the JIT's in-memory LRU keep it alive)."""
        return self._code() if self._code is not None else None

    @compiled.setter
    def compiled(self, code):
        self._code = weakref.ref(code)


# every live Template: a child forked while another thread of the parent ran shared code
# would inherit its lock held for good (and hang on its first call of that code)
_templates = weakref.WeakSet()


def _reinit_locks_in_child():
    for t in list(_templates):
        t.lock._at_fork_reinit()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_locks_in_child)


def _digest(text):
    return hashlib.sha256(text.encode()).digest()


def _operand_lists(mod):
    """(position prefix, instruction, its operands) for every instruction of mod's defined
    functions, in order; a phi's operands are its incoming values."""
    for fi, fn in enumerate(_defined(mod)):
        for bi, block in enumerate(fn.blocks):
            for ii, ins in enumerate(block.instructions):
                ops = [v for v, _ in ins.incomings] if isinstance(ins, ir.PhiInstr) \
                    else list(ins.operands)
                yield (fi, bi, ii), ins, ops


def _defined(mod):
    return [f for f in mod.functions if f.blocks]


def _instruction_at(fns, where):
    fi, bi, ii = where
    return fns[fi].blocks[bi].instructions[ii]


def _set_operand(ins, k, value):
    if isinstance(ins, ir.PhiInstr):
        ins.incomings[k] = (value, ins.incomings[k][1])
    else:
        ops = list(ins.operands)
        ops[k] = value
        ins.operands = ops
        if isinstance(ins, ir.GEPInstr):        # (which prints these, not its operands)
            ins.pointer, ins.indices = ops[0], ops[1:]
    ins._clear_string_cache()


def _number(c):
    """A constant's number, told apart as its bits are (-0.0 from 0.0; a NaN equal to no
    number, so it shares a slot with none)."""
    c = c.constant if isinstance(c, ir.Constant) else c
    return float("nan") if c != c else (type(c), repr(c))


def _is_scalar_constant(v):
    return type(v) is ir.Constant and isinstance(v.type, _SCALARS) \
        and isinstance(v.constant, (int, float))


def _intrinsic_call(ins):
    return isinstance(ins, ir.CallInstr) and getattr(ins.callee, "name", "").startswith("llvm.")


def derive(mod_a, name_a, mod_b, name_b):
    """The positions where mod_b's scalar constants differ from mod_a's, when that is all
    that differs (else None); mod_b gets mod_a's constants there (it is spent)."""
    lists_a = list(_operand_lists(mod_a))
    lists_b = list(_operand_lists(mod_b))
    if len(lists_a) != len(lists_b):
        return None
    positions = []
    for (where, ins_a, ops_a), (_, ins_b, ops_b) in zip(lists_a, lists_b):
        if len(ops_a) != len(ops_b):
            return None
        for k, (x, y) in enumerate(zip(ops_a, ops_b)):
            if x is y or not (_is_scalar_constant(x) and _is_scalar_constant(y)):
                continue
            if x.type != y.type or x.constant == y.constant:
                continue
            if _intrinsic_call(ins_a) or isinstance(ins_a, (ir.SwitchInstr,)):
                return None             # (immediate arguments must stay constants)
            positions.append((where, k, x, y))
            _set_operand(ins_b, k, x)
    if not positions or str(mod_a).replace(name_a, name_b) != str(mod_b):
        return None
    return positions


def parametrize(mod, name, positions):
    """Turn mod (the module derive's positions were found in, its first) into a template:
    each position's constant becomes a load from the table, filled by the exported
    `name + SETTER`. The Template, not yet compiled.

    Positions whose numbers are equal at both sizes share a slot (one load in each function
    using it): a row's stride read by a load and by the store back to the same row is then
    one value, and LLVM sees the same address (with a slot each it could not, and a
    softmax's last pass, in place, ran scalar: 2x the specialised kernel's time). Two
    numbers equal at two sizes may differ at a third (ceil(n / 64) and n // 64): `match`
    takes a size only where a slot's positions are equal again."""
    text = str(mod)
    slot_of, slots = {}, []
    for _, _, x, y in positions:
        slots.append(slot_of.setdefault((str(x.type), _number(x), _number(y)), len(slot_of)))
    n = len(slot_of)
    table = ir.GlobalVariable(mod, ir.ArrayType(I64, n), name=name + TABLE)
    table.linkage = "internal"
    table.initializer = ir.Constant(ir.ArrayType(I64, n), None)
    table.align = 64
    fns = _defined(mod)
    # (every instruction found before any load goes in: the loads shift the entry blocks)
    sites = [(_instruction_at(fns, where), k, slot, x)
             for (where, k, x, _), slot in zip(positions, slots)]
    loaded = {}                         # (function, slot) -> the value loaded there
    for ins, k, slot, x in sites:       # (a slot's positions share their type: its key's)
        fn = ins.parent.parent
        value = loaded.get((id(fn), slot))
        if value is None:
            b = ir.IRBuilder()
            b.position_at_start(fn.blocks[0])
            p = b.gep(table, [ir.Constant(I64, 0), ir.Constant(I64, slot)], inbounds=True)
            if isinstance(x.type, ir.IntType):
                value = b.load(p, typ=I64)
                if x.type.width < 64:
                    value = b.trunc(value, x.type)
            else:
                value = b.load(p, typ=x.type)
            loaded[(id(fn), slot)] = value
        _set_operand(ins, k, value)
    _setter(mod, name, table, n)
    return Template(name, text, [(where, k, x) for where, k, x, _ in positions], slots)


def _setter(mod, name, table, n):
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR]), name=name + SETTER)
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    copy = mod.declare_intrinsic("llvm.memcpy", [PTR, PTR, I64])
    b.call(copy, [table, fn.args[0], ir.Constant(I64, 8 * n), ir.Constant(ir.IntType(1), 0)])
    b.ret_void()


def match(template, mod, name):
    """The table of values under which template computes mod (a module lowered at another
    size, named name), or None where mod differs in more than those numbers (mod is left
    as it was then)."""
    values, changed = [None] * template.n_slots, []
    fns = _defined(mod)
    try:
        for (where, k, base), slot in zip(template.positions, template.slots):
            ins = _instruction_at(fns, where)
            x = (ins.incomings[k][0] if isinstance(ins, ir.PhiInstr) else ins.operands[k])
            if not _is_scalar_constant(x) or x.type != base.type:
                return None
            if values[slot] is None:
                values[slot] = (x.type, x.constant)
            elif _number(values[slot][1]) != _number(x):
                return None             # (numbers one slot serves differ at this size)
            changed.append((ins, k, x))
            _set_operand(ins, k, base)
        if _digest(str(mod).replace(name, template.name)) != template.digest:
            return None
        return _pack(values)
    except IndexError:
        return None
    finally:
        for ins, k, x in changed:
            _set_operand(ins, k, x)


def base_table(template):
    """The table of the size template was made at."""
    values = [None] * template.n_slots
    for (_, _, base), slot in zip(template.positions, template.slots):
        values[slot] = (base.type, base.constant)
    return _pack(values)


def _pack(values):
    table = np.zeros(len(values), dtype=np.int64)
    raw = table.view(np.uint8)
    for i, (typ, c) in enumerate(values):
        if isinstance(typ, ir.IntType):     # (two's complement: a trunc keeps the low bits)
            table[i] = (int(c) + (1 << 63)) % (1 << 64) - (1 << 63)
        elif isinstance(typ, ir.FloatType):     # (packed as llvmlite rounds a float
            # constant, natively: inf past float32's range, where "<f" raises OverflowError)
            raw[8 * i:8 * i + 4] = np.frombuffer(struct.pack("f", c), dtype=np.uint8)
        else:
            raw[8 * i:8 * i + 8] = np.frombuffer(struct.pack("d", c), dtype=np.uint8)
    return table


def bind(fn, setter, table, lock):
    """fn (a native entry, f(ctx)) running with table in the template's global: the shared
    code serves Kernels of several sizes, one call at a time."""
    address = table.ctypes.data

    def call(ctx):
        with lock:
            setter(address)
            fn(ctx)
    call.table = table                  # (keeps the table alive with the call)
    call.code = getattr(fn, "code", None)
    return call
