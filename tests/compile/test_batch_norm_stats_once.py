"""A compiled training step with BatchNorm computes each batch's statistics once: the op
batch_norm_with_stats (llgrad/ir/ops_batch_norm.py) normalises and gives the batch mean and
unbiased variance its kernel computed (codegen/lowerings/ops_norm.py, ops_batch_norm_rows.py),
and the update of the running statistics reads them; no separate mean or var of the input is
left in the traced graph. Compiled and eager llgrad give the same running statistics
(float32 with a momentum: the same bits; the sums' order differs, float64 may differ in the
last bits; momentum=None's traced update rounds stat / count before adding it), the
same outputs and gradients, over several calls, and PyTorch's: BatchNorm1d on 2-D and 3-D
input, 2d, 3d, momentum=None (the cumulative average), affine=False, track_running_stats=
False, float32 and float64. The op's kernel (both walks) against its NumPy implementation."""
import re

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
from llgrad.codegen import lower
from llgrad.ir import OPS
from llgrad.ir.builder import Builder
from llgrad.ir.graph import TensorType

torch = pytest.importorskip("torch")

# (module class, keyword arguments, input shape): inputs under 4096 elements, where eager
# runs the op's NumPy implementation (no background build decides which kernel runs)
LAYERS = [("BatchNorm1d", {}, (16, 5)),
          ("BatchNorm1d", {"momentum": None}, (6, 3, 7)),
          ("BatchNorm2d", {}, (8, 4, 5, 5)),
          ("BatchNorm2d", {"momentum": None}, (4, 3, 6, 6)),
          ("BatchNorm3d", {"momentum": 0.3}, (4, 3, 2, 3, 3)),
          ("BatchNorm2d", {"affine": False}, (5, 2, 4, 4)),
          ("BatchNorm1d", {"track_running_stats": False}, (7, 4))]
STATS = ("running_mean", "running_var", "num_batches_tracked")


def _models(lib, dtype):
    return [getattr(lib.nn, cls)(shape[1], **kw).to(getattr(lib, dtype))
            for cls, kw, shape in LAYERS]


def _step(models, xs):
    """The loss of every layer's output (each on its own input), and its backward."""
    loss = sum(((m(x) - 0.5) ** 2 * (k + 1)).sum() for k, (m, x) in enumerate(zip(models, xs)))
    loss.backward()
    return loss


def _inputs(lib, dtype, call):
    rng = np.random.default_rng(100 + call)
    arrays = [(rng.standard_normal(shape) * (1.5 + call) + call - 1.0).astype(dtype)
              for _, _, shape in LAYERS]
    return arrays, [lib.tensor(a) for a in arrays]


def _forward_ops(cf, *args):
    text = cf.dump(*args)
    forward = text.split("== forward ==")[1].split("== ")[0]
    return re.findall(r"^\s+%[\w, %]+ = (\w+) ", forward, re.M)


def test_the_compiled_step_has_no_separate_statistics_pass():
    models = _models(llgrad, "float32")
    cf = llgrad.compile(lambda *xs: _step(models, xs))
    ops = _forward_ops(cf, *_inputs(llgrad, "float32", 0)[1])
    # one op per layer that tracks running statistics; the others are plain batch norms
    assert ops.count("batch_norm_with_stats") == 6 and ops.count("batch_norm") == 1, ops
    assert "mean" not in ops and "var" not in ops, ops


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_equals_eager_and_torch_over_calls(dtype):
    eager, comp = _models(llgrad, dtype), _models(llgrad, dtype)
    ref = _models(torch, dtype)
    for me, mc, mt in zip(eager, comp, ref):
        state = {k: llgrad.tensor(v.detach().numpy().copy()) for k, v in mt.state_dict().items()}
        me.load_state_dict(state), mc.load_state_dict(state)
    cf = llgrad.compile(lambda *xs: _step(comp, xs))
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-13)
    for call in range(4):
        arrays, xs = _inputs(llgrad, dtype, call)
        want, got = _step(eager, xs), cf(*_inputs(llgrad, dtype, call)[1])
        _step(ref, [torch.tensor(a) for a in arrays])
        np.testing.assert_allclose(got.item(), want.item(), **tol)
        for k, (me, mc, mt) in enumerate(zip(eager, comp, ref)):
            where = f"call {call}, layer {k} {LAYERS[k]}"
            for name in STATS:
                e, c = getattr(me, name), getattr(mc, name)
                if e is None:
                    assert c is None and getattr(mt, name) is None, where
                    continue
                e, c, t = e.numpy(), c.numpy(), getattr(mt, name).numpy()
                cumulative = "momentum" in LAYERS[k][1] and LAYERS[k][1]["momentum"] is None
                if name == "num_batches_tracked" or dtype == "float32" and not cumulative:
                    np.testing.assert_array_equal(c, e, err_msg=f"{where} {name}")
                elif cumulative:    # (traced, stat * (1 / count) is rounded before the add)
                    np.testing.assert_allclose(c, e, rtol=3e-7 if dtype == "float32" else 1e-14,
                                               atol=1e-8 if dtype == "float32" else 1e-15,
                                               err_msg=f"{where} {name}")
                else:   # (float64 sums in another order: the last bits)
                    np.testing.assert_allclose(c, e, rtol=1e-14, atol=1e-15,
                                               err_msg=f"{where} {name}")
                np.testing.assert_allclose(c, t, **tol, err_msg=f"{where} {name} (torch)")
            for name, pe in me.named_parameters():
                pc = dict(mc.named_parameters())[name]
                np.testing.assert_allclose(pc.grad.numpy(), pe.grad.numpy(), **tol,
                                           err_msg=f"{where} {name}.grad")
                pe.grad, pc.grad = None, None
    assert cf.n_traces == 1
    for mm in eager + comp:         # evaluation reads the running statistics written back
        mm.eval()
    _, xs = _inputs(llgrad, dtype, 9)
    for me, mc, x in zip(eager, comp, xs):
        np.testing.assert_allclose(llgrad.compile(mc)(x).detach().numpy(),
                                   me(x).detach().numpy(), **tol)


def test_eager_result_keeps_pytorchs_node_name():
    m = nn.BatchNorm2d(3)
    y = m(llgrad.randn(4, 3, 2, 2, requires_grad=True))
    assert y.grad_fn.name() == "NativeBatchNormBackward0"
    assert y.grad_fn._op is OPS["batch_norm_with_stats"]


def _kernel(shape, dtype, affine):
    b = Builder("bn_stats")
    x = b.input(TensorType(dtype, shape), "x")
    w, bias = ((b.input(TensorType(dtype, (shape[1],)), n) for n in "wb") if affine
               else (None, None))
    return lower.lower(b.ret(*b.add("batch_norm_with_stats", [x, w, bias], {"eps": 1e-5})))


@pytest.mark.parametrize("shape", [(40, 6), (6, 3, 7), (5, 4, 3, 3), (2, 1, 9)], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_kernel_matches_the_numpy_implementation(shape, dtype):
    """(N, C) runs the rows' walk, the others the channels'; the statistics of float32 data
    are the float64 ones rounded once (the same bits), those of float64 data agree to the
    order of the sums."""
    rng = np.random.default_rng(len(shape))
    x = (rng.standard_normal(shape) * 3 + 2).astype(dtype)
    w, b = (rng.standard_normal(shape[1]).astype(dtype) for _ in range(2))
    for affine in (True, False):
        got = _kernel(shape, dtype, affine)([x, w, b] if affine else [x])
        want = OPS["batch_norm_with_stats"].impl(x, w if affine else None,
                                                 b if affine else None, 1e-5)
        x64 = x.astype(np.float64)
        dims = (0,) + tuple(range(2, x.ndim))
        np.testing.assert_allclose(want[2], x64.var(dims, ddof=1), rtol=1e-6)
        for k, (g, e) in enumerate(zip(got, want)):
            assert g.dtype == e.dtype and g.shape == e.shape
            if dtype == "float32":
                np.testing.assert_array_equal(g, e, err_msg=f"result {k}")
            else:
                np.testing.assert_allclose(g, e, rtol=1e-14, atol=1e-14, err_msg=f"result {k}")
