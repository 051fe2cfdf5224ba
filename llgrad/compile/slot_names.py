"""The names the guard walk gives the number slots a traced run changed (attr_writes.Slots):
a counter's, which becomes an input of the graph (symbolic_slots.py), and a slot's other
names where the walk reached its container along two paths (one dict two of the user's hooks
share through a closure: the guard walk enters it at each path, the Slots walk once)."""
from ..runtime.symbolic_scalar import SymbolicScalar


def also_named(where, aliases):
    """[where, and the guard walk's other names of that slot]: the same slot under each other
    path of a container it is in that the walk reached twice (attr_writes: Slots.aliases)."""
    names = [where]
    for name in names:      # (grows: a container reached twice inside one reached twice)
        for first, other in aliases:
            if name.startswith(first + "_"):
                alias = other + name[len(first):]
                if alias not in names and len(names) < 64:
                    names.append(alias)
    return names


def note_counter(out, where, before, value):
    """Note where if the run changed its number to another of the same type (a counter: a
    stand-in's number too, `self.t += k` of a number argument k), or the paths of such
    numbers in a list it replaced with one of the same length (a scheduler's list of last
    lrs; not a tuple, which can hold no stand-in: its numbers would go unguarded)."""
    if type(value) is list and type(before) is list and len(before) == len(value):
        for i, (b, v) in enumerate(zip(before, value)):
            if type(b) in (int, float):
                note_counter(out, f"{where}_{i}", b, v)
        return
    value = value.value if type(value) is SymbolicScalar else value
    if type(before) in (int, float) and type(value) is type(before) and value != before:
        out.append(where)
