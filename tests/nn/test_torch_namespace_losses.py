"""torch.cosine_embedding_loss, hinge_embedding_loss, margin_ranking_loss,
triplet_margin_loss and poisson_nll_loss: torch.nn.functional's losses under ATen's argument
order and reduction numbers (0 none, 1 mean, 2 sum, any other none; torch 2.13 binds the
default as none), against torch: values, float64 gradients, errors; compiled == eager."""
import warnings

import numpy as np
import pytest

import llgrad

RNG = np.random.default_rng(5)
A, B, C = (RNG.standard_normal((4, 5)) for _ in range(3))
SIGN = np.array([1.0, -1.0, 1.0, -1.0])

CASES = [
    lambda L, a, b, c: L.cosine_embedding_loss(a, b, L.tensor(SIGN)),
    lambda L, a, b, c: L.cosine_embedding_loss(a, b, L.tensor(SIGN).long(), 0.2, 1),
    lambda L, a, b, c: L.hinge_embedding_loss(a, L.tensor(np.sign(C)), 0.5, 2),
    lambda L, a, b, c: L.hinge_embedding_loss(a, L.tensor(np.sign(C))),
    lambda L, a, b, c: L.margin_ranking_loss(a[0], b[0], L.tensor(np.sign(C[0])), 0.1, 1),
    lambda L, a, b, c: L.margin_ranking_loss(a, b, L.tensor(np.sign(C)), reduction=7),
    lambda L, a, b, c: L.triplet_margin_loss(a, b, c),
    lambda L, a, b, c: L.triplet_margin_loss(a, b, c, 0.5, 3.0, 1e-3, True, 2),
    lambda L, a, b, c: L.poisson_nll_loss(a, L.tensor(np.abs(C)), True, False, 1e-8, 1),
    lambda L, a, b, c: L.poisson_nll_loss(a.abs() + 0.1, L.tensor(np.abs(C) * 3), False, True,
                                          1e-6, 0),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_torch_losses_match_torch(case):
    torch = pytest.importorskip("torch")
    got = []
    for lib in (llgrad, torch):
        ts = [lib.tensor(x, requires_grad=True) for x in (A, B, C)]
        out = CASES[case](lib, *ts)
        cot = np.random.default_rng(2).standard_normal(tuple(out.shape))
        (out * lib.tensor(cot)).sum().backward()
        got.append([out.detach().numpy()] + [t.grad.numpy() if t.grad is not None else None
                                             for t in ts])
    for a, b in zip(*got):
        if b is None:
            assert a is None
            continue
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_reduction_must_be_an_int_as_torch():
    torch = pytest.importorskip("torch")
    for lib in (llgrad, torch):
        a = lib.tensor(A)
        with pytest.raises(TypeError, match=r"hinge_embedding_loss\(\): argument 'reduction' "
                                            r"\(position 4\) must be int, not str"):
            lib.hinge_embedding_loss(a, a.sign(), 1.0, "mean")
        with pytest.raises(TypeError):
            lib.poisson_nll_loss(a, a.abs(), True, False, 1e-8)        # (all required)


def test_gradcheck_and_compiled_equals_eager():
    ts = [llgrad.tensor(x, requires_grad=True) for x in (A, B, C)]
    for case in CASES:
        assert llgrad.autograd.gradcheck(lambda a, b, c: case(llgrad, a, b, c), ts)

    def loss(a, b, c):
        return sum(case(llgrad, a, b, c).sum() for case in CASES)
    runs = []
    for fn in (loss, llgrad.compile(loss)):
        for _ in range(2):
            xs = [llgrad.tensor(x, requires_grad=True) for x in (A, B, C)]
            with warnings.catch_warnings():
                warnings.simplefilter("error")          # (no graph break)
                value = fn(*xs)
        value.backward()
        runs.append([value.item()] + [x.grad.numpy() for x in xs])
    for a, b in zip(*runs):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
