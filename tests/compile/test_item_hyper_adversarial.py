"""Adversarial cases of t.item() and optimiser hyper-parameters read as stand-ins while a
compiled function is traced (tracer/item_reads.py, runtime/hypers.py) and of numbers in
replaced containers counted as counters (compile/attr_writes.py): each runs eagerly and
compiled on equal copies of the state and compares the results and the state after every
call."""
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.optim as optim

torch = pytest.importorskip("torch")


class State:
    pass


def _side_by_side(make, inputs):
    """[(result, state)] of each call, eagerly and compiled."""
    runs = []
    for compiled in (False, True):
        llgrad.manual_seed(0)
        state, f = make()
        g = llgrad.compile(f, backend="llvm") if compiled else f
        runs.append([(g(x), dict(state.__dict__)) for x in inputs])
    return runs


def test_a_tuple_of_counters_replaced_each_call():
    # (a replaced tuple's numbers were counted as counters, but no stand-in can be placed in
    # a tuple: the trace read them as constants the walk no longer guarded, and compiled
    # calls wrote (2, 0.25) for ever)
    def make():
        s = State()
        s.t = (0, 1.0)

        def f(x):
            s.t = (s.t[0] + 1, s.t[1] * 0.5)
            return x * 2
        return s, f
    eager, compiled = _side_by_side(make, [llgrad.ones(2)] * 6)
    for (ra, sa), (rb, sb) in zip(eager, compiled):
        assert ra.tolist() == rb.tolist()
        assert sa == sb and [type(v) for v in sa["t"]] == [type(v) for v in sb["t"]]
    assert compiled[-1][1]["t"] == (6, 0.015625)


def _type_reads(v):
    return type(v) is float, type(v).__name__, {float: "float"}.get(type(v), "other")


def test_the_type_of_an_item_read():
    # (a stand-in of t.item() answered type(v) is float with False)
    def make():
        s = State()

        def f(x):
            return x * 2, _type_reads(x.sum().item())
        return s, f
    inputs = [llgrad.full((2,), 0.5 + i) for i in range(5)]
    eager, compiled = _side_by_side(make, inputs)
    assert [r[1] for r, _ in compiled] == [r[1] for r, _ in eager] == \
        [(True, "float", "float")] * 5


def test_the_type_of_a_learning_rate_read_in_the_step():
    def make():
        s = State()
        s.m = nn.Linear(3, 1)
        s.opt = optim.SGD(s.m.parameters(), lr=0.1)
        s.sched = optim.lr_scheduler.ExponentialLR(s.opt, 0.5)

        def f(x):
            s.opt.zero_grad()
            loss = s.m(x).sum()
            loss.backward()
            s.opt.step()
            s.sched.step()
            return loss.detach(), _type_reads(s.opt.param_groups[0]["lr"])
        return s, f
    inputs = [llgrad.full((2, 3), 0.5 + i) for i in range(5)]
    eager, compiled = _side_by_side(make, inputs)
    assert [r[1] for r, _ in compiled] == [r[1] for r, _ in eager] == \
        [(True, "float", "float")] * 5
    for (ra, _), (rb, _) in zip(eager, compiled):
        assert rb[0].item() == pytest.approx(ra[0].item(), rel=1e-5)


_LR = 0.1


@pytest.mark.parametrize("clamped", [False, True])
def test_a_constant_learning_rate_written_when_the_caller_changed_it(clamped):
    # (`g["lr"] = 0.1` wrote back the very float object the group held, which the traced
    # run's writes skipped: after the caller set 0.05, compiled calls kept 0.05; with
    # min(0.1, loss.item()) a stand-in's guarded comparison served every call that way)
    def make():
        m = nn.Linear(4, 1)
        opt = optim.SGD(m.parameters(), lr=_LR)

        def f(x):
            opt.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.param_groups[0]["lr"] = min(_LR, loss.item()) if clamped else _LR
            return loss.detach()
        return opt, f
    runs = []
    for compiled in (False, True):
        llgrad.manual_seed(0)
        opt, f = make()
        g = llgrad.compile(f, backend="llvm") if compiled else f
        got = []
        for i in range(6):
            loss = g(llgrad.arange(4.0).reshape(1, 4) + i * 0.37)
            got.append((loss.item(), opt.param_groups[0]["lr"]))
            if i == 2:
                opt.param_groups[0]["lr"] = 0.05
        runs.append(got)
    eager, compiled = runs
    assert [lr for _, lr in compiled] == [lr for _, lr in eager] == [0.1] * 6
    for (a, _), (b, _) in zip(eager, compiled):
        assert b == pytest.approx(a, rel=1e-5)


def test_two_dicts_of_counters_made_one_by_the_caller():
    # (each dict's number was an input written back on its own: after the caller made
    # s.L[1] the same dict as s.L[0], compiled calls kept serving the trace of two dicts,
    # eager's `n += 1; n -= 1` on one dict gave 0 where compiled gave 2)
    def run(compiled):
        s = State()
        s.L = [{"n": 0}, {"n": 10}]

        def f(x):
            s.L[0]["n"] += 1
            s.L[1]["n"] -= 1
            return x * (s.L[0]["n"] - s.L[1]["n"])
        g = llgrad.compile(f, backend="llvm") if compiled else f
        out = []
        for i in range(7):
            out.append((g(llgrad.ones(1)).item(), [dict(d) for d in s.L]))
            if i == 3:
                s.L[1] = s.L[0]
        return out
    assert run(True) == run(False)
