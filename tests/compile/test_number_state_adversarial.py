"""Adversarial cases of the numbers a compiled function computes from, or writes into, the
Python state it reaches (compile/symbolic_slots.py, attr_writes.py, runtime/symbolic_scalar.py):
each runs the function eagerly and compiled on equal state and compares the results and the
state (values and types) after every call, or, where eager's numbers are fresh at each call,
checks that compiled calls read them afresh too."""
import datetime
import os
import random
import secrets
import uuid
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


class _State:
    pass


def _side_by_side(make, calls, between=None):
    """make() -> (function, state); run one copy eagerly and one compiled with the same
    arguments; compare results and vars(state) after every call (between(state, i): a
    change of both states before call i)."""
    (fa, sa), (fb, sb) = make(), make()
    fb = llgrad.compile(fb, backend="llvm")
    for i, args in enumerate(calls):
        if between is not None:
            between(sa, i)
            between(sb, i)
        ra, rb = fa(*args), fb(*args)
        np.testing.assert_array_equal(ra.numpy(), rb.numpy())
        assert ra.dtype == rb.dtype
        va, vb = vars(sa), vars(sb)
        assert {k: (type(v), repr(v)) for k, v in va.items()} == \
            {k: (type(v), repr(v)) for k, v in vb.items()}
    return fb


def test_a_number_over_a_counter_is_pythons_division():
    # (PyTorch's number / tensor is the reciprocal times the number, rounded twice: a
    # counter's `0.1 / t` must be Python's correctly rounded quotient at every call)
    def make():
        s = _State()
        s.t, s.v = 0, 0.0

        def f(x):
            s.t += 1
            s.v = 0.1 / s.t
            return x * s.v
        return f, s
    x = llgrad.ones(3, dtype=llgrad.float64)
    f = _side_by_side(make, [(x,)] * 11)
    assert f.n_traces == 2


def test_a_number_over_a_number_argument_is_pythons_division():
    x = llgrad.ones(2, dtype=llgrad.float64)

    def f(x, n):
        return x * (0.1 / n)
    c = llgrad.compile(f, backend="llvm")
    for n in range(1, 12):
        np.testing.assert_array_equal(c(x, n).numpy(), f(x, n).numpy())
        assert c(x, n).numpy()[0] == 0.1 / n


def _fresh_each_call(fn, read):
    """A compiled function writing a fresh number (a clock, the system's entropy) into the
    state: every call reads it again, as eager's (a trace would replay the traced one)."""
    c = llgrad.compile(fn, backend="llvm")
    x = llgrad.ones(3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        seen = []
        for _ in range(6):
            np.testing.assert_array_equal(c(x).numpy(), (x * 2).numpy())
            seen.append(read())
    assert len(set(seen)) == len(seen)
    assert any("running eagerly" in str(m.message) for m in w)


_s = _State()
_s.n = 0


def _now(x):
    _s.n = datetime.datetime.now().isoformat()
    return x * 2


def _urandom(x):
    _s.n = int.from_bytes(os.urandom(8), "little")
    return x * 2


def _uuid(x):
    _s.n = uuid.uuid4().int % (2 ** 61)
    return x * 2


def _secrets(x):
    _s.n = secrets.randbits(60)
    return x * 2


def _choice(x):
    _s.n = secrets.choice(range(2 ** 60))
    return x * 2


def _system_random(x):
    _s.n = random.SystemRandom().random()
    return x * 2


@pytest.mark.parametrize("fn", [_now, _urandom, _uuid, _secrets, _choice, _system_random])
def test_fresh_numbers_written_into_the_state_are_read_at_each_call(fn):
    _s.n = 0
    _fresh_each_call(fn, lambda: _s.n)


def _past_int64(s, i):
    if i == 4:
        s.t = 2 ** 70      # (set by the program between calls: no trace saw it coming)
    if i == 7:
        s.t = -2 ** 66


def test_a_counter_past_int64_keeps_pythons_ints():
    def make():
        s = _State()
        s.t = 3

        def f(x):
            s.t += 1
            return x + s.t % 7
        return f, s
    _side_by_side(make, [(llgrad.ones(3),)] * 10, _past_int64)


def test_a_counter_past_int64_in_an_argument_object():
    # (the guard walker's path: the counter an attribute of an argument)
    def f(x, s):
        s.t += 1
        return x + 1
    c = llgrad.compile(f, backend="llvm")
    sa, sb = _State(), _State()
    sa.t = sb.t = 3
    x = llgrad.ones(3)
    for i in range(10):
        _past_int64(sa, i)
        _past_int64(sb, i)
        np.testing.assert_array_equal(f(x, sa).numpy(), c(x, sb).numpy())
        assert type(sb.t) is int and sa.t == sb.t


def test_an_int_argument_past_int64():
    x = llgrad.ones(2, dtype=llgrad.float64)

    def f(x, n):
        return x + n % 7
    c = llgrad.compile(f, backend="llvm")
    for n in (1, 2, 3, 2 ** 70, 4, -2 ** 64 + 5):
        np.testing.assert_array_equal(c(x, n).numpy(), f(x, n).numpy())


def _shared_writes(kind):
    s = _State()
    s.a, s.b = [0], [1]

    def f(x):
        t = x * 2
        n = [t] if kind == "tensors" else {"k": 1} if kind == "dict" else [1]
        s.a = n
        if kind != "returned":
            s.b = n
        return t, n
    return f, s


@pytest.mark.filterwarnings("ignore:llgrad.compile")     # (it runs eagerly, saying why)
@pytest.mark.parametrize("kind", ["numbers", "tensors", "dict", "returned"])
def test_one_new_structure_written_twice_stays_one(kind):
    # (eager's slots hold one list, or the slot the list returned: each compiled call would
    # write a copy per slot, an equal one that no guard tells apart)
    fa, sa = _shared_writes(kind)
    fb, sb = _shared_writes(kind)
    fb = llgrad.compile(fb, backend="llvm")
    x = llgrad.ones(3)
    for _ in range(4):
        (ta, na), (tb, nb) = fa(x), fb(x)
        np.testing.assert_array_equal(ta.numpy(), tb.numpy())
        assert (sa.a is sa.b) == (sb.a is sb.b)
        assert (na is sa.a) == (nb is sb.a)


@pytest.mark.parametrize("scalar", [np.float64(0.1), np.float32(0.1), np.int64(3)])
def test_a_numpy_scalar_with_a_counter_keeps_numpys_type(scalar):
    # (a NumPy scalar's operator converts it to a Python number before deferring: the
    # stand-in's float64 arithmetic would give a float where eager's is NumPy's scalar)
    def make():
        s = _State()
        s.t, s.v = 0, 0

        def f(x):
            s.t += 1
            s.v = scalar * s.t
            return x * s.v
        return f, s
    _side_by_side(make, [(llgrad.ones(3),)] * 6)


def test_a_counter_stepped_by_a_number_argument_becomes_an_input():
    # (`self.t += k`: the slot gets k's stand-in arithmetic, a counter as well)
    def make():
        s = _State()
        s.t = 0

        def f(x, k):
            s.t += k
            return x * s.t
        return f, s
    f = _side_by_side(make, [(llgrad.ones(3), k) for k in range(9)])
    assert f.n_traces <= 3
