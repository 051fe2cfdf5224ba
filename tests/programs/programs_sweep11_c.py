"""Tutorial programs on sequence models (see tutorial_harness.py): a hierarchical attention
network over words then sentences, Transformer-XL segment recurrence with a detached
memory, ALiBi attention biases through scaled_dot_product_attention's float attn_mask, SQuAD
style span extraction with masked start / end logits, an HMM trained by its forward
algorithm in log space with Viterbi decoding, and GloVe's weighted least squares with
Adagrad."""
import math


def _no_key_bias(model, name, d):
    """The parameters to compare with torch, a fused qkv Linear's key bias left out: its
    gradient is zero (softmax ignores a shift per query), which Adam turns from rounding
    noise into full steps."""
    return [p.detach()[:d].tolist() + p.detach()[2 * d:].tolist() if n == name else p
            for n, p in model.named_parameters()]


def hierarchical_attention(torch, env):
    """Yang et al.'s HAN: documents [B, S, W] of word ids viewed as B*S sentences, a
    bidirectional word GRU with additive attention (a context vector parameter, masked
    softmax over padding words), then a sentence GRU with its own attention."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    B, S, W, V, H = 4, 3, 5, 20, 6

    class Attn(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.proj = nn.Linear(d, d)
            self.ctx = nn.Parameter(torch.randn(d) * 0.1)

        def forward(self, h, mask=None):
            scores = torch.tanh(self.proj(h)) @ self.ctx
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            a = torch.softmax(scores, dim=1)
            return (a.unsqueeze(-1) * h).sum(1), a

    class HAN(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, 8, padding_idx=0)
            self.word_rnn = nn.GRU(8, H, batch_first=True, bidirectional=True)
            self.word_attn = Attn(2 * H)
            self.sent_rnn = nn.GRU(2 * H, H, batch_first=True, bidirectional=True)
            self.sent_attn = Attn(2 * H)
            self.out = nn.Linear(2 * H, 3)

        def forward(self, docs):
            b, s, w = docs.shape
            words = docs.view(b * s, w)
            h, _ = self.word_rnn(self.emb(words))
            sent, _ = self.word_attn(h, words != 0)
            h2, _ = self.sent_rnn(sent.view(b, s, -1))
            doc, a = self.sent_attn(h2)
            return self.out(doc), a

    model = HAN()
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    docs = torch.randint(1, V, (B, S, W))
    docs[:, :, 3:] = docs[:, :, 3:] * (torch.rand(B, S, 2) > 0.5).long()
    y = torch.randint(0, 3, (B,))

    def train_step(docs, y):
        opt.zero_grad()
        logits, a = model(docs)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        return loss, a

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        loss, a = step(docs, y)
        hist.append(loss.item())
    env.rec("hist", hist)
    env.rec("sentence attention", a)
    env.rec("params", list(model.parameters()))


def transformer_xl_memory(torch, env):
    """Transformer-XL's segment-level recurrence: each segment attends to
    torch.cat([mem, h]) under a causal mask shifted by the memory length (torch.triu with
    diagonal=1 + M), and the new memory is the last M hidden states .detach()'ed; the
    memory is carried across training steps (a step's output fed to the next)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    V, D, T, M = 11, 12, 4, 4
    data = torch.randint(0, V, (2, 5 * T + 1))

    class XL(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.qkv = nn.Linear(D, 3 * D)
            self.ff = nn.Sequential(nn.LayerNorm(D), nn.Linear(D, 2 * D), nn.ReLU(),
                                    nn.Linear(2 * D, D))
            self.out = nn.Linear(D, V)

        def forward(self, x, mem):
            h = self.emb(x)
            cat = torch.cat([mem, h], 1)
            q = self.qkv(h)[..., :D]
            k, v = self.qkv(cat)[..., D:].chunk(2, dim=-1)
            scores = q @ k.transpose(1, 2) / math.sqrt(D)
            mask = torch.triu(torch.ones(x.shape[1], cat.shape[1], dtype=torch.bool),
                              diagonal=1 + mem.shape[1])
            h = h + torch.softmax(scores.masked_fill(mask, -1e9), -1) @ v
            h = h + self.ff(h)
            return self.out(h), h[:, -M:].detach()

    model = XL()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def train_step(x, y, mem):
        opt.zero_grad()
        logits, new_mem = model(x, mem)
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        return loss, new_mem

    step = env.step(train_step)
    mem = torch.zeros(2, M, D)
    hist = []
    for epoch in range(2):
        mem = torch.zeros(2, M, D)
        for i in range(0, 5 * T, T):
            loss, mem = step(data[:, i:i + T], data[:, i + 1:i + T + 1], mem)
            hist.append(loss.item())
    env.rec("hist", hist)
    env.rec("mem", mem)
    env.rec("mem requires_grad", mem.requires_grad)
    env.rec("params", _no_key_bias(model, "qkv.bias", D))


def alibi_sdpa(torch, env):
    """ALiBi (Press et al.): per-head slopes 2^(-8 i / H), a bias -slope * (i - j) added as
    a float attn_mask to F.scaled_dot_product_attention together with -inf above the
    diagonal, no position embeddings; trained on shorter sequences, evaluated on longer."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    V, D, H = 10, 16, 4

    def alibi(T):
        slopes = torch.tensor([2 ** (-8 * (i + 1) / H) for i in range(H)])
        pos = torch.arange(T)
        dist = (pos.view(-1, 1) - pos.view(1, -1)).clamp(min=0).float()
        bias = -slopes.view(H, 1, 1) * dist
        causal = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        return bias + causal

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.qkv = nn.Linear(D, 3 * D)
            self.proj = nn.Linear(D, D)
            self.ln = nn.LayerNorm(D)
            self.out = nn.Linear(D, V)

        def forward(self, x):
            b, t = x.shape
            h = self.emb(x)
            q, k, v = self.qkv(self.ln(h)).view(b, t, 3, H, D // H).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=alibi(t))
            h = h + self.proj(a.transpose(1, 2).reshape(b, t, D))
            return self.out(h)

    model = LM()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    seq = torch.arange(20) % 5
    x, y = torch.stack([seq[:8], seq[1:9]]), torch.stack([seq[1:9], seq[2:10]])

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x).transpose(1, 2), y)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(6)])
    with torch.no_grad():
        env.rec("long logits", model(seq[:16].view(1, -1)))
    env.rec("params", _no_key_bias(model, "qkv.bias", D))


def squad_span_extraction(torch, env):
    """Extractive QA: a TransformerEncoder over [question; context] with
    src_key_padding_mask, a Linear(D, 2) split into start / end logits with .split(1, -1)
    and squeeze(-1), question and pad positions masked with torch.finfo(dtype).min, the
    mean of the two cross entropies; the best span by the upper triangle of start x end.
    SGD (the logits' shift over positions gets a zero gradient, which Adam would amplify)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    V, D, T = 14, 16, 9

    class QA(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D, padding_idx=0)
            self.seg = nn.Embedding(2, D)
            layer = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
            self.qa = nn.Linear(D, 2)

        def forward(self, ids, segs, pad):
            h = self.enc(self.emb(ids) + self.seg(segs), src_key_padding_mask=pad)
            start, end = self.qa(h).split(1, dim=-1)
            start, end = start.squeeze(-1), end.squeeze(-1)
            invalid = pad | (segs == 0)
            neg = torch.finfo(start.dtype).min
            return start.masked_fill(invalid, neg), end.masked_fill(invalid, neg)

    model = QA()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ids = torch.randint(1, V, (4, T))
    segs = torch.zeros(4, T, dtype=torch.long)
    segs[:, 3:] = 1
    lens = torch.tensor([9, 7, 8, 6])
    pad = torch.arange(T).view(1, -1) >= lens.view(-1, 1)
    ids = ids.masked_fill(pad, 0)
    s_pos, e_pos = torch.tensor([3, 4, 5, 3]), torch.tensor([5, 6, 5, 4])

    def train_step(ids, segs, pad, s_pos, e_pos):
        opt.zero_grad()
        start, end = model(ids, segs, pad)
        loss = (F.cross_entropy(start, s_pos) + F.cross_entropy(end, e_pos)) / 2
        loss.backward()
        opt.step()
        return loss, start.detach(), end.detach()

    step = env.step(train_step)
    hist = []
    for _ in range(6):
        loss, start, end = step(ids, segs, pad, s_pos, e_pos)
        hist.append(loss.item())
    env.rec("hist", hist)
    scores = start.log_softmax(-1).unsqueeze(2) + end.log_softmax(-1).unsqueeze(1)
    scores = torch.triu(scores).flatten(1)
    best = scores.argmax(1)
    env.rec("spans", torch.stack([best // T, best % T], 1))
    env.rec("params", [p for n, p in model.named_parameters() if "in_proj_bias" not in n])


def hmm_forward_viterbi(torch, env):
    """A discrete HMM as an nn.Module with unnormalised logits (log_softmax rows): the
    forward algorithm over time with torch.logsumexp of alpha[:, :, None] + log_A, the
    mean negative log likelihood minimised with Adam, then Viterbi by max / argmax
    backpointers and a backtrace with gather."""
    nn = torch.nn
    torch.manual_seed(0)
    S, O, T, B = 3, 4, 8, 5

    class HMM(nn.Module):
        def __init__(self):
            super().__init__()
            self.pi = nn.Parameter(torch.randn(S) * 0.1)
            self.A = nn.Parameter(torch.randn(S, S) * 0.1)
            self.E = nn.Parameter(torch.randn(S, O) * 0.1)

        def forward(self, obs):
            log_pi = self.pi.log_softmax(0)
            log_A, log_E = self.A.log_softmax(1), self.E.log_softmax(1)
            alpha = log_pi + log_E[:, obs[:, 0]].T
            for t in range(1, obs.shape[1]):
                alpha = torch.logsumexp(alpha.unsqueeze(2) + log_A, dim=1) + \
                    log_E[:, obs[:, t]].T
            return torch.logsumexp(alpha, dim=1)

        def viterbi(self, obs):
            log_A, log_E = self.A.log_softmax(1), self.E.log_softmax(1)
            delta = self.pi.log_softmax(0) + log_E[:, obs[:, 0]].T
            back = []
            for t in range(1, obs.shape[1]):
                best, arg = (delta.unsqueeze(2) + log_A).max(dim=1)
                back.append(arg)
                delta = best + log_E[:, obs[:, t]].T
            path = [delta.argmax(1)]
            for arg in reversed(back):
                path.append(arg.gather(1, path[-1].unsqueeze(1)).squeeze(1))
            return torch.stack(path[::-1], 1)

    model = HMM()
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    obs = torch.randint(0, O, (B, T))
    obs[:, ::2] = obs[:, ::2] % 2

    def train_step(obs):
        opt.zero_grad()
        loss = -model(obs).mean()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(obs).item() for _ in range(8)])
    with torch.no_grad():
        env.rec("viterbi", model.viterbi(obs))
        # (the rows' log_softmax: a shift of a row's logits gets a zero gradient)
        env.rec("log probs", [model.pi.log_softmax(0), model.A.log_softmax(1),
                              model.E.log_softmax(1)])


def glove_adagrad(torch, env):
    """GloVe: a co-occurrence matrix counted with index_put_(accumulate=True) over a window,
    the weighting f(x) = min(1, (x / x_max) ** 0.75), the weighted squared error of
    w_i . c_j + b_i + b_j - log x_ij over the nonzero pairs (nonzero(as_tuple=True)),
    Adagrad on four embeddings; word vectors = W + C."""
    nn = torch.nn
    torch.manual_seed(0)
    V, D = 8, 4
    corpus = torch.randint(0, V, (60,))
    co = torch.zeros(V, V)
    for off in (1, 2):
        co.index_put_((corpus[:-off], corpus[off:]), torch.full((60 - off,), 1.0 / off),
                      accumulate=True)
    co = co + co.T
    i, j = co.nonzero(as_tuple=True)
    x = co[i, j]
    w_emb, c_emb = nn.Embedding(V, D), nn.Embedding(V, D)
    w_bias, c_bias = nn.Embedding(V, 1), nn.Embedding(V, 1)
    for e in (w_bias, c_bias):
        nn.init.zeros_(e.weight)
    params = [m.weight for m in (w_emb, c_emb, w_bias, c_bias)]
    opt = torch.optim.Adagrad(params, lr=0.1)
    weight = torch.clamp((x / 3.0) ** 0.75, max=1.0)

    def train_step(i, j, x, weight):
        opt.zero_grad()
        pred = (w_emb(i) * c_emb(j)).sum(1) + w_bias(i).squeeze(1) + c_bias(j).squeeze(1)
        loss = (weight * (pred - torch.log(x)) ** 2).sum() / len(x)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("pairs", len(x))
    env.rec("hist", [step(i, j, x, weight).item() for _ in range(8)])
    env.rec("vectors", w_emb.weight + c_emb.weight)
