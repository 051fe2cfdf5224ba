"""Adversarial compile-contract cases (sweep 20, d1): numbers that change between calls and
reach a check eager makes of their value (add's alpha must fit the result's dtype). Each
runs the same calls eagerly and compiled and compares results, raised errors and state."""
import warnings

import numpy as np
import pytest

import llgrad

_HUGE = 1e300       # (a float64 past float32's range: add's alpha refuses it for float32)


def _outcome(f, *args):
    try:
        return ("value", f(*args).numpy().tolist())
    except RuntimeError as e:
        return ("raised", str(e))


@pytest.mark.parametrize("sub", [False, True])
def test_dynamic_number_alpha_past_float32_raises_as_eager(sub):
    # alpha is a graph input after its second value; eager refuses one past float32 ("value
    # cannot be converted to type float without overflow"); compiled gave inf
    def fn(x, k):
        return llgrad.sub(x, x * 2, alpha=k) if sub else llgrad.add(x, x, alpha=k)
    cf = llgrad.compile(fn)
    x = llgrad.ones(2)
    for k in [1.5, 2.5, 3.5, 4.5]:
        assert _outcome(cf, x, k) == _outcome(fn, x, k), k
    assert cf.n_traces == 2         # (k an input from its second value on: one entry)
    for k in [_HUGE, 0.5, -_HUGE, float("inf"), 2.0]:
        assert _outcome(cf, x, k) == _outcome(fn, x, k), k


def test_dynamic_number_alpha_in_place_leaves_the_tensor_as_eager():
    def fn(x, k):
        x.add_(llgrad.ones(2), alpha=k)
        return x * 1
    cf = llgrad.compile(fn)
    xa, xb = llgrad.zeros(2), llgrad.zeros(2)
    for k in [1.5, 2.5, _HUGE, 0.5]:
        assert _outcome(cf, xb, k) == _outcome(fn, xa, k), k
        np.testing.assert_array_equal(xb.numpy(), xa.numpy())


def _sgd_run(wrap, lrs, **kw):
    llgrad.manual_seed(0)
    m = llgrad.nn.Linear(2, 1)
    opt = llgrad.optim.SGD(m.parameters(), lr=0.1, **kw)

    def step(x):
        opt.zero_grad()
        loss = m(x).sum()
        loss.backward()
        opt.step()
        return loss
    f, seen = wrap(step), []
    for lr in lrs:
        opt.param_groups[0]["lr"] = lr
        try:
            f(llgrad.ones(3, 2))
            seen.append(("stepped",))
        except RuntimeError as e:
            seen.append(("raised", str(e)))
        seen.append((m.weight.detach().numpy().tolist(), m.bias.detach().numpy().tolist()))
    return seen


@pytest.mark.parametrize("kw", [{}, {"momentum": 0.9}, {"weight_decay": 0.1}])
def test_optimiser_lr_past_float32_between_calls_raises_as_eager(kw):
    # the lr is a graph input read at each call; eager's p.add_(grad, alpha=-lr) refuses
    # 1e300 next to float32 parameters (and leaves them), compiled wrote -inf into them
    lrs = [0.1, 0.2, 0.3, _HUGE, 0.1, _HUGE, 0.05]
    want = _sgd_run(lambda f: f, lrs, **kw)
    assert any(s[0] == "raised" for s in want)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert _sgd_run(llgrad.compile, lrs, **kw) == want
    said = [str(x.message) for x in w if "past float32" in str(x.message)]
    assert len(said) == 1 and "running eagerly" in said[0] and __file__.split("/")[-1] in said[0]


@pytest.mark.parametrize("body", [
    lambda x, k: x * k,                 # (PyTorch multiplies a float16 tensor in float32,
    lambda x, k: x / k,                 # the number rounded once, to float32, not to float16)
    lambda x, k: k / x,
    lambda x, k: x + k,
])
def test_dynamic_number_beside_a_float16_tensor_rounds_as_eager(body):
    x = llgrad.tensor([1.0, 2.0, 3.0, 0.1], dtype=llgrad.float16)
    f = llgrad.compile(lambda x, k: body(x * x, k))
    for k in [1.5, 2.5, 1.7320508075688772, 70000.0, 1e-4, 3.0001, 0.3]:
        want = body(x * x, k)
        got = f(x, k)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=str(k))


@pytest.mark.parametrize("body", [
    lambda x, k: x.clamp(-k, k),
    lambda x, k: x.clamp(min=k),
    lambda x, k: x.clamp_max(k),
    lambda x, k: x.lerp(x * 2, k),
])
def test_dynamic_number_past_float32_in_a_float32_ops_dtype_as_eager(body):
    # clamp reads its bounds in self's dtype and refuses one past float32's range; compiled
    # cast the float64 input to inf and clamped by it
    f = llgrad.compile(body)
    x = llgrad.tensor([1.0, -2.0, 3.0])
    for k in [1.5, 2.5, 0.5, _HUGE, -_HUGE, 2.0, float("inf"), 1e39, 0.25]:
        assert _outcome(f, x, k) == _outcome(body, x, k), k


def _half_run(wrap, name, schedule):
    w = llgrad.nn.Parameter(llgrad.tensor(np.random.default_rng(0).uniform(-1, 1, (4,)),
                                          dtype=llgrad.float16))
    opt = getattr(llgrad.optim, name)([w], lr=0.01, **({"momentum": 0.9} if name == "SGD"
                                                       else {}))

    def step(x):
        opt.zero_grad()
        loss = (w * x).sum() + (w * w).sum()
        loss.backward()
        opt.step()
        return loss
    f, x, out = wrap(step), llgrad.tensor([0.3, -0.7, 1.1, 0.01], dtype=llgrad.float16), []
    for lr in [0.1, 0.0123, 0.0771, 0.3, 0.05, 0.0123]:
        if schedule:
            opt.param_groups[0]["lr"] = lr
        out.append((f(x).item(), w.detach().numpy().tolist()))
    return out


@pytest.mark.parametrize("name", ["SGD", "Adam", "Adagrad", "RMSprop"])
@pytest.mark.parametrize("schedule", [False, True])
def test_optimiser_step_on_float16_parameters_as_eager(name, schedule):
    # PyTorch updates float16 parameters with its numbers (lr, momentum, Adagrad's lr
    # decayed by the step count) in float32; the graph cast its float64 inputs to float16
    # first and rounded otherwise (SGD with momentum from the third step, Adagrad at once)
    want = _half_run(lambda f: f, name, schedule)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert _half_run(llgrad.compile, name, schedule) == want
    assert any("float16 parameters" in str(x.message) for x in w)


def test_hand_written_update_reading_the_lr_past_float32_raises_as_eager():
    # the user's own update reads group["lr"] (a stand-in of the graph's input) as alpha
    def run(wrap):
        llgrad.manual_seed(0)
        m = llgrad.nn.Linear(2, 1)
        opt = llgrad.optim.SGD(m.parameters(), lr=0.1)

        def step(x):
            loss = m(x).sum()
            loss.backward()
            with llgrad.no_grad():
                for g in opt.param_groups:
                    for p in g["params"]:
                        p.add_(p.grad, alpha=-g["lr"])
                        p.grad = None
            return loss
        f, out = wrap(step), []
        for lr in [0.1, 0.2, 0.3, _HUGE, 0.1, 0.4, _HUGE, 0.2]:
            opt.param_groups[0]["lr"] = lr
            out.append(_outcome(f, llgrad.ones(3, 2)))
            out.append(m.weight.detach().numpy().tolist())
        return out
    assert run(llgrad.compile) == run(lambda f: f)


@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_integer_minimum_floor_divided_by_minus_one_warns_neither_way(dtype):
    # it wraps, as PyTorch's (which says nothing); eager gave NumPy's RuntimeWarning
    # "overflow encountered in floor_divide", a compiled call none
    def fn(a, b):
        return a // b, a % b
    info = np.iinfo(dtype)
    a = llgrad.tensor([int(info.min), 6], dtype=getattr(llgrad, dtype))
    b = llgrad.tensor([-1, 3], dtype=getattr(llgrad, dtype))
    cf = llgrad.compile(fn)
    for f in (fn, cf, cf, cf):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            q, r = f(a, b)
        assert q.tolist() == [int(info.min), 2] and r.tolist() == [0, 0]
        assert [str(x.message) for x in w] == []
