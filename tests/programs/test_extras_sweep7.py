"""Tutorial programs (seeded with torch.manual_seed, modules initialised by their own
constructors, data from torch's random functions; see test_basics_sweep7.py): a
Transformer encoder classifier with a padding mask (its evaluation fast path), SWA with
AveragedModel / SWALR / update_bn, a whole-model and scheduler checkpoint, a char-LSTM
sampling text with multinomial and a temperature, an IterableDataset, weight
initialisation by model.apply with the loss options (label smoothing, class weights,
ignore_index, pos_weight)."""
import io

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def transformer_padding_classifier(torch, env):
    """nn.TransformerEncoder(batch_first=True) over padded token sequences with
    src_key_padding_mask, a masked mean pool, positional encoding as a buffer; evaluation
    in eval mode under no_grad (PyTorch's fast path, nested tensors: padded rows out 0)."""
    import math
    nn = torch.nn
    torch.manual_seed(0)
    V, D, L = 20, 16, 7

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, max_len=32):
            super().__init__()
            position = torch.arange(max_len).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
            pe = torch.zeros(1, max_len, d_model)
            pe[0, :, 0::2] = torch.sin(position * div_term)
            pe[0, :, 1::2] = torch.cos(position * div_term)
            self.register_buffer("pe", pe)
            self.dropout = nn.Dropout(0.1)

        def forward(self, x):
            return self.dropout(x + self.pe[:, :x.size(1)])

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D, padding_idx=0)
            self.pos = PositionalEncoding(D)
            layer = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.1, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2)
            self.fc = nn.Linear(D, 3)

        def forward(self, tokens):
            mask = tokens == 0
            h = self.encoder(self.pos(self.emb(tokens) * math.sqrt(D)),
                             src_key_padding_mask=mask)
            keep = (~mask).unsqueeze(-1).float()
            return self.fc((h * keep).sum(1) / keep.sum(1)), h

    lengths = torch.randint(2, L + 1, (12,))
    tokens = torch.randint(1, V, (12, L))
    tokens[torch.arange(L).unsqueeze(0) >= lengths.unsqueeze(1)] = 0
    labels = torch.randint(0, 3, (12,))
    model = Model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(tokens, labels):
        opt.zero_grad()
        logits, _ = model(tokens)
        loss = nn.functional.cross_entropy(logits, labels)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    env.rec("losses", [step(tokens[i:i + 4], labels[i:i + 4]) for _ in range(3)
                       for i in (0, 4, 8)])
    model.eval()
    with torch.no_grad():
        logits, h = model(tokens)
        env.rec("eval", (logits, h))
        env.rec("padded rows zero", bool((h[tokens == 0] == 0).all()))


def swa_averaged_model(torch, env):
    """torch.optim.swa_utils: AveragedModel, SWALR annealing after swa_start, update_bn
    through a DataLoader, and an EMA AveragedModel with get_ema_multi_avg_fn."""
    nn = torch.nn
    data = torch.utils.data
    swa_utils = torch.optim.swa_utils
    torch.manual_seed(0)
    loader = data.DataLoader(data.TensorDataset(torch.randn(32, 6), torch.randn(32, 1)),
                             batch_size=8, shuffle=True)
    model = nn.Sequential(nn.Linear(6, 12), nn.BatchNorm1d(12), nn.ReLU(), nn.Linear(12, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    swa_model = swa_utils.AveragedModel(model)
    ema_model = swa_utils.AveragedModel(model,
                                        multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.9))
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    swa_start = 3
    swa_scheduler = swa_utils.SWALR(opt, swa_lr=0.02, anneal_epochs=2)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    hist = []
    for epoch in range(6):
        for x, y in loader:
            hist.append(step(x, y))
            ema_model.update_parameters(model)
        if epoch > swa_start:
            swa_model.update_parameters(model)
            swa_scheduler.step()
        else:
            scheduler.step()
        hist.append(opt.param_groups[0]["lr"])
    swa_utils.update_bn(loader, swa_model)
    env.rec("hist", hist)
    env.rec("n_averaged", swa_model.n_averaged)
    env.rec("swa", swa_model.module.state_dict())
    env.rec("ema", list(ema_model.parameters()))
    swa_model.eval()
    with torch.no_grad():
        env.rec("swa out", swa_model(torch.randn(4, 6)))


def checkpoint_whole_model(torch, env):
    """torch.save of a whole model (pickled) and of optimizer + scheduler state to BytesIO,
    loaded with weights_only=False; training resumes with the same lrs and losses."""
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 10), nn.ReLU(), nn.Linear(10, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    X, y = torch.randn(16, 5), torch.randint(0, 2, (16,))

    def make_step(model, opt, sched):
        def step(X, y):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(X), y)
            loss.backward()
            opt.step()
            return loss.item()

        step = env.step(step)

        def epoch(X, y):
            loss = step(X, y)
            sched.step()
            return loss, opt.param_groups[0]["lr"]
        return epoch

    step = make_step(model, opt, sched)
    env.rec("before", [step(X, y) for _ in range(3)])
    buf = io.BytesIO()
    torch.save(model, buf)
    buf2 = io.BytesIO()
    torch.save({"opt": opt.state_dict(), "sched": sched.state_dict()}, buf2)
    buf.seek(0)
    buf2.seek(0)
    model2 = torch.load(buf, weights_only=False)
    ck = torch.load(buf2, weights_only=False)
    opt2 = torch.optim.Adam(model2.parameters(), lr=0.01)
    opt2.load_state_dict(ck["opt"])
    sched2 = torch.optim.lr_scheduler.StepLR(opt2, step_size=2, gamma=0.5)
    sched2.load_state_dict(ck["sched"])
    env.rec("sched state", ck["sched"])
    env.rec("model type", (type(model2).__name__, model2 is not model,
                           [type(m).__name__ for m in model2]))
    step2 = make_step(model2, opt2, sched2)
    env.rec("resumed", [step2(X, y) for _ in range(3)])
    env.rec("continued", [step(X, y) for _ in range(3)])
    env.rec("weights", (model.state_dict(), model2.state_dict()))


def char_lstm_sampling(torch, env):
    """A char-level LSTM language model trained on a random 'text', then text sampled with
    torch.multinomial over softmax(logits / temperature) and with argmax."""
    nn = torch.nn
    torch.manual_seed(0)
    chars = "abcdefgh "
    V = len(chars)
    text = torch.randint(0, V, (200,))

    class CharLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, 12)
            self.lstm = nn.LSTM(12, 24, num_layers=2, batch_first=True, dropout=0.1)
            self.fc = nn.Linear(24, V)

        def forward(self, x, state=None):
            out, state = self.lstm(self.emb(x), state)
            return self.fc(out), state

    model = CharLSTM()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    seq_len, bs = 10, 4

    def step(x, y):
        opt.zero_grad()
        logits, _ = model(x)
        loss = nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        return loss.item()

    step = env.step(step)
    losses = []
    for it in range(12):
        starts = torch.randint(0, len(text) - seq_len - 1, (bs,))
        x = torch.stack([text[s:s + seq_len] for s in starts])
        y = torch.stack([text[s + 1:s + seq_len + 1] for s in starts])
        losses.append(step(x, y))
    env.rec("losses", losses)
    model.eval()
    with torch.no_grad():
        for temperature in (0.8, 1.5, None):
            idx, state, out = torch.tensor([[0]]), None, []
            for _ in range(15):
                logits, state = model(idx, state)
                if temperature is None:
                    nxt = logits[0, -1].argmax()
                else:
                    probs = torch.softmax(logits[0, -1] / temperature, dim=-1)
                    nxt = torch.multinomial(probs, 1)[0]
                out.append(chars[nxt.item()])
                idx = nxt.view(1, 1)
            env.rec(f"sample {temperature}", "".join(out))


def iterable_dataset(torch, env):
    """An IterableDataset yielding random batches of a linear teacher; DataLoader with
    batch_size=None; islice to a fixed number of steps."""
    import itertools
    nn = torch.nn
    data = torch.utils.data
    torch.manual_seed(0)
    teacher = torch.randn(4, 2)

    class Stream(data.IterableDataset):
        def __iter__(self):
            while True:
                x = torch.randn(8, 4)
                yield x, x @ teacher + 0.01 * torch.randn(8, 2)

    model = nn.Linear(4, 2, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, nesterov=True, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    loader = data.DataLoader(Stream(), batch_size=None)
    env.rec("losses", [step(x, y) for x, y in itertools.islice(loader, 25)])
    env.rec("weight", (model.weight, teacher.t()))


def init_apply_losses(torch, env):
    """model.apply(init_weights) with kaiming_normal_ / xavier_uniform_ / constant_ by
    isinstance; CrossEntropyLoss(weight, ignore_index, label_smoothing) and
    BCEWithLogitsLoss(pos_weight) as the two heads' losses."""
    nn = torch.nn
    torch.manual_seed(0)

    def init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            nn.init.constant_(m.bias, 0.01)
        elif isinstance(m, nn.Conv1d):
            nn.init.xavier_uniform_(m.weight, gain=nn.init.calculate_gain("relu"))
            nn.init.zeros_(m.bias)

    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(3, 8, 3, padding=1)
            self.cls = nn.Linear(8, 4)
            self.tags = nn.Linear(8, 5)

        def forward(self, x):
            h = torch.relu(self.conv(x)).mean(-1)
            return self.cls(h), self.tags(h)

    model = TwoHeads()
    model.apply(init_weights)
    env.rec("init", model.state_dict())
    ce = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5, 1.0]), ignore_index=-100,
                             label_smoothing=0.1)
    bce = nn.BCEWithLogitsLoss(pos_weight=torch.full((5,), 3.0))
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05)
    X = torch.randn(10, 3, 6)
    y = torch.randint(0, 4, (10,))
    y[3] = -100
    tags = (torch.rand(10, 5) > 0.7).float()

    def step(X, y, tags):
        opt.zero_grad()
        a, b = model(X)
        l1, l2 = ce(a, y), bce(b, tags)
        (l1 + l2).backward()
        opt.step()
        return l1.item(), l2.item()

    step = env.step(step)
    env.rec("losses", [step(X, y, tags) for _ in range(10)])
    env.rec("weights", model.state_dict())


PROGRAMS = {f.__name__: f for f in [
    transformer_padding_classifier, swa_averaged_model, checkpoint_whole_model,
    char_lstm_sampling, iterable_dataset, init_apply_losses]}


# (over ~1.5 s each with their builds, on a machine the suite shares: in the slow run)
SLOW = {"char_lstm_sampling", "checkpoint_whole_model", "swa_averaged_model",
        "transformer_padding_classifier"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], rtol=1e-4, atol=1e-6)
