"""Activation argument checks as torch 2.13's: CELU's alpha 0 message, F.hardtanh_ without
F.hardtanh's min_val <= max_val check (clamped to max_val, zero gradient)."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("call", [
    lambda lib, t: lib.nn.functional.celu(t, 0.0),
    lambda lib, t: lib.nn.functional.celu(t, 0.0, inplace=True),
    lambda lib, t: lib.nn.functional.celu_(t, 0.0),
    lambda lib, t: lib.celu(t, 0.0),
    lambda lib, t: lib.nn.CELU(0.0)(t)])
def test_celu_alpha_zero_message(call):
    msgs = []
    for lib in (torch, llgrad):
        with pytest.raises(RuntimeError) as info:
            call(lib, lib.ones(3))
        msgs.append(str(info.value).splitlines()[0])
    assert msgs[1] == msgs[0]


@pytest.mark.parametrize("n", [5, 40000])
def test_hardtanh_inplace_min_above_max(n):
    x = np.linspace(-3, 3, n).astype(np.float32)
    got = []
    for lib in (torch, llgrad):
        a = lib.tensor(x, requires_grad=True)
        y = lib.nn.functional.hardtanh_(a * 1.0, 1.0, -1.0)
        (y * 2.0).sum().backward()
        got.append((y.detach().numpy(), a.grad.numpy(), type(y.grad_fn).__name__))
    np.testing.assert_array_equal(got[1][0], got[0][0])
    np.testing.assert_array_equal(got[1][1], got[0][1])
    assert got[1][2] == got[0][2]
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        llgrad.nn.functional.hardtanh(llgrad.ones(3), 1.0, -1.0)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("call", [
    lambda lib, t: lib.nn.functional.leaky_relu_(t, 0.1),
    lambda lib, t: lib.nn.functional.relu6(t),
    lambda lib, t: lib.nn.functional.relu6(t, inplace=True),
    lambda lib, t: lib.nn.functional.hardtanh(t),
    lambda lib, t: lib.nn.functional.hardtanh_(t),
    lambda lib, t: lib.nn.functional.hardtanh(t, 0.5, 2.5),
    lambda lib, t: lib.nn.Hardtanh(-2.0, 1.0, inplace=True)(t)])
def test_activation_integer_inputs(dtype, call):
    got = []
    for lib in (torch, llgrad):
        t = lib.arange(-3, 3).to(getattr(lib, dtype))
        try:
            y = call(lib, t)
            got.append(("ok", str(y.dtype).split(".")[-1], y.tolist()))
        except Exception as e:      # noqa: BLE001 (the error is what is compared)
            got.append((type(e).__name__, str(e).splitlines()[0]))
    assert got[1] == got[0]
