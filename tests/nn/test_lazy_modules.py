"""Lazy modules: shapes inferred by the first call, the module turned into its
cls_to_become, an optimiser made before the first call training the real parameters, state
dicts loaded into a lazy model, reprs as torch's, and a compiled training step on a lazy
model equal to the eager one."""
import numpy as np
import pytest

import llgrad
import llgrad.nn as nn

RNG = np.random.default_rng(4)
X = RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)


def _model(lib):
    tnn = lib.nn
    # (no conv bias before BatchNorm: its gradient is rounding noise, which Adam scales up)
    return tnn.Sequential(tnn.LazyConv2d(4, 3, padding=1, bias=False), tnn.LazyBatchNorm2d(),
                          tnn.ReLU(),
                          tnn.Flatten(), tnn.LazyLinear(5))


def test_first_call_materialises_and_swaps_classes():
    m = _model(llgrad)
    opt = llgrad.optim.SGD(m.parameters(), lr=0.1)
    assert m[4].has_uninitialized_params()
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized"):
        m[4].weight.shape
    out = m(llgrad.tensor(X))
    assert tuple(out.shape) == (2, 5)
    assert [type(c).__name__ for c in m] == ["Conv2d", "BatchNorm2d", "ReLU", "Flatten",
                                              "Linear"]
    assert tuple(m[0].weight.shape) == (4, 3, 3, 3) and m[4].in_features == 144
    assert all(type(p) is nn.Parameter for p in m.parameters())
    before = m[4].weight.detach().numpy().copy()
    out.sum().backward()
    opt.step()
    assert not np.array_equal(before, m[4].weight.detach().numpy())


def test_reprs_match_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = _model(llgrad), _model(torch)
    assert repr(ours) == repr(theirs)
    ours(llgrad.tensor(X))
    theirs(torch.tensor(X))
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_load_state_dict_materialises():
    src = _model(llgrad)
    src(llgrad.tensor(X))
    dst = _model(llgrad)
    dst.load_state_dict(src.state_dict())
    np.testing.assert_array_equal(dst[4].weight.detach().numpy(), src[4].weight.detach().numpy())
    dst.eval(), src.eval()
    np.testing.assert_array_equal(dst(llgrad.tensor(X)).detach().numpy(),
                                  src(llgrad.tensor(X)).detach().numpy())
    assert type(dst[4]) is nn.Linear


def test_lazy_conv1d_and_transposed():
    x = llgrad.randn(2, 5, 7)
    assert tuple(nn.LazyConv1d(3, 2)(x).shape) == (2, 3, 6)
    assert tuple(nn.LazyConvTranspose1d(3, 2)(x).shape) == (2, 3, 8)
    assert tuple(nn.LazyConvTranspose2d(3, 2)(llgrad.randn(1, 4, 3, 3)).shape) == (1, 3, 4, 4)
    assert tuple(nn.LazyBatchNorm1d()(llgrad.randn(4, 6)).shape) == (4, 6)
    with pytest.raises(ValueError, match="Expected 3D .unbatched. or 4D .batched. input"):
        nn.LazyConv2d(3, 2)(llgrad.randn(3, 4))


def test_compiled_training_of_a_lazy_model_equals_eager():
    y = llgrad.tensor(RNG.standard_normal((2, 5)).astype(np.float32))

    def run(compiled):
        llgrad.manual_seed(0)
        m = _model(llgrad)
        opt = llgrad.optim.Adam(m.parameters(), lr=0.01)

        def step(x):
            opt.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss.detach()
        fn = llgrad.compile(step) if compiled else step
        losses = [fn(llgrad.tensor(X)).item() for _ in range(4)]
        return losses, [p.detach().numpy().copy() for p in m.parameters()]
    eager, compiled = run(False), run(True)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-5)
    for a, b in zip(compiled[1], eager[1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["LazyBatchNorm1d", "LazyBatchNorm2d", "LazyInstanceNorm1d"])
def test_lazy_norms_take_bias_false(name):
    # (torch 2.x's norm layers take `bias=`, the lazy ones too; llgrad's lazy norms raised
    # TypeError: an unexpected keyword)
    x = X[:, :, :, 0] if name.endswith("1d") else X
    m = getattr(nn, name)(bias=False)
    out = m(llgrad.tensor(x))
    assert m.bias is None and tuple(m.weight.shape) == (3,)
    assert "bias" not in m.state_dict() and "bias=False" in repr(m)
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    assert tuple(out.shape) == x.shape
