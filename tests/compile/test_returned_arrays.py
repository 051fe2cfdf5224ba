"""`return t.numpy()` / `return t.tolist()` in a compiled function (tracer/returned.py's
ReturnedArray): t is a graph output and each call returns the conversion of its own result,
as eager does: no eager fallback, no value guard (a trace for every new value), the array
sharing the returned tensor's memory where both are returned, eager's errors for a tensor
that requires grad; in tuples and dicts, after .detach().cpu(), and a predict function of a
model over several batches."""
import warnings

import numpy as np
import pytest

import llgrad

F = llgrad.nn.functional


def _calls(fn, inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # (no eager fallback, no recompile warning)
        return [fn(x) for x in inputs]


def _equal(a, b):
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-6)     # (native code: within an ulp)
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _equal(x, y)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _equal(a[k], b[k])
    elif isinstance(a, llgrad.Tensor):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    elif isinstance(a, float):
        assert type(b) is float and a == pytest.approx(b, rel=1e-6)
    else:
        assert a == b and type(a) is type(b)


def predict(model, x):
    return model(x).argmax(dim=1).cpu().numpy()


def probs_and_labels(model, x):
    p = F.softmax(model(x), dim=1)
    return {"probs": p.detach().numpy(), "labels": p.argmax(1).tolist()}


def scores_list(model, x):
    return (model(x) * 2).detach().tolist()


@pytest.mark.parametrize("fn", [predict, probs_and_labels, scores_list])
def test_compiled_equals_eager_without_guards(fn):
    llgrad.manual_seed(0)
    model = llgrad.nn.Sequential(llgrad.nn.Linear(6, 8), llgrad.nn.ReLU(),
                                 llgrad.nn.Linear(8, 4))
    inputs = [llgrad.randn(5, 6) for _ in range(6)]
    compiled = llgrad.compile(fn)
    with llgrad.no_grad() if fn is predict else warnings.catch_warnings():
        got = _calls(lambda x: compiled(model, x), inputs)
        want = [fn(model, x) for x in inputs]
    _equal(got, want)
    assert compiled.n_traces == 1


def returned_with_array(x):
    y = x * 2
    return y, y.numpy()


def test_array_shares_the_returned_tensors_memory():
    f = llgrad.compile(returned_with_array)
    for _ in range(3):
        y, a = f(llgrad.randn(3, 4))
        a[0, 0] = 42.0
        assert float(y[0, 0]) == 42.0


def needs_grad(w):
    return (w * 2).numpy()


def test_numpy_of_a_tensor_requiring_grad_raises_as_eager():
    w = llgrad.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
        needs_grad(w)
    with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
        llgrad.compile(needs_grad)(w)


def doubled_array(x):
    return x.numpy() * 2


def negated_list_len(x):
    return -len(x.tolist()), x.sum().item()


def test_arithmetic_on_a_returned_array_is_eagers():
    x = llgrad.randn(3, 2)
    for fn in (doubled_array, negated_list_len):
        compiled = llgrad.compile(fn)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")         # (numpy() read by Python: eagerly)
            for _ in range(3):
                x = llgrad.randn(3, 2)
                _equal(compiled(x), fn(x))
