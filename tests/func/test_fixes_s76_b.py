"""Fixes found by stop 76's autograd / torch.func tutorial programs (file b,
tests/programs/test_tutorials_autograd_s76_b.py)."""
import warnings

import numpy as np
import pytest

import llgrad
from llgrad import nn


def test_raw_saved_tensor_type_name_is_torchs():
    # "Hooks for autograd saved tensors" prints the type of grad_fn._raw_saved_self:
    # torch._C._autograd.SavedTensor
    x = llgrad.randn(3, requires_grad=True)
    raw = x.pow(2).grad_fn._raw_saved_self
    assert type(raw).__name__ == "SavedTensor"
    assert type(raw).__qualname__ == "SavedTensor"


def test_save_on_cpu_inside_compiled_step_compiles():
    # save_on_cpu on llgrad's CPU tensors is the identity pair: no graph break, no warning
    w = llgrad.tensor([0.5, -1.0, 2.0], requires_grad=True)

    def step(x):
        with llgrad.autograd.graph.save_on_cpu(pin_memory=False):
            y = (x * w).exp().sum()
        return y

    x = llgrad.tensor([1.0, 2.0, 3.0])
    cf = llgrad.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = cf(x)
    assert cf.entries and not cf.graph_breaks
    y.backward()
    np.testing.assert_allclose(w.grad.numpy(), np.exp(np.array([0.5, -2.0, 6.0])) * [1, 2, 3],
                               rtol=1e-6)


def test_saved_tensors_hooks_inside_compiled_step_still_breaks():
    def step(x):
        with llgrad.autograd.graph.saved_tensors_hooks(lambda t: t * 1, lambda t: t):
            y = x.exp().sum()
        return y

    cf = llgrad.compile(step)
    with pytest.warns(UserWarning, match="saved_tensors_hooks"):
        cf(llgrad.ones(3, requires_grad=True))


def test_vmap_batch_norm_training_with_unbatched_running_stats_raises_torchs_error():
    # per-sample gradients / ensembling of a model with BatchNorm in training mode
    m = nn.BatchNorm1d(4)
    mean0 = m.running_mean.clone()
    with pytest.raises(RuntimeError, match="Batch norm got a batched tensor as input while "
                                           "the running_mean or running_var"):
        llgrad.func.vmap(m)(llgrad.ones(2, 5, 4))
    assert llgrad.equal(m.running_mean, mean0)
    # (what works: eval mode, no running stats, batched buffers from stack_module_state)
    m.eval()
    assert llgrad.func.vmap(m)(llgrad.ones(2, 5, 4)).shape == (2, 5, 4)
    ms = [nn.BatchNorm1d(4) for _ in range(2)]
    p, b = llgrad.func.stack_module_state(ms)
    out = llgrad.func.vmap(lambda p, b, x: llgrad.func.functional_call(ms[0], (p, b), (x,)))(
        p, b, llgrad.arange(40.).reshape(2, 5, 4))
    assert out.shape == (2, 5, 4)
    np.testing.assert_allclose(b["running_mean"].numpy(),
                               [[0.8, 0.9, 1.0, 1.1], [2.8, 2.9, 3.0, 3.1]], rtol=1e-6)


def test_parametrization_shape_error_names_the_unparametrized_shape():
    # a right_inverse that changes the shape: the message gives the tensor's shape before it
    class Bad(nn.Module):
        def forward(self, X):
            return X

        def right_inverse(self, X):
            return X[0]

    with pytest.raises(ValueError, match=r"unparametrized shape: llgrad\.Size\(\[3, 3\]\)\n"
                                         r"parametrized shape: llgrad\.Size\(\[3\]\)"):
        nn.utils.parametrize.register_parametrization(nn.Linear(3, 3), "weight", Bad())
