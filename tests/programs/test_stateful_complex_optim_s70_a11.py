"""Optimisers over a complex parameter beside a real one (PyTorch steps a complex
parameter as its real view, and refuses it where it has no complex rule: fused kernels,
Adafactor, Muon): parameters, gradients and state after each of six steps, or the error
and what was written before it; torch, llgrad eager and the step compiled
(stateful_harness_s70_a11.check)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from stateful_harness_s70_a11 import check, randn  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case; the fast regressions are in
# test_stateful_regressions_s70_a11.py)


def _complex(seed, *shape):
    return (randn(seed, *shape) + 1j * randn(seed + 50, *shape)).astype(np.complex64)


def xy(i):
    return _complex(10 + i, 3, 2), _complex(20 + i, 3, 2)


def program(name, complex_first=False, **kw):
    def make(lib):
        w = lib.nn.Parameter(lib.tensor(_complex(1, 2, 2)))
        v = lib.nn.Parameter(lib.tensor(randn(2, 2, 2)))
        params = [w, v] if complex_first else [v, w]
        opt = getattr(lib.optim, name)(params, **kw)

        def step(x, y):
            opt.zero_grad()
            loss = (x @ w - y).abs().pow(2).mean() + (x.real @ v).tanh().pow(2).mean()
            loss.backward()
            if name == "LBFGS":
                return opt.step(lambda: (x @ w - y).abs().pow(2).mean())
            opt.step()
            return loss
        sd = opt.state_dict
        return dict(step=step, state=lambda: [w, v, w.grad, v.grad,
                                              {k: sd()["state"][k] for k in sorted(sd()["state"])}])
    make.__name__ = name
    return make


CASES = [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1)),
         ("SGD", dict(lr=0.1, fused=True)), ("SGD", dict(lr=0.1, fused=True, complex_first=True)),
         ("Adam", dict(lr=0.01, amsgrad=True)), ("Adam", dict(lr=0.01, fused=True)),
         ("AdamW", dict(lr=0.01, foreach=True)), ("AdamW", dict(lr=0.01, fused=True)),
         ("Adagrad", dict(lr=0.1)), ("Adagrad", dict(lr=0.1, fused=True)),
         ("Adadelta", dict(lr=1.0)), ("Adamax", dict(lr=0.01)), ("NAdam", dict(lr=0.01)),
         ("RAdam", dict(lr=0.01)), ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5)),
         ("Rprop", dict(lr=0.01)), ("ASGD", dict(lr=0.05, t0=2)), ("Adafactor", dict(lr=0.01)),
         ("Muon", dict(lr=0.01)), ("LBFGS", dict(lr=0.5, max_iter=3))]

# (the first call of a step whose optimiser has no state runs eagerly; these warn)
EAGER = {"LBFGS": "LBFGS.step"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0] + "-" + "-".join(map(str, c[1].items())))
def test_complex_parameter(case):
    name, kw = case
    check(program(name, **kw), xy, atol=1e-5, compiled_warns=EAGER.get(name))
