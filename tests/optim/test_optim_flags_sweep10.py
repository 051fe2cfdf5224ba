"""capturable and differentiable, as PyTorch's CPU optimisers take them: accepted by the
constructor, refused by the step with PyTorch's errors (whose device list depends on the
optimiser and on foreach); a differentiable step whose parameters do not require grad runs
as the plain step."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

_NAMES = ["Adam", "AdamW", "Adadelta", "Adamax", "NAdam", "RAdam", "RMSprop", "Rprop", "ASGD",
          "Adagrad", "SGD"]


def _outcome(lib, name, kw):
    try:
        p = lib.nn.Parameter(lib.ones(3))
        opt = getattr(lib.optim, name)([p], lr=0.1, **kw)
    except Exception as e:      # noqa: BLE001 (the error is compared)
        return f"ctor {type(e).__name__}: {e}"
    p.grad = lib.ones(3)
    try:
        opt.step()
    except Exception as e:      # noqa: BLE001
        return f"step {type(e).__name__}: {e}"
    return "ok"


@pytest.mark.parametrize("name", _NAMES)
@pytest.mark.parametrize("flag", ["capturable", "differentiable"])
@pytest.mark.parametrize("foreach", [None, False, True])
def test_flag_errors_as_torch(name, flag, foreach):
    if flag == "capturable" and name in ("Adagrad", "SGD"):
        pytest.skip("no capturable flag")
    kw = {flag: True, "foreach": foreach}
    assert _outcome(llgrad, name, kw) == _outcome(torch, name, kw)


@pytest.mark.parametrize("name", _NAMES)
def test_differentiable_step_without_grad_params_is_the_plain_step(name):
    out = []
    for lib in (torch, llgrad):
        p = lib.ones(3)
        p.grad = lib.tensor([0.5, -1.0, 2.0])
        opt = getattr(lib.optim, name)([p], lr=0.1, differentiable=True)
        opt.step()
        opt.step()
        out.append(p.numpy().copy())
    np.testing.assert_allclose(out[1], out[0], rtol=1e-6)


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
@pytest.mark.parametrize("amsgrad", [False, True])
def test_differentiable_adam_uses_pytorchs_arithmetic(name, amsgrad):
    out = []
    for lib in (torch, llgrad):
        p = lib.tensor([1.0, -2.0, 0.3])
        opt = getattr(lib.optim, name)([p], lr=0.1, differentiable=True, amsgrad=amsgrad,
                                       weight_decay=0.1)
        for i in range(4):
            p.grad = lib.tensor([0.5, -1.0, 2.0]) * (i - 1.5)
            opt.step()
        out.append(p.numpy().copy())
    np.testing.assert_allclose(out[1], out[0], rtol=1e-6, atol=1e-7)
