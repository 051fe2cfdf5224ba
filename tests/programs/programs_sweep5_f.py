"""Programs of common kinds: a word-level GRU language model with an adaptive softmax
(nn.AdaptiveLogSoftmaxWithLoss over frequency-sorted classes: its loss, log_prob and predict)
trained by Adafactor with truncated backpropagation through time (hidden.detach()).
Programs `f(torch, env)`, see tutorial_harness.py."""


def adaptive_softmax_lm(torch, env):
    nn, optim = torch.nn, torch.optim
    V, E, Hd, bptt, batch = 40, 12, 16, 5, 3

    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(V, E)
            self.rnn = nn.GRU(E, Hd, batch_first=False)
            self.crit = nn.AdaptiveLogSoftmaxWithLoss(Hd, V, cutoffs=[8, 20], div_value=2.0)

        def forward(self, x, hidden, targets):
            out, hidden = self.rnn(self.encoder(x), hidden)
            flat = out.reshape(-1, Hd)
            result = self.crit(flat, targets.reshape(-1))
            return result.output, result.loss, hidden

    model = env.init(RNNModel())
    env.rec("tail", [tuple(p.shape) for p in model.crit.tail.parameters()])
    optimizer = optim.Adafactor(model.parameters(), lr=0.05, weight_decay=1e-3)
    # Zipf-like token ids: frequent words have small ids, as the adaptive softmax wants
    u = env.rand(batch * 4 * bptt + 1)
    stream = (V * u ** 3).long().clamp(max=V - 1)
    data = stream[:-1].view(batch, -1).t().contiguous()       # (time, batch)
    targets = stream[1:].view(batch, -1).t().contiguous()

    def train_step(x, hidden, y):
        hidden = hidden.detach()
        optimizer.zero_grad()
        output, loss, hidden = model(x, hidden, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        return loss.item(), output.detach(), hidden

    train_step = env.step(train_step)
    for epoch in range(2):
        hidden = torch.zeros(1, batch, Hd)
        for i in range(0, data.size(0), bptt):
            loss, output, hidden = train_step(data[i:i + bptt], hidden, targets[i:i + bptt])
            env.rec(f"epoch {epoch} batch {i}", (loss, output))
    model.eval()
    with torch.no_grad():
        out, _ = model.rnn(model.encoder(data[:bptt]))
        flat = out.reshape(-1, Hd)
        log_prob = model.crit.log_prob(flat)
        env.rec("log_prob", (log_prob, log_prob.exp().sum(1)))
        env.rec("predict", (model.crit.predict(flat), log_prob.argmax(1)))
        env.rec("state", optimizer.state_dict()["state"][0])
