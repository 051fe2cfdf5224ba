"""Rprop, ASGD and LBFGS against torch.optim (when installed): parameter trajectories and
state from the same start on the same problem, the checks on bad arguments; and compiled
Rprop / ASGD steps equal to eager ones."""
import numpy as np
import pytest

import llgrad

RNG = np.random.default_rng(3)
X = RNG.standard_normal((16, 5))
Y = RNG.standard_normal((16, 2))
W0 = RNG.standard_normal((5, 2)) * 0.5
B0 = RNG.standard_normal(2) * 0.1


def _torch():
    return pytest.importorskip("torch")


def _problem(lib, dtype):
    dt = getattr(lib, dtype)
    w = lib.tensor(W0, dtype=dt, requires_grad=True)
    b = lib.tensor(B0, dtype=dt, requires_grad=True)
    x, y = lib.tensor(X, dtype=dt), lib.tensor(Y, dtype=dt)

    def loss():
        return ((x @ w + b).tanh() - y).pow(2).mean() + 0.01 * (w * w).sum()
    return [w, b], loss


def _run(lib, name, kwargs, steps, dtype="float64"):
    params, loss = _problem(lib, dtype)
    opt = getattr(lib.optim, name)(params, **kwargs)
    losses = []
    for _ in range(steps):
        def closure():
            opt.zero_grad()
            value = loss()
            value.backward()
            return value
        if name == "LBFGS":
            losses.append(float(opt.step(closure).detach()))
        else:
            losses.append(float(closure().detach()))
            opt.step()
    return losses, [p.detach().numpy().copy() for p in params], opt


CASES = [
    ("Rprop", dict(), 25),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-4, 0.2), maximize=False), 25),
    ("ASGD", dict(lr=0.05), 25),
    ("ASGD", dict(lr=0.05, t0=5, lambd=0.01, weight_decay=0.1), 25),
    ("LBFGS", dict(lr=0.5, max_iter=5), 4),
    ("LBFGS", dict(lr=1, max_iter=10, history_size=3, line_search_fn="strong_wolfe"), 4),
]


@pytest.mark.parametrize("name,kwargs,steps", CASES, ids=[f"{n}-{i}" for i, (n, _, _) in
                                                          enumerate(CASES)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_trajectory_matches_torch(name, kwargs, steps, dtype):
    torch = _torch()
    if dtype == "float32" and name == "LBFGS":
        steps = 1       # (later steps: float32 rounding chooses other line-search branches)
    ours = _run(llgrad, name, kwargs, steps, dtype)
    theirs = _run(torch, name, kwargs, steps, dtype)
    # (L-BFGS's dot products and line search amplify the summation order's last bits)
    tol = dict(rtol=1e-7 if name == "LBFGS" else 1e-9, atol=1e-12) if dtype == "float64" \
        else dict(rtol=2e-4, atol=5e-5 if name == "LBFGS" else 1e-5)    # (CPU-dependent)
    np.testing.assert_allclose(ours[0], theirs[0], **tol)
    for a, b in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(a, b, **tol)
    sd, tsd = ours[2].state_dict(), theirs[2].state_dict()
    assert sorted(sd["state"][0]) == sorted(tsd["state"][0])
    assert sd["param_groups"] == [{k: v for k, v in g.items()} for g in tsd["param_groups"]]


def test_lbfgs_minimises_rosenbrock_as_torch():
    torch = _torch()
    out = []
    for lib in (llgrad, torch):
        xy = lib.tensor([-1.5, 2.0], dtype=lib.float64, requires_grad=True)
        opt = lib.optim.LBFGS([xy], lr=1, max_iter=50, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            f = (1 - xy[0]) ** 2 + 100 * (xy[1] - xy[0] ** 2) ** 2
            f.backward()
            return f
        for _ in range(3):
            opt.step(closure)
        out.append((xy.detach().numpy().copy(), opt.state[xy]["func_evals"],
                    opt.state[xy]["n_iter"]))
    np.testing.assert_allclose(out[0][0], [1.0, 1.0], atol=1e-5)
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-8, atol=1e-10)
    assert out[0][1:] == out[1][1:]


def test_bad_arguments():
    p = [llgrad.zeros(2, requires_grad=True)]
    with pytest.raises(ValueError, match="Invalid eta values: 1.5, 1.2"):
        llgrad.optim.Rprop(p, etas=(1.5, 1.2))
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        llgrad.optim.ASGD(p, lr=-1)
    with pytest.raises(ValueError, match="Invalid weight_decay value: -0.1"):
        llgrad.optim.ASGD(p, weight_decay=-0.1)
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        llgrad.optim.LBFGS([{"params": p}, {"params": [llgrad.zeros(1, requires_grad=True)]}])
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt = llgrad.optim.LBFGS(p, line_search_fn="armijo")

        def closure():
            opt.zero_grad()
            loss = ((p[0] - 1) ** 2).sum()
            loss.backward()
            return loss
        opt.step(closure)


@pytest.mark.parametrize("name,kwargs", [("Rprop", dict(lr=0.05)),
                                         ("ASGD", dict(lr=0.05, t0=3))])
def test_compiled_step_equals_eager(name, kwargs):
    def run(compiled):
        params, loss = _problem(llgrad, "float32")
        opt = getattr(llgrad.optim, name)(params, **kwargs)

        def step():
            opt.zero_grad()
            value = loss()
            value.backward()
            opt.step()
            return value.detach()
        fn = llgrad.compile(step) if compiled else step
        losses = [fn().item() for _ in range(8)]
        return losses, [p.detach().numpy().copy() for p in params]
    eager, compiled = run(False), run(True)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-5)
    for a, b in zip(compiled[1], eager[1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
