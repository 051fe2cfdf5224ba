"""Sweep 20 (C), part 20: channels_last through the CNN ops as ATen's CPU kernels allocate
their outputs: conv2d (an input or a weight in channels_last), conv_transpose2d, batch_norm,
group_norm, max_pool2d (values and indices), avg_pool2d, pad and cat (of inputs all
channels_last) give channels_last results, eagerly and compiled, with torch's values; a
row-major model stays row-major."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _ops(lib, x, w, wt, dw):
    F = lib.nn.functional
    return {
        "conv": F.conv2d(x, w, padding=1),
        "conv_s2": F.conv2d(x, w, stride=2, padding=1),
        "conv_dw": F.conv2d(x, dw, padding=1, groups=4),
        "conv_w_cl": F.conv2d(x.contiguous(), w.contiguous(memory_format=lib.channels_last)),
        "convT": F.conv_transpose2d(x, wt, stride=2),
        "bn": F.batch_norm(x, None, None, training=True),
        "bn_eval": F.batch_norm(x, lib.zeros(4), lib.ones(4), training=False),
        "maxpool": F.max_pool2d(x, 2),
        "maxpool_idx": F.max_pool2d(x, 2, return_indices=True)[1],
        "avgpool": F.avg_pool2d(x, 2),
        "plain": F.conv2d(x.contiguous(), w, padding=1),
        "group_norm": F.group_norm(x, 2),
        "pad": F.pad(x, (1, 2, 0, 1)),
        "pad_reflect": F.pad(x, (1, 1, 1, 1), mode="reflect"),
        "cat": lib.cat([x, x * 2], 1),
        "cat_mixed": lib.cat([x, x.contiguous()], 1),
        "cat_batch": lib.cat([x, x], 0),
    }


def _inputs(lib):
    rng = np.random.default_rng(0)
    arrs = [rng.standard_normal(s).astype(np.float32) for s in
            ((2, 4, 6, 6), (5, 4, 3, 3), (4, 3, 2, 2), (4, 1, 3, 3))]
    x, w, wt, dw = (lib.tensor(a) for a in arrs)
    return x.contiguous(memory_format=lib.channels_last), w, wt, dw


def _formats(lib, out):
    return {k: (v.is_contiguous(memory_format=lib.channels_last), v.is_contiguous())
            for k, v in out.items()}


def test_cnn_ops_keep_channels_last():
    ref = _ops(torch, *_inputs(torch))
    got = _ops(llgrad, *_inputs(llgrad))
    assert _formats(llgrad, got) == _formats(torch, ref)
    for k in ref:
        np.testing.assert_allclose(got[k].numpy(), ref[k].numpy(), rtol=1e-5, atol=1e-5, err_msg=k)
    compiled = llgrad.compile(lambda *a: _ops(llgrad, *a))(*_inputs(llgrad))
    assert _formats(llgrad, compiled) == _formats(torch, ref)
    for k in ref:
        np.testing.assert_allclose(compiled[k].numpy(), got[k].numpy(), rtol=1e-6, atol=1e-6)


def test_channels_last_training_step():
    """Gradients (the weight's in its own channels_last layout) and grad_fn names as torch."""
    def run(lib, compiled):
        nn = lib.nn
        lib.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(4, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Linear(54, 2))
        for p in model.parameters():
            with lib.no_grad():
                p.copy_(lib.tensor(np.linspace(-0.3, 0.3, p.numel(), dtype=np.float32)
                                   .reshape(tuple(p.shape))))
        model = model.to(memory_format=lib.channels_last)
        x = _inputs(lib)[0]

        def step(x):
            model.zero_grad()
            out = model[:2](x)
            loss = model[2:](out).pow(2).sum()
            loss.backward()
            return loss, out
        if compiled:
            step = llgrad.compile(step)
        loss, out = step(x)
        return (loss.item(), out.detach().numpy().copy(),
                out.is_contiguous(memory_format=lib.channels_last), type(out.grad_fn).__name__,
                [(p.grad.numpy().copy(), p.grad.stride()) for p in model.parameters()])
    ref = run(torch, False)
    for compiled in (False, True):
        got = run(llgrad, compiled)
        np.testing.assert_allclose(got[0], ref[0], rtol=1e-5)
        np.testing.assert_allclose(got[1], ref[1], rtol=1e-5, atol=1e-5)
        assert got[2:4] == ref[2:4]
        for (g, s), (rg, rs) in zip(got[4], ref[4]):
            np.testing.assert_allclose(g, rg, rtol=1e-4, atol=1e-4)
            assert s == rs
