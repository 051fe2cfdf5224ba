"""Compiled convolution and pooling when state changes between calls: a module attribute
(padding, stride), train/eval with BatchNorm's running statistics, the weight written in
place, an lr changed in the optimiser; compiled steps against the same steps run eagerly."""
import copy

import numpy as np

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F


def _net():
    llgrad.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(4, 2, 3), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten())


def _run(model, compiled):
    opt = llgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def evaluate(x):
        with llgrad.no_grad():
            return model(x)

    if compiled:
        step, evaluate = llgrad.compile(step), llgrad.compile(evaluate)
    rng = np.random.default_rng(1)
    out = []
    for k in range(7):
        x = llgrad.tensor(rng.standard_normal((4, 3, 10, 10)).astype(np.float32))
        y = llgrad.tensor(rng.integers(0, 2, 4))
        if k == 2:
            model[0].padding = (2, 2)                   # an attribute the forward reads
        if k == 3:
            model[4].stride = (2, 2)
        if k == 4:
            with llgrad.no_grad():
                model[0].weight.mul_(0.5)               # written in place between calls
        if k == 5:
            opt.param_groups[0]["lr"] = 0.01
        out.append(step(x, y).item())
        model.eval()
        out.append(evaluate(x).numpy().copy())
        model.train()
    out.append([p.detach().numpy().copy() for p in model.parameters()])
    out.append([b.numpy().copy() for b in model.buffers()])
    return out


def test_conv_pool_steps_with_changing_state_match_eager():
    model = _net()
    twin = copy.deepcopy(model)
    want, got = _run(model, False), _run(twin, True)
    for w, g in zip(want, got):
        if isinstance(w, list):
            for a, b in zip(w, g):
                np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
