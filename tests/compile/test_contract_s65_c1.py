"""Compile-contract adversary s65 (c1): a tensor `if` inside a loop over a module's
parameters (a grad-scaler's overflow check), and Python numbers that the branches of a
tensor `if` assign, compared with eager llgrad and with torch over calls that take each
branch: the compiled call gives eager's types (a bool, an int, a float, not 0-d tensors),
dtypes (`int_tensor * k`) and float64 values to the bit."""
import collections
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

def _observed(v):
    """What a caller can see of a result: type, and a tensor's dtype and exact values."""
    if isinstance(v, (llgrad.Tensor, torch.Tensor)):
        return ("tensor", str(v.dtype).split(".")[-1], v.detach().numpy().tolist())
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [_observed(x) for x in v])
    if isinstance(v, dict):
        return ("dict", {k: _observed(x) for k, x in v.items()})
    return (type(v).__name__, v)


# ---- a tensor if inside an iteration over an OrderedDict -------------------------------------
def _scaler_steps(T, compiled, backend="llvm"):
    """A training step that unscales its gradients and skips the optimiser step when one
    is not finite: the `if` on a tensor runs while `m.parameters()` iterates the module's
    OrderedDict (tracing its untaken branch used to refill that dict: the iteration raised
    `OrderedDict mutated during iteration` on every compiled call)."""
    T.manual_seed(0)
    m = T.nn.Linear(2, 1)
    opt = T.optim.SGD(m.parameters(), lr=0.1)
    scale = T.tensor(1024.0)

    def step(x):
        opt.zero_grad()
        loss = m(x).pow(2).sum()
        (loss * scale).backward()
        found = False
        for p in m.parameters():
            p.grad.div_(scale)
            if not T.isfinite(p.grad).all():
                found = True
        if not found:
            opt.step()
        return loss, found
    f = llgrad.compile(step, backend=backend) if compiled else step
    got = []
    for v in (1.0, 1e30, 2.0, 1.0, 1e30, 0.5):
        loss, found = f(T.ones(1, 2) * v)
        got.append((_observed(found), _observed(m.weight), _observed(m.bias)))
        got.append(loss.item())
    return got


# (native code: ~10 s of builds for a step traced three times, so slow; the bug was the trace's)
@pytest.mark.parametrize("backend", [pytest.param("llvm", marks=pytest.mark.slow), "interpret"])
def test_a_tensor_if_inside_a_loop_over_parameters_runs_as_eager(backend):
    want = _scaler_steps(llgrad, False)
    oracle = _scaler_steps(torch, False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (the overflow call: a value guard, retraced)
        got = _scaler_steps(llgrad, True, backend)
    for a, b, c in zip(oracle, want, got):
        if isinstance(a, float):
            np.testing.assert_allclose([b, c], a, rtol=1e-6)
        else:
            assert a[0] == b[0] == c[0]
            for u, v, w in zip(a[1:], b[1:], c[1:]):
                np.testing.assert_allclose(v[2], u[2], rtol=1e-6)
                assert w == v


DICTS = {kind: kind(a=llgrad.tensor([1.0, 2.0]), b=llgrad.tensor([-3.0, 4.0]))
         for kind in (dict, collections.OrderedDict)}


def count_positive_in_dict(x):
    n = 0
    for _, v in DICTS[collections.OrderedDict].items():
        if (v * x).sum() > 0:
            n = n + 1
    return x * n


def count_positive_in_plain_dict(x):
    n = 0
    for _, v in DICTS[dict].items():
        if (v * x).sum() > 0:
            n = n + 1
    return x * n


@pytest.mark.parametrize("fn", [count_positive_in_dict, count_positive_in_plain_dict],
                         ids=lambda f: f.__name__)
def test_a_tensor_if_inside_an_iteration_over_a_dict(fn):
    f = llgrad.compile(fn)
    for v in (1.0, -1.0, 2.0, -2.0, 1.0):
        x = llgrad.ones(2) * v
        assert _observed(f(x)) == _observed(fn(x))


# ---- Python numbers assigned in the branches of a tensor if ----------------------------------
def returns_flags(x):
    found, n, s = False, 0, 0.25
    if x.sum() > 0:
        found, n, s = True, 3, 0.1
    return x * 2, found, n, s


def scales_by_numbers(x):
    k, s = 2, 0.1
    if x.sum() > 0:
        k, s = 3, 0.3
    return x.long() * k, x.double() * s, x * s, [k, s], {"k": k}


def conditional_expressions(x):
    k = 2 if x.sum() > 0 else 3
    s = 0.1 if x.sum() > 0 else 0.7
    return x.long() * k, x.double() * s, k


class _State:
    pass


STATE = _State()


def stores_the_number(x):
    n = 0
    if x.sum() > 0:
        n = 1
    STATE.n = n
    return x + n


def mixes_int_and_float(x):
    k = 1
    if x.sum() > 0:
        k = 0.5
    return x.long() * k, k


PROGRAMS = [returns_flags, scales_by_numbers, conditional_expressions, stores_the_number,
            mixes_int_and_float]


# (native code for two programs: the rest on the interpreter, the same graphs)
@pytest.mark.parametrize("fn, backend", [(f, "interpret") for f in PROGRAMS] + [
    (scales_by_numbers, "llvm"), (returns_flags, "llvm")],
    ids=lambda v: getattr(v, "__name__", v))
def test_numbers_set_in_tensor_if_branches_keep_eagers_types(fn, backend):
    f = llgrad.compile(fn, backend=backend)
    for v in (1.0, -1.0, 2.0, -2.0, 1.0):
        STATE.n = None
        oracle = _observed(fn(torch.ones(2, dtype=torch.float64) * v)), STATE.n
        STATE.n = None
        want = _observed(fn(llgrad.ones(2, dtype=llgrad.float64) * v)), STATE.n
        STATE.n = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # (mixes_int_and_float: left as Python)
            got = _observed(f(llgrad.ones(2, dtype=llgrad.float64) * v)), STATE.n
        assert want == oracle                   # (types, dtypes and values to the bit)
        assert got == want, f"compiled {got} != eager {want} at {v}"
        assert type(got[1]) is type(want[1])


@pytest.mark.parametrize("fn", [returns_flags, scales_by_numbers, conditional_expressions],
                         ids=lambda f: f.__name__)
def test_numbers_from_tensor_if_branches_still_trace_once(fn):
    # (a returned number is an output; one used with tensors a stand-in: no value guard)
    f = llgrad.compile(fn, backend="interpret")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for v in (1.0, -1.0, 2.0, -2.0):
            f(llgrad.ones(2) * v)
    assert f.n_traces == 1


def test_an_int_or_a_float_by_branch_is_left_as_python_with_a_warning():
    f = llgrad.compile(mixes_int_and_float, backend="interpret")
    with pytest.warns(UserWarning, match=r"left as Python.*'k' is float .* and int "):
        f(llgrad.ones(2))


# ---- Python numbers carried through a tensor while -------------------------------------------
def fibonacci_steps(x):
    a, b = 0, 1
    while x.sum() < 50:
        x = x * 2
        a, b = b, a + b
    return x, a, b


def float_clock(x):
    t, dt = 0.0, 0.1
    while x.sum() < 5000:
        x = x * 1.1
        t = t + dt
        dt = dt * 1.5
    return x * t, t


def counts_into_the_state(x):
    n, k = 0, 1
    while x.sum() < 50:
        x = x * 2
        n = n + k
        k = k + 1
    STATE.n = n
    return x.long() * n, [n]


@pytest.mark.parametrize("fn, backend", [
    (fibonacci_steps, "interpret"), (float_clock, "interpret"),
    (counts_into_the_state, "interpret"), (float_clock, "llvm")],
    ids=lambda v: getattr(v, "__name__", v))
def test_numbers_carried_through_a_tensor_while_stay_eagers_numbers(fn, backend):
    # (they were 0-d tensors after the loop, and floats were summed in float32: 8.2999954
    # where eager's doubles give 8.299999999999986)
    f = llgrad.compile(fn, backend=backend)
    for v in (1.0, 3.0, 60.0, 2.0):
        STATE.n = None
        oracle = _observed(fn(torch.ones(2, dtype=torch.float64) * v)), STATE.n
        STATE.n = None
        want = _observed(fn(llgrad.ones(2, dtype=llgrad.float64) * v)), STATE.n
        STATE.n = None
        got = _observed(f(llgrad.ones(2, dtype=llgrad.float64) * v)), STATE.n
        assert want == oracle
        assert got == want, f"compiled {got} != eager {want} at {v}"
