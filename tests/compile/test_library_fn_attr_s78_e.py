"""An object a compiled step reaches through a closure cell, holding a library's function as
an attribute (miniai's Learner: `self.loss_func = F.cross_entropy`), is still walked
through the attributes the step uses (captured_reads_narrow.py): the list of losses the
caller appends to between calls no longer traces every call. A function made at run time
over an object (a scheduler's wrapper of opt.step) still keeps the whole object guarded
(test_captured_narrow_s77_R.py). Results checked against eager runs of the same steps and
against torch."""
import functools

import numpy as np
import pytest

import llgrad
from llgrad.compile import captured_reads_narrow
from llgrad.compile.function_reads import captured_reads


class Learner:
    def __init__(self, lib, model, loss_func):
        self.model, self.loss_func = model, loss_func
        self.opt = lib.optim.SGD(model.parameters(), lr=0.1)
        self.losses = []


def _run(lib, compiled, n=5):
    lib.manual_seed(0)
    model = lib.nn.Linear(3, 2)
    with lib.no_grad():
        model.weight.copy_(lib.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) / 10))
        model.bias.fill_(0.5)
    learn = Learner(lib, model, lib.nn.functional.cross_entropy)
    xb = lib.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    yb = lib.tensor(np.array([0, 1, 1, 0]))

    def train_step(xb, yb):
        learn.preds = learn.model(xb)
        learn.loss = learn.loss_func(learn.preds, yb)
        learn.loss.backward()
        learn.opt.step()
        learn.opt.zero_grad()
        return learn.loss

    step = llgrad.compile(train_step) if compiled else train_step
    for _ in range(n):
        learn.losses.append(step(xb, yb))
        if compiled:
            step.wait()
    return [v.item() for v in learn.losses], model.weight.detach().numpy().copy(), step


def test_library_loss_func_attribute_traces_once():
    got, w_got, cf = _run(llgrad, True)
    want, w_want, _ = _run(llgrad, False)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(w_got, w_want, rtol=1e-6)
    assert cf.n_traces == 1 and len(cf.entries) == 1, cf.graph_breaks


def test_matches_torch():
    torch = pytest.importorskip("torch")
    got, w_got, _ = _run(llgrad, True)
    want, w_want, _ = _run(torch, False)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(w_got, w_want, rtol=1e-5)


def test_which_functions_count_as_the_library_s():
    lib_fn = llgrad.nn.functional.cross_entropy
    assert captured_reads_narrow._library_function(lib_fn)
    assert captured_reads_narrow._library_function(llgrad.relu)     # (op-table wrapper)
    obj = Learner(llgrad, llgrad.nn.Linear(3, 2), lib_fn)
    made = (lambda r: lambda: r)(obj)           # (a closure over the object)
    for v in (made, functools.partial(lib_fn), obj.opt.step, lambda x: x):
        assert not captured_reads_narrow._library_function(v)

    def step(x):
        return obj.loss_func(obj.model(x), x.argmax(1))
    uses = []
    captured_reads(step, uses)
    assert captured_reads_narrow.narrowing(uses)[id(obj)][1] == {"loss_func", "model"}
    obj.loss_func = made
    uses = []
    captured_reads(step, uses)
    assert id(obj) not in captured_reads_narrow.narrowing(uses)
