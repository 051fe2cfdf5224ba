"""llgrad.nn.utils.prune against torch.nn.utils.prune: masks of the deterministic methods
(equal on data without ties), iterative pruning through PruningContainer, global pruning,
the reparametrisation (weight_orig / weight_mask, the forward pre-hook, state_dict keys),
remove, the validation errors, and a pruned model's training step: eager, compiled and
PyTorch's equal."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
import llgrad.nn.utils.prune as lprune  # noqa: E402
import torch.nn.utils.prune as tprune  # noqa: E402


def _pair(make):
    """The same model in PyTorch and in llgrad (llgrad's initialised from PyTorch's)."""
    torch.manual_seed(0)
    tm = make(torch)
    lm = make(llgrad)
    lm.load_state_dict({k: llgrad.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return tm, lm


def _net(t):
    return t.nn.Sequential(t.nn.Conv2d(2, 4, 3), t.nn.ReLU(), t.nn.Flatten(),
                           t.nn.Linear(4 * 4 * 4, 5))


def _eq(a, b, what=""):
    np.testing.assert_array_equal(np.asarray(b.detach().numpy()), a.detach().numpy(),
                                  err_msg=what)


def _both(fn):
    tm, lm = _pair(_net)
    fn(tprune, tm, torch)
    fn(lprune, lm, llgrad)
    return tm, lm


def _same_state(tm, lm):
    ts, ls = tm.state_dict(), lm.state_dict()
    assert list(ls) == list(ts)
    for k in ts:
        _eq(ts[k], ls[k], k)


@pytest.mark.parametrize("amount", [0.3, 7, 0.0, 1.0])
def test_l1_unstructured_mask_and_reparametrisation(amount):
    def f(P, m, t):
        P.l1_unstructured(m[0], "weight", amount=amount)
        P.l1_unstructured(m[3], name="bias", amount=amount if amount != 7 else 2)
    tm, lm = _both(f)
    _same_state(tm, lm)
    assert [n for n, _ in lm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in lm.named_buffers()] == [n for n, _ in tm.named_buffers()]
    _eq(tm[0].weight, lm[0].weight)
    assert "weight" not in lm[0]._parameters and isinstance(lm[0].weight_orig,
                                                            llgrad.nn.Parameter)
    hooks = list(lm[0]._forward_pre_hooks.values())
    assert len(hooks) == 1 and isinstance(hooks[0], lprune.L1Unstructured)
    assert hooks[0]._tensor_name == "weight"
    assert lprune.is_pruned(lm) and not lprune.is_pruned(_net(llgrad))


def test_importance_scores_and_ln_structured():
    scores = np.random.default_rng(1).standard_normal((4, 2, 3, 3)).astype(np.float32)

    def f(P, m, t):
        P.l1_unstructured(m[0], "weight", amount=0.25, importance_scores=t.tensor(scores))
        P.ln_structured(m[3], "weight", amount=0.4, n=2, dim=0)
    tm, lm = _both(f)
    _same_state(tm, lm)
    for n, dim in ((1, 1), (2, -1), (float("inf"), 0), (-float("inf"), 2)):
        tm, lm = _both(lambda P, m, t: P.ln_structured(m[0], "weight", amount=1, n=n, dim=dim))
        _same_state(tm, lm)


def test_iterative_pruning_combines_masks_through_a_container():
    def f(P, m, t):
        P.l1_unstructured(m[0], "weight", amount=0.2)
        P.ln_structured(m[0], "weight", amount=0.5, n=2, dim=0)
        P.l1_unstructured(m[0], "weight", amount=10)
        P.ln_structured(m[3], "weight", amount=2, n=1, dim=1)
        P.l1_unstructured(m[3], "weight", amount=0.5)
        P.custom_from_mask(m[3], "bias", mask=t.tensor([1., 0., 1., 1., 0.]))
        P.identity(m[3], "bias")
    tm, lm = _both(f)
    _same_state(tm, lm)
    hook = next(iter(lm[0]._forward_pre_hooks.values()))
    assert isinstance(hook, lprune.PruningContainer) and len(hook) == 3
    assert [type(h).__name__ for h in hook] == ["L1Unstructured", "LnStructured",
                                                "L1Unstructured"]
    assert isinstance(hook[1], lprune.LnStructured)


def test_global_unstructured_and_prune_method():
    def f(P, m, t):
        P.l1_unstructured(m[3], "weight", amount=0.1)
        P.global_unstructured([(m[0], "weight"), (m[3], "weight"), (m[3], "bias")],
                              pruning_method=P.L1Unstructured, amount=0.6)
    tm, lm = _both(f)
    _same_state(tm, lm)
    x = np.array([[3., -1., 0.5], [2., -4., 0.1]], np.float32)
    want = tprune.L1Unstructured(amount=2).prune(torch.tensor(x))
    _eq(want, lprune.L1Unstructured(amount=2).prune(llgrad.tensor(x)))
    s = -x[::-1].copy()
    want = tprune.LnStructured(1, n=1, dim=1).prune(torch.tensor(x),
                                                    importance_scores=torch.tensor(s))
    _eq(want, lprune.LnStructured(1, n=1, dim=1).prune(llgrad.tensor(x),
                                                       importance_scores=llgrad.tensor(s)))


def test_remove_makes_pruning_permanent():
    def f(P, m, t):
        P.l1_unstructured(m[0], "weight", amount=0.5)
        P.random_unstructured(m[3], "bias", amount=0.0)
        P.remove(m[0], "weight")
        P.remove(m[3], "bias")
    tm, lm = _both(f)
    _same_state(tm, lm)
    assert isinstance(lm[0].weight, llgrad.nn.Parameter) and not lprune.is_pruned(lm)
    assert not lm[0]._forward_pre_hooks
    with pytest.raises(ValueError, match="has to be pruned before pruning can be removed"):
        lprune.remove(lm[0], "weight")


def test_random_methods_prune_the_asked_amount():
    llgrad.manual_seed(0)
    m = _net(llgrad)
    lprune.random_unstructured(m[0], "weight", amount=0.25)
    assert int((m[0].weight_mask == 0).sum()) == round(0.25 * 72)
    lprune.random_structured(m[3], "weight", amount=2, dim=0)
    rows = m[3].weight_mask.sum(1)
    assert int((rows == 0).sum()) == 2 and int((rows == 64).sum()) == 3
    lprune.random_structured(m[3], "weight", amount=1, dim=0)      # (prunes a kept row)
    assert int((m[3].weight_mask.sum(1) == 0).sum()) == 3


def test_validation_errors_as_torch():
    for P, t in ((tprune, torch), (lprune, llgrad)):
        m = t.nn.Linear(3, 2)
        with pytest.raises(ValueError, match=r"amount=-1 should either be a float in the range"):
            P.l1_unstructured(m, "weight", amount=-1)
        with pytest.raises(ValueError, match=r"amount=1.5 should either"):
            P.random_unstructured(m, "weight", amount=1.5)
        with pytest.raises(TypeError, match="Invalid type for amount: a. Must be int or float"):
            P.L1Unstructured("a")
        with pytest.raises(ValueError, match="amount=7 should be smaller than the number of "
                                             "parameters to prune=6"):
            P.l1_unstructured(m, "weight", amount=7)
        assert "weight" in m._parameters and "weight_orig" not in m._parameters
        with pytest.raises(ValueError, match="Structured pruning can only be applied to "
                                             "multidimensional tensors"):
            P.ln_structured(m, "bias", amount=1, n=2, dim=0)
        with pytest.raises(IndexError, match="Invalid index 2 for tensor of size"):
            P.random_structured(m, "weight", amount=1, dim=2)
        with pytest.raises(AssertionError, match="importance_scores should have the same shape"):
            P.l1_unstructured(m, "weight", amount=1, importance_scores=t.ones(3))
        with pytest.raises(TypeError, match="Only \"unstructured\" PRUNING_TYPE supported"):
            P.global_unstructured([(m, "weight")], P.LnStructured, amount=1, n=2)
        with pytest.raises(TypeError, match="parameters is not an Iterable"):
            P.global_unstructured(3, P.L1Unstructured, amount=1)
        with pytest.raises(AttributeError, match="_tensor_name"):
            P.PruningContainer(P.L1Unstructured(1))
        method = P.L1Unstructured(1)
        method._tensor_name = "weight"
        c = P.PruningContainer(method)
        other = P.L1Unstructured(1)
        other._tensor_name = "bias"
        with pytest.raises(ValueError, match="Can only add pruning methods acting on the "
                                             "parameter named 'weight'"):
            c.add_pruning_method(other)
        with pytest.raises(TypeError, match="is not a BasePruningMethod subclass"):
            c.add_pruning_method(3)
        assert not P.is_pruned(m)


def _train(m, step_fn, x, y, steps=3):
    losses = []
    for _ in range(steps):
        losses.append(float(step_fn(x, y)))
    return losses


def _step(t, m, opt):
    def step(x, y):
        opt.zero_grad()
        loss = t.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


@pytest.mark.parametrize("backend", ["llvm", "interpret"])
def test_pruned_model_trains_as_torch_eager_and_compiled(backend):
    def prune(P, m, t):
        P.l1_unstructured(m[0], "weight", amount=0.3)
        P.ln_structured(m[3], "weight", amount=2, n=2, dim=0)
        P.l1_unstructured(m[3], "weight", amount=0.2)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 2, 6, 6)).astype(np.float32)
    y = rng.integers(0, 5, 6)
    tm, le = _pair(_net)
    tm2, lc = _pair(_net)
    prune(tprune, tm, torch)
    prune(lprune, le, llgrad)
    prune(lprune, lc, llgrad)
    tl = _train(tm, _step(torch, tm, torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)),
                torch.tensor(x), torch.tensor(y))
    el = _train(le, _step(llgrad, le, llgrad.optim.SGD(le.parameters(), lr=0.1, momentum=0.9)),
                llgrad.tensor(x), llgrad.tensor(y))
    cm = llgrad.compile(lc, backend=backend)
    opt = llgrad.optim.SGD(lc.parameters(), lr=0.1, momentum=0.9)

    def cstep(x, y):
        opt.zero_grad()
        loss = llgrad.nn.functional.cross_entropy(cm(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    cl = _train(lc, cstep, llgrad.tensor(x), llgrad.tensor(y))
    np.testing.assert_allclose(el, tl, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cl, el, rtol=1e-5, atol=1e-6)
    for (k, a), (_, b), (_, c) in zip(tm.state_dict().items(), le.state_dict().items(),
                                      lc.state_dict().items()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
        np.testing.assert_allclose(c.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    # module.weight: the pre-hook's product of the last forward (before the last step)
    for m in (le, lc):
        np.testing.assert_allclose(m[0].weight.detach().numpy(), tm[0].weight.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
        assert m[0].weight.grad_fn is not None
    assert not cm.graph_breaks


def test_pruned_model_compiled_step_as_one_function():
    """The whole step (forward, backward, SGD update) compiled: pre-hook traced in it."""
    rng = np.random.default_rng(3)
    x = llgrad.tensor(rng.standard_normal((4, 3)).astype(np.float32))
    y = llgrad.tensor(rng.standard_normal((4, 2)).astype(np.float32))
    models = []
    for _ in range(2):
        llgrad.manual_seed(0)
        m = llgrad.nn.Sequential(llgrad.nn.Linear(3, 4), llgrad.nn.Tanh(), llgrad.nn.Linear(4, 2))
        lprune.l1_unstructured(m[0], "weight", amount=5)
        lprune.custom_from_mask(m[2], "bias", mask=llgrad.tensor([1., 0.]))
        models.append(m)

    def make_step(m):
        opt = llgrad.optim.SGD(m.parameters(), lr=0.05)

        def step(x, y):
            opt.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss.detach()
        return step
    eager, compiled = make_step(models[0]), llgrad.compile(make_step(models[1]))
    for _ in range(3):
        np.testing.assert_allclose(float(compiled(x, y)), float(eager(x, y)), rtol=1e-5)
    for (k, a), (_, b) in zip(models[0].state_dict().items(), models[1].state_dict().items()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-7, err_msg=k)
    assert float(models[1][2].bias[1].detach()) == 0.0
    assert not compiled.graph_breaks and compiled.n_traces <= 2


def test_ties_prune_as_torch_topk():
    """Among tied importances the entries pruned are those PyTorch's CPU topk picks (its
    nth_element's order, ir/select_order.py), not the lowest indices."""
    t = llgrad.tensor([1., 0.5, 0.5, 0.5, 2.])
    mask = lprune.L1Unstructured(2).compute_mask(t, llgrad.ones(5))
    want = tprune.L1Unstructured(2).compute_mask(torch.tensor(t.numpy()), torch.ones(5))
    assert mask.tolist() == want.tolist() == [1., 0., 1., 0., 1.]
    w = llgrad.tensor([[1., 1.], [2., 0.], [0., 2.]])         # equal column norms
    mask = lprune.LnStructured(1, n=1, dim=1).compute_mask(w, llgrad.ones(3, 2))
    assert mask.tolist() == [[1., 0.], [1., 0.], [1., 0.]]     # (keeps the lower index)
