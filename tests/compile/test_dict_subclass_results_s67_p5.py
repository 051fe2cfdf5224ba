"""Session 67 (p5): a compiled function returning a dict of the user's subclass (an
attribute dict, `class ModelOutput(dict)` read as out.loss, as HuggingFace's outputs are)
returns that type from every call, as eager does (tracer/pytree.py: remade_dict).

Fixed: compiled calls (and the traced call) returned a plain dict, silently: `out.loss`
raised AttributeError, isinstance(out, ModelOutput) was False; a counter returned inside
one was guarded by value (a trace per call). A subclass whose objects hold attributes
besides their items cannot be remade so: the function runs eagerly, with a warning, rather
than return a plain dict. The oracle is the same function run eagerly."""
import warnings

import numpy as np
import pytest

import llgrad


class ModelOutput(dict):
    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Noted(dict):
    def __init__(self, **items):
        super().__init__(**items)
        self.note = "kept"


def _same(a, b):
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, llgrad.Tensor):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    else:
        assert a == b


def _calls(fn, compiled, n=4):
    w = llgrad.tensor([1.0, -2.0, 0.5], requires_grad=True)
    opt = llgrad.optim.SGD([w], lr=0.1)
    state = {"n": 0}

    def step(x):
        loss = (w * x).sum() ** 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        state["n"] += 1
        return fn(loss, w, state["n"])

    f = llgrad.compile(step, backend="interpret") if compiled else step
    return [f(llgrad.full((3,), 0.5 + i)) for i in range(n)], f


@pytest.mark.parametrize("make", [
    lambda loss, w, n: ModelOutput(loss=loss.detach(), w=w.detach() * 1),
    lambda loss, w, n: ModelOutput(loss=loss.detach(), stats=ModelOutput(step=n, w=w.detach() + n)),
    lambda loss, w, n: (ModelOutput(loss=loss.detach()), [ModelOutput(n=n)]),
], ids=["flat", "nested_with_counter", "in_containers"])
def test_a_dict_subclass_result_keeps_its_type(make):
    want, _ = _calls(make, False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, f = _calls(make, True)
    for a, b in zip(got, want):
        if isinstance(a, tuple):
            _same(a[0], b[0])
            _same(a[1][0], b[1][0])
        else:
            _same(a, b)
    assert f.n_traces <= 2, f.n_traces


def test_a_dict_subclass_argument_is_read_as_its_items():
    w = llgrad.ones(3, requires_grad=True)

    def f(batch):
        return ModelOutput(loss=((w * batch.x).sum() - batch["y"]) ** 2)

    cf = llgrad.compile(f, backend="interpret")
    for i in range(4):
        b = ModelOutput(x=llgrad.full((3,), float(i)), y=llgrad.tensor(1.0))
        _same(cf(b), f(b))
    assert cf.n_traces == 1


def test_a_dict_subclass_holding_attributes_runs_eagerly_with_a_warning():
    w = llgrad.ones(3, requires_grad=True)

    def f(x):
        return Noted(loss=(w * x).sum())

    cf = llgrad.compile(f, backend="interpret")
    with pytest.warns(UserWarning, match="running eagerly: the function returned a Noted"):
        out = cf(llgrad.ones(3))
    assert type(out) is Noted and out.note == "kept" and out["loss"].item() == 3.0
