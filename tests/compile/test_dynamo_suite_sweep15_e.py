"""Sweep 15 (helper E): programs in the manner of PyTorch's Dynamo tests (test/dynamo), each
run with torch (the oracle), llgrad eagerly and llgrad.compile over several calls with the
state they read changed between calls. This file: what the guard walk reads.

Silent mismatches these found (compiled calls reused a trace eager would not have made):
- `w.grad = None` (or `opt.zero_grad()`) inside the function, traced while .grad was None:
  the entry served calls whatever their .grad, and never cleared it (.grad accumulated).
- An object the walk met a second time (`st["m"]`, an enum member also reached through its
  class; one object in two list slots) had no guard at its second place: replacing it there
  by another object reused the trace.
- Dict keys that are not Python scalars (an enum member, a tuple, a frozenset, an object)
  were guarded by type only: `d.get(Mode.A)` read a key the new dict no longer had.
- A module made at run time (types.ModuleType filled by exec: no file) was taken for a
  library's: the helpers it holds were not followed, its globals not guarded, a counter it
  kept not seen; a module's __getattr__ (PEP 562) answered reads no guard saw.
- A functools.lru_cache over a function reading a global: after cache_clear() eager computed
  with the global's new value, a compiled call kept the value traced."""
import collections
import enum
import functools
import types
import weakref

import pytest
from contract_harness_sweep7 import runs

torch = pytest.importorskip("torch")

E = (RuntimeError, ValueError, IndexError, TypeError, KeyError, AssertionError,
     ZeroDivisionError)


def _grad_cleared_inside(lib, wrap, see):
    w = lib.ones(2, requires_grad=True)

    def f(x):
        w.grad = None
        return (w * x).sum()
    cf = wrap(f)
    for k in range(4):
        cf(lib.ones(2) * (k + 1)).backward()
        see(w.grad)


def _grad_deleted_inside(lib, wrap, see):
    def f(w, x):
        del w.grad
        return (w * x).sum()
    cf = wrap(f)
    w = lib.ones(2, requires_grad=True)
    for k in range(3):
        cf(w, lib.ones(2) * (k + 1)).backward()
        see(w.grad)


def _zero_grad_in_forward(lib, wrap, see):
    m = lib.nn.Linear(2, 1)

    def f(x):
        m.zero_grad()       # (set_to_none: a trace before the first backward sees None)
        return m(x).sum()
    cf = wrap(f)
    for k in range(4):
        l = cf(lib.ones(3, 2) * (k + 1))
        see(m.weight.grad)
        l.backward()
        with lib.no_grad():
            m.weight.sub_(0.1 * m.weight.grad)
        see(l, m.weight.grad, m.weight)


def _grad_cleared_with_grad_present(lib, wrap, see):
    w = lib.ones(2, requires_grad=True)
    (w * 5).sum().backward()

    def f(x):
        w.grad = None
        return (w * x).sum()
    cf = wrap(f)
    for k in range(3):
        cf(lib.ones(2) * (k + 1)).backward()
        see(w.grad)


def _enum_member_in_dict_and_class(lib, wrap, see):
    class Mode(enum.Enum):
        A = 1
        B = 2
    st = {"m": Mode.A}
    cf = wrap(lambda x: x * 2 if st["m"] is Mode.A else x * st["m"].value * 10)
    for m in (Mode.A, Mode.B, Mode.A, Mode.B):
        st["m"] = m
        see(cf(lib.ones(2)))


def _object_in_two_slots(lib, wrap, see):
    class C:
        def __init__(self, s):
            self.s = s
    a = C(2.0)
    xs = [a, a]
    cf = wrap(lambda x: x * xs[0].s + x * xs[1].s)
    for k in range(3):
        see(cf(lib.ones(2)))
        xs[1] = C(5.0) if k == 0 else a


def _slotted_object_in_two_slots(lib, wrap, see):
    class S:
        __slots__ = ("v",)

        def __init__(self, v):
            self.v = v
    a = S(1.0)
    box = [a, a]
    cf = wrap(lambda x: x * box[0].v + box[1].v)
    see(cf(lib.ones(2)))
    box[1] = S(4.0)
    see(cf(lib.ones(2)))


def _partial_in_two_slots(lib, wrap, see):
    def scale(x, s):
        return x * s
    p = functools.partial(scale, s=2.0)
    box = [p, p]
    cf = wrap(lambda x: box[0](x) + box[1](x))
    see(cf(lib.ones(2)))
    box[1] = functools.partial(scale, s=5.0)
    see(cf(lib.ones(2)))


def _enum_keyed_dict(lib, wrap, see):
    class Mode(enum.Enum):
        A = 1
        B = 2
    box = {"d": {Mode.A: 2.0}}
    cf = wrap(lambda x: x * box["d"].get(Mode.A, 10.0))
    for k in range(3):
        see(cf(lib.ones(2)))
        box["d"] = {(Mode.B, Mode.A)[k % 2]: 2.0}


def _tuple_keyed_dict(lib, wrap, see):
    box = {"d": {(0, 1): 2.0}}
    cf = wrap(lambda x: x * box["d"].get((0, 1), 10.0))
    see(cf(lib.ones(2)))
    box["d"] = {(1, 0): 2.0}
    see(cf(lib.ones(2)))


def _frozenset_keyed_dict_argument(lib, wrap, see):
    cf = wrap(lambda x, d: x * d.get(frozenset({1}), -1.0))
    see(cf(lib.ones(2), {frozenset({1}): 3.0}))
    see(cf(lib.ones(2), {frozenset({2}): 3.0}))


def _object_keyed_dict_argument(lib, wrap, see):
    class K:
        def __init__(self, n):
            self.n = n
    k1, k2 = K(1), K(1)
    cf = wrap(lambda x, d: x * d.get(k1, -1.0))
    see(cf(lib.ones(2), {k1: 3.0}))
    see(cf(lib.ones(2), {k2: 3.0}))
    see(cf(lib.ones(2), {k1: 4.0}))


_HELPER = """
CFG = {"scale": 2.0}
COUNT = [0]
def helper(x):
    COUNT[0] += 1
    return x * CFG["scale"]
"""


def _helper_in_module_made_at_run_time(lib, wrap, see):
    mod = types.ModuleType("sweep15_e_helpers")
    exec(_HELPER, mod.__dict__)
    cf = wrap(lambda x: mod.helper(x) + 1)
    for k in range(3):
        see(cf(lib.ones(2)), mod.COUNT[0])
        mod.CFG["scale"] = k + 3.0


def _module_getattr_answers(lib, wrap, see):
    mod = types.ModuleType("sweep15_e_lazy")
    state = {"v": 1.0}
    mod.__getattr__ = lambda name: state["v"]
    cf = wrap(lambda x: x * mod.anything)
    for k in range(3):
        see(cf(lib.ones(2)))
        state["v"] = k + 2.0


def _weakref_target_changes(lib, wrap, see):
    class C:
        def __init__(self, v):
            self.v = v
    a, b = C(1.0), C(2.0)
    box = {"r": weakref.ref(a)}
    cf = wrap(lambda x: x * box["r"]().v)
    see(cf(lib.ones(2)))
    a.v = 5.0
    see(cf(lib.ones(2)))
    box["r"] = weakref.ref(b)
    see(cf(lib.ones(2)))


def _defaultdict_factory_replaced(lib, wrap, see):
    d = collections.defaultdict(lambda: 1.0)
    cf = wrap(lambda x: x * d["missing_" + str(x.shape[0])])
    see(cf(lib.ones(2)), len(d))
    d.default_factory = lambda: 5.0
    see(cf(lib.ones(3)), len(d))
    see(cf(lib.ones(2)), len(d))


def _ordered_dict_reordered(lib, wrap, see):
    d = collections.OrderedDict(a=lib.ones(1), b=lib.ones(1) * 2)
    cf = wrap(lambda: lib.cat(list(d.values())))
    see(cf())
    d.move_to_end("a")
    see(cf())


def _namedtuples_with_swapped_fields(lib, wrap, see):
    A = collections.namedtuple("A", "x y")
    B = collections.namedtuple("B", "y x")
    cf = wrap(lambda t: t.x - t.y)
    see(cf(A(lib.ones(1), lib.zeros(1))))
    see(cf(B(lib.ones(1), lib.zeros(1))))


def _intenum_member_or_int(lib, wrap, see):
    class F(enum.IntEnum):
        A = 1
    cf = wrap(lambda x, m: x * 100 if m is F.A else x * m)
    for m in (F.A, 1, F.A, 1):
        see(cf(lib.ones(2), m))


def _property_reads_closure(lib, wrap, see):
    g = {"v": 1.0}

    class C:
        @property
        def s(self):
            return g["v"]
    c = C()
    cf = wrap(lambda x: x * c.s)
    for k in range(3):
        see(cf(lib.ones(2)))
        g["v"] = k + 3.0


def _argument_lambda_closure_changes(lib, wrap, see):
    s = [1.0]
    g = lambda x: x * s[0]      # noqa: E731
    cf = wrap(lambda x, h: h(x))
    for k in range(3):
        see(cf(lib.ones(2), g))
        s[0] = k + 2.0


def _buffer_aliased_then_untied(lib, wrap, see):
    m = lib.nn.Module()
    t = lib.ones(2)
    m.register_buffer("a", t)
    m.register_buffer("b", t)

    def f(x):
        m.a.add_(1)
        return x * m.b
    cf = wrap(f)
    see(cf(lib.ones(2)), m.a, m.b)
    m.b = lib.ones(2)
    see(cf(lib.ones(2)), m.a, m.b)


def _nan_and_signed_zero_arguments(lib, wrap, see):
    cf = wrap(lambda x, s: x * s)
    for s in (float("nan"), 0.0, -0.0, float("nan"), float("inf"), -0.0):
        see(cf(lib.ones(2), s))


_SCALE = {"v": 1.0}


@functools.lru_cache(maxsize=None)
def _scaled(n):
    return n * _SCALE["v"]


@functools.lru_cache(maxsize=None)
def _table(n):
    return [float(i) for i in range(n)]


def _cached_helper_reading_state(lib, wrap, see):
    cf = wrap(lambda x: x * sum(_table(x.shape[0])) + _scaled(2))
    try:
        for n in (2, 3, 2):
            see(cf(lib.ones(n)))
        _SCALE["v"] = 5.0     # (the cache keeps the old result: eager's too)
        see(cf(lib.ones(2)))
        _scaled.cache_clear()
        see(cf(lib.ones(2)))
    finally:
        _SCALE["v"] = 1.0
        _scaled.cache_clear()


def _helper(x):
    return x * 2


def _call_dunder_and_global_function_replaced(lib, wrap, see):
    global _helper

    class C:
        def __call__(self, x):
            return x * 2
    c = C()
    cf = wrap(lambda x: c(x) + _helper(x))
    keep = _helper
    try:
        see(cf(lib.ones(2)))
        C.__call__ = lambda self, x: x * 3
        see(cf(lib.ones(2)))
        _helper = lambda x: x - 5      # noqa: E731
        see(cf(lib.ones(2)))
    finally:
        _helper = keep


PROGRAMS = [v for k, v in sorted(globals().items()) if k.startswith("_") and callable(v)
            and getattr(v, "__code__", None) is not None and v.__code__.co_argcount == 3]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.strip("_"))
def test_compiled_equals_eager_and_torch(program):
    runs(program, torch)


@pytest.mark.parametrize("program", [_grad_cleared_inside, _zero_grad_in_forward,
                                     _enum_member_in_dict_and_class, _enum_keyed_dict],
                         ids=lambda p: p.__name__.strip("_"))
def test_native_backend(program):
    runs(program, torch, with_torch=False, backend="llvm")


def test_runtime_module_getattr_read_runs_eagerly_with_a_warning():
    own = runs(_module_getattr_answers, torch, with_torch=False)
    assert len(own) == 1 and "__getattr__" in own[0] and "test_dynamo_suite_sweep15_e" in own[0]


def test_pure_cached_helper_stays_compiled():
    def scenario(lib, wrap, see):
        cf = wrap(lambda x: x * sum(_table(x.shape[0])))
        for n in (2, 3, 2):
            see(cf(lib.ones(n)))
    assert runs(scenario, torch) == []
