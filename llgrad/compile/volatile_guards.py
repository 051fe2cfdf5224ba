"""Value guards whose value changes from call to call: the count a data-dependent mask or
nonzero selects (top-k routing to experts), a number read with .item() into Python code.
Each new value is another trace, and every kept entry costs each later call of its key a
whole forward run before its guards can be read (they are values the forward kernel
computes; compiled_function._run_first tries a key's entries in turn). So when one guard
site has taken VOLATILE distinct values in a key's traces, that key's calls run eagerly,
with a warning naming the line: torch.compile breaks the graph at such reads. A site taking
fewer values (a smaller last batch, a branch's two outcomes) keeps its compiled entries."""

VOLATILE = 4


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
    found = None if cf.fullgraph else volatile_site(cf.cache[key])
    if found is None:
        return False
    loc, values = found
    gone = {id(e) for e in cf.cache[key]}
    for free, entries in cf._grad_free.items():
        cf._grad_free[free] = [e for e in entries if id(e) not in gone]
    cf.cache[key] = [eager]
    reason = (f"the value read from a tensor at {loc} changes from call to call "
              f"({', '.join(map(repr, values))}, ...): a trace per value would not be reused")
    cf._break(reason, key=key)
    cf._warn_once(f"running eagerly: {reason}")
    return True
