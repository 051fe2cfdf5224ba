"""Sweep 63 (t1), file d: sequence and meta-learning tutorial programs run with PyTorch,
with llgrad eagerly and with llgrad compiling each whole training step through
tutorial_harness.py (the same per-step losses, parameters and gradients, no llgrad
warning, compiled code for every step).

- Tacotron 2's location-sensitive attention (NVIDIA/tacotron2's Attention and
  LocationLayer): an LSTMCell decoder over mel frames with teacher forcing, a Conv1d over
  the previous and cumulative attention weights, energies masked by masked_fill with
  the padding mask, bmm context, the stop-token BCE and the mel MSE;
- a QRNN (Bradbury et al.) language model: causal Conv1d gates (F.pad on the left), the
  fo-pooling recurrence as a Python loop over time, truncated BPTT with the hidden state
  carried detached from step to step (an input of the compiled step);
- R2-D2 (Bertinetto et al.): few-shot episodes whose head is ridge regression solved in
  closed form by the Woodbury identity (torch.linalg.solve on the n-by-n system) with a
  learnable lambda and output scale, back-propagated into the embedding."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _grads(model):
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def tacotron_location_attention(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_symbols, emb, n_mel, rnn, attn_dim, n_filters, k_size = 12, 16, 6, 24, 12, 4, 5
    batch, t_in, t_out = 3, 7, 6

    class LocationLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.location_conv = nn.Conv1d(2, n_filters, k_size, padding=(k_size - 1) // 2,
                                           bias=False)
            self.location_dense = nn.Linear(n_filters, attn_dim, bias=False)

        def forward(self, attention_weights_cat):
            processed = self.location_conv(attention_weights_cat).transpose(1, 2)
            return self.location_dense(processed)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.query_layer = nn.Linear(rnn, attn_dim, bias=False)
            self.memory_layer = nn.Linear(emb, attn_dim, bias=False)
            self.v = nn.Linear(attn_dim, 1, bias=False)
            self.location_layer = LocationLayer()
            self.score_mask_value = -float("inf")

        def forward(self, query, memory, processed_memory, weights_cat, mask):
            processed_query = self.query_layer(query.unsqueeze(1))
            processed_location = self.location_layer(weights_cat)
            energies = self.v(torch.tanh(processed_query + processed_location + processed_memory))
            alignment = energies.squeeze(-1).masked_fill(mask, self.score_mask_value)
            weights = F.softmax(alignment, dim=1)
            context = torch.bmm(weights.unsqueeze(1), memory).squeeze(1)
            return context, weights

    class Tacotron(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(n_symbols, emb)
            self.encoder = nn.LSTM(emb, emb // 2, batch_first=True, bidirectional=True)
            self.prenet = nn.Linear(n_mel, rnn // 2)
            self.decoder_rnn = nn.LSTMCell(rnn // 2 + emb, rnn)
            self.attention = Attention()
            self.mel_proj = nn.Linear(rnn + emb, n_mel)
            self.gate_proj = nn.Linear(rnn + emb, 1)

        def forward(self, text, lengths, mels):
            memory, _ = self.encoder(self.embedding(text))
            mask = torch.arange(t_in).unsqueeze(0) >= lengths.unsqueeze(1)
            processed_memory = self.attention.memory_layer(memory)
            b = text.size(0)
            h, c = torch.zeros(b, rnn), torch.zeros(b, rnn)
            weights, weights_cum = torch.zeros(b, t_in), torch.zeros(b, t_in)
            context = torch.zeros(b, emb)
            frame = torch.zeros(b, n_mel)              # (the go frame)
            mel_out, gate_out, alignments = [], [], []
            for t in range(mels.size(1)):
                x = torch.cat([F.relu(self.prenet(frame)), context], -1)
                h, c = self.decoder_rnn(x, (h, c))
                weights_cat = torch.cat([weights.unsqueeze(1), weights_cum.unsqueeze(1)], dim=1)
                context, weights = self.attention(h, memory, processed_memory, weights_cat, mask)
                weights_cum = weights_cum + weights
                hc = torch.cat([h, context], -1)
                mel_out.append(self.mel_proj(hc))
                gate_out.append(self.gate_proj(hc).squeeze(1))
                alignments.append(weights)
                frame = mels[:, t]                      # teacher forcing
            return torch.stack(mel_out, 1), torch.stack(gate_out, 1), torch.stack(alignments, 1)

    model = env.init(Tacotron())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-6)

    def train_step(text, lengths, mels, gates):
        optimizer.zero_grad()
        mel_out, gate_out, alignments = model(text, lengths, mels)
        loss = F.mse_loss(mel_out, mels) + F.binary_cross_entropy_with_logits(gate_out, gates)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.detach(), grad_norm, alignments.detach()

    step = env.step(train_step)
    lengths = torch.tensor([7, 5, 4])
    gates = torch.zeros(batch, t_out)
    gates[:, -1] = 1.0
    for it in range(3):
        text = env.randint(1, n_symbols, (batch, t_in)) * (torch.arange(t_in) < lengths[:, None])
        env.rec(f"step {it}", step(text, lengths, env.randn(batch, t_out, n_mel), gates))
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


def qrnn_language_model(torch, env):
    nn, F = torch.nn, torch.nn.functional
    vocab, emb, hidden, window, bptt, batch = 20, 12, 16, 2, 6, 4

    class QRNNLayer(nn.Module):
        def __init__(self, input_size, hidden_size):
            super().__init__()
            self.hidden_size = hidden_size
            self.conv = nn.Conv1d(input_size, 3 * hidden_size, kernel_size=window)

        def forward(self, x, c0):             # x: (batch, time, features)
            gates = self.conv(F.pad(x.transpose(1, 2), (window - 1, 0))).transpose(1, 2)
            z, f, o = gates.chunk(3, dim=-1)
            z, f, o = torch.tanh(z), torch.sigmoid(f), torch.sigmoid(o)
            c, cs = c0, []
            for t in range(x.size(1)):          # fo-pooling
                c = f[:, t] * c + (1 - f[:, t]) * z[:, t]
                cs.append(c)
            c_all = torch.stack(cs, 1)
            return o * c_all, c

    class QRNNLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(vocab, emb)
            self.layers = nn.ModuleList([QRNNLayer(emb, hidden), QRNNLayer(hidden, hidden)])
            self.decoder = nn.Linear(hidden, vocab)

        def forward(self, x, hidden_state):
            h, new_hidden = self.encoder(x), []
            for layer, c0 in zip(self.layers, hidden_state):
                h, c = layer(h, c0)
                new_hidden.append(c)
            return self.decoder(h), new_hidden

    model = env.init(QRNNLM())
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    criterion = nn.CrossEntropyLoss()

    def repackage_hidden(h):
        return [v.detach() for v in h]

    def train_step(data, targets, hidden_state):
        optimizer.zero_grad()
        output, hidden_state = model(data, hidden_state)
        loss = criterion(output.reshape(-1, vocab), targets.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        optimizer.step()
        return loss.detach(), repackage_hidden(hidden_state)

    step = env.step(train_step)
    stream = env.randint(0, vocab, (batch, 4 * bptt + 1))
    hidden_state = [torch.zeros(batch, hidden) for _ in range(2)]
    for i in range(4):
        data = stream[:, i * bptt:(i + 1) * bptt]
        targets = stream[:, i * bptt + 1:(i + 1) * bptt + 1]
        loss, hidden_state = step(data, targets, hidden_state)
        env.rec(f"step {i}", (loss, hidden_state))
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


def r2d2_closed_form_ridge(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_way, n_shot, n_query, img = 3, 2, 3, 8

    class Embedding(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1, bias=False),
                                     nn.BatchNorm2d(6), nn.ReLU(),
                                     nn.MaxPool2d(2), nn.Conv2d(6, 8, 3, padding=1, bias=False),
                                     nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2))

        def forward(self, x):
            return self.net(x).flatten(1)

    class R2D2(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = Embedding()
            self.log_lambda = nn.Parameter(torch.tensor(0.0))
            # (the paper's output scale; its output bias is left out: softmax cross
            # entropy is invariant to it, so its gradient is rounding noise Adam amplifies)
            self.alpha = nn.Parameter(torch.tensor(1.0))

        def forward(self, support, support_labels, query):
            X = self.embedding(support)                         # (n, d), n < d
            Xq = self.embedding(query)
            n = X.shape[0]
            X = torch.cat([X, torch.ones(n, 1)], 1)             # (a bias column)
            Xq = torch.cat([Xq, torch.ones(Xq.shape[0], 1)], 1)
            Y = F.one_hot(support_labels, n_way).float()
            # Woodbury: W = X^T (X X^T + lambda I)^-1 Y, an n-by-n solve
            A = X @ X.t() + torch.exp(self.log_lambda) * torch.eye(n)
            W = X.t() @ torch.linalg.solve(A, Y)
            return self.alpha * (Xq @ W)

    model = env.init(R2D2())
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(support, support_labels, query, query_labels):
        model.train()
        optimizer.zero_grad()
        logits = model(support, support_labels, query)
        loss = F.cross_entropy(logits, query_labels)
        loss.backward()
        optimizer.step()
        acc = (logits.argmax(1) == query_labels).float().mean()
        return loss.detach(), acc

    step = env.step(train_step)
    prototypes = env.randn(8, 1, img, img)
    for it in range(5):
        classes = [env.choice(8) for _ in range(n_way)]
        proto = torch.cat([prototypes[c:c + 1] for c in classes])
        support_labels = torch.arange(n_way).repeat_interleave(n_shot)
        query_labels = torch.arange(n_way).repeat_interleave(n_query)
        support = proto[support_labels] + 0.5 * env.randn(n_way * n_shot, 1, img, img)
        query = proto[query_labels] + 0.5 * env.randn(n_way * n_query, 1, img, img)
        env.rec(f"episode {it}", step(support, support_labels, query, query_labels))
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {
    "tacotron_location_attention": tacotron_location_attention,
    "qrnn_language_model": qrnn_language_model,
    "r2d2_closed_form_ridge": r2d2_closed_form_ridge,
}


# (over ~1 s each on an idle machine, most of it cold compile)
SLOW = {'tacotron_location_attention', 'r2d2_closed_form_ridge'}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW
                                               else [], id=n) for n in PROGRAMS])
def test_program(name):
    _, _, compiled = run_tutorial(PROGRAMS[name], rtol=1e-4, atol=1e-5)
    for cf in compiled.steps:
        assert cf.n_traces == 1, (cf.fn.__name__, cf.n_traces)
