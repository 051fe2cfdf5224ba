"""The compositions of llgrad/runtime/functions_*.py need no op, lowering or batching rule
of their own: under llgrad.compile (traced once, native code, called twice), under
llgrad.func.vmap and llgrad.func.grad they give what eager gives."""
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.func import grad, vmap

rng = np.random.default_rng(5)
X = llgrad.tensor(rng.standard_normal((3, 4)).astype(np.float32))
Y = llgrad.tensor(rng.standard_normal((3, 4)).astype(np.float32))

CASES = {
    "log2": lambda a, b: llgrad.log2(a.abs() + 1),
    "exp2": lambda a, b: llgrad.exp2(a),
    "logaddexp": lambda a, b: llgrad.logaddexp(a, b),
    "hypot": lambda a, b: llgrad.hypot(a, b),
    "fmod": lambda a, b: llgrad.fmod(a, 0.7),
    "remainder": lambda a, b: llgrad.remainder(a, b),
    "xlogy": lambda a, b: llgrad.xlogy(a, b.abs()),
    "sinc": lambda a, b: llgrad.sinc(a),
    "copysign": lambda a, b: llgrad.copysign(a, b),
    "logit": lambda a, b: llgrad.logit(a.sigmoid(), eps=0.1),
    "asinh": lambda a, b: llgrad.asinh(a),
    "isin": lambda a, b: llgrad.isin(a, b).float() * a,
    "nansum": lambda a, b: llgrad.nansum(a, 1),
    "logcumsumexp": lambda a, b: llgrad.logcumsumexp(a, 1),
    "cummax": lambda a, b: llgrad.cummax(a, 1).values,
    "cummin_indices": lambda a, b: llgrad.cummin(a, 1).indices.float() + a,
    "median": lambda a, b: llgrad.median(a),
    "median_dim": lambda a, b: llgrad.median(a, 1).values,
    "kthvalue": lambda a, b: llgrad.kthvalue(a, 2, 1).values,
    "mode": lambda a, b: llgrad.mode(a.round(), 1).values,
    "quantile": lambda a, b: llgrad.quantile(a, 0.3, dim=1),
    "movedim": lambda a, b: llgrad.movedim(a, 0, 1),
    "hstack": lambda a, b: llgrad.hstack([a, b]),
    "tensor_split": lambda a, b: llgrad.tensor_split(a, 3, 1)[1],
    "diff": lambda a, b: llgrad.diff(a, 2, 1),
    "rot90": lambda a, b: llgrad.rot90(a),
    "kron": lambda a, b: llgrad.kron(a, b),
    "block_diag": lambda a, b: llgrad.block_diag(a, b),
    "combinations": lambda a, b: llgrad.combinations(a[0]),
    "take": lambda a, b: llgrad.take(a, llgrad.tensor([0, 5, -1])),
    "cross": lambda a, b: llgrad.cross(a[:, :3], b[:, :3], dim=1),
    "inner": lambda a, b: llgrad.inner(a, b),
    "addmv": lambda a, b: llgrad.addmv(a[:, 0], a, b[0], beta=0.5),
    "matrix_power": lambda a, b: llgrad.matrix_power(a[:, :3], 5),
    "cov": lambda a, b: llgrad.cov(a),
    "cdist": lambda a, b: llgrad.cdist(a, b),
    "pixel_shuffle": lambda a, b: llgrad.pixel_shuffle(a.reshape(1, 4, 3, 1), 2),
    "log2_": lambda a, b: (a.abs() + 1).log2_(),
    "gt_": lambda a, b: (a * 1).gt_(b),
}


def _close(a, b):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6,
                               equal_nan=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_calls_equal_eager(name):
    fn = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # (no graph break: the whole call traces)
        compiled = llgrad.compile(fn)
        eager = fn(X, Y)
        for _ in range(2):
            _close(compiled(X, Y), eager)


@pytest.mark.parametrize("name", ["logaddexp", "median", "cummax", "quantile", "hypot",
                                  "matrix_power", "cdist", "kthvalue", "xlogy"])
def test_compiled_gradients_equal_eager(name):
    fn = CASES[name]

    def loss(a, b):
        return (fn(a, b) * 1.5).sum()
    compiled = llgrad.compile(loss)
    a = X.detach().requires_grad_(True)
    loss(a, Y).backward()
    want = a.grad
    for _ in range(2):
        a = X.detach().requires_grad_(True)
        compiled(a, Y).backward()
        _close(a.grad, want)


@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_and_grad_equal_eager(name):
    fn = CASES[name]
    batched = vmap(fn)(llgrad.stack([X, X * 2]), llgrad.stack([Y, Y + 1]))
    _close(batched, llgrad.stack([fn(X, Y), fn(X * 2, Y + 1)]))
    if fn(X, Y).dtype.is_floating_point:
        a = X.detach().requires_grad_(True)
        fn(a, Y).sum().backward()
        _close(grad(lambda u, v: fn(u, v).sum())(X, Y), a.grad)
