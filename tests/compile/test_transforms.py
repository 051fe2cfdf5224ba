"""llgrad.grad / value_and_grad / vjp, and the `python -m llgrad dump` command line."""
import os
import subprocess
import sys

import numpy as np
import pytest

import llgrad


def cube_sum(x):
    return (x ** 3).sum()


def test_grad_matches_hand_derivative_and_traces_once():
    g = llgrad.grad(cube_sum)
    x = llgrad.tensor([1.0, 2.0, 3.0])
    for _ in range(3):
        np.testing.assert_allclose(g(x).numpy(), 3 * x.numpy() ** 2)
    assert g.n_traces == 1
    assert not g(x).requires_grad


def test_grad_of_grad_nests():
    gg = llgrad.grad(lambda x: llgrad.grad(cube_sum)(x).sum())
    x = llgrad.tensor([1.0, -2.0])
    for _ in range(2):
        np.testing.assert_allclose(gg(x).numpy(), 6 * x.numpy())


def test_value_and_grad_with_argnums_and_aux():
    def f(w, b, x):
        y = x @ w + b
        return (y * y).mean(), y

    vg = llgrad.value_and_grad(f, argnums=(0, 1), has_aux=True)
    w, b, x = llgrad.randn(3, 2), llgrad.randn(2), llgrad.randn(4, 3)
    for _ in range(2):
        (value, aux), (gw, gb) = vg(w, b, x)
        we, be = w.clone().requires_grad_(), b.clone().requires_grad_()
        loss, y = f(we, be, x)
        loss.backward()
        np.testing.assert_allclose(value.item(), loss.item(), rtol=1e-6)
        np.testing.assert_allclose(aux.numpy(), y.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(gw.numpy(), we.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(gb.numpy(), be.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_grad_rejects_non_scalar_and_bad_argnums():
    with pytest.raises(TypeError, match="scalar"):
        llgrad.grad(lambda x: x * 2)(llgrad.ones(3))
    with pytest.raises(ValueError, match="argnums 3"):
        llgrad.grad(cube_sum, argnums=3)(llgrad.ones(3))
    with pytest.raises(TypeError, match="floating-point"):
        llgrad.grad(lambda x: x.sum())(llgrad.tensor([1, 2]))


def test_vjp_returns_outputs_and_a_pullback():
    x = llgrad.tensor([0.5, 1.0, 2.0])
    out, pullback = llgrad.vjp(lambda a: a.sin() * 2, x)
    np.testing.assert_allclose(out.detach().numpy(), 2 * np.sin(x.numpy()), rtol=1e-6)
    (gx,) = pullback(llgrad.tensor([1.0, 0.0, 2.0]))
    np.testing.assert_allclose(gx.numpy(), 2 * np.cos(x.numpy()) * [1, 0, 2], rtol=1e-6)


MODEL = """
import llgrad

def loss(x, w):
    return (x @ w).tanh().sum()
"""


@pytest.mark.slow
def test_command_line_dump(tmp_path):
    f = tmp_path / "model.py"
    f.write_text(MODEL)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-m", "llgrad", "dump", f"{f}:loss", "--args",
                        "f32[4,6] f32[6,3]"], capture_output=True, text=True, cwd=root)
    assert r.returncode == 0, r.stderr
    for part in ("== forward ==", "== backward ==", "== saved values ==", "bytes",
                 "mm %x, %w", "model.py:5"):
        assert part in r.stdout
    r = subprocess.run([sys.executable, "-m", "llgrad", "dump", f"{f}:nope", "--args", "f32[2]"],
                       capture_output=True, text=True, cwd=root)
    assert r.returncode != 0 and "has no function 'nope'" in r.stderr
