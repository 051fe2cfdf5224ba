"""Sweep 65 (p1), programs whose losses combine options (where a library's reading of one
option beside another is easy to get wrong), run with PyTorch, with llgrad eagerly and with
llgrad compiling the training step (tutorial_harness.py):

- a BiLSTM named-entity tagger: padded labels -100, cross_entropy with class weights,
  ignore_index and label_smoothing together;
- a tiny segmentation net: cross_entropy over (N, C, H, W) with weight, ignore_index (a
  void class 255) and label_smoothing;
- mixup with soft (probability) targets and label_smoothing in cross_entropy;
- a CTC speech model: log_softmax over time-major frames, per-sample input and target
  lengths as tensors, one target too long for its input (an infinite loss zeroed by
  zero_infinity=True), reduction "mean";
- BCEWithLogitsLoss with pos_weight per class and weight per sample together;
- MultiheadAttention(need_weights=True, average_attn_weights=False) per-head weights in an
  attention-entropy penalty, a bool key_padding_mask;
- a GraphSAGE max aggregator by scatter_reduce("amax", include_self=False);
- GIN graph classification over a batch of graphs: the node -> graph vector by
  arange(B).repeat_interleave(sizes) inside the step, mean readout by index_add;
- a fine-tuning switch: after some steps the model's head is replaced by a new Linear and a
  new optimizer made, the same compiled step function continuing;
- weight_norm through torch.nn.utils.parametrizations, removed mid-training by
  parametrize.remove_parametrizations (leave_parametrized=True).

graph_batch_readout found repeat_interleave with a tensor of repeats sending the step to
eager with a warning (traced now, the repeats' sum a guard:
tests/compile/test_repeat_interleave_traced_s65_p1.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _fit(torch, env, model, opt, loss_fn, batches, tag="loss", params_of=dict):
    def train_step(*args):
        loss = loss_fn(model, *args)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    for it, args in enumerate(batches):
        env.rec(f"{tag} {it}", step(*args))
    env.rec("params", params_of(model.state_dict()))


def ner_tagger(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, T = 15, 5

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, 8, padding_idx=0)
            self.lstm = nn.LSTM(8, 8, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(16, T)

        def forward(self, ids):
            return self.fc(self.lstm(self.emb(ids))[0])

    weight = torch.tensor([0.2, 1.0, 1.5, 1.0, 2.0])

    def loss_fn(model, ids, labels):
        logits = model(ids)
        return F.cross_entropy(logits.reshape(-1, T), labels.reshape(-1), weight=weight,
                               ignore_index=-100, label_smoothing=0.1)

    lengths = (6, 4, 2)
    batches = []
    for it in range(4):
        ids = env.randint(1, V, (3, 6))
        labels = env.randint(0, T, (3, 6))
        for b, n in enumerate(lengths):
            ids[b, n:] = 0
            labels[b, n:] = -100
        batches.append((ids, labels))
    model = env.init(Tagger())
    _fit(torch, env, model, torch.optim.Adam(model.parameters(), lr=1e-2), loss_fn, batches)


def segmentation_void(torch, env):
    nn, F = torch.nn, torch.nn.functional
    C = 4
    model = env.init(nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                   nn.Conv2d(8, C, 1)))

    def loss_fn(model, img, mask):
        return F.cross_entropy(model(img), mask, weight=torch.tensor([0.5, 1.0, 2.0, 1.0]),
                               ignore_index=255, label_smoothing=0.05)

    batches = []
    for it in range(4):
        mask = env.randint(0, C, (2, 6, 6))
        mask[:, 0, :] = 255                      # (a void border)
        batches.append((env.randn(2, 3, 6, 6), mask))
    _fit(torch, env, model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
         loss_fn, batches)


def mixup_soft_targets(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)))

    def loss_fn(model, x, y, perm, lam):
        target = lam * F.one_hot(y, 3).float() + (1 - lam) * F.one_hot(y[perm], 3).float()
        mixed = lam * x + (1 - lam) * x[perm]
        return F.cross_entropy(model(mixed), target, label_smoothing=0.1)

    batches = [(env.randn(8, 6), env.randint(0, 3, (8,)), env.randint(0, 8, (8,)),
                float(env.rand(1)[0])) for _ in range(4)]
    _fit(torch, env, model, torch.optim.Adam(model.parameters(), lr=1e-2), loss_fn, batches)


def ctc_speech(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_mels, n_chars, T, B = 6, 5, 8, 3

    class Acoustic(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(n_mels, 12, 3, padding=1)
            self.gru = nn.GRU(12, 12)
            self.fc = nn.Linear(12, n_chars)

        def forward(self, mels):                     # (B, n_mels, T)
            h = F.relu(self.conv(mels)).permute(2, 0, 1)     # (T, B, 12)
            return F.log_softmax(self.fc(self.gru(h)[0]), dim=-1)

    ctc = nn.CTCLoss(blank=0, reduction="mean", zero_infinity=True)

    def loss_fn(model, mels, targets, input_lengths, target_lengths):
        return ctc(model(mels), targets, input_lengths, target_lengths)

    input_lengths = torch.tensor([8, 6, 3])
    target_lengths = torch.tensor([3, 2, 4])         # (4 labels in 3 frames: infinite)
    batches = [(env.randn(B, n_mels, T), env.randint(1, n_chars, (B, 4)), input_lengths,
                target_lengths) for _ in range(4)]
    model = env.init(Acoustic())
    _fit(torch, env, model, torch.optim.Adam(model.parameters(), lr=1e-2), loss_fn, batches)


def bce_pos_weight(torch, env):
    nn = torch.nn
    model = env.init(nn.Sequential(nn.Linear(5, 12), nn.Tanh(), nn.Linear(12, 3)))

    def loss_fn(model, x, y, w):
        crit = nn.BCEWithLogitsLoss(weight=w, pos_weight=torch.tensor([1.0, 3.0, 0.5]))
        return crit(model(x), y)

    batches = []
    for it in range(4):
        x = env.randn(8, 5)
        batches.append((x, (x[:, :3] > 0.5).float(), env.rand(8, 1) + 0.5))
    _fit(torch, env, model, torch.optim.SGD(model.parameters(), lr=0.3), loss_fn, batches)


def mha_head_entropy(torch, env):
    nn, F = torch.nn, torch.nn.functional
    E, heads, L = 8, 2, 5

    class Pool(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Linear(3, E)
            self.attn = nn.MultiheadAttention(E, heads, batch_first=True)
            self.fc = nn.Linear(E, 2)

        def forward(self, x, pad):
            h = self.emb(x)
            out, w = self.attn(h, h, h, key_padding_mask=pad, need_weights=True,
                               average_attn_weights=False)
            mean = out.masked_fill(pad.unsqueeze(-1), 0).sum(1) / (~pad).sum(1, keepdim=True)
            return self.fc(mean), w

    def loss_fn(model, x, pad, y):
        logits, w = model(x, pad)
        ent = -(w * torch.log(w + 1e-9)).sum(-1)     # (B, heads, L)
        return F.cross_entropy(logits, y) + 0.01 * ent.mean()

    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
    batches = [(env.randn(3, L, 3), pad, env.randint(0, 2, (3,))) for _ in range(4)]
    def without_key_bias(state):
        # (the key projection's bias shifts every score of a query alike, so softmax
        # cancels it: its gradient is rounding noise that Adam scales to lr-sized steps)
        state = dict(state)
        bias = state.pop("attn.in_proj_bias")
        return {**state, "q and v bias": (bias[:E], bias[2 * E:])}

    model = env.init(Pool())
    _fit(torch, env, model, torch.optim.Adam(model.parameters(), lr=1e-2), loss_fn, batches,
         params_of=without_key_bias)


def graphsage_max(torch, env):
    nn, F = torch.nn, torch.nn.functional
    N, d = 7, 4
    src = torch.tensor([0, 1, 2, 3, 4, 5, 6, 0, 2, 4])
    dst = torch.tensor([1, 2, 3, 4, 5, 6, 0, 3, 5, 1])

    class SAGE(nn.Module):
        def __init__(self):
            super().__init__()
            self.pool = nn.Linear(d, 8)
            self.lin = nn.Linear(d + 8, 3)

        def forward(self, x):
            msg = F.relu(self.pool(x))[src]                # (E, 8)
            agg = torch.zeros(N, 8).scatter_reduce(0, dst[:, None].expand(-1, 8), msg,
                                                   reduce="amax", include_self=False)
            return self.lin(torch.cat([x, agg], 1))

    def loss_fn(model, x, y):
        return F.cross_entropy(model(x), y)

    batches = [(env.randn(N, d), env.randint(0, 3, (N,))) for _ in range(4)]
    model = env.init(SAGE())
    _fit(torch, env, model, torch.optim.Adam(model.parameters(), lr=1e-2), loss_fn, batches)


def graph_batch_readout(torch, env):
    nn, F = torch.nn, torch.nn.functional
    d = 4

    class GIN(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(d, 8), nn.ReLU(), nn.Linear(8, 8))
            self.eps = nn.Parameter(torch.zeros(1))
            self.cls = nn.Linear(8, 2)

        def forward(self, x, edges, sizes):
            agg = torch.zeros_like(x).index_add(0, edges[1], x[edges[0]])
            h = self.mlp((1 + self.eps) * x + agg)
            batch = torch.arange(sizes.numel()).repeat_interleave(sizes)   # (node -> graph)
            pooled = torch.zeros(sizes.numel(), 8).index_add(0, batch, h)
            return self.cls(pooled / sizes[:, None].float())

    def loss_fn(model, x, edges, sizes, y):
        return F.cross_entropy(model(x, edges, sizes), y)

    batches = []
    for it, sizes in enumerate(([3, 4, 2], [2, 5, 2], [3, 4, 2], [4, 3, 2])):
        n = sum(sizes)
        batches.append((env.randn(n, d), env.randint(0, n, (2, 12)), torch.tensor(sizes),
                        env.randint(0, 2, (3,))))
    model = env.init(GIN())
    _fit(torch, env, model, torch.optim.Adam(model.parameters(), lr=1e-2), loss_fn, batches)


def head_replacement(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(nn.Linear(6, 16), nn.ReLU())
            self.fc = nn.Linear(16, 3)

        def forward(self, x):
            return self.fc(self.backbone(x))

    model = env.init(Net())
    state = {"opt": torch.optim.SGD(model.parameters(), lr=0.1)}

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        state["opt"].zero_grad()
        loss.backward()
        state["opt"].step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(3):
        env.rec(f"pre {it}", step(env.randn(8, 6), env.randint(0, 3, (8,))))
    model.fc = env.init(nn.Linear(16, 5))
    state["opt"] = torch.optim.Adam([{"params": model.backbone.parameters(), "lr": 1e-3},
                                     {"params": model.fc.parameters()}], lr=1e-2)
    for it in range(3):
        env.rec(f"fine {it}", step(env.randn(8, 6), env.randint(0, 5, (8,))))
    env.rec("params", dict(model.state_dict()))


def weight_norm_removed(torch, env):
    nn, F = torch.nn, torch.nn.functional
    P = nn.utils.parametrizations
    parametrize = nn.utils.parametrize
    model = env.init(nn.Sequential(P.weight_norm(nn.Linear(4, 12)), nn.ReLU(),
                                   P.weight_norm(nn.Linear(12, 1))))

    def loss_fn(model, x, y):
        return F.mse_loss(model(x), y)

    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def train_step(x, y):
        loss = loss_fn(model, x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(3):
        x = env.randn(8, 4)
        env.rec(f"wn {it}", step(x, x.sum(1, keepdim=True)))
    env.rec("wn params", dict(model.state_dict()))
    for m in (model[0], model[2]):
        parametrize.remove_parametrizations(m, "weight", leave_parametrized=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for it in range(3):
        x = env.randn(8, 4)
        env.rec(f"plain {it}", step(x, x.sum(1, keepdim=True)))
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {"ner_tagger": ner_tagger, "segmentation_void": segmentation_void,
            "mixup_soft_targets": mixup_soft_targets, "ctc_speech": ctc_speech,
            "bce_pos_weight": bce_pos_weight, "mha_head_entropy": mha_head_entropy,
            "graphsage_max": graphsage_max, "graph_batch_readout": graph_batch_readout,
            "head_replacement": head_replacement,
            "weight_norm_removed": weight_norm_removed}

# (the default run keeps the quickest; the others are marked slow)
FAST = ("bce_pos_weight", "mixup_soft_targets")


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
