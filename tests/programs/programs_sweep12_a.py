"""Tutorial NLP programs (see tutorial_harness.py): a fastText classifier on EmbeddingBag
with offsets and hashed bigrams, a char-GRU trained with truncated BPTT and sampled with a
temperature, a pointer-generator's copy distribution built with scatter_add, a mixture of
softmaxes language model, T5's bucketed relative position bias, the DPO preference loss
against a frozen reference model, prompt tuning of a frozen encoder and a child-sum
Tree-LSTM over Python trees."""


def fasttext_bag_offsets(torch, env):
    """fastText: token ids plus hashed bigram ids in one flat tensor with per-sentence
    offsets, nn.EmbeddingBag(mode="mean") and a linear layer, SGD with a linearly decaying
    learning rate set by hand in param_groups between steps."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    vocab, buckets = 30, 50
    sents = [[env.choice(vocab) for _ in range(2 + env.choice(6))] for _ in range(12)]
    labels = torch.tensor([s[0] % 3 for s in sents])

    def featurize(s):
        bigrams = [vocab + (a * 31 + b) % buckets for a, b in zip(s, s[1:])]
        return s + bigrams

    feats = [featurize(s) for s in sents]
    flat = torch.tensor([i for f in feats for i in f])
    offsets = torch.tensor([0] + [len(f) for f in feats[:-1]]).cumsum(0)
    bag = nn.EmbeddingBag(vocab + buckets, 10, mode="mean")
    fc = nn.Linear(10, 3)
    opt = torch.optim.SGD(list(bag.parameters()) + list(fc.parameters()), lr=0.5)

    def train_step(flat, offsets, labels):
        opt.zero_grad()
        loss = F.cross_entropy(fc(bag(flat, offsets)), labels)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    hist = []
    for k in range(6):
        for g in opt.param_groups:
            g["lr"] = 0.5 * (1 - k / 6)
        hist.append(step(flat, offsets, labels).item())
    env.rec("hist", hist)
    env.rec("params", list(bag.parameters()) + list(fc.parameters()))


def char_gru_sampling(torch, env):
    """The char-RNN recipe: nn.GRU over one-hot-embedded characters, the hidden state
    carried across chunks and detached (truncated BPTT), clip_grad_norm_, then generation
    one character at a time with torch.multinomial(softmax(logits / temperature))."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    text = "hello world, hello gru. " * 6
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text])
    V = len(chars)

    class CharRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, 8)
            self.rnn = nn.GRU(8, 16, batch_first=True)
            self.out = nn.Linear(16, V)

        def forward(self, x, h=None):
            o, h = self.rnn(self.emb(x), h)
            return self.out(o), h

    model = CharRNN()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, y, h):
        opt.zero_grad()
        logits, h = model(x, h)
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.detach(), h.detach()

    @torch.no_grad()
    def sample_next(x, h, temperature):
        logits, h = model(x, h)
        probs = F.softmax(logits[:, -1] / temperature, dim=-1)
        return torch.multinomial(probs, 1), h

    step, sampler = env.step(train_step), env.step(sample_next)
    hist, h = [], torch.zeros(1, 4, 16)
    T = 8
    for k in range(5):
        starts = [k * T + j * 20 for j in range(4)]
        x = torch.stack([data[s:s + T] for s in starts])
        y = torch.stack([data[s + 1:s + T + 1] for s in starts])
        loss, h = step(x, y, h)
        hist.append(loss.item())
    env.rec("hist", hist)
    x, hs, out = data[:1].view(1, 1), None, []
    for _ in range(12):
        x, hs = sampler(x, hs, 0.8)
        out.append(x.item())
    env.rec("sampled", out)
    env.rec("params", list(model.parameters()))


def pointer_generator_copy(torch, env):
    """See et al.'s pointer-generator output: p_gen = sigmoid(w [context; state; input]),
    the vocabulary distribution padded with zeros for source OOVs, the attention scattered
    onto the extended vocabulary with scatter_add, NLL of the mixture (log of a clamp), and
    the coverage loss sum(min(attention, coverage))."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    B, S, T, V, n_oov, H = 3, 6, 4, 12, 3, 10
    src_ext = torch.randint(0, V + n_oov, (B, S))
    src = src_ext.masked_fill(src_ext >= V, 1)
    tgt = torch.randint(0, V + n_oov, (B, T))
    emb = nn.Embedding(V, H)
    enc = nn.GRU(H, H, batch_first=True)
    dec = nn.GRUCell(H, H)
    attn_w = nn.Linear(2 * H, 1)
    cov_w = nn.Linear(1, 1, bias=False)
    out = nn.Linear(2 * H, V)
    pgen = nn.Linear(3 * H, 1)
    mods = [emb, enc, dec, attn_w, cov_w, out, pgen]
    params = [p for m in mods for p in m.parameters()]
    opt = torch.optim.Adagrad(params, lr=0.15, initial_accumulator_value=0.1)

    def train_step(src, src_ext, tgt):
        enc_out, h = enc(emb(src))
        s = h[0]
        coverage = torch.zeros(B, S)
        inp = torch.zeros(B, dtype=torch.long)
        nll, cov_loss = 0.0, 0.0
        for t in range(T):
            x = emb(inp)
            s = dec(x, s)
            feats = torch.cat([enc_out, s.unsqueeze(1).expand(-1, S, -1)], -1)
            e = attn_w(feats).squeeze(-1) + cov_w(coverage.unsqueeze(-1)).squeeze(-1)
            a = F.softmax(e, dim=1)
            ctx = torch.bmm(a.unsqueeze(1), enc_out).squeeze(1)
            p_vocab = F.softmax(out(torch.cat([s, ctx], -1)), -1)
            p_gen = torch.sigmoid(pgen(torch.cat([ctx, s, x], -1)))
            ext = torch.cat([p_gen * p_vocab, torch.zeros(B, n_oov)], 1)
            final = ext.scatter_add(1, src_ext, (1 - p_gen) * a)
            gold = final.gather(1, tgt[:, t:t + 1]).squeeze(1)
            nll = nll - torch.log(gold.clamp(min=1e-12)).mean()
            cov_loss = cov_loss + torch.minimum(a, coverage).sum(1).mean()
            coverage = coverage + a
            inp = tgt[:, t].masked_fill(tgt[:, t] >= V, 1)
        loss = (nll + cov_loss) / T
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(src, src_ext, tgt).item() for _ in range(4)])
    env.rec("params", params)


def mixture_of_softmaxes(torch, env):
    """Yang et al.'s mixture of softmaxes LM head: K latent contexts tanh(W h), a prior
    softmax over them, the mixture of K softmaxes computed in log space with logsumexp
    (log prior + log_softmax), NLL via gather; an LSTM body, ASGD as in AWD-LSTM."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    V, E, H, K = 15, 8, 12, 3
    emb = nn.Embedding(V, E)
    lstm = nn.LSTM(E, H, batch_first=True)
    latent = nn.Linear(H, K * E)
    prior = nn.Linear(H, K, bias=False)
    decoder = nn.Linear(E, V)
    mods = [emb, lstm, latent, prior, decoder]
    params = [p for m in mods for p in m.parameters()]
    opt = torch.optim.ASGD(params, lr=0.5, t0=2, lambd=0.0)
    x = torch.randint(0, V, (4, 7))
    y = torch.roll(x, -1, 1)

    def train_step(x, y):
        h, _ = lstm(emb(x))
        ctx = torch.tanh(latent(h)).view(*h.shape[:2], K, E)
        log_prior = F.log_softmax(prior(h), -1)
        log_probs = F.log_softmax(decoder(ctx), -1)
        log_mix = torch.logsumexp(log_prior.unsqueeze(-1) + log_probs, dim=2)
        loss = -log_mix.gather(-1, y.unsqueeze(-1)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(5)])
    env.rec("params", params)
    env.rec("ax", [opt.state[p]["ax"] for p in params[:3]])


def t5_relative_bias(torch, env):
    """T5's relative position bias: _relative_position_bucket (half the buckets exact, the
    rest log-spaced, bidirectional: + num_buckets for positive offsets), an nn.Embedding
    of bucket -> per-head bias added to the attention scores, an encoder layer in pre-norm
    with T5's RMS layer norm (no mean subtraction, no bias)."""
    nn, F = torch.nn, torch.nn.functional
    import math
    torch.manual_seed(0)
    L, D, Hh, nb, maxd = 9, 16, 2, 8, 20

    def bucket(rel):
        n = nb // 2
        ret = (rel > 0).long() * n
        rel = rel.abs()
        max_exact = n // 2
        is_small = rel < max_exact
        large = max_exact + (torch.log(rel.float() / max_exact) / math.log(maxd / max_exact)
                             * (n - max_exact)).long()
        large = torch.min(large, torch.full_like(large, n - 1))
        return ret + torch.where(is_small, rel, large)

    class T5Norm(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            var = x.pow(2).mean(-1, keepdim=True)
            return self.weight * x * torch.rsqrt(var + 1e-6)

    rel_bias = nn.Embedding(nb, Hh)
    norm1, norm2 = T5Norm(D), T5Norm(D)
    qkv = nn.Linear(D, 3 * D, bias=False)
    o = nn.Linear(D, D, bias=False)
    ff = nn.Sequential(nn.Linear(D, 32, bias=False), nn.ReLU(), nn.Linear(32, D, bias=False))
    head = nn.Linear(D, 2)
    mods = [rel_bias, norm1, norm2, qkv, o, ff, head]
    params = [p for m in mods for p in m.parameters()]
    opt = torch.optim.Adafactor(params, lr=1e-2) if hasattr(torch.optim, "Adafactor") \
        else torch.optim.Adam(params, lr=1e-2)
    x, y = torch.randn(4, L, D), torch.randint(0, 2, (4,))
    ctx = torch.arange(L)[:, None]
    mem = torch.arange(L)[None, :]
    buckets = bucket(mem - ctx)

    def train_step(x, y, buckets):
        B = x.shape[0]
        h = norm1(x)
        q, k, v = qkv(h).view(B, L, 3, Hh, D // Hh).permute(2, 0, 3, 1, 4)
        bias = rel_bias(buckets).permute(2, 0, 1).unsqueeze(0)
        scores = q @ k.transpose(-1, -2) + bias          # (T5: no 1/sqrt(d) scaling)
        a = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, L, D)
        x = x + o(a)
        x = x + ff(norm2(x))
        loss = F.cross_entropy(head(x.mean(1)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("buckets", buckets)
    env.rec("hist", [step(x, y, buckets).item() for _ in range(5)])
    env.rec("params", params)


def dpo_preference_loss(torch, env):
    """Direct preference optimisation: a tiny causal LM and a frozen copy as the reference
    (copy.deepcopy, requires_grad_(False), eval()), per-sequence log-probabilities of the
    chosen and rejected completions summed over the response tokens (a loss mask, gather on
    log_softmax), loss = -logsigmoid(beta * (policy margin - reference margin)), and the
    implicit rewards and accuracy as metrics."""
    nn, F = torch.nn, torch.nn.functional
    import copy
    torch.manual_seed(0)
    V, D, L = 11, 12, 8

    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.pos = nn.Parameter(torch.randn(L, D) * 0.1)
            self.mix = nn.Linear(D, D)
            self.out = nn.Linear(D, V)

        def forward(self, ids):
            h = self.emb(ids) + self.pos[:ids.shape[1]]
            causal = torch.tril(torch.ones(ids.shape[1], ids.shape[1]))
            h = h + torch.tanh(self.mix((causal / causal.sum(1, keepdim=True)) @ h))
            return self.out(h)

    policy = TinyLM()
    ref = copy.deepcopy(policy).requires_grad_(False).eval()
    opt = torch.optim.RMSprop(policy.parameters(), lr=5e-3)
    prompt_len = 3
    chosen, rejected = torch.randint(0, V, (4, L)), torch.randint(0, V, (4, L))
    rejected[:, :prompt_len] = chosen[:, :prompt_len]
    mask = torch.zeros(4, L - 1)
    mask[:, prompt_len - 1:] = 1
    mask[0, -2:] = 0                                   # (a shorter response, padded)

    def seq_logp(model, ids):
        logits = model(ids)[:, :-1]
        lp = F.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        return (lp * mask).sum(-1)

    def train_step(chosen, rejected, beta):
        pi_c, pi_r = seq_logp(policy, chosen), seq_logp(policy, rejected)
        with torch.no_grad():
            ref_c, ref_r = seq_logp(ref, chosen), seq_logp(ref, rejected)
        logits = beta * ((pi_c - pi_r) - (ref_c - ref_r))
        loss = -F.logsigmoid(logits).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        rewards = beta * torch.stack([pi_c - ref_c, pi_r - ref_r]).detach()
        return loss, rewards, (rewards[0] > rewards[1]).float().mean()

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        loss, rewards, acc = step(chosen, rejected, 0.1)
        hist.append((loss.item(), acc.item()))
    env.rec("hist", hist)
    env.rec("rewards", rewards)
    env.rec("params", list(policy.parameters()))
    env.rec("ref unchanged", list(ref.parameters()))


def prompt_tuning_frozen(torch, env):
    """Prompt tuning (Lester et al.): a pretrained-style encoder frozen with
    requires_grad_(False), a learned soft prompt nn.Parameter prepended to the token
    embeddings with torch.cat and expand, the attention mask extended with ones, only the
    prompt in the optimiser; nn.TransformerEncoderLayer with a key padding mask."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    V, D, P = 13, 16, 3
    emb = nn.Embedding(V, D, padding_idx=0)
    layer = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, batch_first=True)
    head = nn.Linear(D, 2)
    for m in (emb, layer, head):
        m.requires_grad_(False)
    prompt = nn.Parameter(torch.randn(P, D) * 0.5)
    opt = torch.optim.AdamW([prompt], lr=0.05, weight_decay=0.0)
    ids = torch.randint(1, V, (5, 6))
    ids[1, 4:] = 0
    ids[3, 3:] = 0
    y = torch.tensor([0, 1, 1, 0, 1])

    def train_step(ids, y):
        B = ids.shape[0]
        x = torch.cat([prompt.unsqueeze(0).expand(B, -1, -1), emb(ids)], 1)
        pad = torch.cat([torch.zeros(B, P, dtype=torch.bool), ids == 0], 1)
        h = layer(x, src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).float()
        pooled = (h * keep).sum(1) / keep.sum(1)
        loss = F.cross_entropy(head(pooled), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(ids, y).item() for _ in range(5)])
    env.rec("prompt", prompt)
    env.rec("frozen grads", [p.grad is None for p in layer.parameters()])


def tree_lstm_childsum(torch, env):
    """Tai et al.'s child-sum Tree-LSTM for sentiment over parse trees given as nested
    Python tuples: a recursive forward (leaves embed a word, inner nodes sum their
    children's h, one forget gate per child), a root classifier; the tree shape is Python
    structure, so each distinct tree is its own trace."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    V, X, H = 10, 6, 8

    class ChildSumTreeLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, X)
            self.ioux = nn.Linear(X, 3 * H)
            self.iouh = nn.Linear(H, 3 * H)
            self.fx = nn.Linear(X, H)
            self.fh = nn.Linear(H, H)

        def node(self, x, child_c, child_h):
            h_sum = child_h.sum(0, keepdim=True)
            i, o, u = (self.ioux(x) + self.iouh(h_sum)).chunk(3, -1)
            i, o, u = torch.sigmoid(i), torch.sigmoid(o), torch.tanh(u)
            f = torch.sigmoid(self.fh(child_h) + self.fx(x).repeat(child_h.shape[0], 1))
            c = i * u + (f * child_c).sum(0, keepdim=True)
            return c, o * torch.tanh(c)

        def forward(self, tree, words):
            if isinstance(tree, int):
                x = self.emb(words[tree:tree + 1])
                zero = torch.zeros(1, H)
                return self.node(x, zero, zero)
            states = [self.forward(t, words) for t in tree]
            cs = torch.cat([s[0] for s in states])
            hs = torch.cat([s[1] for s in states])
            return self.node(torch.zeros(1, X), cs, hs)

    model = ChildSumTreeLSTM()
    clf = nn.Linear(H, 3)
    params = list(model.parameters()) + list(clf.parameters())
    opt = torch.optim.Adagrad(params, lr=0.05, weight_decay=1e-4)
    trees = [((0, 1), (2, (3, 4))), (0, (1, 2, 3)), ((0, 1), (2, (3, 4)))]
    words = [torch.randint(0, V, (5,)) for _ in trees]
    labels = [torch.tensor([k % 3]) for k in range(len(trees))]

    def train_step(tree, words, label):
        opt.zero_grad()
        _, h = model(tree, words)
        loss = F.cross_entropy(clf(h), label)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    hist = []
    for _ in range(2):
        for t, w, y in zip(trees, words, labels):
            hist.append(step(t, w, y).item())
    env.rec("hist", hist)
    env.rec("params", params)
