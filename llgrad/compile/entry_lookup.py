"""The entry a call's arguments select, traced if need be, for the tools that show one
(dump, explain, compare, `python -m llgrad`): whatever the trace wrote is put back."""
from .attr_writes import Slots
from .guards import collect
from .snapshot import StateSnapshot

EAGER = "eager"     # a cache entry: calls with this key run the function eagerly


def entry_for(cf, args, kwargs, trace=True):
    """The entry these arguments select, traced if needed (and trace is true) with
    everything the trace wrote put back; None if the call runs eagerly."""
    args, kwargs = cf._defaults(args, kwargs) if cf._defaults else (args, kwargs)
    entered = []
    tensors, guards, n_own = collect(cf.fn, args, kwargs, entered, cf._dynamic)
    key = tuple(v for _, v in guards)
    entries = [e for e in cf._entries_for(key, n_own) or () if e is not EAGER]
    if not entries and trace:
        snapshot = StateSnapshot([t for _, t in tensors], entered,
                                 Slots(cf.fn, args, kwargs).names, cf.fn)
        # (dump and explain want this call traced)
        cf._first_untraced, cf._fresh_unkept = True, False
        try:
            cf(*args, **kwargs)
        finally:
            snapshot.restore()
        entries = [e for e in cf._entries_for(key, n_own) or () if e is not EAGER]
    return entries[-1] if entries else None
