"""arange as an op (ir/ops_copy.py `arange`): integer-valued ranges are one node whose numbers
are attributes, not a literal constant, so a graph holding positions (`arange(T)`) or a
causal mask (scaled_dot_product_attention's is_causal) has the same text at every sequence
length but its numbers, and the code of one length serves the others
(codegen/size_params.py). Values against torch's arange (eager), compiled against eager,
and the LLVM builds a sweep of sequence lengths costs."""
import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F

CASES = [((5,), None), ((2, 9, 3), None), ((9, 2, -2), None), ((-4, 4), "int8"),
         ((0, 300), "uint8"), ((5,), "float32"), ((1, 4), "float16"), ((0.0, 5.0, 2.0), None),
         ((3.0,), "float64"), ((0.5, 3), None), ((0, 1, 0.1), None), ((2.0 ** 25,), None),
         ((2 ** 24 - 2, 2 ** 24 + 3), "float32"), ((0, 10.0, 3), "int32"), ((0,), None)]


@pytest.mark.parametrize("args,dtype", CASES)
def test_values_dtypes_and_strides_are_torchs(args, dtype):
    torch = pytest.importorskip("torch")
    if args == (2.0 ** 25,):
        args = (2 ** 25 - 3, 2 ** 25 + 3, 1.0)
    got = llgrad.arange(*args, **({"dtype": getattr(llgrad, dtype)} if dtype else {}))
    want = torch.arange(*args, **({"dtype": getattr(torch, dtype)} if dtype else {}))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    assert got.shape == tuple(want.shape) and got.stride() == want.stride()
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_integer_ranges_are_one_node_and_others_a_constant():
    def f(x):
        t = x.shape[-1]
        return x + llgrad.arange(t), x + llgrad.arange(0, 1, 1 / t)[:t]
    text = llgrad.compile(f).dump(llgrad.ones(2, 4))
    forward = text.split("== forward ==")[1].split("== backward")[0]
    assert "arange start=0 step=1 size=4 dtype='int64'" in forward
    assert forward.count("= constant value=") == 1        # (0.25-steps: the kernel's rounding)


def test_compiled_equals_eager_at_every_length(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")

    def f(x):
        t = x.shape[1]
        causal = llgrad.arange(t).unsqueeze(1) >= llgrad.arange(t)
        freq = llgrad.arange(0, 8, 2, dtype=llgrad.float32) / 8
        return (x * llgrad.arange(t) + causal.float().sum(1) * freq.sum(),
                llgrad.arange(-t, t, 3, dtype=llgrad.int16))
    cf = llgrad.compile(f)
    for t in (5, 7, 9, 12, 7):
        x = llgrad.randn(2, t)
        for got, want in zip(cf(x), f(x)):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    # (a trace per length: arange(-t, t, 3) has ceil(2t / 3) values, no size a template
    # holds; 7's and 9's traces, handed t as a SymInt, are each done again with ints)
    assert cf.n_traces == 6


class _Attention(nn.Module):
    def __init__(self, vocab=29, width=16, heads=2, block=48):
        super().__init__()
        self.heads = heads
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(block, width)
        self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, vocab)

    def forward(self, idx, target):
        b, t = idx.shape
        x = self.tok(idx) + self.pos(llgrad.arange(t))
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2)
                   for z in self.qkv(x).split(x.shape[-1], 2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        logits = self.out(x + y.transpose(1, 2).reshape(b, t, -1))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), target.view(-1))


def _step_fn(model, opt):
    def step(idx, target):
        opt.zero_grad()
        loss = model(idx, target)
        loss.backward()
        opt.step()
        return loss
    return step


def test_a_sweep_of_sequence_lengths_shares_one_build(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    monkeypatch.setenv("LLGRAD_SHARE_SIZES", "1")
    llgrad.manual_seed(0)
    eager_model = _Attention()
    model = _Attention()
    model.load_state_dict(eager_model.state_dict())
    run_eager = _step_fn(eager_model, llgrad.optim.SGD(eager_model.parameters(), 0.1))
    step = llgrad.compile(_step_fn(model, llgrad.optim.SGD(model.parameters(), 0.1)))
    rng = np.random.default_rng(0)
    lengths = [13, 21, 8, 30, 17]
    for t in lengths + lengths:
        idx, target = (llgrad.tensor(rng.integers(0, 29, (3, t))) for _ in range(2))
        np.testing.assert_allclose(step(idx, target).item(), run_eager(idx, target).item(),
                                   rtol=1e-5, atol=1e-6)
    for a, b in zip(model.parameters(), eager_model.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-4,
                                   atol=1e-6)
    # the first call runs untraced (no .grad yet); 21 and 8 trace (the model reads T, a
    # SymInt in the second trace), the others are made from their template
    # (size_templates.py); the first built length's module and the code the others share
    # (positions and the causal mask were constants of each length's own values, a module
    # per length)
    assert step.n_traces == 2
    assert step.n_llvm_compiles <= 2
