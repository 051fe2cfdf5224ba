"""Value guards whose value changes from call to call: the count a data-dependent mask or
nonzero selects (top-k routing to experts), a number read with .item() into Python code.
Each new value is another trace, and every kept entry costs each later call of its key a
whole forward run before its guards can be read (they are values the forward kernel
computes; compiled_function._run_first tries a key's entries in turn). So when one guard
site has taken VOLATILE distinct values in a key's traces, that key's calls run eagerly,
with a warning naming the line: torch.compile breaks the graph at such reads. A site taking
fewer values (a smaller last batch, a branch's two outcomes) keeps its compiled entries.

Such a read changes the state the function keeps in numbers (a scheduler's best loss, its
count of bad epochs, its lr): so the key changes too, once when each number becomes a
dynamic input and then whenever a number still guarded by value changes. The values a site
took in the entries of keys a key superseded (the same but for numbers now dynamic) count
as its own; and a new key that differs from a settled one only in numbers (ints and
floats, not bools: flags choose code) runs eagerly without a trace, as the settled key
does: its trace would read the same site (torch.compile breaks there in every frame)."""

VOLATILE = 4
_NUMBERS = ("int", "float", "dynamic number")


class Settled(str):
    """The reason a key's calls run eagerly (cf._eager_reasons) when settle() made them:
    it also holds the key's guard items without its numbers (for relatives_settled)."""
    items = ()


def _number(v):
    return type(v) is tuple and len(v) == 2 and v[0] in _NUMBERS and (
        isinstance(v[1], str) if v[0] == "dynamic number" else type(v[1]) in (int, float, str))


def _without(items, paths):
    """items but those of paths (and of their .grad: a dynamic number's input has one)."""
    return tuple((p, v) for p, v in items
                 if p not in paths and not (str(p).endswith(".grad") and p[:-5] in paths))


def _numbers_blind(items):
    """guard items without the numbers (a dynamic number's 0-d tensor input too)."""
    return _without(items, {p for p, v in items if _number(v)})


def _superseded(cf, key):
    """The entries of keys that key supersedes: their guard items equal its own but for
    numbers key holds as dynamic inputs (calls make those keys no more)."""
    own = [e for e in cf.cache[key] if not isinstance(e, str)]
    if not own:
        return []
    items = own[0].guard_items
    dynamic = {p for p, v in items if type(v) is tuple and v[:1] == ("dynamic number",)}
    if not dynamic:
        return []
    mine, older = _without(items, dynamic), []
    for k, entries in cf.cache.items():
        first = next((e for e in entries if not isinstance(e, str)), None)
        if k != key and first is not None and _without(first.guard_items, dynamic) == mine:
            older += [e for e in entries if not isinstance(e, str)]
    return older


def relatives_settled(cf, guards, key, eager):
    """Whether a key with no entry differs from a settled key only in numbers: it is then
    settled too (it runs eagerly, untraced); -> whether it is."""
    settled = [r for r in cf._eager_reasons.values() if type(r) is Settled]
    if not settled or cf.fullgraph:
        return False
    blind = _numbers_blind(guards)
    for reason in settled:
        if reason.items == blind:
            cf._add(key, 0, eager)
            cf._break(reason, key=key)
            return True
    return False


def volatile_site(entries):
    """(loc, [values]) of the first guard site (its line, and which of the reads made there
    in order) with VOLATILE distinct values across the entries' traces; else None."""
    seen = {}
    for e in entries:
        if isinstance(e, str):      # (entry_lookup.EAGER)
            continue
        nth = {}
        for g in e.forward.guards:
            nth[g.loc] = k = nth.get(g.loc, -1) + 1
            values = seen.setdefault((g.loc, k), [])
            if g.expected not in values:
                values.append(g.expected)
                if len(values) >= VOLATILE:
                    return g.loc, values
    return None


def settle(cf, key, eager):
    """After an entry is added for key: if a value guard of key's entries changes from call
    to call, key's calls run eagerly from now on (its entries dropped, also as grad-free
    entries; a warning once); -> whether they do. The fast path's runners are cleared
    either way (those made before know only the older entries)."""
    cf._fast.clear()
    found = None if cf.fullgraph else volatile_site(_superseded(cf, key) + cf.cache[key])
    if found is None:
        return False
    loc, values = found
    items = next(e for e in cf.cache[key] if not isinstance(e, str)).guard_items
    gone = {id(e) for e in cf.cache[key]}
    for free, entries in cf._grad_free.items():
        cf._grad_free[free] = [e for e in entries if id(e) not in gone]
    cf.cache[key] = [eager]
    reason = Settled(f"the value read from a tensor at {loc} changes from call to call "
                     f"({', '.join(map(repr, values))}, ...): a trace per value would not be "
                     f"reused")
    reason.items = _numbers_blind(items)
    cf._break(reason, key=key)
    cf._warn_once(f"running eagerly: {reason}")
    return True
