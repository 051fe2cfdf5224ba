"""x[mask] and x[mask] = v with bool masks under the tracer (llgrad/tracer/masks.py).

The result's length is the mask's number of Trues. A constant mask (made inside the
function) fixes it in the IR type; a data mask (an input, or computed from one) fixes it
too and becomes a value guard of the trace, so a call whose mask selects another number of
elements retraces. Every backend must give eager's values and gradients, call after call."""
import numpy as np
import pytest

import llgrad
from llgrad.autograd import gradcheck
from llgrad.codegen.lower import lower, supports
from llgrad.ir import Builder, TensorType
from llgrad.ir.interpret import evaluate
from llgrad.tracer.trace import TraceError

BACKENDS = ("interpret", "python", "llvm")


def _run(fn, arrays, grad=True):
    """fn's outputs and the gradients of its inputs (the outputs' plain sum), as arrays."""
    xs = [llgrad.tensor(a, requires_grad=grad) for a in arrays]
    outs = fn(*xs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    res = [o.detach().numpy().copy() for o in outs]
    if grad:
        sum((o * (k + 1.0)).sum() for k, o in enumerate(outs)).backward()
        res += [np.zeros(a.shape) if x.grad is None else x.grad.numpy().copy()
                for x, a in zip(xs, arrays)]
    return res


def _same(got, want, what):
    assert len(got) == len(want), what
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape, f"{what}: result {k}: shape {a.shape} != eager {b.shape}"
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=f"{what}: result {k}")


def _entries(cf):
    return sum(len(v) for v in cf.cache.values())


# ---- the traced type ------------------------------------------------------------------------

def test_constant_mask_types_the_result_and_needs_no_guard():
    x = llgrad.tensor([1.0, 2.0, 3.0])
    g = llgrad.trace(lambda x0: x0[llgrad.tensor([True, False, True])] * 2, x)
    assert g.outputs[0].type.shape == (2,)
    assert g.guards == []
    m = llgrad.tensor([[True, False], [True, True]])
    g = llgrad.trace(lambda x0: x0[m.logical_not().logical_not()], llgrad.ones(2, 2, 3))
    assert g.outputs[0].type.shape == (3, 3)      # computed from constants only: no guard
    assert g.guards == []


def test_data_mask_types_the_result_and_guards_its_count():
    x = llgrad.tensor([1.0, -2.0, 3.0, 4.0])
    g = llgrad.trace(lambda x0: x0[x0 > 0] * 2, x)
    assert g.outputs[0].type.shape == (3,)
    (guard,) = g.guards
    assert guard.expected == 3
    assert "test_bool_mask.py" in guard.loc        # the user's line
    m = llgrad.tensor([[True, False, True], [False, False, True]])
    g = llgrad.trace(lambda x0, m0: x0[:, m0], llgrad.ones(4, 2, 3), m)
    assert g.outputs[0].type.shape == (4, 3)
    assert [gd.expected for gd in g.guards] == [3]


# ---- compiled == interpreted == eager -------------------------------------------------------

def _masks(x):
    return x[x > 0] * 2.0


def _rows(x, m):
    return x[m].sum(0), x[:, 1:][m.logical_not()]


def _put(x, y):
    m = x > 0
    z = y.clone()
    z[:, m] = y[:, m] * 3.0        # values with the mask's length
    z[y < -0.5] = 0.0              # a scalar: valid for every mask
    return z, x[llgrad.tensor([True, False, True, True])]


@pytest.mark.parametrize("backend", BACKENDS)
def test_constant_mask_matches_eager(backend):
    def f(x):
        return x[llgrad.tensor([True, False, True])] * x[llgrad.tensor([False, True, True])]
    cf = llgrad.compile(f, backend=backend)
    for seed in range(3):
        a = np.random.default_rng(seed).standard_normal(3)
        _same(_run(cf, [a]), _run(f, [a]), f"{backend} call {seed}")
    assert _entries(cf) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_data_masks_in_a_row_retrace_and_match_eager(backend):
    cf = llgrad.compile(_masks, backend=backend)
    calls = [[1.0, -2.0, 3.0, 4.0],      # 3 Trues
             [1.0, 2.0, -3.0, -4.0],     # 2: the guard misses, a retrace
             [-1.0, -2.0, -3.0, -4.0],   # 0
             [5.0, -6.0, 7.0, 8.0],      # 3 again, other values: the first entry
             [-1.0, 2.0, 3.0, 4.0]]      # 3, other positions: the first entry too
    for k, a in enumerate(calls):
        _same(_run(cf, [np.array(a)]), _run(_masks, [np.array(a)]), f"{backend} call {k}")
        cf.wait()       # (built: the next call checks the value guard)
    assert _entries(cf) == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_mask_input_over_several_dims_and_after_a_slice(backend):
    cf = llgrad.compile(_rows, backend=backend)
    rng = np.random.default_rng(3)
    for k in range(4):
        x = rng.standard_normal((4, 3))
        m = llgrad.tensor(rng.random(4) < 0.5)
        got = _run(lambda x0: cf(x0, m), [x])
        want = _run(lambda x0: _rows(x0, m), [x])
        _same(got, want, f"{backend} call {k}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_put_with_a_mask_matches_eager(backend):
    cf = llgrad.compile(_put, backend=backend)
    rng = np.random.default_rng(4)
    for k in range(5):
        a, b = rng.standard_normal(4), rng.standard_normal((2, 4))
        _same(_run(cf, [a, b]), _run(_put, [a, b]), f"{backend} call {k}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_scalar_put_through_a_data_mask_does_not_specialise(backend):
    def relu_(x):
        y = x * 1.0
        y[y < 0] = 0.0
        return y
    cf = llgrad.compile(relu_, backend=backend)
    for a in ([1.0, -2.0, 3.0], [-1.0, -2.0, -3.0], [1.0, 2.0, 3.0]):
        _same(_run(cf, [np.array(a)]), _run(relu_, [np.array(a)]), f"{backend} {a}")
    assert _entries(cf) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_grad_data_masks(backend):
    cf = llgrad.compile(_masks, backend=backend)
    with llgrad.no_grad():
        for a in ([1.0, -2.0], [1.0, 2.0], [-1.0, -2.0]):
            _same(_run(cf, [np.array(a)], grad=False), _run(_masks, [np.array(a)], grad=False),
                  f"{backend} {a}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradcheck_through_masks(backend):
    cf = llgrad.compile(lambda x, y: _put(x, y)[0] * _put(x, y)[0] + x[x > 0].sum(),
                        backend=backend)
    rng = np.random.default_rng(6)
    a = rng.uniform(0.2, 1.0, 4) * np.array([1, -1, 1, -1])   # far from the mask's edge
    b = rng.uniform(0.6, 1.0, (2, 4)) * np.array([[1], [-1]])
    assert gradcheck(cf, (llgrad.tensor(a, requires_grad=True),
                          llgrad.tensor(b, requires_grad=True)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_inside_the_compiled_function(backend):
    """A train step: eager autograd's VJP of x[mask] traced inside the function."""
    def step(x, w):
        y = w * x
        loss = (y[y > 0] ** 2).sum()
        loss.backward()
        return loss
    cf = llgrad.compile(step, backend=backend)
    w = llgrad.tensor([0.5, -1.0, 2.0, 0.3], requires_grad=True)
    for seed in range(4):
        x = np.random.default_rng(seed).standard_normal(4)
        got = []
        for fn in (step, cf):
            w.grad = None
            got.append((fn(llgrad.tensor(x), w).detach().numpy(), w.grad.numpy().copy()))
        _same(got[1], got[0], f"{backend} call {seed}")


# ---- errors and native code ------------------------------------------------------------------

def test_mask_made_inside_tensor_dependent_control_flow_is_an_error():
    def f(x):
        if x.sum() > 0:
            y = x[x > 1].sum()
        else:
            y = x.sum()
        return y
    with pytest.raises(TraceError, match=r"test_bool_mask.py:\d+: indexing with a bool mask "
                                         r"computed inside the tensor-dependent if"):
        llgrad.compile(f, backend="interpret", fullgraph=True)(llgrad.tensor([1.0, 2.0, 3.0]))
    # without fullgraph: traced again with the if as a value guard, and a warning
    cf = llgrad.compile(f, backend="interpret")
    with pytest.warns(UserWarning, match=r"control flow left as Python .* indexing with a "
                                         r"bool mask computed inside"):
        assert cf(llgrad.tensor([1.0, 2.0, 3.0])).item() == 5.0
    assert cf(llgrad.tensor([-3.0, 1.0, 1.0])).item() == -1.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_mask_from_outside_control_flow_is_guarded(backend):
    def f(x):
        m = x > 1
        if x.sum() > 0:
            y = x[m].sum() * 2
        else:
            y = x.sum()
        return y
    cf = llgrad.compile(f, backend=backend)
    for a in ([1.0, 2.0, 3.0], [2.0, 2.0, 3.0], [-5.0, 2.0, 3.0], [0.5, 0.5, 3.0]):
        _same(_run(cf, [np.array(a)]), _run(f, [np.array(a)]), f"{backend} {a}")


def _counted_graph(count):
    b = Builder("masked")
    x = b.input(TensorType("float64", (3, 4)))
    m = b.input(TensorType("bool", (4,)))
    v = b.input(TensorType("float64", (3, count)))
    got = b.add("index", [x, m], {"spec": (("slice", None, None, None), "T"),
                                  "counts": (count,)})
    put = b.add("index_put", [x, v, m], {"spec": (("slice", None, None, None), "T"),
                                         "accumulate": True, "counts": (count,)})
    return b.ret(got, put)


@pytest.mark.parametrize("mask", [[True, False, True, False],     # the traced count
                                  [True, True, True, True],       # more Trues
                                  [False, False, False, True],    # fewer
                                  [False, False, False, False]])
def test_native_code_stays_in_bounds_when_the_count_differs(mask):
    """The forward runs before its guards are checked: with a mask of another count the
    kernel must still write exactly the declared result and read only the values it has
    (and the interpreter must still give the declared shapes); the guard then discards it."""
    g = _counted_graph(2)
    assert supports(g) == (True, None)
    rng = np.random.default_rng(8)
    x, v, m = rng.standard_normal((3, 4)), rng.standard_normal((3, 2)), np.array(mask)
    got = lower(g)([x, m, v])
    assert [a.shape for a in got] == [(3, 2), (3, 4)]
    cols = np.flatnonzero(m)[:2]
    np.testing.assert_array_equal(got[0][:, :len(cols)], x[:, cols])
    np.testing.assert_array_equal(got[0][:, len(cols):], 0.0)
    want = x.copy()
    want[:, cols] += v[:, :len(cols)]
    np.testing.assert_allclose(got[1], want, rtol=1e-15)
    ref, _ = evaluate(g, [x, m, v])               # the interpreter: the declared shapes too
    assert [a.shape for a in ref] == [(3, 2), (3, 4)]
    if m.sum() == 2:                              # and the same values where they count
        for a, b in zip(got, ref):
            np.testing.assert_allclose(a, b, rtol=1e-15)
