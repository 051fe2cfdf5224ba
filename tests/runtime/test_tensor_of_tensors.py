"""torch.tensor of a tensor, or of lists holding tensors (each must have one element and
is taken as a number of its dtype: a list of 1-element tensors gives a 1-D tensor, not an
(n, 1) one): eagerly, against torch when installed, and inside a compiled function, where
the values are the call's (they were the traced call's, baked in: a wrong answer)."""
import warnings

import numpy as np
import pytest

import llgrad


def _cases(m):
    t = m.tensor
    return [
        [t([1.0]), t([2.0])], [t([[1.0]]), t([[2.0]])], [t(1.0, dtype=m.float64), t(2.0)],
        [t(1), t(2)], [[t([1.0])], [t([2.0])]], [t(1.0), 2], [t(True), t(False)],
        [t([1.0], requires_grad=True)], [t(1), 2.5], (t(3.0),), [1, 2],
    ]


def _result(m, v):
    x = m.tensor(v)
    return tuple(x.shape), str(x.dtype).split(".")[-1], x.tolist(), x.requires_grad


@pytest.mark.parametrize("k", range(len(_cases(llgrad))))
def test_tensor_of_tensors_matches_torch(k):
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _result(llgrad, _cases(llgrad)[k]) == _result(torch, _cases(torch)[k])


def test_one_element_tensors_are_numbers():
    x = llgrad.tensor([llgrad.tensor([1.5]), llgrad.tensor([[2.5]])])
    assert x.shape == (2,) and x.tolist() == [1.5, 2.5]


def test_a_tensor_of_several_elements_in_a_list_is_refused():
    with pytest.raises(ValueError, match="only one element tensors"):
        llgrad.tensor([llgrad.tensor([1.0, 2.0]), llgrad.tensor([3.0, 4.0])])


def test_compiled_reads_the_values_at_each_call():
    f = llgrad.compile(lambda x: llgrad.tensor([x.sum(), x.max()]) * 2)
    for k in range(3):
        x = llgrad.arange(3.0) + k
        np.testing.assert_array_equal(f(x).numpy(),
                                      (llgrad.tensor([x.sum(), x.max()]) * 2).numpy())


@pytest.mark.parametrize("make", [lambda x: llgrad.tensor(x) * 2,
                                  lambda x: llgrad.as_tensor(x, dtype=llgrad.float64) * 2,
                                  lambda x: llgrad.tensor(x.sum()) * 2,
                                  lambda x: llgrad.tensor(x.t(), dtype=llgrad.float64) + 1])
def test_compiled_tensor_of_a_tensor_copies_the_calls_values(make):
    f = llgrad.compile(make)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(3):
            x = llgrad.arange(6.0).reshape(2, 3) + k
            got, want = f(x), make(x)
            assert got.dtype == want.dtype and got.is_contiguous()
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert f.n_traces == 1


def test_tensor_of_a_tensor_warns_and_copies_as_torch():
    x = llgrad.ones(2, 3, requires_grad=True)
    with pytest.warns(UserWarning, match="To copy construct from a tensor"):
        y = llgrad.tensor(x.t())
    assert y.is_leaf and not y.requires_grad and y.is_contiguous() and y.shape == (3, 2)
    y.add_(1)
    assert x.tolist() == [[1.0] * 3] * 2


def test_as_tensor_to_another_dtype_copies_without_a_warning_and_new_tensor_warns():
    x = llgrad.ones(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = llgrad.as_tensor(x, dtype=llgrad.float64)
    assert y.dtype == llgrad.float64 and y.tolist() == x.tolist()
    with pytest.warns(UserWarning, match=r"rather than tensor\.new_tensor\(sourceTensor\)"):
        z = x.new_tensor(x.t())
    assert z.is_contiguous() and z.shape == (3, 2) and not z.requires_grad


def test_compiled_new_tensor_copies_the_calls_values():
    f = llgrad.compile(lambda x: x.new_tensor(x) * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(3):
            x = llgrad.arange(3.0) + k
            np.testing.assert_array_equal(f(x).numpy(), (x * 2).numpy())
    assert f.n_traces == 1
