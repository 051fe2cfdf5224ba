"""LBFGS with a compiled closure: the closure reaches the optimiser (its zero_grad), and
LBFGS's state (counters, history), which every evaluation changes, is not in its guards:
two traces (the first with no .grad) serve every evaluation, with eager's numbers. The state
stays a mapping (state[p]['n_iter']) and state_dict() gives plain dicts that load back;
LBFGS.step inside a compiled function runs eagerly (a graph break)."""
import warnings

import numpy as np

import llgrad


def _fit(compiled, steps=4):
    llgrad.manual_seed(0)
    w = llgrad.nn.Parameter(llgrad.tensor([[0.5, -0.3], [0.2, 0.1]]))
    x = llgrad.tensor(np.random.default_rng(0).standard_normal((8, 2)).astype(np.float32))
    y = x @ llgrad.tensor([[1.0, 2.0], [-1.0, 0.5]])
    opt = llgrad.optim.LBFGS([w], lr=0.5, max_iter=5, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        return loss

    fn = llgrad.compile(closure) if compiled else closure
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        losses = [opt.step(fn).item() for _ in range(steps)]
    return losses, w.detach().numpy().copy(), opt, fn


def test_compiled_closure_traces_once_and_equals_eager():
    eager, w_eager, opt, _ = _fit(False)
    got, w_got, _, fn = _fit(True)
    # (once: the closure zeroes .grad to None before its backward, so the .grad a call
    # meets does not matter)
    assert fn.n_traces == 1 and len(fn.entries) == 1
    np.testing.assert_allclose(got, eager, rtol=1e-6)
    np.testing.assert_allclose(w_got, w_eager, rtol=1e-6, atol=1e-7)
    assert opt.state[opt.param_groups[0]["params"][0]]["func_evals"] > 4


def test_state_dict_is_plain_dicts_and_loads_back(tmp_path):
    _, _, opt, _ = _fit(False, steps=2)
    sd = opt.state_dict()
    assert all(type(v) is dict for v in sd["state"].values())
    assert {"func_evals", "n_iter", "d", "old_dirs", "H_diag"} <= set(sd["state"][0])
    llgrad.save(sd, tmp_path / "opt.pt")
    loaded = llgrad.load(tmp_path / "opt.pt", weights_only=True)
    w = llgrad.nn.Parameter(llgrad.ones(2, 2))
    opt2 = llgrad.optim.LBFGS([w], lr=0.5, max_iter=5, line_search_fn="strong_wolfe")
    opt2.load_state_dict(loaded)
    assert opt2.state[w]["n_iter"] == sd["state"][0]["n_iter"]

    def closure():
        opt2.zero_grad()
        loss = (w ** 2).sum()
        loss.backward()
        return loss
    opt2.step(closure)
    assert opt2.state[w]["n_iter"] > sd["state"][0]["n_iter"]


def test_lbfgs_step_in_a_compiled_function_runs_eagerly():
    w = llgrad.nn.Parameter(llgrad.tensor([1.0, -2.0]))
    opt = llgrad.optim.LBFGS([w], max_iter=3)

    def closure():
        opt.zero_grad()
        loss = (w ** 2).sum()
        loss.backward()
        return loss

    @llgrad.compile
    def step():
        return opt.step(closure)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):      # (the first call, with no state yet, is not traced)
            step()
    assert any("LBFGS.step" in str(w.message) and "eagerly" in str(w.message) for w in caught)
    assert not step.entries
