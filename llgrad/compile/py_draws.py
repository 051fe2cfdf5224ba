"""Draws from Python's random module and NumPy's global generator inside a compiled function
(the seq2seq tutorial's `inp = tgt[:, t] if random.random() < teacher_forcing_ratio else
...`, `np.random.rand() < eps`): made again by each compiled call, not baked into the trace.

torch.compile's way (dynamo's random_calls): a compiled call makes the draws its trace made,
with the same functions and arguments, in the same order, before its graph runs, and their
numbers are inputs of the graph. While a compile trace runs, `standing_in()` puts wrappers
in the random module in the place of its drawing functions; a draw with plain number
arguments is eager's own draw (the same number), given to the traced code as a
SymbolicScalar of a new graph input (runtime/symbolic_scalar.py): `random.random() < ratio`
is then a guarded outcome (an entry per outcome, not one per number) and arithmetic on it
(`x * random.uniform(0.8, 1.2)`) graph ops. A read of the number (an index, float(), a
format not written as output) ends the trace (ScalarEscape, symbolic_args.retry): the
function's draws are plain numbers from then on and its calls run eagerly with
snapshot.py's warning, as before. So do draws inside tensor-dependent control flow (that
`if` is traced again as Python) and draws no wrapper sees (`from random import random`,
random.shuffle, a library's): `explains` finds the random state moved past the recorded
draws.

The entry keeps its draws (entry.draws: [(function, args, kwargs)]); its runner (`drawing`)
makes them at each call, as inputs after the guard walk's tensors (the RNG state's input, if
any, after them), and puts Python's random state back where the entry does not serve the
call (a value guard failed, the call runs eagerly): the next entry, a trace or eager's run
then draws the same numbers again."""
import contextlib
import random
import threading

import numpy as np

from ..ir.graph import Value
from ..ir.interpret import apply_casts, node_impl
from ..ir.optable import CONTROL, OPS
from ..runtime import trace_state
from ..runtime.derived_number import is_stand_in
from ..runtime.saved_tensor import user_location
from ..runtime.symbolic_scalar import SymbolicScalar, scalar_input, stand_ins
from ..tracer.errors import ControlFlowError

PY_DRAWS = "a draw from Python's random module"     # (the stand-ins' path: symbolic_args)
# the random module's drawing functions (methods of its hidden Random instance) and NumPy's
# global generator's (np.random.rand(): a Python number when no size is given)
_DRAWS = {random: ("random", "uniform", "randint", "randrange", "choice", "gauss",
                   "normalvariate", "triangular", "expovariate", "betavariate",
                   "lognormvariate", "vonmisesvariate", "gammavariate", "paretovariate",
                   "weibullvariate"),
          np.random: ("rand", "randn", "random", "random_sample", "uniform", "normal",
                      "randint", "standard_normal", "exponential", "beta", "gamma",
                      "binomial", "poisson")}
_INT_RANGE = 2 ** 62
_lock = threading.Lock()
_active = [0]               # traces under way, all threads (the wrappers are in place while
_originals = {}             # it is not 0)


class _Flags(threading.local):
    on = False              # this thread's compile trace takes draws as stand-ins


_flags = _Flags()


class _DrawWrapper:
    """random.<name> while a trace runs: a plain object equal to (and hashing as) the
    function it wraps; other threads and other traces get the function's own draw."""

    def __init__(self, name, fn):
        self.__wrapped__, self.__name__, self.__doc__ = fn, name, fn.__doc__
        self.__qualname__ = name

    def __call__(self, *args, **kwargs):
        tracer = trace_state.state.tracer
        if not _flags.on or tracer is None or not getattr(tracer, "reused", False):
            return self.__wrapped__(*args, **kwargs)
        return _traced_draw(tracer, self.__wrapped__, args, kwargs)

    def __eq__(self, other):
        return other is self or other is self.__wrapped__

    def __hash__(self):
        return hash(self.__wrapped__)

    def __repr__(self):
        return repr(self.__wrapped__)


def _plain(x):
    return type(x) in (int, float, bool) or x is None


def _traced_draw(tracer, fn, args, kwargs):
    """fn(*args, **kwargs) in a compile trace: eager's number, as a stand-in of a new input."""
    if hasattr(tracer, "parent"):       # (a region's input would be its own: as Python)
        raise ControlFlowError(f"{user_location()}: a draw from Python's random module "
                               f"inside {tracer.what}")
    if tracer.hooks_off:
        tracer.graph_break("a draw from Python's random module while compile differentiates")
    for a in (*args, *kwargs.values()):
        if is_stand_in(a):          # (a dynamic number's value read: guarded by value)
            float(a)
    if fn.__name__ == "choice" and not kwargs and len(args) == 1 and \
            type(args[0]) in (list, tuple) and len({type(x) for x in args[0]}) == 1 and \
            type(args[0][0]) in (int, float):
        args = (tuple(args[0]),)    # (its items as they are now: a call draws from these)
    elif not all(map(_plain, (*args, *kwargs.values()))):
        return fn(*args, **kwargs)  # (a plain draw: explains() refuses the trace)
    value = fn(*args, **kwargs)
    if type(value) not in (int, float) or type(value) is int and abs(value) >= _INT_RANGE:
        return value
    draws = getattr(tracer, "py_draws", None)
    if draws is None:
        draws = tracer.py_draws = []
    t = scalar_input(value)
    v = tracer.input(t, f"draw{len(draws)}")
    rng = tracer.rng_input
    if rng is not None:             # (before the RNG state's input: run.py appends that last)
        inputs = tracer.builder.graph.inputs
        at = inputs.index(rng)
        inputs.insert(at, inputs.pop())
        v.index, rng.index = at, at + 1
        tracer.inputs[id(t._storage)] = at
    draws.append((fn, args, dict(kwargs)))
    stand_ins.made, stand_ins.active = stand_ins.made | {PY_DRAWS}, True
    return SymbolicScalar(t, value, PY_DRAWS)


@contextlib.contextmanager
def standing_in(cf, reads_types):
    """The random module's draws wrapped while the block (cf's trace) runs, as stand-ins
    unless they were given up (a read of a drawn number) or the user's code reads types."""
    prev, _flags.on = _flags.on, PY_DRAWS not in cf._static and not reads_types
    with _lock:
        if _active[0] == 0:
            for module, names in _DRAWS.items():
                for name in names:
                    fn = getattr(module, name, None)
                    if fn is not None and not isinstance(fn, _DrawWrapper) and \
                            getattr(fn, "__self__", None) is _generator(module):
                        _originals[module, name] = fn
                        setattr(module, name, _DrawWrapper(name, fn))
        _active[0] += 1
    try:
        yield
    finally:
        _flags.on = prev
        with _lock:
            _active[0] -= 1
            if _active[0] == 0:
                for (module, name), fn in _originals.items():
                    if isinstance(vars(module).get(name), _DrawWrapper):
                        setattr(module, name, fn)
                _originals.clear()


def _generator(module):
    """The generator whose methods are module's drawing functions."""
    return random._inst if module is random else np.random.mtrand._rand


def explains(entry, py_before, np_before=None):
    """Whether entry's draws, made from Python's random state py_before (and NumPy's global
    state np_before, when given), leave the states where the traced run left them (no draw
    the wrappers did not see)."""
    draws = getattr(entry, "draws", None) if entry is not None else None
    if not draws:
        return False
    py, npr = random.Random(), np.random.RandomState()
    py.setstate(py_before)
    if np_before is not None:
        npr.set_state(np_before)
    for fn, args, kwargs in draws:
        if np_before is not None or fn.__self__ is random._inst:
            getattr(py if fn.__self__ is random._inst else npr, fn.__name__)(*args, **kwargs)
    if py.getstate() != random.getstate():
        return False
    if np_before is None:
        return True
    a, b = npr.get_state(), np.random.get_state()
    return a[2:] == b[2:] and np.array_equal(a[1], b[1])


def drawing(run, entry, failed, tensors):
    """run(tensors and the call's draws), the random states put back if the answer is in
    `failed` (its first: a value guard failed; the call runs eagerly or stands in: it draws
    again). The guards on the draws alone (`random.random() < ratio`) are checked first, on
    the numbers: an entry of another outcome costs no run of its graph."""
    draws = entry.draws
    state, np_state = random.getstate(), _np_state(draws)
    inputs = [*tensors, *[scalar_input(fn(*args, **kwargs)) for fn, args, kwargs in draws]]
    out = failed[0] if not _checks_hold(entry.forward, inputs) else run(inputs)
    if any(out is f for f in failed):
        random.setstate(state)
        if np_state is not None:
            np.random.set_state(np_state)
    return out


def _np_state(draws):
    """NumPy's global state if one of draws is NumPy's, else None."""
    return np.random.get_state() if any(fn.__self__ is not random._inst
                                        for fn, _, _ in draws) else None



_MAX_CHECK_NODES = 64


def _checks_hold(graph, tensors):
    """Whether the value guards of graph computed from its 0-d inputs alone (the draws, the
    dynamic numbers) hold for these inputs, on the IR interpreter (the graph's run checks
    every guard again)."""
    plan = graph.__dict__.get("_draw_checks")
    if plan is None:
        plan = graph.__dict__["_draw_checks"] = _check_plan(graph)
    positions, nodes, guards = plan
    if not guards:
        return True
    env = {graph.inputs[i]: tensors[i]._data for i in positions}
    for node, impl, casts in nodes:
        args = apply_casts([env[x] if isinstance(x, Value) else x for x in node.inputs], casts)
        out = impl(*args, **node.attrs)
        for v, o in zip(node.outputs, out if len(node.outputs) > 1 else (out,)):
            o = np.asarray(o)
            env[v] = o if o.dtype == v.type.dtype else o.astype(v.type.dtype)
    for v, expected in guards:
        now = env[v].reshape(()).item()
        if now != expected or (now == 0 and repr(now) != repr(expected)):
            return False
    return True


def _check_plan(graph):
    """(input positions, [(node, impl, casts)] in graph order, [(guard value, expected)]) of
    the guards whose values only ops of the op table (no control flow, no RNG state) compute
    from 0-d inputs and constants, at most _MAX_CHECK_NODES nodes."""
    at = {id(v): i for i, v in enumerate(graph.inputs)}
    made = {id(v): n for n in graph.nodes for v in n.outputs}
    positions, needed, guards = set(), set(), []
    for g in graph.guards:
        seen, stack, inputs, ok = set(), [g.value], set(), True
        while stack and ok:
            v = stack.pop()
            if id(v) in seen:
                continue
            seen.add(id(v))
            node = made.get(id(v))
            if node is None:
                ok = id(v) in at and v.type.shape == () and v.name != "rng"
                inputs.add(at.get(id(v)))
            elif node.op in CONTROL or node.op not in OPS or OPS[node.op].kind == "random":
                ok = False
            else:
                stack.extend(x for x in node.inputs if isinstance(x, Value))
        nodes = {id(made[i]) for i in seen if i in made}
        if ok and len(needed | nodes) <= _MAX_CHECK_NODES:
            needed |= nodes
            positions |= inputs
            guards.append((g.value, g.expected))
    nodes = [(n, *node_impl(n)) if n.op != "constant" else (n, _constant, ())
             for n in graph.nodes if id(n) in needed]
    return sorted(positions), nodes, guards


def _constant(value, dtype):
    return np.array(value, dtype=dtype)
