"""The differential harness of the _sweep7 semantics tests: a small program (source text
that sets r) run in torch and in llgrad (as `t`, with NumPy as `np`) must give the same
tensors (shape, dtype, strides, requires_grad, grad_fn name, values), Python values and
strings (llgrad read as torch), or the same exception type and first line."""
import warnings

import numpy as np

import llgrad


def _tensors(v):
    if isinstance(v, (tuple, list)):
        return [x for e in v for x in _tensors(e)]
    return [v]


def _first_line(text):
    return (text.splitlines() or [""])[0].replace("llgrad", "torch")


def run(lib, src):
    env = {"t": lib, "np": np}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            exec(src, env)
            return "ok", env["r"]
        except Exception as e:      # noqa: BLE001 (the exception is what is compared)
            return "raise", (type(e).__name__, _first_line(str(e)))


def _name(d):
    return str(d).split(".")[-1]


def _same_tensor(a, b, strides):
    assert isinstance(b, llgrad.Tensor), type(b)
    assert tuple(b.shape) == tuple(a.shape), (b.shape, a.shape)
    assert _name(b.dtype) == _name(a.dtype), (b.dtype, a.dtype)
    if strides and a.numel() > 1:
        assert b.stride() == a.stride(), (b.stride(), a.stride())
    assert b.requires_grad == a.requires_grad
    assert type(b.grad_fn).__name__ == type(a.grad_fn).__name__, (b.grad_fn, a.grad_fn)
    if a.dtype.is_floating_point:
        # (float32 values near 0 from products: PyTorch's AVX-512 kernels round them an
        # ulp of the operands apart from NumPy's on some hosts)
        atol = 1e-7 if a.dtype == a.new_zeros(()).float().dtype else 0
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-6,
                                   atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(b.detach().numpy(), a.detach().numpy())


def same(src, strides=True):
    """src (which sets r) gives the same in torch and in llgrad."""
    import torch
    (tk, tv), (lk, lv) = run(torch, src), run(llgrad, src)
    assert tk == lk, (tv, lv)
    if tk == "raise":
        assert tv == lv
        return
    for a, b in zip(_tensors(tv), _tensors(lv), strict=True):
        if isinstance(a, torch.Tensor):
            _same_tensor(a, b, strides)
        elif isinstance(a, torch.dtype):
            assert _name(b) == _name(a)
        elif isinstance(a, str):
            assert b.replace("llgrad", "torch") == a, (a, b)
        else:
            assert type(b) is type(a) and (b == a or a != a and b != b), (a, b)
