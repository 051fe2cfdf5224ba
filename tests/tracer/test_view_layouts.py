"""Views and reshapes after ops whose eager result keeps its input's strides (PyTorch:
an elementwise op on a transposed input gives a transposed-layout result), while the IR
lays such results out contiguous: a `.view` eager could take must still trace (the tracer
reads a contiguous copy where the IR layout cannot be viewed), a `.view` eager refuses
raises the same error compiled, and values, strides and gradients equal eager's and
PyTorch's."""
import numpy as np
import pytest

import llgrad

BACKENDS = ["llvm", "interpret"]


def _written_through_view(x):
    y = x[:9].reshape(3, 3).t() * 2
    z = y.t().view(9)
    z.add_(1)                       # reaches y's memory: eager viewed it
    return y * 1


CHAINS = {
    "issue": lambda x: (x[:9].reshape(3, 3).t() * 2).t().reshape(9),
    "view_after_mul": lambda x: (x[:9].reshape(3, 3).t() * 2).t().view(9),
    "reshape_copies": lambda x: (x[:9].reshape(3, 3).t() * 2).reshape(9),
    "flatten": lambda x: (x[:9].reshape(3, 3).t() + 1).t().flatten(),
    "exp_view_minus1": lambda x: x[:9].reshape(3, 3).t().exp().t().view(-1),
    "permute3": lambda x: x.reshape(2, 3, 4).permute(2, 0, 1).sin().permute(1, 2, 0)
    .reshape(24),
    "permute3_view": lambda x: x.reshape(2, 3, 4).permute(2, 0, 1).sin().permute(1, 2, 0)
    .view(6, 4),
    "unsqueeze": lambda x: x[:12].reshape(3, 4).t().unsqueeze(0).mul(3).squeeze(0).t()
    .view(12),
    "unsqueeze_view": lambda x: (x[:12].reshape(3, 4).t() * 3).unsqueeze(1).transpose(0, 2)
    .view(3, 4),
    "sliced": lambda x: x[:12].reshape(3, 4).t()[1:3].neg().t().reshape(6),
    "strided_slice": lambda x: x[:12].reshape(3, 4)[:, ::2].t().mul(2).t().reshape(6),
    "expanded": lambda x: x[:12].reshape(4, 1, 3).expand(4, 2, 3).transpose(0, 2).mul(1.5)
    .transpose(0, 2).reshape(24),
    "expand_after": lambda x: (x[:9].reshape(3, 3).t() * 2).t().unsqueeze(1).expand(3, 2, 3)
    .reshape(18),
    "contiguous_noop": lambda x: (x[:12].reshape(3, 4).t() * 2).t().contiguous().view(12),
    "contiguous_copy": lambda x: x[:12].reshape(3, 4).t().contiguous().view(12),
    "binary_mixed": lambda x: (x[:12].reshape(3, 4).t() + x[12:].reshape(4, 3)).t()
    .reshape(12),
    "view_as": lambda x: (x[:9].reshape(3, 3).t() * 2).t().view_as(x[:9]),
    "unflatten": lambda x: (x[:12].reshape(3, 4).t() * 2).t().unflatten(1, (2, 2)),
    "twice": lambda x: x[:12].reshape(2, 6).t().tanh().t().reshape(3, 4).t().reshape(12),
    "through_sum": lambda x: (x.reshape(2, 3, 4).transpose(0, 2) * 2).sum(1).t().reshape(8),
    "written_through_view": _written_through_view,
    # returned as eager lays them out (the IR's own layout is contiguous)
    "returned_transposed": lambda x: x[:9].reshape(3, 3).t() * 2,
    "returned_expanded": lambda x: (x[:9].reshape(3, 3).t() * 2).unsqueeze(0)
    .expand(2, 3, 3),
    "returned_size1": lambda x: x[:3].reshape(3, 1).t().unsqueeze(2) * 2,
    "returned_slice": lambda x: (x[:12].reshape(3, 4).t() * 2)[1:, ::2],
}


def _run(fn, lib, a, w):
    x = lib.tensor(a, requires_grad=True)
    out = fn(x)
    (out * lib.tensor(w[:out.numel()]).reshape(out.shape)).sum().backward()
    return out, x.grad


def _inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal(24).astype(np.float32),
            rng.standard_normal(24).astype(np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CHAINS))
def test_chain_compiled_equals_eager(name, backend):
    fn = CHAINS[name]
    a, w = _inputs()
    want, want_grad = _run(fn, llgrad, a, w)
    cf = llgrad.compile(fn, backend=backend, fullgraph=True)
    for _ in range(2):              # the tracing call, then a compiled call
        got, got_grad = _run(cf, llgrad, a, w)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(got_grad.numpy(), want_grad.numpy(), rtol=1e-6)
        assert got.stride() == want.stride() and got.shape == want.shape
    assert cf.n_traces == 1


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_chain_matches_torch(name):
    torch = pytest.importorskip("torch")
    fn = CHAINS[name]
    a, w = _inputs()
    want, want_grad = _run(fn, torch, a, w)
    got, got_grad = _run(llgrad.compile(fn, fullgraph=True), llgrad, a, w)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(got_grad.numpy(), want_grad.numpy(), rtol=1e-5)
    # (a size-1 dim's stride is arbitrary: llgrad's eager views keep NumPy's)
    assert [s for s, n in zip(got.stride(), got.shape) if n > 1] == \
        [s for s, n in zip(want.stride(), want.shape) if n > 1]


VIEW_ERRORS = {
    "transposed_result": lambda x: (x.reshape(3, 4).t() * 2).view(12),
    "view_of_t_of_view": lambda x: (x.reshape(3, 4).t() * 2).t().view(3, 4).t().view(12),
    "sliced_result": lambda x: x.reshape(3, 4)[:, ::2].t().exp().view(6),
}


@pytest.mark.parametrize("name", sorted(VIEW_ERRORS))
def test_view_raises_where_torch_does(name):
    fn = VIEW_ERRORS[name]
    msg = "view size is not compatible with input tensor's size and stride"
    x = llgrad.arange(12.0)
    with pytest.raises(RuntimeError, match=msg):
        fn(x)
    with pytest.raises(RuntimeError, match=msg):
        llgrad.compile(fn)(x)
    try:
        import torch
    except ImportError:
        return
    with pytest.raises(RuntimeError, match=msg):
        fn(torch.arange(12.0))
