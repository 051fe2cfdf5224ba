"""F.pad of an integer or bool tensor in a compiled function runs as native code: constant_pad_nd
has no lowering of its own and is written as full + strided_put + view (ir/decompose.py), at
every dtype native code holds, not only float (a LongTensor of token ids padded with a
start token, `F.pad(ys, (1, 0), value=BLANK)`, ran the whole graph on the interpreter with a
warning). Values and dtypes equal eager's and torch's."""
import warnings

import numpy as np
import pytest

import llgrad

DTYPES = ["int64", "int32", "int16", "int8", "uint8", "bool", "float32", "float64"]
PADS = [((1, 0), 7), ((1, 2, 0, 1), 1), ((-1, 2), 0), ((0, 0, -1, 1, 2, 0), 3)]


def _pads(m, x):
    F = m.nn.functional
    return [F.pad(x, pad, value=value if x.dtype != m.bool else bool(value))
            for pad, value in PADS]


@pytest.mark.parametrize("dtype", DTYPES)
def test_compiled_pad_of_every_dtype_is_native_and_equals_eager(dtype):
    a = (np.arange(24).reshape(2, 3, 4) % 5).astype(dtype)
    x = llgrad.tensor(a)
    f = llgrad.compile(lambda x: _pads(llgrad, x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # (no "runs on the interpreter" warning)
        f(x)
        got = f(x)
    interpreted = [k for e in f.entries for k in e.kernels.values()
                   if isinstance(k, str) and k.startswith("interpreted")]
    assert not interpreted, interpreted
    for g, want in zip(got, _pads(llgrad, x)):
        assert g.dtype == want.dtype
        np.testing.assert_array_equal(g.numpy(), want.numpy())
    torch = pytest.importorskip("torch")
    for g, want in zip(got, _pads(torch, torch.tensor(a))):
        assert str(g.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        np.testing.assert_array_equal(g.numpy(), want.numpy())


def test_training_step_padding_token_ids_is_native():
    emb, lin = llgrad.nn.Embedding(6, 4), llgrad.nn.Linear(4, 6)
    opt = llgrad.optim.SGD(list(emb.parameters()) + list(lin.parameters()), lr=0.1)

    @llgrad.compile
    def step(ys):
        inp = llgrad.nn.functional.pad(ys, (1, 0), value=0)[:, :-1]   # (shifted right)
        loss = llgrad.nn.functional.cross_entropy(lin(emb(inp)).transpose(1, 2), ys)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    ys = llgrad.tensor([[1, 2, 3], [4, 5, 1]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        losses = [step(ys).item() for _ in range(3)]
    assert losses[2] < losses[0]
    interpreted = [k for e in step.entries for k in e.kernels.values()
                   if isinstance(k, str) and k.startswith("interpreted")]
    assert step.entries and not interpreted, interpreted
