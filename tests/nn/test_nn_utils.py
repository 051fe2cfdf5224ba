"""llgrad.nn.utils (clip_grad_norm_, clip_grad_value_, get_total_norm, parameters_to_vector,
vector_to_parameters) against torch.nn.utils when installed, and by hand."""
import math
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn

RNG = np.random.default_rng(3)
GRADS = [RNG.standard_normal(s).astype(np.float32) * 3 for s in [(4, 3), (3,), (2, 2, 2)]]


def _torch():
    return pytest.importorskip("torch")


def params_with_grads(lib, grads=GRADS, none_at=None):
    ps = []
    for i, g in enumerate(grads):
        p = lib.tensor(np.ones_like(g), requires_grad=True)
        if i != none_at:
            p.grad = lib.tensor(g.copy())
        ps.append(p)
    return ps


NORMS = [2, 2.0, 1, math.inf, -math.inf, 0, 3, 0.5, "inf"]


@pytest.mark.parametrize("max_norm", [0.5, 1e6])
@pytest.mark.parametrize("norm_type", NORMS, ids=[str(n) for n in NORMS])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    torch = _torch()
    res = []
    for lib in (llgrad, torch):
        ps = params_with_grads(lib, none_at=1)
        total = lib.nn.utils.clip_grad_norm_(ps, max_norm, norm_type=norm_type)
        assert isinstance(total, lib.Tensor) and total.dim() == 0
        res.append((float(total), [None if p.grad is None else p.grad.numpy().copy()
                                   for p in ps]))
    (n, grads), (tn, tgrads) = res
    assert n == pytest.approx(tn, rel=1e-6)
    for g, tg in zip(grads, tgrads):
        if tg is None:
            assert g is None
        else:
            np.testing.assert_allclose(g, tg, rtol=1e-6, atol=1e-7)


def test_clip_grad_norm_forms_match_torch():
    """A single tensor, a generator, no gradient at all, error_if_nonfinite."""
    torch = _torch()
    for lib in (llgrad, torch):
        p = lib.tensor([3.0, 4.0], requires_grad=True)
        p.grad = lib.tensor([3.0, 4.0])
        assert float(lib.nn.utils.clip_grad_norm_(p, 1.0)) == 5.0
        np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-5)
        assert float(lib.nn.utils.clip_grad_norm_([lib.zeros(2, requires_grad=True)], 1.0)) == 0
        with pytest.warns(UserWarning, match="`parameters` is an empty generator"):
            lib.nn.utils.clip_grad_norm_((q for q in []), 1.0)
        p.grad = lib.tensor([float("nan"), 1.0])
        with pytest.raises(RuntimeError) as info:
            lib.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
        assert str(info.value) == (
            "The total norm of order 2.0 for gradients from `parameters` is non-finite, so it "
            "cannot be clipped. To disable this error and scale the gradients by the non-finite "
            "norm anyway, set `error_if_nonfinite=False`")
        p.grad = lib.tensor([float("inf"), 1.0])
        with np.errstate(invalid="ignore"):           # (inf * 0: NumPy would warn)
            total = lib.nn.utils.clip_grad_norm_([p], 1.0, foreach=False)   # scales anyway
        assert math.isinf(float(total))


def test_get_total_norm_and_clip_grads_with_norm_match_torch():
    torch = _torch()
    out = []
    for lib in (llgrad, torch):
        ps = params_with_grads(lib)
        total = lib.nn.utils.get_total_norm([p.grad for p in ps], norm_type=3.0)
        lib.nn.utils.clip_grads_with_norm_(ps, 2.0, total)
        out.append((float(total), [p.grad.numpy().copy() for p in ps]))
    assert out[0][0] == pytest.approx(out[1][0], rel=1e-6)
    for g, tg in zip(out[0][1], out[1][1]):
        np.testing.assert_allclose(g, tg, rtol=1e-6)


@pytest.mark.parametrize("clip", [0.5, 2, 100.0])
def test_clip_grad_value_matches_torch(clip):
    torch = _torch()
    out = []
    for lib in (llgrad, torch):
        ps = params_with_grads(lib, none_at=0)
        assert lib.nn.utils.clip_grad_value_(ps, clip) is None
        out.append([None if p.grad is None else p.grad.numpy().copy() for p in ps])
    for g, tg in zip(*out):
        assert (g is None) == (tg is None)
        if g is not None:
            np.testing.assert_array_equal(g, tg)


def test_clip_by_hand():
    p = llgrad.tensor([1.0, 1.0], requires_grad=True)
    p.grad = llgrad.tensor([6.0, 8.0])
    total = nn.utils.clip_grad_norm_([p], 5.0)
    assert total.item() == 10.0
    np.testing.assert_allclose(p.grad.numpy(), [3.0, 4.0], rtol=1e-6)
    nn.utils.clip_grad_value_(p, 3.5)
    np.testing.assert_allclose(p.grad.numpy(), [3.0, 3.5], rtol=1e-6)
    with pytest.warns(FutureWarning, match="clip_grad_norm` is now deprecated"):
        nn.utils.clip_grad_norm([p], 1.0)


def test_clip_grad_norm_does_not_record():
    p = llgrad.tensor([3.0, 4.0], requires_grad=True)
    p.grad = llgrad.tensor([3.0, 4.0], requires_grad=True) * 1.0     # a grad with history
    total = nn.utils.clip_grad_norm_([p], 1.0)
    assert not total.requires_grad


def test_parameters_to_vector_and_back_match_torch():
    torch = _torch()
    out = []
    for lib in (llgrad, torch):
        lin = lib.nn.Linear(3, 2)
        with lib.no_grad():
            lin.weight.copy_(lib.tensor([[1.0, 2, 3], [4, 5, 6]]))
            lin.bias.copy_(lib.tensor([7.0, 8]))
        vec = lib.nn.utils.parameters_to_vector(lin.parameters())
        assert vec.requires_grad and vec.shape == (8,)
        new = lib.arange(8.0) * 10
        lib.nn.utils.vector_to_parameters(new, lin.parameters())
        new[0] = -1.0                                  # the parameters view `new`
        out.append((vec.detach().numpy().copy(), lin.weight.detach().numpy().copy(),
                    lin.bias.detach().numpy().copy(), type(lin.weight).__name__))
        with pytest.raises(TypeError) as info:
            lib.nn.utils.vector_to_parameters([1.0], lin.parameters())
        out.append(str(info.value))
    for a, b in zip(out[0][:3], out[2][:3]):
        np.testing.assert_array_equal(a, b)
    assert out[0][3] == out[2][3] == "Parameter"
    assert out[0][1][0, 0] == -1.0
    assert out[1] == out[3] == "expected torch.Tensor, but got: list"


def test_clip_inside_a_compiled_step_equals_eager():
    """clip_grad_norm_ has no branch on the norm: the compiled step is traced once per
    state change, not once per clipping decision."""
    def make():
        llgrad.manual_seed(0)
        m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
        return m, llgrad.optim.SGD(m.parameters(), lr=0.5, momentum=0.9)

    llgrad.manual_seed(1)
    x, y = llgrad.randn(16, 4), llgrad.randint(0, 3, (16,))

    def step(model, opt):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 0.3)
        nn.utils.clip_grad_value_(model.parameters(), 0.05)
        opt.step()
        return loss.detach(), norm

    compiled = llgrad.compile(step)
    runs = []
    for fn in (step, compiled):
        m, o = make()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = [[v.item() for v in fn(m, o)] for _ in range(6)]
        runs.append((out, [p.detach().numpy().copy() for p in m.parameters()]))
    assert compiled.n_traces <= 2
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-5)
    for p, q in zip(runs[0][1], runs[1][1]):
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6)
