"""A size template with an affine rule (k * s + m, m != 0: a KV cache's s + 1, the offset
s - 1 of seq[:, -1:]) confirmed by a third trace before it serves a size.

Two sizes a and b fit an affine rule through any two numbers, so a fit of two traces whose
rules need an offset (size_templates.fit: `confirmed` False) proves nothing: a constant that
moved by one between the calls would fit s + m. The call at a third size c traces (served()
skips the template), and its entry must be exactly what the template makes at c: the same
skeleton, every size the rule's number at c, the user's reads as predicted, its checks True.
Only then does the template serve other sizes (dynamic_sizes.learn)."""
from ..runtime.sym_int import SymInt, plain
from .size_templates import _at, _entry_slots, _flat, _holds, size_of


def _plain_reads(values):
    return [tuple(map(plain, v)) if isinstance(v, tuple) else plain(v) for v in values]


def confirms(template, entry):
    """Whether entry, traced at a third size c, is what an unconfirmed template makes at c:
    every size its rules' k * c**e + m, every other number and leaf the same, the user's
    reads its predictions, its checks True at c. Two sizes fit any affine rule; three that
    agree are the evidence that the sizes are the symbol's, not a constant that moved.
    None: entry is no call the template would serve (its key does not fit, a size it was
    made at): no evidence either way."""
    c = size_of(template, entry.guard_items)
    if c is None or c in template.symbol or entry.size_reads is None:
        return None
    if not all(_holds(check, c) for check in template.checks):
        return False
    sizes_t, skel_t, _, _, _ = _flat(template.slots, template.items)
    sizes, skel, _, _, _ = _flat(_entry_slots(entry), entry.guard_items)
    if skel != skel_t or len(sizes) != len(sizes_t) or any(
            v != (u if r is None else _at(r, c)) for v, u, r in zip(sizes, sizes_t,
                                                                  template.rules)):
        return False
    reads = _plain_reads(entry.size_reads.values)
    want = [tuple(_value_at(x, c) for x in v) if isinstance(v, tuple) else _value_at(v, c)
            for v in template.reads]
    return reads == want


def _value_at(x, c):
    """A size read at b (a SymInt: a function of the size) at size c."""
    try:
        return x._at(c) if type(x) is SymInt else x
    except Exception:
        return None
