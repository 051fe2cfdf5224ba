"""Growable stacks: what a `while_loop` with save=True gives (one entry per iteration).

A stack's length is the loop's run-time trip count, so no buffer planned before the call
can hold it. Its buffer is instead a three-word descriptor in the arena,
    {data pointer, capacity in entries, length}
that native code zeroes when the loop starts and grows by doubling with libc's realloc
(registered with the JIT as `llgrad_realloc`). A push that cannot grow sets the length to
-1 and stops pushing, so native code never writes outside memory it was given. After the
call the Kernel copies each stack into a fresh NumPy array of shape (length, *entry
shape), frees the memory with the same libc's free and zeroes the descriptor (also when
the call then raises), so nothing native outlives the call.

A stack given to a graph (the loop backward's input) is read in place, one entry after
another; `stack_input` checks its shape (and copies a strided one), and the Kernel writes
its length to a word of the arena (plan.lengths) that native code checks indices with."""
import ctypes

import numpy as np
from llvmlite import ir

from ..native import jit
from .scalar import I64, PTR

_libc = ctypes.CDLL(None)
_realloc = _libc.realloc
_realloc.restype, _realloc.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t]
_free = _libc.free
_free.restype, _free.argtypes = None, [ctypes.c_void_p]
_SYMBOL = "llgrad_realloc"
jit.add_symbol(_SYMBOL, ctypes.cast(_realloc, ctypes.c_void_p).value)

WORDS = 3                       # data, capacity, length (int64 each)


def _word(b, desc, k):
    return b.gep(desc, [ir.Constant(I64, k)], inbounds=True, source_etype=I64)


def emit_reset(b, desc):
    """The stack is empty. (The Kernel frees and zeroes after each call, but a context's
    arena starts uninitialised, so native code never trusts words it did not write.)"""
    for k in range(WORDS):
        b.store(ir.Constant(I64, 0), _word(b, desc, k))


def emit_push(fg, desc, entry_bytes, copy):
    """Append one entry: grow when full, then copy(pointer to the new entry) writes it."""
    b = fg.b
    realloc = fg.module.globals.get(_SYMBOL)
    if realloc is None:
        realloc = ir.Function(fg.module, ir.FunctionType(PTR, [PTR, I64]), name=_SYMBOL)
    data_p, cap_p, len_p = (_word(b, desc, k) for k in range(WORDS))
    n = b.load(len_p, typ=I64)
    with b.if_then(b.icmp_signed(">=", n, ir.Constant(I64, 0))):    # (-1: failed before)
        cap = b.load(cap_p, typ=I64)
        with b.if_then(b.icmp_signed("==", n, cap)):
            new_cap = b.add(b.mul(cap, ir.Constant(I64, 2)), ir.Constant(I64, 4))
            size = b.mul(new_cap, ir.Constant(I64, max(entry_bytes, 1)))
            grown = b.call(realloc, [b.load(data_p, typ=PTR), size])
            failed = b.icmp_unsigned("==", b.ptrtoint(grown, I64), ir.Constant(I64, 0))
            with b.if_else(failed) as (bad, good):
                with bad:                   # the old block stays valid: freed by the Kernel
                    b.store(ir.Constant(I64, -1), len_p)
                with good:
                    b.store(grown, data_p)
                    b.store(new_cap, cap_p)
        n = b.load(len_p, typ=I64)
        with b.if_then(b.icmp_signed(">=", n, ir.Constant(I64, 0))):
            base = b.load(data_p, typ=PTR)
            at = b.gep(base, [b.mul(n, ir.Constant(I64, entry_bytes))], inbounds=True,
                       source_etype=ir.IntType(8))
            copy(at)
            b.store(b.add(n, ir.Constant(I64, 1)), len_p)


class Descriptors:
    """The stacks of one kernel context: their words in its arena, and their entries."""

    def __init__(self, base, plan):
        self.items = [((ctypes.c_int64 * WORDS).from_address(base + buf.offset),
                       np.dtype(buf.value.type.elem.dtype), tuple(buf.value.type.elem.shape))
                      for buf in plan.stacks]

    def harvest(self):
        """Each stack as an array (its memory freed, its words zeroed); MemoryError when a
        push could not grow one (after freeing them all)."""
        out, failed = [], False
        for words, dtype, shape in self.items:
            data, n = words[0], words[2]
            if n < 0:
                failed = True
                n = 0
            arr = np.empty((n,) + shape, dtype)
            if data:
                if arr.nbytes:
                    ctypes.memmove(arr.ctypes.data, data, arr.nbytes)
                _free(data)
            words[0] = words[1] = words[2] = 0
            out.append(arr)
        if failed:
            raise MemoryError("while_loop: cannot grow the stack of saved iterations")
        return out


def stack_input(a, shape, what):
    """A stack input as native code reads it: entries of `shape` one after another (the
    Kernel writes its length, len(a), where native code checks every index against it)."""
    if a.ndim != len(shape) + 1 or a.shape[1:] != tuple(shape):
        raise ValueError(f"{what}: expected a stack of {tuple(shape)} entries, got shape "
                         f"{a.shape}")
    if not a.flags.c_contiguous or a.ctypes.data % a.itemsize:
        a = np.array(a, order="C")          # (dense and aligned: a fresh copy)
    return a
