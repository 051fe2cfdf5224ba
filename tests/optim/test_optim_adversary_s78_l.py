"""Adversarial checks of the optimisers against torch (the oracle): Adam's beta2 edited into
param_groups past [-1, 1] between steps, eagerly and in a compiled step; momenta a schedule
cycles (RAdam's beta1, Muon's momentum, a float beta1 beside a tensor beta2) read by a
compiled step at each call, not traced per value."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _adam_with_edited_beta2(lib, name, beta2, **kw):
    """Two good steps, then a step with betas edited to (0.9, beta2): the error, and the
    weights before and after it."""
    p = lib.nn.Parameter(lib.tensor([1.0, -2.0, 0.5]))
    opt = getattr(lib.optim, name)([p], lr=0.1, **kw)
    for _ in range(2):
        p.grad = lib.tensor([0.3, -1.0, 2.0])
        opt.step()
    before = p.detach().numpy().copy()
    opt.param_groups[0]["betas"] = (0.9, beta2)
    p.grad = lib.tensor([0.3, -1.0, 2.0])
    with pytest.raises(Exception) as info:
        opt.step()
    return info.value, before, p.detach().numpy().copy()


@pytest.mark.parametrize("name,kw", [("Adam", {}), ("Adam", {"amsgrad": True}),
                                     ("AdamW", {}), ("Adam", {"weight_decay": 0.1})])
@pytest.mark.parametrize("beta2", [1.5, 3.0])
def test_adam_beta2_edited_past_one_raises_value_error(name, kw, beta2):
    # torch fails by accident (a complex bias correction: "result type ComplexFloat ...")
    t_err, t_before, t_after = _adam_with_edited_beta2(torch, name, beta2, **kw)
    assert isinstance(t_err, RuntimeError) and "Complex" in str(t_err)
    l_err, l_before, l_after = _adam_with_edited_beta2(llgrad, name, beta2, **kw)
    assert isinstance(l_err, ValueError) and "beta parameter at index 1" in str(l_err)
    np.testing.assert_allclose(l_before, t_before, rtol=1e-6)
    # no weight written (not NaN, not a silently wrong update; torch's raise comes after
    # AdamW's decay of the weights: llgrad checks before writing anything)
    np.testing.assert_array_equal(l_after, l_before)
    if name == "Adam":
        np.testing.assert_array_equal(t_after, t_before)


@pytest.mark.parametrize("beta2", [0.5, -0.5, 1.0])
def test_adam_beta2_edited_within_one_steps_as_torch(beta2):
    # (invalid at construction, but torch's step computes these: so does llgrad's)
    out = []
    for lib in (torch, llgrad):
        p = lib.nn.Parameter(lib.tensor([1.0, -2.0, 0.5]))
        opt = lib.optim.Adam([p], lr=0.1)
        for i in range(4):
            if i == 2:
                opt.param_groups[0]["betas"] = (0.9, beta2)
            p.grad = lib.tensor([0.3, -1.0, 2.0])
            opt.step()
        out.append(p.detach().numpy())
    np.testing.assert_allclose(out[1], out[0], rtol=1e-6)


def _compiled_run(amsgrad, compiled):
    llgrad.manual_seed(0)
    w = llgrad.nn.Parameter(llgrad.randn(4, 3))
    x = llgrad.randn(5, 4)
    opt = llgrad.optim.Adam([w], lr=0.1, amsgrad=amsgrad)

    def step(x):
        opt.zero_grad()
        loss = (x @ w).square().mean()
        loss.backward()
        opt.step()
        return loss
    f = llgrad.compile(step) if compiled else step
    errors, weights = [], []
    for i in range(6):
        opt.param_groups[0]["betas"] = (0.9, {3: 1.5, 4: 1.5, 5: 0.8}.get(i, 0.999))
        try:
            f(x)
        except ValueError as e:
            errors.append((i, "beta parameter at index 1" in str(e)))
        if compiled:
            f.wait()
        weights.append(w.detach().numpy().copy())
    return errors, weights, (f.n_traces if compiled else None)


@pytest.mark.parametrize("amsgrad", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_compiled_adam_beta2_edited_past_one_raises_as_eager(amsgrad):
    # beta2 is an input of the compiled graph (no trace per value): without a guard on it,
    # the graph ran with 1.5 and wrote NaN weights
    e_errors, e_weights, _ = _compiled_run(amsgrad, compiled=False)
    c_errors, c_weights, n_traces = _compiled_run(amsgrad, compiled=True)
    assert e_errors == c_errors == [(3, True), (4, True)]
    for a, b in zip(c_weights, e_weights):
        assert np.isfinite(a).all()
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # a valid beta2 again (0.8, another value) is served by the first trace
    assert n_traces <= 3


def _scheduled_run(lib, opt_name, sched_name, compiled, steps=8):
    rng = np.random.default_rng(0)
    w = lib.nn.Parameter(lib.tensor(rng.standard_normal((6, 4)).astype(np.float32)))
    x = lib.tensor(rng.standard_normal((5, 6)).astype(np.float32))
    makers = {"RAdam": lambda: lib.optim.RAdam([w], lr=0.01, weight_decay=0.1),
              "Muon": lambda: lib.optim.Muon([w], lr=0.02),
              # (tensor lr and betas: OneCycleLR writes (float beta1, tensor beta2))
              "AdamW_T": lambda: lib.optim.AdamW([w], lr=lib.tensor(0.01),
                                                 betas=(lib.tensor(0.9), lib.tensor(0.99)))}
    opt = makers[opt_name]()
    sched = {"onecycle": lambda: lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05,
                                                                  total_steps=20),
             "cyclic": lambda: lib.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.05,
                                                               step_size_up=2)}[sched_name]()

    def step(x):
        opt.zero_grad()
        loss = (x @ w).tanh().square().mean()
        loss.backward()
        opt.step()
        return loss
    f = llgrad.compile(step) if compiled else step
    momenta = []
    for _ in range(steps):
        f(x)
        if compiled:
            f.wait()
        sched.step()
        g = opt.param_groups[0]
        momenta.append(float(g["betas"][0] if "betas" in g else g["momentum"]))
    return w.detach().numpy().copy(), momenta, (f.n_traces if compiled else None)


@pytest.mark.parametrize("opt_name,sched_name", [
    ("RAdam", "onecycle"), pytest.param("RAdam", "cyclic", marks=pytest.mark.slow),
    pytest.param("Muon", "onecycle", marks=pytest.mark.slow), ("Muon", "cyclic"),
    ("AdamW_T", "onecycle")])
def test_scheduled_momentum_does_not_retrace(opt_name, sched_name):
    # OneCycleLR / CyclicLR cycle RAdam's beta1, Muon's momentum, the float beta1 written
    # beside AdamW's tensor beta2: these were guarded Python numbers, a trace per step (up to
    # 7 traces in 8 steps); now graph inputs as Adam's float betas
    t_w, t_m, _ = _scheduled_run(torch, opt_name, sched_name, False)
    e_w, e_m, _ = _scheduled_run(llgrad, opt_name, sched_name, False)
    c_w, c_m, n_traces = _scheduled_run(llgrad, opt_name, sched_name, True)
    assert len(set(t_m)) > 2 and e_m == t_m and c_m == t_m
    np.testing.assert_allclose(e_w, t_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c_w, e_w, rtol=1e-6, atol=1e-6)
    assert n_traces == 1
