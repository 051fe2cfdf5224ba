"""Session 68 (f6): a compiled function returning a dataclass (HuggingFace-style `@dataclass
class ModelOutput: loss; logits`) gives back a new instance of that class each call, its
attributes eager's (tensors, None, numbers; nested in tuples and lists; a frozen one stays
frozen; what __post_init__ derived is kept, not computed again), with one trace
(tracer/pytree.py: made_dataclasses). A dataclass the call was given, one with __slots__,
stays eager's (the eager fallback, with its warning); a __post_init__ writing global state
makes no compiled call that skips the write."""
import dataclasses
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

COUNT = [0]


@dataclasses.dataclass
class Output:
    loss: object = None
    logits: object = None
    hidden: object = None
    step: int = 0


@dataclasses.dataclass(frozen=True)
class Frozen:
    loss: object
    parts: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Derived:
    logits: object

    def __post_init__(self):
        self.probs = self.logits.softmax(-1)
        self.n = self.logits.shape[0]


@dataclasses.dataclass
class Counted:
    loss: object

    def __post_init__(self):
        COUNT[0] += 1


@dataclasses.dataclass(slots=True)
class Slotted:
    loss: object


def _plain(v):
    if hasattr(v, "detach"):
        return v.detach().numpy().copy()
    if dataclasses.is_dataclass(v):
        return (type(v).__name__, {k: _plain(x) for k, x in vars(v).items()}
                if hasattr(v, "__dict__") else _plain(v.loss))
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def _equal(a, b, rtol=1e-6):
    if isinstance(a, np.ndarray):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-6)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _equal(a[k], b[k], rtol)
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _equal(x, y, rtol)
    else:
        assert a == b and type(a) is type(b), (a, b)


def _runs(make, n=4):
    """make(lib) -> (fn, args(i)): torch's, llgrad eager's and llgrad compiled's results,
    the compiled function and its llgrad warnings."""
    outs = []
    for lib, compiled in ((torch, False), (llgrad, False), (llgrad, True)):
        fn, args = make(lib)
        cf = llgrad.compile(fn) if compiled else fn
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = [cf(*args(i)) for i in range(n)]
        outs.append(([_plain(g) for g in got], got, cf,
                     [str(w.message) for w in caught if "llgrad" in str(w.message)]))
    (t, _, _, _), (e, _, _, e_warn), (c, got, cf, c_warn) = outs
    _equal(t, e, rtol=1e-5)
    _equal(e, c)
    assert not e_warn
    return got, cf, c_warn


def test_dataclass_output_of_a_training_step():
    def make(lib):
        lib.manual_seed(0)
        w = lib.tensor([[0.5, -1.0, 2.0], [0.1, 0.2, -0.3]], requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.1)

        def step(x, y):
            logits = x @ w.t()
            loss = lib.nn.functional.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return Output(loss=loss.detach(), logits=logits.detach(), step=3)
        return step, lambda i: (lib.arange(12.0).reshape(4, 3) / (i + 1),
                                lib.tensor([0, 1, 1, 0]))
    got, cf, warned = _runs(make)
    assert not warned and cf.n_traces == 1
    assert all(type(o) is Output and o.hidden is None for o in got)
    assert len({id(o) for o in got}) == len(got)        # (a new instance per call)


def test_frozen_nested_and_derived_fields():
    def make(lib):
        def f(x):
            d = Derived(x * 2)
            return Frozen(loss=(x ** 2).sum(), parts=[d, Output(logits=x)]), d.n
        return f, lambda i: (lib.arange(6.0).reshape(2, 3) - i,)
    got, cf, warned = _runs(make)
    assert not warned and cf.n_traces == 1
    out, n = got[-1]
    assert type(out) is Frozen and type(out.parts[0]) is Derived and n == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.loss = None
    assert out.parts[0].n == 2 and out.parts[0].probs.shape == (2, 3)


def test_gradient_through_returned_dataclass():
    w = llgrad.tensor([1.0, -2.0, 0.5], requires_grad=True)
    tw = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)

    def f(lib, w, x):
        return Output(loss=(w * x).tanh().sum(), logits=w * 3)

    cf = llgrad.compile(lambda w, x: f(llgrad, w, x))
    for i in range(3):
        x = np.arange(3.0, dtype=np.float32) - i
        out, ref = cf(w, llgrad.tensor(x)), f(torch, tw, torch.tensor(x))
        (out.loss + out.logits.sum()).backward()
        (ref.loss + ref.logits.sum()).backward()
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5)
    assert cf.n_traces == 1


def test_post_init_writing_global_state_is_eagers():
    """Counted.__post_init__ counts instances in a global: every call counts, as eager's."""
    def make(lib):
        return (lambda x: Counted(loss=x.sum())), lambda i: (lib.ones(2) * i,)
    COUNT[0] = 0
    got, cf, _ = _runs(make)
    assert COUNT[0] == 12 and all(type(o) is Counted for o in got)


@pytest.mark.parametrize("kind", ["given", "slots"])
def test_given_or_slotted_dataclass_runs_eagerly(kind):
    given = Output(step=1)

    def make(lib):
        def f(x, out):
            if kind == "slots":
                return Slotted(loss=x.sum())
            out.loss = x.sum()
            return out
        return f, lambda i: (lib.ones(2) * i, given)
    got, cf, warned = _runs(make)
    assert len(warned) == 1 and "returned a non-tensor" in warned[0]
    if kind == "given":
        assert all(o is given for o in got)


def test_numbers_read_from_tensors_in_a_returned_dataclass():
    """Fields holding `.item()` numbers and a counter the step increments: outputs each call
    gives as Python numbers (symbolic_args.returned_stand_ins), not a trace per value."""
    def make(lib):
        state = {"n": 0}

        def f(x):
            state["n"] += 1
            return Output(loss=(x ** 2).mean().item(), logits=x.sum(), step=state["n"])
        return f, lambda i: (lib.arange(3.0) * (i + 1),)
    got, cf, warned = _runs(make, n=5)
    assert not warned and cf.n_traces <= 2 and type(got[-1].loss) is float
    assert [o.step for o in got] == [1, 2, 3, 4, 5]
