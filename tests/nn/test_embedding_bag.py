"""F.embedding_bag and nn.EmbeddingBag (llgrad/nn/functional_embedding_bag.py): values and
float64 gradients (weight, per_sample_weights) against torch for the modes sum / mean / max,
offsets with empty bags, include_last_offset, padding_idx, 2-D input, max_norm; PyTorch's
errors; scale_grad_by_freq against the documented scaling (each row's gradient divided by
the row's count in the batch; PyTorch's CPU backward indexes its counts wrongly, see
test_scale_grad_by_freq); gradcheck; compiled == eager, a compiled call serving new offsets,
and the text classification tutorial's model trained a few compiled steps."""
import itertools
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F

RNG = np.random.default_rng(5)
W = RNG.standard_normal((10, 4))
INDICES = np.array([1, 2, 4, 5, 4, 3, 2, 9, 2, 2, 0])
OFFSETS = [
    ({"offsets": np.array([0, 4, 4, 7])}),                        # an empty bag
    ({"offsets": np.array([0, 3, 5, 11]), "include_last_offset": True}),
    ({"offsets": np.array([0, 0, 6])}),                           # the first bag empty
    ({"offsets": np.array([0, 2, 11])}),                          # the last bag empty
]


def _torch():
    return pytest.importorskip("torch")


def _bag_both(mode, case, padding_idx, psw, indices=INDICES):
    """embedding_bag's output and the gradients of weight and per_sample_weights in llgrad
    and torch (float64, a fixed cotangent)."""
    torch = _torch()
    weights = np.random.default_rng(2).standard_normal(indices.shape)
    res = []
    for lib in (llgrad, torch):
        w = lib.tensor(W, requires_grad=True)
        p = lib.tensor(weights, requires_grad=True) if psw else None
        kw = {k: lib.tensor(v) if isinstance(v, np.ndarray) else v for k, v in case.items()}
        out = lib.nn.functional.embedding_bag(lib.tensor(indices), w, mode=mode,
                                              padding_idx=padding_idx, per_sample_weights=p,
                                              **kw)
        cot = np.random.default_rng(3).standard_normal(tuple(out.shape))
        (out * lib.tensor(cot)).sum().backward()
        res.append((out.detach().numpy(), w.grad.numpy(), p.grad.numpy() if psw else None))
    return res


@pytest.mark.parametrize("mode,case,padding_idx,psw", [
    (m, c, p, s) for m, c, p, s in itertools.product(["sum", "mean", "max"], OFFSETS,
                                                     [None, 2, -1], [False, True])
    if not (s and m != "sum")])
def test_matches_torch(mode, case, padding_idx, psw):
    a, b = _bag_both(mode, case, padding_idx, psw)
    for x, y in zip(a, b):
        if x is not None:
            assert x.shape == y.shape
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_2d_input_and_module_match_torch(mode):
    torch = _torch()
    idx = INDICES[:10].reshape(2, 5)
    res = []
    for lib in (llgrad, torch):
        bag = lib.nn.EmbeddingBag.from_pretrained(lib.tensor(W), freeze=False, mode=mode,
                                                  padding_idx=4)
        out = bag(lib.tensor(idx))
        out.pow(2).sum().backward()
        res.append((out.detach().numpy(), bag.weight.grad.numpy(), repr(bag)))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-12)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-12)
    assert res[0][2] == res[1][2]


def test_max_norm_renormalises_like_torch():
    torch = _torch()
    res = []
    for lib in (llgrad, torch):
        w = lib.tensor(W * 3)
        out = lib.nn.functional.embedding_bag(lib.tensor(INDICES), w, lib.tensor([0, 5]),
                                              max_norm=1.5, mode="sum")
        res.append((out.numpy(), w.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-6)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-6)


def test_module_construction_matches_torch():
    torch = _torch()
    for kw in ({}, {"padding_idx": -2, "mode": "sum"}, {"max_norm": 2.0, "norm_type": 1.0,
                                                        "scale_grad_by_freq": True}):
        a, b = nn.EmbeddingBag(6, 3, **kw), torch.nn.EmbeddingBag(6, 3, **kw)
        assert repr(a) == repr(b)
        assert a.padding_idx == b.padding_idx
        assert list(a.state_dict()) == list(b.state_dict()) == ["weight"]
        if a.padding_idx is not None:
            assert not a.weight[a.padding_idx].detach().numpy().any()
    for kw in ({"padding_idx": 6}, {"padding_idx": -7}):
        with pytest.raises(AssertionError, match="padding_idx must be within num_embeddings"):
            nn.EmbeddingBag(6, 3, **kw)
    # (sparse=True's gradients: tests/test_api_s63_a6_sparse_grad.py)
    assert repr(nn.EmbeddingBag(6, 3, sparse=True)) == \
        repr(torch.nn.EmbeddingBag(6, 3, sparse=True))


def test_scale_grad_by_freq():
    """Each row's gradient divided by its count among all the indices (as F.embedding's
    scale_grad_by_freq does in PyTorch). PyTorch's CPU embedding_bag backward divides by the
    count of the i-th sorted index instead of the row's own (a bug), so the reference here is
    torch's embedding (whose scaling is right) reduced into the bags."""
    torch = _torch()
    offsets = [0, 4, 7]
    res = []
    for mode in ("sum", "mean"):
        w = llgrad.tensor(W, requires_grad=True)
        out = F.embedding_bag(llgrad.tensor(INDICES), w, llgrad.tensor(offsets), mode=mode,
                              scale_grad_by_freq=True)
        cot = RNG.standard_normal(tuple(out.shape))
        (out * llgrad.tensor(cot)).sum().backward()
        tw = torch.tensor(W, requires_grad=True)
        rows = torch.nn.functional.embedding(torch.tensor(INDICES), tw, scale_grad_by_freq=True)
        bags = [rows[a:b] for a, b in zip(offsets, offsets[1:] + [len(INDICES)])]
        ref = torch.stack([r.sum(0) if mode == "sum" else r.mean(0) for r in bags])
        (ref * torch.tensor(cot)).sum().backward()
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12)
        res.append(w.grad.numpy())
    assert not np.allclose(res[0], res[1])


def test_errors_match_torch():
    torch = _torch()
    w, idx = W, INDICES[:8]
    cases = [
        lambda L: L.nn.functional.embedding_bag(L.tensor(idx), L.tensor(w), L.tensor([1, 4])),
        lambda L: L.nn.functional.embedding_bag(L.tensor(idx), L.tensor(w), L.tensor([0, 9])),
        lambda L: L.nn.functional.embedding_bag(L.tensor([1, 10]), L.tensor(w), L.tensor([0])),
        lambda L: L.nn.functional.embedding_bag(L.tensor([1, -1]), L.tensor(w), L.tensor([0])),
        lambda L: L.nn.functional.embedding_bag(L.tensor([1.0]), L.tensor(w), L.tensor([0])),
        lambda L: L.nn.functional.embedding_bag(L.tensor(idx), L.tensor(w), L.tensor([0.0])),
        lambda L: L.nn.functional.embedding_bag(L.tensor(idx), L.tensor(w).long(),
                                                L.tensor([0])),
        lambda L: L.nn.functional.embedding_bag(L.tensor(idx), L.tensor(w), L.tensor([0]),
                                                padding_idx=10),
        lambda L: L.nn.functional.embedding_bag(L.tensor(idx), L.tensor(w), L.tensor([0]),
                                                mode="sum",
                                                per_sample_weights=L.ones(8)),
        lambda L: L.nn.functional.embedding_bag(L.tensor(idx), L.tensor(w), L.tensor([0]),
                                                per_sample_weights=L.ones(8, dtype=L.float64)),
        lambda L: L.nn.functional.embedding_bag(L.tensor(idx), L.tensor(w), L.tensor([0]),
                                                per_sample_weights=L.ones(7, dtype=L.float64)),
        lambda L: L.nn.functional.embedding_bag(L.tensor(idx).view(2, 4), L.tensor(w),
                                                L.tensor([0])),
        lambda L: L.nn.functional.embedding_bag(L.tensor(idx).view(1, 2, 4), L.tensor(w)),
        lambda L: L.nn.functional.embedding_bag(L.tensor(idx), L.tensor(w)),
        lambda L: L.nn.functional.embedding_bag(L.tensor(idx), L.tensor(w), L.tensor([[0]])),
        lambda L: L.nn.functional.embedding_bag(L.tensor(idx), L.tensor(w), L.tensor([0]),
                                                mode="median"),
        lambda L: L.nn.functional.embedding_bag(L.tensor(idx), L.tensor(w[0]), L.tensor([0])),
        lambda L: L.nn.functional.embedding_bag(L.tensor(idx), L.tensor(w), L.tensor([0]),
                                                mode="max", scale_grad_by_freq=True),
    ]
    for case in cases:
        msgs = []
        for lib in (llgrad, torch):
            with pytest.raises(Exception) as info:
                case(lib)
            msgs.append((info.type.__name__, str(info.value)))
        assert msgs[0][0] == msgs[1][0]
        # (first lines: PyTorch prints the offending 0-d tensor under some messages)
        norm = [m.split("\n")[0].replace("llgrad.", "").replace("torch.", "")
                .replace("runtime.tensor.", "") for _, m in msgs]
        assert norm[0] == norm[1]


def test_int32_indices_and_deprecated_argument_order():
    torch = _torch()
    ref = torch.nn.functional.embedding_bag(torch.tensor(INDICES), torch.tensor(W),
                                            torch.tensor([0, 5]))
    out = F.embedding_bag(llgrad.tensor(INDICES, dtype=llgrad.int32), llgrad.tensor(W),
                          llgrad.tensor([0, 5], dtype=llgrad.int32))
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-12)
    with pytest.warns(UserWarning, match="Argument order of nn.functional.embedding_bag"):
        out = F.embedding_bag(llgrad.tensor(W), llgrad.tensor(INDICES), llgrad.tensor([0, 5]))
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-12)


def test_gradcheck():
    w = llgrad.tensor(W, requires_grad=True)
    p = llgrad.tensor(RNG.standard_normal(INDICES.shape), requires_grad=True)
    idx, off = llgrad.tensor(INDICES), llgrad.tensor([0, 4, 4, 7])
    assert llgrad.autograd.gradcheck(
        lambda w, p: F.embedding_bag(idx, w, off, mode="sum", per_sample_weights=p,
                                     padding_idx=2), (w, p))
    for mode in ("mean", "max"):
        assert llgrad.autograd.gradcheck(lambda w: F.embedding_bag(idx, w, off, mode=mode), (w,))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_compiled_equals_eager_and_serves_new_offsets(mode):
    w = llgrad.tensor(W.astype(np.float32), requires_grad=True)
    idx = llgrad.tensor(INDICES)

    def loss(w, offsets):
        return F.embedding_bag(idx, w, offsets, mode=mode, padding_idx=2).pow(2).sum()

    compiled = llgrad.compile(loss)
    # the same number of bags each call, in other places: one trace serves them all
    for offsets in ([0, 4, 4, 7], [0, 1, 2, 3], [0, 0, 0, 11], [0, 5, 9, 10]):
        results = []
        for fn in (loss, compiled):
            w.grad = None
            value = fn(w, llgrad.tensor(offsets))
            value.backward()
            results.append((value.item(), w.grad.numpy().copy()))
        assert results[0][0] == pytest.approx(results[1][0], rel=1e-5)
        np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5, atol=1e-6)


def test_text_classification_tutorial_model_trains_compiled():
    """The text classification tutorial's model (EmbeddingBag of a batch of concatenated
    token lists with their offsets, a Linear classifier), its training step compiled: losses
    and weights equal eager's, and the loss goes down."""
    vocab, dim, classes = 50, 8, 4

    class TextClassificationModel(nn.Module):
        def __init__(self, vocab_size, embed_dim, num_class):
            super().__init__()
            self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
            self.fc = nn.Linear(embed_dim, num_class)
            initrange = 0.5
            self.embedding.weight.data.uniform_(-initrange, initrange)
            self.fc.weight.data.uniform_(-initrange, initrange)
            self.fc.bias.data.zero_()

        def forward(self, text, offsets):
            return self.fc(self.embedding(text, offsets))

    data_rng = np.random.default_rng(0)
    lengths = data_rng.integers(1, 6, 8)
    text = llgrad.tensor(data_rng.integers(0, vocab, int(lengths.sum())))
    offsets = llgrad.tensor(np.concatenate([[0], np.cumsum(lengths)[:-1]]))
    label = llgrad.tensor(data_rng.integers(0, classes, 8))
    results = []
    for compiled in (False, True):
        llgrad.manual_seed(0)
        model = TextClassificationModel(vocab, dim, classes)
        criterion = nn.CrossEntropyLoss()
        optimizer = llgrad.optim.SGD(model.parameters(), lr=5.0)

        def step(text, offsets, label):
            optimizer.zero_grad()
            loss = criterion(model(text, offsets), label)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            optimizer.step()
            return loss

        run = llgrad.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error")              # no graph break
            losses = [run(text, offsets, label).item() for _ in range(5)]
        results.append((losses, model.embedding.weight.detach().numpy().copy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5, atol=1e-6)
    assert results[1][0][-1] < results[1][0][0]
