"""Two guard walks' items side by side: what a traced run changed (side_effects.py) and what
changed between two calls (readable.py) read them the same way."""

GONE = object()     # (the later walk has no such item)


def paired_items(before, after):
    """[(name, value before, value after or GONE)] for each item of the walk `before`
    [(name, value)]: by position while both walks met the same names in the same order (one
    name can stand for two items, an object's attribute and a global its methods read),
    else a name's n-th item with the later walk's n-th item of that name."""
    if [n for n, _ in before] == [n for n, _ in after]:
        return [(n, v, now) for (n, v), (_, now) in zip(before, after)]
    later, met, out = {}, {}, []
    for name, value in after:
        later.setdefault(name, []).append(value)
    for name, value in before:
        met[name] = i = met.get(name, -1) + 1
        values = later.get(name, ())
        out.append((name, value, values[i] if i < len(values) else GONE))
    return out
