"""Sweep 9: Adam / AdamW's checks of betas (both floats or both tensors, a tensor beta of one
element, squeezed to 0-d) and steps with tensor betas, against torch: the same script run
with each library."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _text(x):
    return str(x).replace("torch", "llgrad")


def _betas(lib):
    out = []
    p = lib.nn.Parameter(lib.ones(2))
    for name in ("Adam", "AdamW"):
        for betas in ((0, 0.9), (0.9, lib.tensor(0.99)), [0.9, 0.99], (np.float64(0.9), 0.99),
                      (lib.tensor([0.9]), lib.tensor(0.99)),
                      (lib.tensor([0.9, 0.8]), lib.tensor(0.99)), (True, 0.9)):
            for kw in ({}, {"foreach": True}):
                try:
                    out.append(repr(getattr(lib.optim, name)([p], betas=betas, **kw)
                                    .defaults["betas"]))
                except (ValueError, RuntimeError) as e:
                    out.append((type(e).__name__, str(e)))
    return out


def test_adam_betas_checks_as_torch():
    assert _text(_betas(llgrad)) == _text(_betas(torch))


def _tensor_betas(lib):
    out = []
    for name, kw in (("Adam", {}), ("Adam", {"amsgrad": True, "weight_decay": 0.1}),
                     ("AdamW", {}), ("Adam", {"lr": lib.tensor(0.05)})):
        lib.manual_seed(0)
        p = lib.nn.Parameter(lib.randn(3))
        o = getattr(lib.optim, name)([p], betas=(lib.tensor([0.8]), lib.tensor(0.9)), **kw)
        for _ in range(4):
            o.zero_grad()
            (p ** 3).sum().backward()
            o.step()
        out.append(p.detach().numpy().copy())
    return out


def test_adam_steps_with_tensor_betas_as_torch():
    for a, b in zip(_tensor_betas(llgrad), _tensor_betas(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _capturable(lib):
    out = []
    for name in ("Adam", "AdamW", "RMSprop", "NAdam", "RAdam", "Adamax", "Adadelta", "ASGD",
                 "Rprop"):
        p = lib.nn.Parameter(lib.ones(3))
        p.grad = lib.ones(3)
        try:
            getattr(lib.optim, name)([p], lr=0.1, capturable=True).step()
            out.append("stepped")
        except AssertionError as e:
            out.append(str(e))
    return out


def test_capturable_errors_as_torch():
    # (PyTorch raises at the first step, llgrad when the optimiser is made)
    assert _capturable(llgrad) == _capturable(torch)
