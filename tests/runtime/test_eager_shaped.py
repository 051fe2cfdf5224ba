"""Eager convolutions on kernels built for their shapes (compile/eager_shaped.py: the
compiled path's lowering of the op alone): the values and gradients of the NumPy
implementations within rounding, and torch's, over strides, paddings, dilations, groups
(depthwise), a strided gradient (sum's), float64; small calls keep NumPy's."""
import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_builds, eager_shaped
from llgrad.runtime import dispatch

CASES = [  # input shape, weight shape, stride, padding, dilation, groups
    ((8, 3, 64, 64), (8, 3, 3, 3), 1, 1, 1, 1),
    ((8, 16, 24, 24), (32, 16, 3, 3), 2, 1, 1, 1),
    ((4, 16, 24, 24), (16, 1, 3, 3), 1, 1, 1, 16),        # depthwise
    ((8, 12, 41, 45), (6, 4, 5, 3), (2, 1), (2, 0), (1, 2), 3),
    ((8, 8, 32, 32), (8, 8, 1, 1), 1, 0, 1, 1),
]


def _run(case, native, dtype=np.float32, strided_grad=False):
    xs, ws, s, p, d, g = case
    rng = np.random.default_rng(0)
    x = llgrad.tensor(rng.standard_normal(xs).astype(dtype), requires_grad=True)
    w = llgrad.tensor(rng.standard_normal(ws).astype(dtype), requires_grad=True)
    prev = dispatch.set_native_eager(dispatch.native_eager if native else None)
    try:
        y = llgrad.nn.functional.conv2d(x, w, None, s, p, d, g)
        if strided_grad:
            y.sum().backward()
        else:
            y.backward(llgrad.tensor(rng.standard_normal(tuple(y.shape)).astype(dtype)))
    finally:
        dispatch.set_native_eager(prev)
    return y.detach().numpy(), x.grad.numpy(), w.grad.numpy()


@pytest.mark.parametrize("strided_grad", [False, True])
@pytest.mark.parametrize("case", CASES, ids=[str(c[1]) for c in CASES])
def test_matches_numpy(case, strided_grad):
    _run(case, True, strided_grad=strided_grad)
    eager_builds.wait()     # (LLGRAD_COMPILE=background: the kernels are built before the run)
    before = eager_shaped.stats["calls"]
    got = _run(case, True, strided_grad=strided_grad)
    assert eager_shaped.stats["calls"] == before + 3, "the shaped kernels did not run"
    want = _run(case, False, strided_grad=strided_grad)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(b).max())


def test_float64_and_torch():
    torch = pytest.importorskip("torch")
    case = CASES[3]
    got = _run(case, True, np.float64)
    xs, ws, s, p, d, g = case
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal(xs), requires_grad=True)
    w = torch.tensor(rng.standard_normal(ws), requires_grad=True)
    y = torch.nn.functional.conv2d(x, w, None, s, p, d, g)
    y.backward(torch.tensor(rng.standard_normal(tuple(y.shape))))
    for a, b in zip(got, (y.detach().numpy(), x.grad.numpy(), w.grad.numpy())):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


def test_small_calls_keep_numpy():
    before = eager_shaped.stats["calls"]
    x = llgrad.ones(1, 2, 5, 5)
    llgrad.nn.functional.conv2d(x, llgrad.ones(3, 2, 3, 3))
    assert eager_shaped.stats["calls"] == before


def test_a_trace_and_a_compiled_first_step_build_no_eager_kernel():
    """A trace's ops run the traced call's shapes, which compiled code runs from then on;
    a compiled training step's first call (run eagerly once: a fresh optimiser) likewise:
    neither starts an eager kernel's build. A later eager call of those shapes does."""
    conv = llgrad.nn.Conv2d(3, 8, 3)
    x = llgrad.randn(8, 3, 40, 40)
    opt = llgrad.optim.Adam(conv.parameters())

    def step(x):
        opt.zero_grad()
        loss = conv(x).relu().softmax(-1).sum()
        loss.backward()
        opt.step()
        return loss
    before = dict(eager_shaped.stats)
    compiled = llgrad.compile(step)
    for _ in range(3):
        compiled(x)
        compiled.wait()     # (LLGRAD_COMPILE=background: the next call runs the entry)
    assert compiled.n_traces == 1
    eager_builds.wait()     # (a build queued in the background counts once it is done)
    assert eager_shaped.stats == before
    conv(x)
    eager_builds.wait()     # (LLGRAD_COMPILE=background: the call ran NumPy's, the build queued)
    assert eager_shaped.stats["built"] == before["built"] + 1
    calls = eager_shaped.stats["calls"]
    conv(x)
    assert eager_shaped.stats["calls"] == calls + 1
