"""Which backward is running on this thread: autograd_api._run numbers each one, and a node
it releases notes the number in _freed, so that compile/replayed_graph.freed can tell a node
this backward freed (which a second-order graph may still lead through: the same node in
eager is run once) from one an earlier backward freed (eager would raise)."""
import itertools
import threading


class _Run(threading.local):
    now = 1         # (no backward running; a running one's number is > 1)


current = _Run()
_numbers = itertools.count(2)


def next_number():
    return next(_numbers)
