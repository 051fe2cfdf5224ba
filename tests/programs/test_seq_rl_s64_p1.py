"""Sweep 64 (p1), sequence and reinforcement-learning programs as tutorials write them, run
with PyTorch, with llgrad eagerly and with llgrad compiling the training step
(tutorial_harness.py):

- PPO's clipped surrogate: Categorical log_prob and entropy, GAE computed backwards in a
  Python loop over a rollout, advantage normalisation, clipped value loss, several epochs
  of minibatches over the same rollout;
- seq2seq GRU encoder and decoder with Bahdanau (additive) attention, teacher forcing
  chosen per step by a Python coin (the same in every run), clip_grad_norm_;
- the PyTorch "classifying names with a character-level RNN" tutorial: one-hot letters,
  nn.RNN, LogSoftmax + NLLLoss, and its manual `p.data.add_(p.grad, alpha=-lr)` update;
- word2vec skip-gram with negative sampling: two Embedding tables, bmm of the context and
  negative vectors, logsigmoid;
- an LSTM sentiment classifier on padded batches through pack_padded_sequence (lengths
  unsorted, enforce_sorted=False) and pad_packed_sequence."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def ppo_clip(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    obs_dim, n_act, T = 4, 3, 16
    gamma, lam, clip_eps = 0.99, 0.95, 0.2

    class ActorCritic(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(obs_dim, 32), nn.Tanh())
            self.pi = nn.Linear(32, n_act)
            self.v = nn.Linear(32, 1)

        def forward(self, obs):
            h = self.body(obs)
            return D.Categorical(logits=self.pi(h)), self.v(h).squeeze(-1)

    ac = env.init(ActorCritic())
    opt = torch.optim.Adam(ac.parameters(), lr=3e-3, eps=1e-5)

    def update(obs, act, old_logp, adv, ret, old_v):
        dist, v = ac(obs)
        logp = dist.log_prob(act)
        ratio = torch.exp(logp - old_logp)
        surr = torch.min(ratio * adv, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * adv)
        v_clipped = old_v + (v - old_v).clamp(-clip_eps, clip_eps)
        v_loss = 0.5 * torch.max((v - ret) ** 2, (v_clipped - ret) ** 2).mean()
        loss = -surr.mean() + 0.5 * v_loss - 0.01 * dist.entropy().mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(ac.parameters(), 0.5)
        opt.step()
        approx_kl = (old_logp - logp).mean()
        return loss.detach(), approx_kl.detach()

    step = env.step(update)
    for rollout in range(2):
        obs = env.randn(T, obs_dim)
        rewards = env.randn(T)
        dones = (env.rand(T) < 0.1).float()
        with torch.no_grad():
            dist, values = ac(obs)
            act = env.randint(0, n_act, (T,))
            old_logp = dist.log_prob(act)
        adv = torch.zeros(T)
        last = 0.0
        for t in reversed(range(T)):      # (GAE, bootstrapped with 0 at the end)
            next_v = values[t + 1] if t + 1 < T else 0.0
            delta = rewards[t] + gamma * next_v * (1 - dones[t]) - values[t]
            last = delta + gamma * lam * (1 - dones[t]) * last
            adv[t] = last
        ret = adv + values
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        for epoch in range(2):
            for mb in (slice(0, 8), slice(8, 16)):
                env.rec(f"r{rollout} e{epoch} {mb.start}",
                        step(obs[mb], act[mb], old_logp[mb], adv[mb], ret[mb], values[mb]))
    env.rec("params", dict(ac.state_dict()))


def seq2seq_bahdanau(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, H, SOS = 10, 16, 0

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, H)
            self.gru = nn.GRU(H, H, batch_first=True)

        def forward(self, src):
            return self.gru(self.embedding(src))

    class BahdanauAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.Wa, self.Ua, self.Va = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, 1)

        def forward(self, query, keys):
            scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
            weights = F.softmax(scores.squeeze(2).unsqueeze(1), dim=-1)
            return torch.bmm(weights, keys), weights

    class AttnDecoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, H)
            self.attention = BahdanauAttention()
            self.gru = nn.GRU(2 * H, H, batch_first=True)
            self.out = nn.Linear(H, V)

        def forward_step(self, inp, hidden, enc_out):
            emb = self.embedding(inp)
            query = hidden.permute(1, 0, 2)
            context, attn = self.attention(query, enc_out)
            output, hidden = self.gru(torch.cat((emb, context), dim=2), hidden)
            return self.out(output), hidden, attn

    enc, dec = env.init(Encoder()), env.init(AttnDecoder())
    opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=5e-3)

    def train_step(src, tgt, teacher):
        enc_out, hidden = enc(src)
        inp = torch.full((src.shape[0], 1), SOS, dtype=torch.long)
        outputs = []
        for i in range(tgt.shape[1]):
            out, hidden, _ = dec.forward_step(inp, hidden, enc_out)
            outputs.append(out)
            if teacher[i]:
                inp = tgt[:, i].unsqueeze(1)
            else:
                _, top = out.topk(1)
                inp = top.squeeze(-1).detach()
        logits = torch.cat(outputs, dim=1)
        loss = F.nll_loss(F.log_softmax(logits, -1).view(-1, V), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(list(enc.parameters()) + list(dec.parameters()), 1.0)
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        src = env.randint(1, V, (4, 5))
        tgt = src.flip(1)                 # (the reversal task)
        teacher = tuple(env.choice(2) == 1 for _ in range(5))
        env.rec(f"loss {it}", step(src, tgt, teacher))
    # (Va's bias shifts every score alike, so softmax cancels it: its gradient is rounding
    # noise (eager's and compiled's differ too) that Adam scales to lr-sized steps: it is
    # left out)
    params = {**enc.state_dict(), **dec.state_dict()}
    del params["attention.Va.bias"]
    env.rec("params", params)


def char_rnn_names(torch, env):
    nn = torch.nn
    letters = "abcdefghijklmnopqrstuvwxyz '"
    categories = ["en", "fr", "it"]
    names = {"en": ["smith", "jones", "brown"], "fr": ["dubois", "lefevre", "moreau"],
             "it": ["rossi", "russo", "bianchi"]}

    def line_to_tensor(line):        # (the tutorial's <line_length x 1 x n_letters>)
        t = torch.zeros(len(line), 1, len(letters))
        for li, letter in enumerate(line):
            t[li][0][letters.find(letter)] = 1
        return t

    class CharRNN(nn.Module):
        def __init__(self, n_hidden=24):
            super().__init__()
            self.rnn = nn.RNN(len(letters), n_hidden)
            self.h2o = nn.Linear(n_hidden, len(categories))
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, line_tensor):
            rnn_out, hidden = self.rnn(line_tensor)
            return self.softmax(self.h2o(hidden[0]))

    rnn = env.init(CharRNN())
    criterion = nn.NLLLoss()
    lr = 0.05

    def train(category_tensor, line_tensor):
        rnn.zero_grad()
        output = rnn(line_tensor)
        loss = criterion(output, category_tensor)
        loss.backward()
        for p in rnn.parameters():
            p.data.add_(p.grad.data, alpha=-lr)
        return output, loss.item()

    step = env.step(train)
    for it in range(8):
        ci = env.choice(3)
        name = names[categories[ci]][env.choice(3)]
        output, loss = step(torch.tensor([ci], dtype=torch.long), line_to_tensor(name))
        guess = categories[output.topk(1)[1][0].item()]
        env.rec(f"step {it}", (output, loss, guess))
    env.rec("params", dict(rnn.state_dict()))


def skipgram_negative_sampling(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, E = 30, 12

    class SkipGram(nn.Module):
        def __init__(self):
            super().__init__()
            self.in_embed = nn.Embedding(V, E)
            self.out_embed = nn.Embedding(V, E)
            self.in_embed.weight.data.uniform_(-0.5 / E, 0.5 / E)

        def forward(self, center, context, negatives):
            v = self.in_embed(center)                            # (B, E)
            u_pos = self.out_embed(context)                      # (B, E)
            u_neg = self.out_embed(negatives)                    # (B, K, E)
            pos = F.logsigmoid((v * u_pos).sum(-1))
            neg = F.logsigmoid(-torch.bmm(u_neg, v.unsqueeze(2)).squeeze(2)).sum(-1)
            return -(pos + neg).mean()

    model = env.init(SkipGram())
    opt = torch.optim.SGD(model.parameters(), lr=1.0)

    def train_step(center, context, negatives):
        loss = model(center, context, negatives)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):
        center = env.randint(0, V, (16,))
        context = (center + env.randint(1, 3, (16,))) % V
        env.rec(f"loss {it}", step(center, context, env.randint(0, V, (16, 5))))
    with torch.no_grad():
        w = F.normalize(model.in_embed.weight, dim=1)
        env.rec("similar", (w[:4] @ w.T).topk(3, dim=1).indices)
    env.rec("params", dict(model.state_dict()))


def packed_lstm_sentiment(torch, env):
    nn, F = torch.nn, torch.nn.functional
    from_pack = nn.utils.rnn
    V, E, H = 20, 8, 12

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, E, padding_idx=0)
            self.lstm = nn.LSTM(E, H, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(2 * H, 2)

        def forward(self, text, lengths):
            packed = from_pack.pack_padded_sequence(self.embedding(text), lengths,
                                                    batch_first=True, enforce_sorted=False)
            out, (h, c) = self.lstm(packed)
            padded, out_lengths = from_pack.pad_packed_sequence(out, batch_first=True)
            pooled = padded.sum(1) / out_lengths.unsqueeze(1).float()
            return self.fc(torch.cat([h[-2], h[-1]], dim=1) + pooled)

    model = env.init(Classifier())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(text, lengths, labels):
        logits = model(text, lengths)
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), (logits.argmax(1) == labels).float().mean()

    step = env.step(train_step)
    lengths = torch.tensor([5, 3, 6, 2])
    for it in range(4):
        text = env.randint(1, V, (4, 6))
        mask = torch.arange(6)[None, :] < lengths[:, None]
        text = text * mask.long()
        env.rec(f"step {it}", step(text, lengths, env.randint(0, 2, (4,))))
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {"ppo_clip": ppo_clip, "seq2seq_bahdanau": seq2seq_bahdanau,
            "char_rnn_names": char_rnn_names,
            "skipgram_negative_sampling": skipgram_negative_sampling,
            "packed_lstm_sentiment": packed_lstm_sentiment}


# (the default run keeps the quickest; the others, 1.5-8 s each with a cold kernel
# cache, are marked slow)
FAST = ('skipgram_negative_sampling',)


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
