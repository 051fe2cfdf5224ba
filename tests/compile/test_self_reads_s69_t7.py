"""A compiled bound method's object is walked through the attributes the method reads
(self_reads.py): what it holds beside them (the batches it is called with, an epoch
counter, the tensors the last call left in an attribute it overwrites first) is neither
guarded nor an input, so it no longer traces per batch or per epoch; and whatever the
method may read stays guarded: a helper method, a back-reference, a store inside a
branch, an attribute that appears later, a tensor attribute replaced between calls.
Each compiled run is checked against the same method run eagerly on a twin object."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F
from llgrad.compile import self_reads


def _twins(make):
    llgrad.manual_seed(0)
    a = make()
    llgrad.manual_seed(0)
    return a, make()


def _run(make, calls, method="step"):
    """-> (compiled results, eager results, the compiled function); no warning allowed."""
    a, b = _twins(make)
    cf = llgrad.compile(getattr(a, method))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = [np.array(r.detach().numpy()) for r in calls(a, cf)]
    want = [np.array(r.detach().numpy()) for r in calls(b, getattr(b, method))]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
    return cf, a, b


class Trainer:
    def __init__(self):
        self.model = llgrad.nn.Linear(4, 2)
        self.opt = llgrad.optim.SGD(self.model.parameters(), lr=0.1)
        self.batches = [(llgrad.randn(8, 4), llgrad.randn(8, 2)) for _ in range(10)]
        self.epoch = 0

    def step(self, x, y):
        self.loss = ((self.model(x) - y) ** 2).mean()
        self.opt.zero_grad()
        self.loss.backward()
        self.opt.step()
        return self.loss.detach()


def _epochs(t, step):
    out = []
    for t.epoch in range(3):
        out += [step(x, y) for x, y in t.batches]
        t.loss = llgrad.zeros(()).requires_grad_(t.epoch % 2 == 0)    # (what step overwrites)
    return out


def test_trainer_holding_its_batches_traces_once():
    cf, a, b = _run(Trainer, _epochs)
    assert self_reads.read_names(a.step) == frozenset({"model", "opt"})
    assert cf.n_traces <= 2, cf.n_traces        # (.grad None at the first call)
    for p, q in zip(a.model.parameters(), b.model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-6)


class WithHelper(Trainer):
    def scale(self):
        return self.w                   # (read by a method: followed)

    def step(self, x, y):
        return (self.model(x) * self.scale()).sum()


def test_what_a_helper_method_reads_is_read():
    def calls(t, step):
        out = []
        for k in range(3):
            t.w = llgrad.full((2,), float(k + 1))       # (a new tensor each call)
            out.append(step(t.batches[k][0], None))
        return out

    cf, a, _ = _run(WithHelper, calls)
    assert self_reads.read_names(a.step) == frozenset({"model", "scale", "w"})


class WithProperty(Trainer):
    @property
    def scale(self):
        return self.w

    def step(self, x, y):
        return (self.model(x) * self.scale).sum()


def test_a_property_keeps_the_full_walk():
    def calls(t, step):
        out = []
        for k in range(3):
            t.w = llgrad.full((2,), float(k + 1))
            out.append(step(t.batches[k][0], None))
        return out

    _, a, _ = _run(WithProperty, calls)
    assert self_reads.read_names(a.step) is None


class HelperTrainer(Trainer):
    def compute_loss(self, x, y):
        return F.mse_loss(self.model(x), y)

    def step(self, x, y):
        loss = self.compute_loss(x, y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.detach()


def test_a_trainer_whose_step_calls_a_helper_traces_once():
    cf, a, _ = _run(HelperTrainer, _epochs)
    assert self_reads.read_names(a.step) == frozenset({"model", "opt", "compute_loss"})
    assert cf.n_traces <= 2, cf.n_traces


class BackReference(Trainer):
    def __init__(self):
        super().__init__()
        self.holder = {"trainer": self}
        self.w = llgrad.ones(2)

    def step(self, x, y):
        return (self.model(x) * self.holder["trainer"].w).sum()


def test_the_object_met_again_is_walked_whole():
    def calls(t, step):
        out = []
        for k in range(3):
            t.w = llgrad.full((2,), float(k + 2))
            out.append(step(t.batches[k][0], None))
        return out

    cf, a, _ = _run(BackReference, calls)
    assert self_reads.read_names(a.step) == frozenset({"model", "holder"})


class BranchStore(Trainer):
    def step(self, x, y):
        if y is not None:
            self.last = x.sum()
        return self.model(x).sum() + self.last


def test_a_store_inside_a_branch_is_a_read():
    def calls(t, step):
        t.last = llgrad.zeros(())
        out = [step(t.batches[0][0], t.batches[0][1])]
        for k in range(1, 4):
            t.last = llgrad.tensor(float(k))            # (read: the branch is not taken)
            out.append(step(t.batches[k][0], None))
        return out

    _, a, _ = _run(BranchStore, calls)
    assert "last" in self_reads.read_names(a.step)


class LateAttribute(Trainer):
    def step(self, x, y):
        return self.model(x).sum() + self.bonus


def test_an_attribute_read_that_appears_later():
    def calls(t, step):
        out = []
        with pytest.raises(AttributeError):
            step(t.batches[0][0], None)
        for k in range(3):
            t.bonus = llgrad.tensor(float(k))
            out.append(step(t.batches[k][0], None))
        del t.bonus
        with pytest.raises(AttributeError):
            step(t.batches[0][0], None)
        return out

    _run(LateAttribute, calls)


class StoredFirst(Trainer):
    def step(self, x, y):
        self.h = self.model(x)          # (stored before any read: the call's own value)
        return (self.h * self.h).sum()


def test_stored_first_is_the_calls_own_value():
    def calls(t, step):
        out = []
        for k in range(4):
            t.h = llgrad.full((8, 2), 100.0 * k)        # (what the call overwrites)
            out.append(step(t.batches[k][0], None))
            out.append(t.h)
        return out

    cf, a, _ = _run(StoredFirst, calls)
    assert self_reads.read_names(a.step) == frozenset({"model"})
    assert cf.n_traces == 1, cf.n_traces


class InTry(Trainer):
    def step(self, x, y):
        try:
            self.h = self.model(x) if y is None else y.missing
        except AttributeError:
            pass
        return self.h.sum()


def test_a_store_in_a_try_body_is_a_read():
    def calls(t, step):
        out = []
        for k in range(3):
            t.h = llgrad.full((8, 2), float(k))
            out.append(step(t.batches[k][0], t.batches[k][1]))     # (the handler's path)
        return out

    _, a, _ = _run(InTry, calls)
    assert "h" in self_reads.read_names(a.step)


def test_a_module_method_keeps_the_full_walk():
    m = llgrad.nn.Linear(3, 3)
    assert self_reads.read_names(m.forward) is None


class Counting(Trainer):
    def step(self, x, y):
        self.calls += 1                 # (read then stored: a read)
        return self.model(x).sum() * self.calls


def test_an_augmented_counter_is_read():
    def calls(t, step):
        t.calls = 0
        out = []
        for k in range(5):
            out.append(step(t.batches[k][0], None))
            assert t.calls == k + 1
        return out

    cf, a, _ = _run(Counting, calls)
    assert self_reads.read_names(a.step) == frozenset({"model", "calls"})
    assert cf.n_traces <= 2, cf.n_traces
