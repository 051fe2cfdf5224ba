"""Guard items an entry does not depend on: the `training` flags of the modules its traced
run set before reading them (model.train() at the top of a training step, model.eval() at
an eval step's; runtime/training_flag.py). The entry writes those flags on every call
(attr_writes.py), so the flags a call is entered with make no difference to it: a call
whose key differs from the entry's only there runs the entry, where the key would
otherwise cost a trace per batch size for each flag state the step is entered with (a
training step after an eval step). A flag the run read before any write (`if
model.training: ...`, a write that depends on it), or that a call left untouched, stays
guarded. So does every flag when a function of the user's that the guard walk follows
names `__dict__` or `vars` (`was = m.__dict__["training"]` before `m.train()`): such a
read bypasses the descriptor, so the flag may have been read before it was written."""
from .code_reads import _names
from .guard_values import without_grads
from .run import _MISS


def dict_readers(funcs):
    """Whether any of funcs (the user's functions a call reaches: attr_writes.Slots.funcs)
    names `__dict__` or `vars`: a flag read that way is not seen by the descriptor, so no
    flag may be taken as set before it was read."""
    return any(not {"__dict__", "vars"}.isdisjoint(_names(code)) for code in
               (getattr(f, "__code__", None) for f in funcs) if code is not None)


def blind_positions(guard_items, paths, funcs):
    """The positions in the guard key of the flags at the guard walk's paths (a bool each:
    another value at such a position is another item); none where funcs (the user's
    functions the call reaches) read an object's attributes past the descriptor."""
    if dict_readers(funcs):
        return ()
    paths = set(paths)
    return tuple(i for i, (p, v) in enumerate(guard_items)
                 if p in paths and type(v) is tuple and v[:1] == ("bool",))


def _masked(key, positions):
    return tuple(None if i in positions else v for i, v in enumerate(key))


def note(table, key, n_own, entry):
    """Let calls whose key differs from key only at entry's blind positions find it (and,
    for a grad-free entry, calls whose key differs in their .grad items too): table
    {(positions, grad-free): {masked key: [(key, entry)]}}, the compiled function's."""
    positions = getattr(entry, "blind", ())
    if positions:
        at = frozenset(positions)
        table.setdefault((positions, False), {}).setdefault(_masked(key, at), []).append(
            (key, entry))
        if entry.grad_free:         # (flags before the .grad items: the same positions)
            table.setdefault((positions, True), {}).setdefault(
                _masked(without_grads(key, n_own), at), []).append((key, entry))


def run(cf, key, n_own, inputs, fast):
    """Run the first entry (note) whose key differs from this key only at its blind
    positions, where this key holds a bool too (a grad-free entry: and in .grad items),
    as CompiledFunction._run_first; _MISS if none."""
    out = _MISS
    for (positions, free), by_key in list(cf._blind.items()):     # (another thread may add)
        if positions[-1] >= len(key) - 1 - n_own or not all(
                type(key[i]) is tuple and key[i][:1] == ("bool",) for i in positions):
            continue
        at = frozenset(positions)
        # (an entry its own key no longer runs, volatile_guards.settle's, is not run either)
        masked = _masked(without_grads(key, n_own) if free else key, at)
        entries = [e for k, e in by_key.get(masked, ()) if any(x is e for x in cf.cache.get(k, ()))]
        if entries:
            out = cf._run_first(entries, inputs[:n_own], fast, n_own) if free else \
                cf._run_first(entries, inputs, fast)
            if out is not _MISS:
                return out
    return out
