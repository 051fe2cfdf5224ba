"""Sweep 13 (helper E): llgrad.compile(fn) against eager llgrad and torch on the ops of
PyTorch's OpInfo database, each difference found written as a standalone case.

- A derivative rule that refuses its inputs raises, in eager as in torch, only when the
  caller runs backward; a compiled call raised it from its trace (the VJP is traced in the
  first call), so the forward itself failed.
- argwhere / nonzero give (n, ndim) results with torch's strides (1, n); the traced call
  gave contiguous ones."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _calls(cf, make, n=3):
    """n compiled calls (the first traces, the next run the compiled code), warnings kept."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [cf(*make()) for _ in range(n)]


def _raised(thunk):
    try:
        thunk()
    except Exception as e:          # noqa: BLE001 - the exception is the observation
        return type(e), str(e).splitlines()[0]
    return None


def _first(v):
    return v if isinstance(v, (llgrad.Tensor, torch.Tensor)) else v[0]


BACKWARD_ERRORS = {
    # (function of the library, input shape): the forward runs, its backward raises
    "qr_mode_r": (lambda lib, x: lib.linalg.qr(x, mode="r"), (4, 3)),
    "qr_complete_tall": (lambda lib, x: lib.linalg.qr(x, mode="complete"), (4, 2)),
    "elu_inplace_negative_alpha":
        (lambda lib, x: lib.nn.functional.elu(x * 1, alpha=-1.0, inplace=True), (5,)),
    "leaky_relu_inplace_negative_slope":
        (lambda lib, x: lib.nn.functional.leaky_relu(x * 1, -0.1, inplace=True), (5,)),
}


@pytest.mark.parametrize("name", sorted(BACKWARD_ERRORS))
def test_backward_only_error_raised_by_backward_not_by_the_compiled_call(name):
    op, shape = BACKWARD_ERRORS[name]
    a = np.random.RandomState(0).standard_normal(shape)
    t = torch.tensor(a, requires_grad=True)
    want = op(torch, t)
    want_err = _raised(lambda: _first(want).sum().backward())
    assert want_err is not None and want_err[0] is RuntimeError
    cf = llgrad.compile(lambda x: op(llgrad, x))
    outs = _calls(cf, lambda: (llgrad.tensor(a, requires_grad=True),))
    for out in outs:
        got, ref = _first(out), _first(want)
        np.testing.assert_allclose(np.abs(got.detach().numpy()), np.abs(ref.detach().numpy()),
                                   rtol=1e-10, atol=1e-12)
        err = _raised(lambda: got.sum().backward())
        assert err is not None and err[0] is RuntimeError and err[1] == want_err[1], err


def test_lu_factor_wide_compiled_as_eager():
    """lu_factor of a 3x5 matrix: torch differentiates it; llgrad's eager backward refuses
    (NotImplementedError); the compiled call must give the forward and the same backward."""
    a = np.random.RandomState(1).standard_normal((3, 5))
    t = torch.tensor(a, requires_grad=True)
    lu_t, piv_t = torch.linalg.lu_factor(t)
    ct = np.random.RandomState(2).standard_normal((3, 5))

    def backward(lu, x):
        return _raised(lambda: lu.backward(type(lu)(ct) if isinstance(lu, torch.Tensor)
                                           else llgrad.tensor(ct))) or x.grad.numpy().copy()

    xe = llgrad.tensor(a, requires_grad=True)
    eager = backward(llgrad.linalg.lu_factor(xe)[0], xe)
    cf = llgrad.compile(lambda x: llgrad.linalg.lu_factor(x))
    for _ in range(3):
        xc = llgrad.tensor(a, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lu, piv = cf(xc)
        np.testing.assert_allclose(lu.detach().numpy(), lu_t.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
        np.testing.assert_array_equal(piv.numpy(), piv_t.numpy())
        got = backward(lu, xc)
        if isinstance(eager, tuple):
            assert got == eager
        else:
            np.testing.assert_allclose(got, eager, rtol=1e-10)


@pytest.mark.parametrize("shape_values", [
    ((2, 3), [0, 1, 2, 3, 0, 4]),
    ((2, 3), [0, 1, 0, 0, 0, 0]),
    ((3,), [0, 1, 2]),
    ((1, 2, 3), [0, 1, 2, 3, 0, 4]),
])
def test_argwhere_nonzero_strides_in_compiled_calls(shape_values):
    shape, values = shape_values
    a = np.array(values, np.float32).reshape(shape)
    want = torch.argwhere(torch.tensor(a))
    for fn in (lambda x: llgrad.argwhere(x), lambda x: x.nonzero()):
        for out in _calls(llgrad.compile(fn), lambda: (llgrad.tensor(a),)):
            np.testing.assert_array_equal(out.numpy(), want.numpy())
            assert out.stride() == want.stride()


@pytest.mark.parametrize("name", ["slice", "view", "select", "unsqueeze", "narrow", "with_grad"])
def test_detached_view_of_an_input_shares_its_memory(name):
    """`return x[1:4].detach()`: eager's (and torch's) result is an alias of x, a write
    through it shows in x; the compiled kernel computed it as a fresh buffer and the one-launch
    call path (fastpath.quick_runner) returned that copy."""
    fns = {"slice": lambda L, x: x[1:4].detach(), "view": lambda L, x: x.view(2, 3).detach(),
           "select": lambda L, x: x[2].detach(), "unsqueeze": lambda L, x: x[None].detach(),
           "narrow": lambda L, x: x.narrow(0, 2, 2).detach(),
           "with_grad": lambda L, x: (x[None].detach(), L.autograd.grad(
               (x * x).sum(), x)[0])}
    f = fns[name]

    def observe(lib, call):
        x = lib.arange(6.).requires_grad_(name == "with_grad")
        out = call(x)
        o = out if isinstance(out, (llgrad.Tensor, torch.Tensor)) else out[0]
        o[(0,) * o.dim()] = 7.
        return x.detach().numpy().copy(), o.stride(), o.storage_offset()

    want = observe(torch, lambda x: f(torch, x))
    cf = llgrad.compile(lambda x: f(llgrad, x))
    for _ in range(3):
        got = observe(llgrad, cf)
        np.testing.assert_array_equal(got[0], want[0])
        assert got[1:] == want[1:]
