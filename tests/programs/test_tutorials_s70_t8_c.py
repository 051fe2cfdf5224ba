"""Stop 70 (t8), file c: Karpathy's "becoming a backprop ninja" (makemore part 4) and a
variable-length sequence classifier, run with PyTorch, with llgrad eagerly and with llgrad
compiling the step through tutorial_harness.py.

- makemore part 4, exercise 1: the MLP's forward broken into its atoms (a hand-written
  batch norm with Bessel's correction, logits minus their row max, counts / counts_sum),
  `t.retain_grad()` on every intermediate, `loss.backward()`, then the backward pass by
  hand (`dlogprobs[range(n), Yb] = -1.0/n`, broadcasting sums, the embedding gradient
  accumulated by a Python loop over `Xb[k, j]`), each compared with the intermediate's
  .grad as Karpathy's `cmp` does;
- makemore part 4, exercise 4: training with the manual backward only, under
  `torch.no_grad()`, the fused cross-entropy backward (`dlogits = F.softmax(logits, 1);
  dlogits[range(n), Yb] -= 1; dlogits /= n`) and the fused batch-norm backward,
  `p.data += -lr * grad` over zip(parameters, grads);
- a padded-batch GRU classifier (the "packed sequences" blog post): pad_sequence,
  pack_padded_sequence(enforce_sorted=False), a bidirectional GRU, pad_packed_sequence and
  the final hidden states of both directions concatenated."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _makemore_setup(torch, env):
    vocab_size, block_size, n_embd, n_hidden, n = 12, 3, 4, 16, 8
    C = env.randn(vocab_size, n_embd)
    W1 = env.randn(n_embd * block_size, n_hidden) * (5 / 3) / ((n_embd * block_size) ** 0.5)
    b1 = env.randn(n_hidden) * 0.1
    W2 = env.randn(n_hidden, vocab_size) * 0.1
    b2 = env.randn(vocab_size) * 0.1
    bngain = env.randn(1, n_hidden) * 0.1 + 1.0
    bnbias = env.randn(1, n_hidden) * 0.1
    parameters = [C, W1, b1, W2, b2, bngain, bnbias]
    for p in parameters:
        p.requires_grad = True
    Xtr, Ytr = env.randint(0, vocab_size, (48, block_size)), env.randint(0, vocab_size, (48,))
    return parameters, Xtr, Ytr, n


def makemore_ninja_ex1(torch, env):
    F = torch.nn.functional
    parameters, Xtr, Ytr, n = _makemore_setup(torch, env)
    C, W1, b1, W2, b2, bngain, bnbias = parameters

    def cmp(dt, t):
        ex = bool(torch.all(dt == t.grad).item())
        app = torch.allclose(dt, t.grad, atol=1e-6)
        maxdiff = (dt - t.grad).abs().max().item()
        return ex, app, maxdiff

    def forward_backward(Xb, Yb):
        emb = C[Xb]
        embcat = emb.view(emb.shape[0], -1)
        hprebn = embcat @ W1 + b1
        bnmeani = 1 / n * hprebn.sum(0, keepdim=True)
        bndiff = hprebn - bnmeani
        bndiff2 = bndiff**2
        bnvar = 1 / (n - 1) * (bndiff2).sum(0, keepdim=True)
        bnvar_inv = (bnvar + 1e-5)**-0.5
        bnraw = bndiff * bnvar_inv
        hpreact = bngain * bnraw + bnbias
        h = torch.tanh(hpreact)
        logits = h @ W2 + b2
        logit_maxes = logits.max(1, keepdim=True).values
        norm_logits = logits - logit_maxes
        counts = norm_logits.exp()
        counts_sum = counts.sum(1, keepdims=True)
        counts_sum_inv = counts_sum**-1
        probs = counts * counts_sum_inv
        logprobs = probs.log()
        loss = -logprobs[range(n), Yb].mean()
        for p in parameters:
            p.grad = None
        for t in [logprobs, probs, counts, counts_sum, counts_sum_inv, norm_logits,
                  logit_maxes, logits, h, hpreact, bnraw, bnvar_inv, bnvar, bndiff2, bndiff,
                  hprebn, bnmeani, embcat, emb]:
            t.retain_grad()
        loss.backward()

        dlogprobs = torch.zeros_like(logprobs)
        dlogprobs[range(n), Yb] = -1.0 / n
        dprobs = (1.0 / probs) * dlogprobs
        dcounts_sum_inv = (counts * dprobs).sum(1, keepdim=True)
        dcounts = counts_sum_inv * dprobs
        dcounts_sum = (-counts_sum**-2) * dcounts_sum_inv
        dcounts += torch.ones_like(counts) * dcounts_sum
        dnorm_logits = counts * dcounts
        dlogits = dnorm_logits.clone()
        dlogit_maxes = (-dnorm_logits).sum(1, keepdim=True)
        dlogits += F.one_hot(logits.max(1).indices, num_classes=logits.shape[1]) * dlogit_maxes
        dh = dlogits @ W2.T
        dW2 = h.T @ dlogits
        db2 = dlogits.sum(0)
        dhpreact = (1.0 - h**2) * dh
        dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
        dbnraw = bngain * dhpreact
        dbnbias = dhpreact.sum(0, keepdim=True)
        dbndiff = bnvar_inv * dbnraw
        dbnvar_inv = (bndiff * dbnraw).sum(0, keepdim=True)
        dbnvar = (-0.5 * (bnvar + 1e-5)**-1.5) * dbnvar_inv
        dbndiff2 = (1.0 / (n - 1)) * torch.ones_like(bndiff2) * dbnvar
        dbndiff += (2 * bndiff) * dbndiff2
        dhprebn = dbndiff.clone()
        dbnmeani = (-dbndiff).sum(0)
        dhprebn += 1.0 / n * (torch.ones_like(hprebn) * dbnmeani)
        dembcat = dhprebn @ W1.T
        dW1 = embcat.T @ dhprebn
        db1 = dhprebn.sum(0)
        demb = dembcat.view(emb.shape)
        dC = torch.zeros_like(C)
        for k in range(Xb.shape[0]):
            for j in range(Xb.shape[1]):
                ix = Xb[k, j]
                dC[ix] += demb[k, j]
        checks = {}
        for name, d, t in [("logprobs", dlogprobs, logprobs), ("probs", dprobs, probs),
                           ("counts_sum_inv", dcounts_sum_inv, counts_sum_inv),
                           ("counts_sum", dcounts_sum, counts_sum), ("counts", dcounts, counts),
                           ("norm_logits", dnorm_logits, norm_logits),
                           ("logit_maxes", dlogit_maxes, logit_maxes), ("logits", dlogits, logits),
                           ("h", dh, h), ("W2", dW2, W2), ("b2", db2, b2),
                           ("hpreact", dhpreact, hpreact), ("bngain", dbngain, bngain),
                           ("bnbias", dbnbias, bnbias), ("bnraw", dbnraw, bnraw),
                           ("bnvar_inv", dbnvar_inv, bnvar_inv), ("bnvar", dbnvar, bnvar),
                           ("bndiff2", dbndiff2, bndiff2), ("bndiff", dbndiff, bndiff),
                           ("bnmeani", dbnmeani, bnmeani), ("hprebn", dhprebn, hprebn),
                           ("embcat", dembcat, embcat), ("W1", dW1, W1), ("b1", db1, b1),
                           ("emb", demb, emb), ("C", dC, C)]:
            checks[name] = cmp(d, t)[1:]
        return loss.detach(), dC.detach(), checks

    step = env.step(forward_backward)
    for i in range(0, 24, 8):
        loss, dC, checks = step(Xtr[i:i + 8], Ytr[i:i + 8])
        env.rec(f"loss {i}", loss)
        env.rec(f"dC {i}", dC)
        env.rec(f"approx {i}", {k: v[0] for k, v in checks.items()})
        env.rec(f"maxdiff small {i}", {k: v[1] < 1e-6 for k, v in checks.items()})
    env.rec("grads", [p.grad for p in parameters])


def makemore_ninja_ex4(torch, env):
    F = torch.nn.functional
    parameters, Xtr, Ytr, n = _makemore_setup(torch, env)
    C, W1, b1, W2, b2, bngain, bnbias = parameters

    @torch.no_grad()
    def train_step(Xb, Yb, lr):
        emb = C[Xb]
        embcat = emb.view(emb.shape[0], -1)
        hprebn = embcat @ W1 + b1
        bnmean = hprebn.mean(0, keepdim=True)
        bnvar = hprebn.var(0, keepdim=True, unbiased=True)
        bnvar_inv = (bnvar + 1e-5)**-0.5
        bnraw = (hprebn - bnmean) * bnvar_inv
        hpreact = bngain * bnraw + bnbias
        h = torch.tanh(hpreact)
        logits = h @ W2 + b2
        loss = F.cross_entropy(logits, Yb)

        dlogits = F.softmax(logits, 1)
        dlogits[range(n), Yb] -= 1
        dlogits /= n
        dh = dlogits @ W2.T
        dW2 = h.T @ dlogits
        db2 = dlogits.sum(0)
        dhpreact = (1.0 - h**2) * dh
        dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
        dbnbias = dhpreact.sum(0, keepdim=True)
        dhprebn = bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0)
                                            - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))
        dembcat = dhprebn @ W1.T
        dW1 = embcat.T @ dhprebn
        db1 = dhprebn.sum(0)
        demb = dembcat.view(emb.shape)
        dC = torch.zeros_like(C)
        dC.index_add_(0, Xb.view(-1), demb.view(-1, demb.shape[-1]))
        grads = [dC, dW1, db1, dW2, db2, dbngain, dbnbias]
        for p, grad in zip(parameters, grads):
            p.data += -lr * grad
        return loss

    step = env.step(train_step)
    lossi = []
    for it in range(12):
        ix = env.randint(0, Xtr.shape[0], (n,))
        lr = 0.1 if it < 8 else 0.01
        lossi.append(step(Xtr[ix], Ytr[ix], lr).log10().item())
    env.rec("lossi", lossi)
    env.rec("parameters", parameters)
    env.rec("grads are None", [p.grad is None for p in parameters])
    if env.compiled:
        assert step.n_traces <= 2, step.n_traces


def packed_gru_classifier(torch, env):
    nn, F = torch.nn, torch.nn.functional
    rnn_utils = torch.nn.utils.rnn
    pack_padded_sequence, pad_packed_sequence = (rnn_utils.pack_padded_sequence,
                                                 rnn_utils.pad_packed_sequence)
    pad_sequence = rnn_utils.pad_sequence

    class Classifier(nn.Module):
        def __init__(self, vocab=20, emb=8, hidden=10, n_classes=3):
            super().__init__()
            self.embedding = nn.Embedding(vocab, emb, padding_idx=0)
            self.gru = nn.GRU(emb, hidden, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(2 * hidden, n_classes)

        def forward(self, tokens, lengths):
            packed = pack_padded_sequence(self.embedding(tokens), lengths, batch_first=True,
                                          enforce_sorted=False)
            out, h_n = self.gru(packed)
            out, out_lengths = pad_packed_sequence(out, batch_first=True)
            feats = torch.cat([h_n[-2], h_n[-1]], dim=1)
            return self.fc(feats), out, out_lengths

    seqs, labels = [], []
    for i in range(18):
        length = env.choice(6) + 2
        seqs.append(env.randint(1, 20, (length,)))
        labels.append(int(seqs[-1].sum().item()) % 3)
    model = env.init(Classifier())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(tokens, lengths, y):
        model.train()
        logits, out, out_lengths = model(tokens, lengths)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, out.shape[1], out_lengths

    step = env.step(train_step)
    losses = []
    for epoch in range(3):
        for i in range(0, 18, 6):
            batch = seqs[i:i + 6]
            tokens = pad_sequence(batch, batch_first=True, padding_value=0)
            lengths = torch.tensor([len(s) for s in batch])
            loss, width, out_lengths = step(tokens, lengths, torch.tensor(labels[i:i + 6]))
            losses.append(loss.item())
            env.rec(f"width {epoch} {i}", width)
            env.rec(f"out lengths {epoch} {i}", out_lengths)
    env.rec("losses", losses)
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {"makemore_ninja_ex1": makemore_ninja_ex1, "makemore_ninja_ex4": makemore_ninja_ex4,
            "packed_gru_classifier": packed_gru_classifier}


# (slow: 10-25 s with a cold kernel cache on a loaded 2-core machine)
@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=("packed_gru_classifier", "makemore_ninja_ex1")))
def test_program(name, program):
    run_tutorial(program, rtol=1e-5, atol=1e-6)
