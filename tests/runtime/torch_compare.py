"""Run one program in PyTorch and in llgrad from the same NumPy inputs and compare: output
values, shapes and dtypes (tuples and named tuples element by element, Python values by
equality), the gradients of the float inputs after backpropagating sum(out * W) over the
float outputs (W fixed random weights), and for bad input the exception type and message.

A program is `fn(lib, *inputs)`: lib is torch or llgrad; NumPy arrays become tensors (float
ones requiring grad when grad=True), lists of arrays lists of tensors, anything else is
passed as is."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _to(lib, x, grad):
    if isinstance(x, np.ndarray):
        t = lib.tensor(x)
        return t.requires_grad_(True) if grad and x.dtype.kind == "f" else t
    if isinstance(x, list) and x and all(isinstance(e, np.ndarray) for e in x):
        return [_to(lib, e, grad) for e in x]
    return x


def _leaves(out):
    if isinstance(out, (tuple, list)):
        return [leaf for o in out for leaf in _leaves(o)]
    return [out]


def _inputs(ins):
    return [t for x in ins for t in (x if isinstance(x, list) else [x])]


def _run(lib, fn, args, grad):
    ins = [_to(lib, a, grad) for a in args]
    return ins, fn(lib, *ins)


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().numpy(force=True)
    return np.asarray(t.detach().numpy())


def _dtype_name(t):
    return str(t.dtype).split(".")[-1]


def compare(fn, *args, grad=True, rtol=1e-5, atol=1e-6, check_dtype=True, exact=False):
    """Compare fn in both libraries (see the module's docstring); returns llgrad's output."""
    tin, tout = _run(torch, fn, args, grad)
    lin, lout = _run(llgrad, fn, args, grad)
    assert type(lout).__name__ == type(tout).__name__ or not isinstance(tout, tuple), \
        (type(lout), type(tout))
    tl, ll = _leaves(tout), _leaves(lout)
    assert len(tl) == len(ll)
    for t, lv in zip(tl, ll):
        if isinstance(t, torch.Tensor):
            assert isinstance(lv, llgrad.Tensor), type(lv)
            assert tuple(lv.shape) == tuple(t.shape), (tuple(lv.shape), tuple(t.shape))
            if check_dtype:
                assert _dtype_name(lv) == _dtype_name(t), (lv.dtype, t.dtype)
            a, b = _np(lv), _np(t)
            if exact or a.dtype.kind in "biu":
                np.testing.assert_array_equal(a, b.astype(a.dtype) if not check_dtype else b)
            else:
                np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
        else:
            assert lv == t or (lv != lv and t != t), (lv, t)
    if not grad:
        return lout
    rng = np.random.default_rng(0)
    pairs = [(t, lv) for t, lv in zip(tl, ll) if isinstance(t, torch.Tensor) and
             t.requires_grad and t.dtype.is_floating_point]
    assert [lv.requires_grad for _, lv in pairs] == [True] * len(pairs), "llgrad lost the graph"
    if not pairs:
        return lout
    tloss = lloss = 0
    for t, lv in pairs:
        w = rng.standard_normal(tuple(t.shape))
        tloss = tloss + (t * torch.tensor(w, dtype=t.dtype)).sum()
        lloss = lloss + (lv * llgrad.tensor(w, dtype=lv.dtype)).sum()
    tloss.backward()
    lloss.backward()
    for t, lv in zip(_inputs(tin), _inputs(lin)):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            if t.grad is None or lv.grad is None:
                # (no gradient and an all-zero one are the same answer: PyTorch gives zeros
                # for an input its formula only compares, llgrad's composition none)
                other = lv.grad if t.grad is None else t.grad
                assert other is None or not np.any(_np(other)), "one library has a gradient"
                continue
            np.testing.assert_allclose(_np(lv.grad), _np(t.grad), rtol=max(rtol, 1e-4),
                                       atol=max(atol, 1e-5), equal_nan=True)
    return lout


def compare_error(fn, *args, message=True):
    """fn raises in PyTorch; llgrad raises the same exception type (and, with message=True,
    the same first line of message)."""
    with pytest.raises(Exception) as te:
        _run(torch, fn, args, False)
    with pytest.raises(Exception) as le:
        _run(llgrad, fn, args, False)
    assert type(le.value) is type(te.value) or (
        type(le.value).__name__ == type(te.value).__name__), (le.value, te.value)
    if message:
        assert str(le.value).splitlines()[0] == str(te.value).splitlines()[0], \
            (str(le.value), str(te.value))
