"""Tutorial-style training loops whose batch size changes (a shuffled DataLoader's ragged
last batch, a batch size that grows each epoch), with a compiled step whose model reads B and
T from x.shape and uses them in view / reshape / expand / arange / zeros / masks: the compiled
run's loss, parameters and gradients equal eager llgrad's at every step, and both PyTorch's
(the same program with `torch` for `llgrad`, the DataLoader's order included)."""
import math

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    monkeypatch.delenv("LLGRAD_DYNAMIC_SIZES", raising=False)


def _tagger(T):
    """A one-head causal attention tagger over padded sequences of lengths `lengths`."""
    nn, F = T.nn, T.nn.functional

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.pos = nn.Embedding(7, 8), nn.Embedding(6, 8)
            self.qkv, self.out = nn.Linear(8, 24), nn.Linear(8, 5)
            self.cls = nn.Parameter(T.zeros(1, 1, 8))

        def forward(self, idx, lengths):
            B, L = idx.shape
            x = self.emb(idx) + self.pos(T.arange(L)).unsqueeze(0).expand(B, L, 8)
            x = T.cat([self.cls.expand(B, -1, -1), x], 1)       # (B, L + 1, 8)
            Lp = x.shape[1]
            q, k, v = self.qkv(x).view(B, Lp, 3, 8).unbind(2)
            att = q @ k.transpose(1, 2) / math.sqrt(8)
            causal = T.tril(T.ones(Lp, Lp, dtype=T.bool))
            keep = T.arange(Lp).expand(B, Lp) <= lengths.unsqueeze(1)   # (cls + tokens)
            att = att.masked_fill(~(causal & keep.unsqueeze(1)), float("-inf"))
            h = (att.softmax(-1) @ v)[:, 1:].reshape(B * L, 8)
            state = T.zeros(B, L, 8).view(B * L, 8) + h
            return self.out(state).view(B, L, 5), keep[:, 1:]
    return Tagger()


def _tag_data(n=45):
    rng = np.random.default_rng(1)
    idx = rng.integers(0, 7, (n, 5))
    lengths = rng.integers(1, 6, n)
    tags = rng.integers(0, 5, (n, 5))
    return idx, lengths, tags


def _tag_step(T, model, opt):
    F = T.nn.functional

    def step(idx, lengths, tags):
        logits, mask = model(idx, lengths)
        per = F.cross_entropy(logits.reshape(-1, 5), tags.reshape(-1), reduction="none")
        loss = (per * mask.reshape(-1)).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def _images(T):
    nn = T.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.bn = nn.Linear(16, 12), nn.BatchNorm1d(12)
            self.fc2, self.drop = nn.Linear(12, 3), nn.Dropout(0.25)

        def forward(self, x):
            B = x.shape[0]
            h = self.drop(T.relu(self.bn(self.fc1(x.view(B, -1)))))
            return self.fc2(h)
    return Net()


def _image_data(n=45):
    rng = np.random.default_rng(2)
    return (rng.standard_normal((n, 1, 4, 4)).astype(np.float32), rng.integers(0, 3, n))


def _image_step(T, model, opt):
    F = T.nn.functional

    def step(x, y):
        out = model(x)
        loss = F.cross_entropy(out, y, reduction="sum") / x.shape[0]
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def _train(T, make_model, make_step, arrays, batch_sizes, compiled, opt_name="adam"):
    T.manual_seed(0)
    model = make_model(T)
    opt = (T.optim.Adam(model.parameters(), 0.01) if opt_name == "adam" else
           T.optim.SGD(model.parameters(), 0.1, momentum=0.9))
    step = make_step(T, model, opt)
    if compiled:
        step = T.compile(step)
    data = T.utils.data.TensorDataset(*(T.tensor(a) for a in arrays))
    record = []
    for bs in batch_sizes:          # (an epoch per batch size: its last batch ragged)
        for batch in T.utils.data.DataLoader(data, batch_size=bs, shuffle=True):
            loss = step(*batch)
            record.append((batch[0].shape[0], loss.item(),
                           [p.detach().numpy().copy() for p in model.parameters()],
                           [p.grad.numpy().copy() for p in model.parameters()]))
    return record, step


def _same(make_model, make_step, arrays, batch_sizes, **kw):
    want, _ = _train(torch, make_model, make_step, arrays, batch_sizes, False, **kw)
    eager, _ = _train(llgrad, make_model, make_step, arrays, batch_sizes, False, **kw)
    got, step = _train(llgrad, make_model, make_step, arrays, batch_sizes, True, **kw)
    assert [r[0] for r in want] == [r[0] for r in eager] == [r[0] for r in got]
    for i, (w, e, g) in enumerate(zip(want, eager, got)):
        np.testing.assert_allclose(e[1], w[1], rtol=1e-4, atol=1e-5, err_msg=f"step {i}")
        assert g[1] == pytest.approx(e[1], rel=2e-5, abs=1e-6), (i, g[0])
        for pw, pe, pg in zip(w[2] + w[3], e[2] + e[3], g[2] + g[3]):
            np.testing.assert_allclose(pe, pw, rtol=1e-3, atol=1e-4, err_msg=f"step {i}")
            np.testing.assert_allclose(pg, pe, rtol=1e-4, atol=1e-5, err_msg=f"step {i}")
    return step, sorted({r[0] for r in got})


@pytest.mark.slow
def test_a_masked_attention_tagger_with_ragged_and_growing_batches():
    step, sizes = _same(_tagger, _tag_step, _tag_data(29), [8, 12], opt_name="sgd")
    assert sizes == [5, 8, 12]
    print("traces", step.n_traces)


@pytest.mark.slow
def test_an_image_classifier_with_batchnorm_and_dropout():
    step, sizes = _same(_images, _image_step, _image_data(), [8, 12, 16], opt_name="sgd")
    assert sizes == [5, 8, 9, 12, 13, 16]
    print("traces", step.n_traces)


def test_a_compiled_model_whose_outputs_have_the_batch_size():
    # (model = compile(model), the loss and backward eager: the outputs are (B, 5), and the
    # shape eager's graph saved for them (entry.eager_saved) once kept every size tracing)
    def make_step(T, model, opt):
        compiled = T.compile(model) if T is llgrad else model
        F = T.nn.functional

        def step(idx, lengths, tags):
            logits, mask = compiled(idx, lengths)
            loss = F.cross_entropy(logits[mask], tags[mask])
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        step.compiled = compiled
        return step
    want, _ = _train(torch, _tagger, make_step, _tag_data(29), [8, 12], False, "sgd")
    got, step = _train(llgrad, _tagger, make_step, _tag_data(29), [8, 12], False, "sgd")
    for i, (w, g) in enumerate(zip(want, got)):
        assert g[1] == pytest.approx(w[1], rel=1e-4, abs=1e-5), i
        for pw, pg in zip(w[2] + w[3], g[2] + g[3]):
            np.testing.assert_allclose(pg, pw, rtol=1e-3, atol=1e-4, err_msg=f"step {i}")
    assert sorted({r[0] for r in got}) == [5, 8, 12]
    assert step.compiled.n_traces == 3    # (8 before and after .grad is set, then 5)


@pytest.mark.slow
def test_the_tagger_over_many_epochs_and_sizes():
    _same(_tagger, _tag_step, _tag_data(61), [4, 7, 9, 16, 30, 61, 2, 3], opt_name="sgd")
