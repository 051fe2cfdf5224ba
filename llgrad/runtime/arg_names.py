"""Operands given by PyTorch's argument names: the binding of functions and methods made
from a table of names (an op's args, a torch.special family's schema names) rather than
written out with a signature of their own."""


def bind(name, names, given, named):
    """given (positional) then the rest of names from named, as Python binds a signature of
    names: an unknown name, one given twice, a missing one or too many raise its TypeError."""
    if len(given) > len(names):
        raise TypeError(f"{name}() takes {len(names)} positional argument"
                        f"{'s' * (len(names) != 1)} but {len(given)} were given")
    rest = names[len(given):]
    for k in named:
        if k not in rest:
            why = "got multiple values for argument" if k in names else \
                "got an unexpected keyword argument"
            raise TypeError(f"{name}() {why} '{k}'")
    missing = [k for k in rest if k not in named]
    if missing:
        raise TypeError(f"{name}() missing {len(missing)} required positional argument"
                        f"{'s' * (len(missing) > 1)}: " + ", ".join(f"'{k}'" for k in missing))
    return tuple(given) + tuple(named[k] for k in rest)
