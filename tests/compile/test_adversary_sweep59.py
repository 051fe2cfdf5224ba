"""Adversary sweep 59 (helper H5): today's changes against eager llgrad and torch.

Compiled results that are parts of one tensor without history (`[r.numpy() for r in y]`,
y[0].detach() beside y) were rebuilt by later calls as views of the first such output, a
buffer of that part only: the others read past its end (garbage, memory not theirs)."""
import warnings

import numpy as np
import pytest

import llgrad


def _calls(fn, n=4):
    """fn's results over n calls with changing inputs, as nested lists of numbers."""
    out = []
    for i in range(n):
        x = llgrad.tensor(np.arange(9.0).reshape(3, 3) + 10 * i)
        r = fn(x)
        out.append([np.asarray(q.numpy() if isinstance(q, llgrad.Tensor) else q).tolist()
                    for q in r])
    return out


def _rows_numpy(x):
    return [r.numpy() for r in (x * 2)]


def _rows_tolist(x):
    return [r.tolist() for r in (x * 2)]


def _first_row_numpy_and_tensor(x):
    y = x * 2
    return y[0].numpy(), y


def _detached_rows(x):
    y = x * 2
    return y[0].detach(), y[1].detach()


def _detached_row_and_base(x):
    y = x * 2
    return y[0].detach(), y


def _unbind_numpy(x):
    a, b, c = (x * 2).unbind(0)
    return a.numpy(), b.numpy(), c.numpy()


def _columns_numpy(x):
    y = x * 2
    return y[:, 0].numpy(), y[:, 1].numpy()


@pytest.mark.parametrize("fn", [_rows_numpy, _rows_tolist, _first_row_numpy_and_tensor,
                                _detached_rows, _detached_row_and_base, _unbind_numpy,
                                _columns_numpy])
def test_parts_of_one_tensor_returned_without_history(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (compiled, not eager with a warning)
        got = _calls(llgrad.compile(fn))
    assert got == _calls(fn)


def test_detached_row_shares_memory_with_returned_base_as_eager():
    f = llgrad.compile(_detached_row_and_base)
    for i in range(3):
        row, y = f(llgrad.tensor(np.ones((3, 3)) * i))
        y.add_(5)
        assert row.tolist() == y[0].tolist()


def _overlapping_parts(x):
    y = x * 2
    return y[1:].numpy(), y[:, 1:].numpy()


def test_overlapping_parts_in_gaps_of_the_other_run_eagerly():
    """y[1:] lies within y[:, 1:]'s byte span but holds y[1, 0], y[2, 0], which are not
    elements of y[:, 1:] (whose compiled buffer leaves those bytes unwritten)."""
    f = llgrad.compile(_overlapping_parts)
    with pytest.warns(UserWarning, match="overlap in memory"):
        got = _calls(f)
    assert got == _calls(_overlapping_parts)


def test_bool_alpha_of_a_non_bool_result_raises_as_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, llgrad):
        a = lib.ones(3)
        i = lib.ones(3, dtype=lib.int64)
        for call in (lambda: lib.add(a, a, alpha=True), lambda: a.sub(a, alpha=False),
                     lambda: a.add_(a, alpha=True), lambda: lib.add(i, i, alpha=True)):
            with pytest.raises(RuntimeError, match="Boolean alpha only supported"):
                call()
        b = lib.ones(3, dtype=lib.bool)
        assert lib.add(b, b, alpha=True).tolist() == [True] * 3


def test_detached_row_beside_a_result_that_requires_grad():
    def f(x):
        y = x * 2
        return y[0].detach(), y

    cf = llgrad.compile(f)
    for i in range(3):
        got = []
        for fn in (f, cf):
            x = llgrad.tensor(np.arange(6.0).reshape(2, 3) + i, requires_grad=True)
            row, y = fn(x)
            (y * y).sum().backward()
            with llgrad.no_grad():
                y.add_(1)
            got.append((row.tolist(), y.tolist(), x.grad.tolist(), y.requires_grad,
                        row.requires_grad, y._version, row._version))
        assert got[0] == got[1]
