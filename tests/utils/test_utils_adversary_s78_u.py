"""Training-loop utilities against PyTorch 2.13 as a hostile user writes them:
torch.testing.assert_close's verdicts and messages (None pairs, scalar and integer
relative differences, bfloat16 / complex arithmetic, negative tolerances, the deprecated
assert_allclose), the tensor predicates' argument checks, and a DataLoader-fed training loop
checkpointed mid-way through save/load, eager and under llgrad.compile."""
import io
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _outcome(lib, make_args, **kw):
    try:
        lib.testing.assert_close(*make_args(lib), **kw)
        return "passed"
    except (AssertionError, TypeError, ValueError, RuntimeError) as e:
        return type(e).__name__, str(e).replace("torch.", "LIB.").replace("llgrad.", "LIB.")


_CASES = {
    # None is its own pair: equal to None, a mismatch against anything else
    "none_none": lambda L: (None, None),
    "tensor_none": lambda L: (L.ones(1), None),
    "none_number": lambda L: (None, 1),
    "none_in_list": lambda L: ([None, L.ones(1)], [L.ones(1), L.ones(1)]),
    "nested_none": lambda L: ({"a": [None]}, {"a": [None]}),
    # 0-d tensors: the message PyTorch builds from the Python values (item())
    "scalar_float32": lambda L: (L.tensor(1.0), L.tensor(1.5)),
    "scalar_float32_ulp": lambda L: (L.tensor(1.1), L.tensor(1.0)),
    "scalar_int": lambda L: (L.tensor(3), L.tensor(5)),
    "scalar_bool": lambda L: (L.tensor(True), L.tensor(False)),
    "scalar_zero_expected": lambda L: (L.tensor(1.0), L.tensor(0.0)),
    # integers: |a - e| in int64, then divided in float32 (not subtracted in float32)
    "int_large": lambda L: (L.tensor([10 ** 12]), L.tensor([10 ** 12 + 1])),
    "int_large_many": lambda L: (L.tensor([2 ** 40 + 1, 7, 3]), L.tensor([3, 2 ** 41 + 3, 3])),
    "int32": lambda L: (L.tensor([5, 6], dtype=L.int32), L.tensor([5, 9], dtype=L.int32)),
    # bfloat16 arithmetic rounds each step to bfloat16
    "bf16": lambda L: (L.tensor([1.0], dtype=L.bfloat16), L.tensor([1.02], dtype=L.bfloat16)),
    "bf16_many": lambda L: (L.tensor([1.0, 3.0, -7.5], dtype=L.bfloat16),
                            L.tensor([1.03, 3.1, -7.0], dtype=L.bfloat16)),
    "float16": lambda L: (L.tensor([1.0, 2.0], dtype=L.float16),
                          L.tensor([1.002, 2.01], dtype=L.float16)),
    # complex: |z| correctly rounded (NumPy's complex64 abs can be one ulp off)
    "complex64": lambda L: (L.tensor([1 + 1j]), L.tensor([1 + 1.1j])),
    "complex128": lambda L: (L.tensor([1 + 1j], dtype=L.complex128),
                             L.tensor([1 + 1.1j], dtype=L.complex128)),
    # check_dtype=False compares in PyTorch's promoted dtype (int64 with float32: float32)
    "int_vs_float32": lambda L: (L.tensor([1, 2]), L.tensor([1.0, 2.5])),
    "int8_vs_bf16": lambda L: (L.tensor([3, 1], dtype=L.int8),
                               L.tensor([1.5, 1.0], dtype=L.bfloat16)),
    # NumPy scalars and complex numbers are numbers (float64 tolerances)
    "numpy_float32_scalars": lambda L: (np.float32(1.0), np.float32(1.5)),
    "numpy_int_scalars": lambda L: (np.int64(2), np.int64(3)),
    "numpy_bool_scalars": lambda L: (np.bool_(True), np.bool_(False)),
    "python_complex": lambda L: (1 + 1j, 1 + 1.5j),
    # where a failure names its item: not for Booleans, also for an unhandled pair's TypeError
    "bool_in_list": lambda L: ([True], [False]),
    "str_in_list": lambda L: (["a"], ["b"]),
    "str_in_dict_list": lambda L: ({"k": [1, "a"]}, {"k": [1, "b"]}),
}
_KW = {"int_vs_float32": {"check_dtype": False}, "int8_vs_bf16": {"check_dtype": False}}


@pytest.mark.parametrize("name", sorted(_CASES))
def test_assert_close_messages_as_torch(name):
    kw = _KW.get(name, {})
    assert _outcome(llgrad, _CASES[name], **kw) == _outcome(torch, _CASES[name], **kw)


@pytest.mark.parametrize("where", ["list", "dict", "top"])
def test_callable_msg_receives_the_located_message(where):
    def args(L):
        a, e = [L.ones(1), 2.0], [L.ones(1), 2.5]
        return {"list": (a, e), "dict": ({"k": a}, {"k": e}), "top": (a[1], e[1])}[where]
    for msg in (lambda m: "W:" + m, "fixed"):
        assert _outcome(llgrad, args, msg=msg) == _outcome(torch, args, msg=msg)


def test_assert_close_negative_tolerance_raises_runtime_error():
    def args(L):
        return L.ones(2), L.ones(2)
    for kw in ({"atol": -1e-3, "rtol": 0.0}, {"atol": 0.0, "rtol": -1e-3}):
        with pytest.raises(RuntimeError) as expected:
            torch.testing.assert_close(*args(torch), **kw)
        which = str(expected.value.__cause__ or expected.value).split()[0]
        with pytest.raises(RuntimeError, match=f"{which} must be greater than or equal to zero"):
            llgrad.testing.assert_close(*args(llgrad), **kw)


def test_assert_allclose_is_deprecated_with_a_future_warning():
    for lib in (torch, llgrad):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            lib.testing.assert_allclose(lib.ones(2), lib.ones(2))
        assert [x.category for x in w] == [FutureWarning]
        assert "assert_allclose()` is deprecated" in str(w[0].message)


@pytest.mark.parametrize("name", ["is_floating_point", "is_complex", "is_nonzero", "is_signed",
                                  "is_conj", "numel"])
@pytest.mark.parametrize("arg", [1.0, [1.0], np.ones(1)])
def test_tensor_predicates_refuse_non_tensors(name, arg):
    with pytest.raises(TypeError) as expected:
        getattr(torch, name)(arg)
    with pytest.raises(TypeError) as got:
        getattr(llgrad, name)(arg)
    assert str(got.value) == str(expected.value)


def _training_log(T, compiled=False, float64=False):
    """Three epochs of a shuffled, batched TensorDataset through Adam, checkpointed after
    the first epoch (model + optimizer state through save/load, then loaded back)."""
    if float64:
        T.set_default_dtype(T.float64)
    try:
        T.manual_seed(0)
        x = T.randn(10, 3)
        y = (x.sum(1, keepdim=True) > 0).to(T.get_default_dtype())
        model = T.nn.Sequential(T.nn.Linear(3, 4), T.nn.Tanh(), T.nn.Linear(4, 1))
        opt = T.optim.Adam(model.parameters(), lr=0.05)

        def step(xb, yb):
            opt.zero_grad()
            loss = T.nn.functional.binary_cross_entropy_with_logits(model(xb), yb)
            loss.backward()
            opt.step()
            return loss
        run = llgrad.compile(step) if compiled else step
        loader = T.utils.data.DataLoader(T.utils.data.TensorDataset(x, y), batch_size=4,
                                         shuffle=True, generator=T.Generator().manual_seed(1))
        log = []
        for epoch in range(3):
            for xb, yb in loader:
                log.append(run(xb, yb).item())
            if epoch == 0:
                buf = io.BytesIO()
                T.save({"m": model.state_dict(), "o": opt.state_dict(), "log": log}, buf)
                buf.seek(0)
                ck = T.load(buf)
                model.load_state_dict(ck["m"])
                opt.load_state_dict(ck["o"])
                assert ck["log"] == log
        if compiled:
            run.wait()
        params = [np.array(p.detach().tolist()) for p in model.parameters()]
        return np.array(log), params, str(model[0].weight.dtype).split(".")[-1]
    finally:
        T.set_default_dtype(T.float32)


@pytest.mark.slow
@pytest.mark.parametrize("float64", [False, True])
def test_checkpointed_training_loop_eager_and_compiled_as_torch(float64):
    tol = 1e-12 if float64 else 1e-6
    ref = _training_log(torch, float64=float64)
    for compiled in (False, True):
        log, params, dtype = _training_log(llgrad, compiled, float64)
        assert dtype == ref[2] == ("float64" if float64 else "float32")
        np.testing.assert_allclose(log, ref[0], rtol=0, atol=tol)
        for p, q in zip(params, ref[1]):
            np.testing.assert_allclose(p, q, rtol=0, atol=tol)
