"""Elementwise code fused into batch norm's kernels (codegen/schedule/kernel_io.py,
lowerings/kernel_io.py): an activation that reads a batch norm's output is computed at the
kernel's store (BN's output is not written where nothing else reads it), and relu's backward
(le + masked_fill) is computed at batch_norm_backward's loads of its gradient.

Fused code must give the bits of the unfused plan (lower(..., clusters=False)); a compiled
conv -> BN -> activation step must give eager's and the interpreter's (and torch's) losses,
gradients and running statistics, in training and evaluation, on contiguous, channels-last
and strided inputs, on 1 and 2 threads; and the fused groups must exist (named in the plan)."""
import re

import numpy as np
import pytest

import llgrad
from llgrad.codegen import lower
from llgrad.ir.builder import Builder
from llgrad.ir.graph import TensorType

SHAPE = (8, 6, 24, 24)      # big enough for two threads in every pass


def _groups(kernel):
    return [line for line in kernel.plan.describe().splitlines() if line.startswith("group")]


def _fused(kernel, *ops):
    """Whether one group of the kernel's plan holds all of ops."""
    return any(all(re.search(rf"[\[ ]{op}[\] ]", line) for op in ops)
               for line in _groups(kernel))


def _threads(*counts):
    old = llgrad.get_num_threads()
    try:
        for t in counts:
            llgrad.set_num_threads(t)
            yield t
    finally:
        llgrad.set_num_threads(old)


def _forward_graph(act, training, residual=False, keep_y=False, shape=SHAPE):
    b = Builder("bn_act")
    x = b.input(TensorType("float32", shape), "x")
    w, bias = (b.input(TensorType("float32", (shape[1],)), n) for n in ("w", "b"))
    r = b.input(TensorType("float32", shape), "r") if residual else None
    if training:
        y, mean, var = b.add("batch_norm_with_stats", [x, w, bias], {"eps": 1e-5})
        extra = [mean, var]
    else:
        rm, rv = (b.input(TensorType("float32", (shape[1],)), n) for n in ("rm", "rv"))
        y = b.add("batch_norm", [x, w, bias, rm, rv], {"training": False, "eps": 1e-5})
        extra = []
    z = b.add("add", [y, r], {"alpha": 1}) if residual else y
    out = b.add(act, [z], {"negative_slope": 0.1} if act == "leaky_relu" else {})
    return b.ret(out, *extra, *([y] if keep_y else []))


def _arrays(g, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for v in g.inputs:
        a = rng.standard_normal(v.type.shape).astype(np.float32)
        out.append(np.abs(a) + 0.5 if v.name == "rv" else a)
    return out


@pytest.mark.parametrize("act", ["relu", "leaky_relu", "sigmoid"])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("variant", ["plain", "residual", "keep_y", "rows"])
def test_forward_epilogue_is_the_unfused_plan_bitwise(act, training, variant):
    """(rows: an (N, C) batch, BatchNorm1d's, which the kernel walks along the rows)"""
    g = _forward_graph(act, training, residual=variant == "residual",
                       keep_y=variant == "keep_y",
                       shape=(4096, 24) if variant == "rows" else SHAPE)
    arrays = _arrays(g)
    fused, plain = lower.lower(g), lower.lower(g, clusters=False)
    op = "batch_norm_with_stats" if training else "batch_norm"
    assert _fused(fused, op, act), _groups(fused)
    assert not _fused(plain, op, act)
    for _ in _threads(1, 2):
        for a, b in zip(fused(arrays), plain(arrays)):
            np.testing.assert_array_equal(a, b)


def _backward_graph(weight=True, shape=SHAPE):
    b = Builder("bn_relu_backward")
    gp, s, x = (b.input(TensorType("float32", shape), n) for n in ("gp", "s", "x"))
    w = b.input(TensorType("float32", (shape[1],)), "w") if weight else None
    mask = b.add("le", [s, 0])
    gr = b.add("masked_fill", [gp, mask, 0])
    return b.ret(*b.add("batch_norm_backward", [gr, x, w], {"eps": 1e-5}))


@pytest.mark.parametrize("weight", [True, False])
@pytest.mark.parametrize("shape", [SHAPE, (4096, 24)])
def test_backward_prologue_is_the_unfused_plan_bitwise(weight, shape):
    g = _backward_graph(weight, shape)
    arrays = _arrays(g, 1)
    arrays[1][:, 2] = np.nan                # (a channel on the exact path)
    fused, plain = lower.lower(g), lower.lower(g, clusters=False)
    assert _fused(fused, "masked_fill", "batch_norm_backward"), _groups(fused)
    assert len(_groups(fused)) == 1
    for _ in _threads(1, 2):
        for a, b in zip(fused(arrays), plain(arrays)):
            np.testing.assert_array_equal(a, b)


# ---- compiled steps against eager, the interpreter and torch ---------------------------------

def _make(lib, act):
    lib.manual_seed(0)
    conv = lib.nn.Conv2d(3, SHAPE[1], 3, padding=1, bias=False)
    bn = lib.nn.BatchNorm2d(SHAPE[1])
    with lib.no_grad():
        bn.weight.copy_(lib.linspace(0.5, 2.0, SHAPE[1]))
        bn.bias.copy_(lib.linspace(-0.3, 0.3, SHAPE[1]))
        bn.running_var.copy_(lib.linspace(0.5, 1.5, SHAPE[1]))
    F = lib.nn.functional
    acts = {"relu": F.relu, "leaky_relu": lambda t: F.leaky_relu(t, 0.1),
            "relu6": F.relu6, "relu_": lambda t: F.relu(t, inplace=True)}
    return conv, bn, acts[act]


def _layout(lib, a, layout):
    t = lib.tensor(a)
    if layout == "channels_last":
        return lib.tensor(np.ascontiguousarray(a.transpose(0, 2, 3, 1))).permute(0, 3, 1, 2)
    if layout == "strided":
        return lib.tensor(np.repeat(a, 2, axis=3))[..., ::2]
    return t


def _run(lib, act, layout, training, wrap, steps=2):
    conv, bn, f = _make(lib, act)
    bn.train(training)
    params = [conv.weight, bn.weight, bn.bias]
    rng = np.random.default_rng(5)
    xa = rng.standard_normal((SHAPE[0], 3) + SHAPE[2:]).astype(np.float32)
    ga = rng.standard_normal(SHAPE).astype(np.float32)

    def step(x, gout):
        y = f(bn(conv(x)))
        loss = (y * gout).sum()
        return (loss,) + tuple(lib.autograd.grad(loss, [x] + params))

    run = wrap(step) if wrap is not None else step
    outs = []
    for _ in range(steps):
        x = _layout(lib, xa, layout).requires_grad_()
        got = run(x, lib.tensor(ga))
        outs.append([np.array(t.detach().numpy()) for t in got])
    outs.append([np.array(bn.running_mean.numpy()), np.array(bn.running_var.numpy())])
    return outs


def _close(got, want, rtol=2e-5):
    for a, b in zip(got, want):
        for p, q in zip(a, b):
            np.testing.assert_allclose(p, q, rtol=rtol, atol=rtol * max(1.0, np.abs(q).max()))


@pytest.mark.parametrize("act", ["relu", "leaky_relu", "relu6", "relu_"])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "strided"])
@pytest.mark.parametrize("training", [True, False])
def test_compiled_step_matches_eager_and_interpreter(act, layout, training):
    if act in ("relu6", "relu_") and layout != "contiguous":
        pytest.skip("(the layouts are the other activations' cases)")
    want = _run(llgrad, act, layout, training, None)
    _close(_run(llgrad, act, layout, training,
                lambda fn: llgrad.compile(fn, backend="interpret")), want)
    for _ in _threads(1, 2):
        _close(_run(llgrad, act, layout, training, llgrad.compile), want)


@pytest.mark.parametrize("act", ["relu", "leaky_relu"])
@pytest.mark.parametrize("training", [True, False])
def test_compiled_step_matches_torch(act, training):
    torch = pytest.importorskip("torch")
    want = _run(torch, act, "channels_last", training, None)
    for _ in _threads(1, 2):
        _close(_run(llgrad, act, "channels_last", training, llgrad.compile), want, 1e-4)


def test_compiled_step_fuses_bn_and_relu_both_ways():
    """A compiled loss whose gradient runs as a backward graph of its own (as a training
    loop's loss.backward()): BN + relu one group forward, relu's backward + BN's one group
    backward."""
    conv, bn, f = _make(llgrad, "relu")
    params = [conv.weight, bn.weight, bn.bias]
    ga = llgrad.randn(*SHAPE)

    @llgrad.compile
    def loss(x):
        return (f(bn(conv(x))) * ga).sum()

    x = llgrad.randn(SHAPE[0], 3, *SHAPE[2:])
    llgrad.autograd.grad(loss(x), params)
    text = loss.dump(x, llvm=True)
    plans = dict(re.findall(r"== (\w+) loop plan \(groups, buffers\) ==\n((?:.+\n)+?)==", text))
    assert re.search(r"\[batch_norm_with_stats relu\]", plans["forward"]), plans["forward"]
    assert re.search(r" le masked_fill batch_norm_backward\]", plans["backward"]), \
        plans["backward"]
