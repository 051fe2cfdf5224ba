"""llgrad.func.functional_call: a module called with some of its parameters and buffers
replaced by the given tensors (torch.func.functional_call, with torch's rules for tied
weights, strict keys, several dicts, and writing back what the module assigned)."""
from collections.abc import Sequence

from ..runtime.tensor import Tensor

_MISSING = object()


def _named_tensors(module):
    """{dotted name: tensor} of every parameter and buffer, tied ones under each name."""
    out = {}
    for prefix, m in module.named_modules(remove_duplicate=False):
        for store in ("_parameters", "_buffers"):
            for n, t in getattr(m, store).items():
                if t is not None:
                    out[f"{prefix}.{n}" if prefix else n] = t
    return out


def _untied(module, given):
    """given, with every name tied to a given one (the same tensor in the module) mapped to
    the same value; torch's error when tied names are given different values."""
    by_tensor = {}
    for name, t in _named_tensors(module).items():
        by_tensor.setdefault(id(t), set()).add(name)
    tied = {n: names for names in by_tensor.values() if len(names) > 1 for n in names}
    given_tied = [n for n in given if n in tied]
    for n in given_tied:
        names = tied[n]
        values = {id(given[m]) for m in names if m in given}
        if len(names & set(given_tied)) > 1 and len(values) != 1:
            raise ValueError(f"functional_call got multiple values for keys {sorted(names)}, "
                             "which are tied. Consider using tie_weights=False")
    out = dict(given)
    for n in given_tied:
        for m in tied[n]:
            out[m] = given[n]
    return out


def _owner(module, name):
    prefix, _, attr = name.rpartition(".")
    m = module
    if prefix:
        for part in prefix.split("."):
            m = getattr(m, part)
    return m, attr


def _swap(module, name, value):
    """Put value at name (a parameter, buffer or plain attribute); return what was there."""
    m, attr = _owner(module, name)
    if value is not _MISSING and value is not None and not isinstance(value, Tensor):
        raise TypeError(f"{value} is not an instance of llgrad.Tensor")
    for store in (m._parameters, m._buffers):
        if attr in store:
            old = store[attr]
            if value is _MISSING:
                del store[attr]
            else:
                store[attr] = value
            return old
    old = m.__dict__.get(attr, _MISSING)
    if value is _MISSING:
        m.__dict__.pop(attr, None)
    else:
        object.__setattr__(m, attr, value)
    return old


def _current(module, name):
    m, attr = _owner(module, name)
    for store in (m._parameters, m._buffers):
        if attr in store:
            return store[attr]
    return m.__dict__.get(attr, _MISSING)


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """torch.func.functional_call: module(*args, **kwargs) with the parameters and buffers
    named in parameter_and_buffer_dicts (a dict, or a sequence of dicts with distinct keys)
    in place of its own, which are restored afterwards. tie_weights: a tensor tied under
    several names in the module is replaced under all of them. strict: the names must be
    exactly the module's. What the module assigns to a replaced name during the call is
    written back into the dict, as torch does."""
    if isinstance(parameter_and_buffer_dicts, dict):
        given = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, Sequence):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be "
                             "dictionaries")
        counts = {}
        for d in parameter_and_buffer_dicts:
            for k in d:
                counts[k] = counts.get(k, 0) + 1
        repeated = [k for k, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of "
                             "functional call is ambiguous")
        given = {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    else:
        raise ValueError("Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of "
                         f"dicts, but got {type(parameter_and_buffer_dicts)}")
    kwargs = {} if kwargs is None else kwargs
    args = () if args is None else args if isinstance(args, tuple) else (args,)
    values = _untied(module, given) if tie_weights else given
    if strict:
        valid = set(_named_tensors(module))
        missing, unexpected = sorted(valid - set(values)), sorted(set(values) - valid)
        msgs = []
        if unexpected:
            msgs.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            msgs.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if msgs:
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t"
                               + "\n\t".join(msgs))
    originals = {}
    try:
        for name, value in values.items():
            originals[name] = _swap(module, name, value)
        return module(*args, **kwargs)
    finally:
        now = {}
        for name, old in reversed(list(originals.items())):
            now[name] = _current(module, name)
            _swap(module, name, old)
        for k in given:
            if k in now and now[k] is not _MISSING and now[k] is not given[k]:
                given_dict = _dict_holding(parameter_and_buffer_dicts, k)
                given_dict[k] = now[k]


def _dict_holding(dicts, key):
    if isinstance(dicts, dict):
        return dicts
    for d in dicts:
        if key in d:
            return d
    return {}
