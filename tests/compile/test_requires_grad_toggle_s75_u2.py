"""A compiled step that freezes or unfreezes a layer by `requires_grad_` (a fine-tuning
schedule: the backbone frozen every other step) is kept as compiled code: the flag the run
set on a parameter is replayed (side_effects._grad_switched_on), also where the optimiser
reaches the same parameter again (its param_groups and state keys). It was traced on every
call, never kept, silently: the other paths' items counted as an unreplayed change."""
import numpy as np

import llgrad


def _run(compiled, opt_name):
    llgrad.manual_seed(0)
    nn, F = llgrad.nn, llgrad.nn.functional
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    opt = getattr(llgrad.optim, opt_name)(model.parameters(), lr=0.1)

    def step(x, y, freeze):
        model[0].requires_grad_(not freeze)
        loss = F.mse_loss(model(x).squeeze(1), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()
    fn = llgrad.compile(step) if compiled else step
    rng = np.random.default_rng(0)
    losses, flags = [], []
    for t in range(8):
        x = llgrad.tensor(rng.standard_normal((6, 3)).astype(np.float32))
        y = llgrad.tensor(rng.standard_normal(6).astype(np.float32))
        losses.append(fn(x, y, t % 2 == 0).item())
        flags.append([p.requires_grad for p in model.parameters()])
    return fn, losses, flags, [p.detach().numpy().copy() for p in model.parameters()]


def test_requires_grad_toggled_in_the_step_is_compiled():
    for opt_name in ("SGD", "Adam"):
        _, losses, flags, params = _run(False, opt_name)
        cf, c_losses, c_flags, c_params = _run(True, opt_name)
        np.testing.assert_allclose(c_losses, losses, rtol=1e-5)
        assert c_flags == flags
        for a, b in zip(c_params, params):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
        assert len(cf.entries) == 2, (opt_name, cf.n_traces)    # (frozen, and not)
        assert cf.n_traces <= 3, opt_name
