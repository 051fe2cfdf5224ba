"""nn.LinearCrossEntropyLoss and F.linear_cross_entropy (PyTorch 2.13) against torch's: the
loss and every gradient over reductions, class weights, ignore_index, label smoothing,
probabilities as targets, a K-dimensional loss, a bias, unbatched input and options; torch's
errors; and a compiled training step against eager."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

CASES = [
    dict(), dict(bias=True), dict(reduction="sum"), dict(reduction="none"),
    dict(label_smoothing=0.2), dict(ignore_index=1), dict(weight=[1., 2., .5, 1.5]),
    dict(out_features=(3,), bias=True), dict(probs=True), dict(unbatched=True),
    dict(options=dict(batch_chunk_size=2)),
]


def _run(lib, case):
    case = dict(case)
    lib.manual_seed(0)
    probs, unbatched = case.pop("probs", False), case.pop("unbatched", False)
    options = case.pop("options", None)
    if "weight" in case:
        case["weight"] = lib.tensor(case["weight"])
    if options is not None:
        case["options"] = lib.nn.LinearCrossEntropyOptions(**options)
    m = lib.nn.LinearCrossEntropyLoss(5, 4, **case)
    out = case.get("out_features", ())
    x = lib.randn(*(() if unbatched else (6,)), 5, requires_grad=True)
    shape = (() if unbatched else (6,)) + tuple(out)
    y = lib.randn(*shape[:1], 4, *out).softmax(1) if probs else lib.randint(0, 4, shape)
    loss = m(x, y)
    loss.sum().backward()
    return [loss.detach().numpy(), x.grad.numpy()] + [p.grad.numpy() for p in m.parameters()]


@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_matches_torch(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for a, b in zip(_run(llgrad, case), _run(torch, case)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call", [
    lambda L: L.nn.functional.linear_cross_entropy(L.ones(2, 3), L.ones(4, 5), L.zeros(2).long()),
    lambda L: L.nn.functional.linear_cross_entropy(L.ones(3), L.ones(4, 2, 3),
                                                   L.zeros(2).long()),
    lambda L: L.nn.functional.linear_cross_entropy(L.ones(2, 3), L.ones(4, 3), L.ones(2, 4),
                                                   ignore_index=0),
    lambda L: L.nn.LinearCrossEntropyLoss(3, 4, label_smoothing=1.5),
    lambda L: L.nn.LinearCrossEntropyLoss(3, 4, weight=L.ones(3)),
])
def test_errors_as_torchs(call):
    for lib in (llgrad, torch):
        with pytest.raises(RuntimeError):
            call(lib)
    for lib in (llgrad, torch):
        with pytest.raises(ValueError):
            lib.nn.LinearCrossEntropyOptions(acc_policy="fast")


def test_compiled_training_step_as_eager():
    def train(compiled):
        llgrad.manual_seed(0)
        m = llgrad.nn.LinearCrossEntropyLoss(8, 5, bias=True)
        opt = llgrad.optim.SGD(m.parameters(), lr=0.1)
        x, y = llgrad.randn(16, 8), llgrad.randint(0, 5, (16,))

        def step():
            opt.zero_grad()
            loss = m(x, y)
            loss.backward()
            opt.step()
            return loss
        run = llgrad.compile(step) if compiled else step
        return [float(run()) for _ in range(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(train(True), train(False), rtol=1e-6)
