"""bench/untuned_models_tenth.py's five models (fast neural style transfer, a Set Transformer, a
TabNet with a sort-and-cumsum sparsemax, a word2vec skip-gram with negative sampling, an ESPCN
super-resolution net), at small sizes, train a few steps in torch, llgrad eager and llgrad
compiled (the whole step under llgrad.compile), seeded alike: losses and every parameter and
buffer against torch's, compiled against eager, and the compiled step runs as one graph (no
warning, no graph break, no retrace once warm)."""
import os
import sys

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from untuned_steps import close, run_steps  # noqa: E402
import untuned_models_tenth as models    # noqa: E402

STEPS = 4      # (the first may run eagerly (a fresh optimiser), the second traces)


def _run(lib, name, compiled=False):
    return run_steps(models.build, lib, name, compiled, STEPS)


# (a bias whose per-channel constant reaches an InstanceNorm through nothing but convolutions
# of reflection-padded inputs (which keep constants) has a zero gradient up to rounding, and
# Adam steps it by the sign of that noise: a convolution's before InstanceNorm, a residual
# block's second InstanceNorm's; such biases are left out, as what follows cancels them)
NOISE = {"style": lambda k: (k.endswith("conv2d.bias") and not k.startswith("deconv3"))
         or (k.startswith("res.") and k.endswith("in2.bias"))}


# (whole models: 3-20 s each, cold, most of it building native code; the default run keeps
# the fix's own test below)
SLOW = {"style", "settf", "tabnet", "espcn", "sgns"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in models.NAMES])
def test_trains_as_torch_eager_and_compiled(name):
    t_loss, t_state, _ = _run(torch, name)
    e_loss, e_state, e_notes = _run(llgrad, name)
    c_loss, c_state, c_notes = _run(llgrad, name, compiled=True)
    assert not e_notes, e_notes
    assert not c_notes, c_notes
    rtol = 2e-5
    np.testing.assert_allclose(e_loss, t_loss, rtol=rtol)
    np.testing.assert_allclose(c_loss, e_loss, rtol=rtol)
    noise = NOISE.get(name, lambda k: False)
    close(e_state, t_state, 50 * rtol, "eager vs torch", noise)
    close(c_state, e_state, 50 * rtol, "compiled vs eager", noise)


def test_tensor_type_calls_leave_a_scheduler_dynamic():
    # (TabNet's sparsemax writes `mask.type(x.type())`: the name `type` in its code made every
    # number slot guarded by value, so StepLR's last_epoch and _step_count retraced the step
    # at every call. Tensor.type is no builtin type(): one trace, and eager's numbers.)
    def run(lib, compiled):
        lib.manual_seed(0)
        m = lib.nn.Linear(5, 3)
        opt = lib.optim.Adam(m.parameters(), lr=0.1)
        sched = lib.optim.lr_scheduler.StepLR(opt, step_size=50, gamma=0.5)
        x = lib.randn(4, 5)

        def step():
            opt.zero_grad()
            h = m(x)
            l = (h * (h > 0).type(h.type())).pow(2).mean()
            l.backward()
            opt.step()
            sched.step()
            return l
        step = llgrad.compile(step) if compiled else step
        losses = [float(step()) for _ in range(6)]
        return losses, m.weight.detach().numpy(), getattr(step, "n_traces", 1)

    want, w_want, _ = run(torch, False)
    got, w_got, n_traces = run(llgrad, True)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(w_got, w_want, rtol=1e-5, atol=1e-6)
    assert n_traces == 1
