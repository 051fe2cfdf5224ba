"""Creation's number checks against PyTorch (s78 F): tensor(..., dtype=uint8) of negative
floats (PyTorch checks a float before truncating it, so -0.5 overflows, while an int -1
wraps to 255, also next to floats in one list), and full() / full_like() of a 0-d tensor
fill value (the default dtype of the tensor's kind, as a Python number of that kind would
pick; a tensor of a dimension or one requiring grad is PyTorch's TypeError; a complex one
with an imaginary part overflows float64 as it does the other real dtypes). Eager and
llgrad.compile, torch the oracle."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

nan = float("nan")

UINT8_DATA = [-0.5, [-1e-8], [-1, 0.5], [[-3, 0.5], [2.0, -200]], (-2, 1.5), [True, -2],
              [-0.0, 3.0], [1.5, -2.25, 0.0], np.float64(-0.5), [np.int64(-3), 1.0],
              [-1.0], [255.5], [-256, 2.0], [-255, 2.0]]


def _outcome(make):
    try:
        t = make()
    except Exception as e:          # (the type and words are compared with torch's)
        return ("raises", type(e).__name__, str(e).replace("torch.", "llgrad."))
    return (str(t.dtype).split(".")[-1], tuple(t.shape), t.tolist())


@pytest.mark.parametrize("data", UINT8_DATA, ids=repr)
def test_uint8_of_negative_floats_as_torch(data):
    want = _outcome(lambda: torch.tensor(data, dtype=torch.uint8))
    assert _outcome(lambda: llgrad.tensor(data, dtype=llgrad.uint8)) == want


def test_uint8_of_negative_floats_compiled():
    """Inside a compiled function the check is the trace's: the same error, or the same
    wrapped values added to the call's tensor."""
    x = llgrad.tensor([1, 2], dtype=llgrad.uint8)
    for data in ([-1, 0.5], [-0.5, 1.0]):
        fn = llgrad.compile(lambda x, data=data: llgrad.tensor(data, dtype=llgrad.uint8) + x)
        want = _outcome(lambda: torch.tensor(data, dtype=torch.uint8) + torch.tensor([1, 2],
                                                                                    dtype=torch.uint8))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # (a fallback to eager is warned)
            assert _outcome(lambda: fn(x)) == want
            assert _outcome(lambda: fn(x)) == want


FILLS = [lambda T: T.tensor(2), lambda T: T.tensor(True), lambda T: T.tensor(2.5, dtype=T.float64),
         lambda T: T.tensor(2, dtype=T.int8), lambda T: T.tensor(1j), lambda T: T.tensor(300),
         lambda T: T.tensor(2.5, dtype=T.float16), lambda T: T.tensor([2]),
         lambda T: T.tensor(2.5, requires_grad=True), lambda T: T.zeros(1, 1), lambda T: 1j,
         lambda T: 1 + 0j, lambda T: T.tensor(1 + 0j)]


@pytest.mark.parametrize("k", range(len(FILLS)))
@pytest.mark.parametrize("dtype", [None, "int32", "int8", "float64"])
def test_full_of_a_tensor_fill_value_as_torch(k, dtype):
    def make(T, like=False):
        kw = {} if dtype is None else {"dtype": getattr(T, dtype)}
        if like:
            return lambda: T.full_like(T.ones(2, dtype=T.int16), FILLS[k](T), **kw)
        return lambda: T.full((2,), FILLS[k](T), **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # (NumPy's and torch's casting warnings)
        for like in (False, True):
            assert _outcome(make(llgrad, like)) == _outcome(make(torch, like))


def test_full_of_a_tensor_fill_value_compiled():
    """The fill tensor an input of the compiled function: its kind picks the dtype (int64
    for an int32 tensor), and the values are the call's, not the traced call's."""
    fn = llgrad.compile(lambda v, w: llgrad.full((3,), v) * 2 + llgrad.full((1,), w))
    for a, b in ((3, True), (-7, False), (11, True)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # (the fill value is read: eager after a while)
            got = fn(llgrad.tensor(a, dtype=llgrad.int32), llgrad.tensor(b))
        eager = llgrad.full((3,), llgrad.tensor(a, dtype=llgrad.int32)) * 2 + \
            llgrad.full((1,), llgrad.tensor(b))
        want = torch.full((3,), torch.tensor(a, dtype=torch.int32)) * 2 + \
            torch.full((1,), torch.tensor(b))
        assert got.dtype == eager.dtype == llgrad.int64 and want.dtype == torch.int64
        assert got.tolist() == eager.tolist() == want.tolist()
    fn.wait()


@pytest.mark.parametrize("value", [1j, 2 + 0j, -0.5 + 1e-9j])
def test_complex_into_float64_as_torch(value):
    """A complex with an imaginary part overflows double (float64) as it does float: no
    silently dropped imaginary part."""
    def makes(T):
        x = T.zeros(3, dtype=T.float64)
        return [lambda: T.full((2,), value, dtype=T.float64), lambda: x.clone().fill_(value),
                lambda: x.masked_fill(T.tensor([True, False, True]), value),
                lambda: T.full_like(x, value)]
    for mine, theirs in zip(makes(llgrad), makes(torch)):
        assert _outcome(mine) == _outcome(theirs)
