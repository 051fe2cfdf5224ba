"""A compiled step that draws random numbers (Dropout) and writes its inputs (an optimizer
update), called with an input whose memory NumPy does not own (torch.from_numpy of a batch
sliced from a NumPy array): the overlap check before the kernel writes (compile/run.py
_overlapping) was given the RNG state's input position, which follows the tensors, and
raised IndexError instead of running the step. Compared with eager, draw for draw."""
import numpy as np

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F


def _train(compiled):
    llgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 3))
    opt = llgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = llgrad.compile(train_step) if compiled else train_step
    rng = np.random.default_rng(0)
    features = rng.standard_normal((32, 4)).astype(np.float32)
    labels = rng.integers(0, 3, 32)
    losses = []
    for i in range(0, 32, 8):       # (slices of the arrays: views NumPy does not own)
        losses.append(step(llgrad.from_numpy(features[i:i + 8]),
                           llgrad.from_numpy(labels[i:i + 8])).item())
    params = [p.detach().numpy().copy() for p in model.parameters()]
    return losses, params, step


def test_dropout_step_on_numpy_slices():
    losses, params, _ = _train(False)
    c_losses, c_params, step = _train(True)
    assert step.entries
    np.testing.assert_allclose(c_losses, losses, rtol=1e-5, atol=1e-6)
    for a, b in zip(c_params, params):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
