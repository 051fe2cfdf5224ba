"""Which numbers a trace with SymbolicScalars (symbolic_scalar.py) makes stand-ins of, and
whether one is running: the per-thread flags compile sets around such a trace."""
import threading


class _StandIns(threading.local):
    active = False      # a trace with SymbolicScalars is running (compile/symbolic_args.py)
    hyper_reads = False     # an optimiser's float hyper-parameter read is one (hypers.py)
    item_reads = False      # the user's t.item() is one (tracer/item_reads.py) ...
    read_sites = frozenset()    # ... unless its read's path is one of these (guarded)
    site_counts = {}        # the trace's t.item() reads so far, by line (item_reads.py)
    made = frozenset()      # the paths of stand-ins made during the trace beside those


# the paths of the stand-ins of optimiser hyper-parameters and of numbers read from tensors
# (t.item()) by the user's code
HYPER_READS = "the optimiser's hyper-parameters read"
ITEM_READS = "a number read from a tensor (.item())"

stand_ins = _StandIns()
