"""A compiled entry's value guards read before its forward runs, where that is cheap.

A value guard (a number the trace read with .item() or a Python decision on a tensor) is a
value the forward computes, so run.run_entry learns that an entry does not serve a call only
after running its whole forward; a key with an entry per value of the guard (a prototypical
network's episode, whose smallest class id its loss reads) then runs every earlier entry's
forward, for a training step a whole step's work each, before the entry whose guards hold.
The guards' slice of the forward (the nodes their values depend on: the episode's draws and
the index arithmetic on its labels) is often a small part of it, so it is run first on the
reference interpreter on a copy of the RNG state: a failing guard then costs the slice. The
slice is made once per entry, and only kept where it is small beside the forward (on a call
whose guards hold it is work done twice)."""
import numpy as np

from ..ir.graph import Graph, TensorType, Value
from ..ir.interpret import evaluate
from ..ir.optable import OPS
from ..ir.passes import dce

NODE_COST = 2000        # the interpreter's cost of a node (some microseconds), in elements
RATIO = 20              # the forward's elements at least this many times the slice's cost

_EXACT = frozenset(("bool", "int64", "int32", "int16", "int8", "uint8"))
# ops whose float results every backend rounds alike (one IEEE operation, or none): a slice
# with another float op (a sum, a matmul, exp) is not kept, as its guards could read
# otherwise on the interpreter than in the forward (a count of floats above a threshold)
_ROUNDED_ALIKE = frozenset(("constant", "add", "sub", "rsub", "mul", "div", "neg", "abs",
                            "to_dtype", "remainder_float", "where", "clone", "copy", "maximum",
                            "minimum", "clamp", "full", "fill", "floor", "ceil", "trunc", "sign"))
_NONE = ()      # an entry's check where the slice is not worth running (or cannot run)


def guards_hold(guards, env):
    """Whether every guard's value in env (a value map) is the value it was traced with
    (a zero with its sign: -0.0 is not 0.0)."""
    for g in guards:
        now = env[g.value].reshape(()).item()
        if now != g.expected or (now == 0 and repr(now) != repr(g.expected)):
            return False
    return True


def holds(entry, arrays):
    """False where the entry's guard slice, run on arrays (the forward's inputs, the RNG
    state last), shows a guard failing; True where they hold or no slice is kept."""
    check = entry._guard_check
    if check is None:
        check = entry._guard_check = _slice(entry.forward)
    if check is _NONE:
        return True
    if entry.rng_index is not None:     # (the slice's draws must not move the state)
        arrays = arrays[:-1] + [np.array(arrays[-1])]
    try:
        _, env = evaluate(check, arrays)
    except Exception:       # noqa: BLE001 - the forward itself gives the call's answer
        entry._guard_check = _NONE
        return True
    return guards_hold(check.guards, env)


def _slice(fwd):
    """The forward's nodes its exact guard values depend on, as a graph whose guards are
    those of the forward's; _NONE where that is not small beside the forward, has no fixed
    shapes or computes a float a backend could round otherwise."""
    # (only integer and boolean values: a float the interpreter sums in another order than
    # the native kernel may differ in its last bit, and is checked after the forward)
    guards = [g for g in fwd.guards if isinstance(g.value.type, TensorType) and
              g.value.type.dtype in _EXACT]
    if not guards or not all(isinstance(v.type, TensorType) for v in fwd.inputs):
        return _NONE
    part = dce(Graph(fwd.name + ".guards", list(fwd.inputs), list(fwd.nodes),
                     [g.value for g in guards], {}, guards))
    if not all(_rounded_alike(n) for n in part.nodes):
        return _NONE
    whole, own = _elements(fwd.nodes), _elements(part.nodes)
    if whole is None or own is None or (own + NODE_COST * len(part.nodes)) * RATIO > whole:
        return _NONE
    return part


def _rounded_alike(node):
    """Whether the node gives the same values on every backend (see _ROUNDED_ALIKE)."""
    if _kind(node) in ("view", "random") or node.op in _ROUNDED_ALIKE:
        return True
    return all(isinstance(o.type, TensorType) and o.type.dtype in _EXACT for o in node.outputs)


def _kind(node):
    op = OPS.get(node.op)
    return op.kind if op is not None else node.op      # (a "constant": no op of the table)


def _elements(nodes):
    """The elements the nodes read and write (None where a value is not a plain tensor; a
    view reads only what it shows)."""
    n = 0
    for node in nodes:
        read = [] if _kind(node) == "view" else \
            [x for x in node.inputs if isinstance(x, Value)]
        for v in node.outputs + read:
            if not isinstance(v.type, TensorType) or \
                    not all(type(d) is int for d in v.type.shape):
                return None
            n += v.type.numel
    return n
