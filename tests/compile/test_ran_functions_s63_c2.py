"""Sweep 63 (c2): a compiled method's guards follow the methods its traces ran
(compile/ran_functions.py), not every function of its object's class.

Fixes: a list or dict grown between calls and read only by methods the step never runs
no longer makes each call trace again (then run eagerly at the recompile limit).
Negatives (soundness): what a method that did run reads is still guarded; a method that
first ran on no call and then runs is followed from then on; a method called through a
bound method kept on the object is followed through it. The oracle is the same program
run eagerly."""
import warnings

import llgrad

records = []            # grown between calls; read by methods the steps may not run
table = {}


class Net(llgrad.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = llgrad.nn.Linear(3, 1)
        records.append("made")

    def forward(self, x):
        return self.lin(x).sum()

    def report(self):
        return len(records) + len(table)


class Scaled:
    def __init__(self):
        self.w = llgrad.ones(3)
        self.cb = self.counted          # (a bound method kept: called not via the class)

    def counted(self):
        return float(len(records))

    def bonus(self):
        return float(len(records))

    aliased = bonus      # (one function under two names: a call through either is seen)

    def step(self, x, extra):
        y = (self.w * x).sum()
        if extra == "bonus":
            y = y * self.bonus()
        elif extra == "cb":
            y = y * self.cb()
        elif extra == "alias":
            y = y * self.aliased()
        return y


def _calls(f, n, arg, grow):
    outs = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(n):
            grow(i)
            outs.append(f(llgrad.full((3,), float(i + 1)), *arg(i)).item())
    return outs, [str(w.message) for w in caught if "llgrad" in str(w.message)]


def test_a_module_step_with_an_unrun_method_reading_grown_containers_traces_once():
    net = Net()
    f = llgrad.compile(lambda x: net(x) * 2.0, backend="interpret")

    def grow(i):
        records.append(i)
        table[i] = i
    outs, warned = _calls(f, 10, lambda i: (), grow)
    want = [2.0 * net(llgrad.full((3,), float(i + 1))).item() for i in range(10)]
    assert outs == want
    assert not warned
    assert f.n_traces == 1


def _both(extra_of, n=8):
    """The compiled and eager runs of Scaled.step over n calls, records grown before each."""
    got = []
    for compiled in (True, False):
        s = Scaled()
        step = llgrad.compile(s.step, backend="interpret") if compiled else s.step
        del records[:]         # (both runs from the same state, whatever ran before)
        outs, _ = _calls(step, n, lambda i: (extra_of(i),), lambda i: records.append(i))
        got.append(outs)
    return got


def test_what_a_method_that_ran_reads_is_still_guarded():
    compiled, eager = _both(lambda i: "bonus")
    assert compiled == eager


def test_a_method_first_run_by_a_later_call_is_followed_from_then_on():
    compiled, eager = _both(lambda i: "bonus" if i >= 3 else "plain")
    assert compiled == eager
    assert len(set(compiled[3:])) > 1       # (the list grew: bonus() gave new numbers)


def test_a_method_called_through_a_kept_bound_method_is_followed():
    compiled, eager = _both(lambda i: "cb" if i % 2 else "plain")
    assert compiled == eager


def test_a_method_run_under_another_name_is_followed():
    compiled, eager = _both(lambda i: "alias" if i >= 2 else "plain")
    assert compiled == eager


TABLE = llgrad.arange(3.0)      # read by an __init__ the step never runs


class Copies(llgrad.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = llgrad.nn.Parameter(TABLE.clone())

    def forward(self, x):
        return (self.w * x).sum()


def test_an_unrun_method_reading_a_tensor_costs_no_second_trace():
    """The entry's inputs include the tensor the unrun __init__ reads (the walk that skips it
    gives other inputs): its methods stay followed, and the next call hits the first entry
    (marking them made every such module trace twice)."""
    m = Copies()
    f = llgrad.compile(lambda x: m(x) * 2.0, backend="interpret")
    outs, warned = _calls(f, 4, lambda i: (), lambda i: None)
    assert outs == [2.0 * m(llgrad.full((3,), float(i + 1))).item() for i in range(4)]
    assert not warned
    assert f.n_traces == 1
