"""Tutorial programs (seeded with torch.manual_seed, modules initialised by their own
constructors, data from torch's random functions; see test_basics_sweep7.py) on building
modules and feeding data: a custom Dataset with a collate_fn padding sequences,
TensorDataset / Subset / ConcatDataset / random_split, register_buffer, ModuleList and
ParameterList, Sequential from an OrderedDict, parameter counting and named_parameters
filters, parametrizations and weight_norm, the learning-rate scheduler zoo."""
import collections

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def custom_dataset_collate(torch, env):
    """A map-style Dataset of variable-length sequences, a collate_fn padding them with
    pad_sequence and returning lengths, a GRU over pack_padded_sequence."""
    nn = torch.nn
    data = torch.utils.data
    rnn_utils = torch.nn.utils.rnn
    torch.manual_seed(0)

    class SeqDataset(data.Dataset):
        def __init__(self, n):
            self.lengths = torch.randint(2, 9, (n,)).tolist()
            self.seqs = [torch.randn(L, 3) for L in self.lengths]
            self.labels = torch.randint(0, 2, (n,))

        def __len__(self):
            return len(self.seqs)

        def __getitem__(self, idx):
            return self.seqs[idx], self.labels[idx]

    def collate_fn(batch):
        seqs, labels = zip(*batch)
        lengths = torch.tensor([len(s) for s in seqs])
        padded = rnn_utils.pad_sequence(seqs, batch_first=True)
        return padded, lengths, torch.stack(labels)

    ds = SeqDataset(24)
    loader = data.DataLoader(ds, batch_size=6, shuffle=True, collate_fn=collate_fn)

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(3, 10, batch_first=True)
            self.fc = nn.Linear(10, 2)

        def forward(self, x, lengths):
            packed = rnn_utils.pack_padded_sequence(x, lengths, batch_first=True,
                                                    enforce_sorted=False)
            _, h = self.gru(packed)
            return self.fc(h[-1])

    model = Classifier()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def step(x, lengths, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x, lengths), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    hist = []
    for epoch in range(2):
        for x, lengths, y in loader:
            hist.append((tuple(x.shape), step(x, lengths, y)))
    env.rec("hist", hist)
    env.rec("weights", list(model.parameters()))


def dataset_combinators(torch, env):
    """TensorDataset, ConcatDataset, Subset, random_split with a seeded Generator,
    WeightedRandomSampler, BatchSampler, drop_last; training over the concatenation."""
    nn = torch.nn
    data = torch.utils.data
    torch.manual_seed(0)
    a = data.TensorDataset(torch.randn(10, 4), torch.randint(0, 3, (10,)))
    b = data.TensorDataset(torch.randn(14, 4), torch.randint(0, 3, (14,)))
    both = data.ConcatDataset([a, b])
    env.rec("lens", (len(a), len(b), len(both), both.cumulative_sizes))
    env.rec("item", both[12])
    sub = data.Subset(both, [0, 11, 23, 5])
    env.rec("subset", [sub[i] for i in range(len(sub))])
    train, val = data.random_split(both, [0.75, 0.25], generator=torch.Generator().manual_seed(42))
    env.rec("split", (sorted(train.indices), sorted(val.indices)))
    weights = torch.rand(len(both))
    sampler = data.WeightedRandomSampler(weights, num_samples=16, replacement=True)
    env.rec("weighted", list(sampler))
    env.rec("batches", list(data.BatchSampler(data.RandomSampler(range(10)), 4, drop_last=True)))
    model = nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    loader = data.DataLoader(train, batch_size=5, shuffle=True, drop_last=True)
    env.rec("losses", [step(x, y) for _ in range(3) for x, y in loader])
    env.rec("weights", (model.weight, model.bias))


def buffers_and_containers(torch, env):
    """A custom module with register_buffer (persistent and not), a ModuleList of blocks,
    a ParameterList of per-block scales, Sequential from an OrderedDict; parameter counts,
    named_parameters / named_buffers / state_dict keys, a filter by name."""
    nn = torch.nn
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.fc = nn.Linear(d, d)
            self.register_buffer("running", torch.zeros(d))
            self.register_buffer("scratch", torch.ones(d), persistent=False)

        def forward(self, x):
            out = self.fc(x)
            if self.training:
                with torch.no_grad():
                    self.running.mul_(0.9).add_(out.mean(0), alpha=0.1)
            return torch.relu(out) + x

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(collections.OrderedDict([
                ("fc", nn.Linear(5, 8)), ("act", nn.Tanh())]))
            self.blocks = nn.ModuleList([Block(8) for _ in range(3)])
            self.scales = nn.ParameterList([nn.Parameter(torch.ones(1) * 0.5) for _ in range(3)])
            self.head = nn.Linear(8, 1)

        def forward(self, x):
            x = self.stem(x)
            for blk, s in zip(self.blocks, self.scales):
                x = blk(x) * s
            return self.head(x)

    net = Net()
    env.rec("counts", (sum(p.numel() for p in net.parameters()),
                       sum(p.numel() for p in net.parameters() if p.requires_grad),
                       len(list(net.modules())), len(list(net.children()))))
    env.rec("names", [n for n, _ in net.named_parameters()])
    env.rec("buffers", [n for n, _ in net.named_buffers()])
    env.rec("state keys", list(net.state_dict().keys()))
    env.rec("stem", (net.stem.fc is net.stem[0], [n for n, _ in net.stem.named_children()]))
    weights = [p for n, p in net.named_parameters() if "weight" in n]
    others = [p for n, p in net.named_parameters() if "weight" not in n]
    opt = torch.optim.Adam([{"params": weights}, {"params": others, "lr": 0.001}], lr=0.01)
    X, y = torch.randn(16, 5), torch.randn(16, 1)

    def step(X, y):
        opt.zero_grad()
        loss = nn.functional.l1_loss(net(X), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    env.rec("losses", [step(X, y) for _ in range(10)])
    env.rec("state", net.state_dict())
    net.eval()
    with torch.no_grad():
        env.rec("eval", net(X[:3]))


def parametrize_weight_norm(torch, env):
    """torch.nn.utils.parametrize with a Symmetric and an orthogonal-ish parametrization,
    parametrizations.weight_norm, remove_parametrizations leaving the trained weight."""
    nn = torch.nn
    P = torch.nn.utils.parametrize
    torch.manual_seed(0)

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(0, 1)

    layer = nn.Linear(4, 4)
    P.register_parametrization(layer, "weight", Symmetric())
    env.rec("symmetric", (layer.weight, P.is_parametrized(layer),
                          [n for n, _ in layer.named_parameters()]))
    wn = nn.utils.parametrizations.weight_norm(nn.Linear(4, 3))
    env.rec("wn names", sorted(n for n, _ in wn.named_parameters()))
    model = nn.Sequential(layer, nn.ReLU(), wn)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    X, y = torch.randn(10, 4), torch.randint(0, 3, (10,))

    def step(X, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(X), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    env.rec("losses", [step(X, y) for _ in range(8)])
    env.rec("weights", (layer.weight, wn.weight, wn.parametrizations.weight.original0,
                        wn.parametrizations.weight.original1))
    P.remove_parametrizations(layer, "weight")
    env.rec("removed", (layer.weight, [n for n, _ in layer.named_parameters()]))


def lr_scheduler_zoo(torch, env):
    """LambdaLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, CosineAnnealingWarmRestarts,
    LinearLR + SequentialLR, ChainedScheduler, CyclicLR: the lrs they set over 12 epochs of
    a training loop, and the trained weights."""
    nn = torch.nn
    S = torch.optim.lr_scheduler
    torch.manual_seed(0)
    makers = {
        "lambda": lambda o: S.LambdaLR(o, lambda e: 0.9 ** e),
        "multistep": lambda o: S.MultiStepLR(o, milestones=[3, 7], gamma=0.3),
        "exponential": lambda o: S.ExponentialLR(o, gamma=0.8),
        "cosine": lambda o: S.CosineAnnealingLR(o, T_max=6, eta_min=0.001),
        "warm restarts": lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2),
        "sequential": lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1,
                                                              total_iters=4),
                                                   S.ExponentialLR(o, gamma=0.9)],
                                               milestones=[4]),
        "chained": lambda o: S.ChainedScheduler([S.ConstantLR(o, factor=0.5, total_iters=3),
                                                 S.ExponentialLR(o, gamma=0.95)]),
        "cyclic": lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3),
    }
    X, y = torch.randn(12, 3), torch.randn(12, 2)
    for name, make in makers.items():
        model = nn.Linear(3, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = make(opt)

        def step(X, y):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(X), y)
            loss.backward()
            opt.step()
            return loss.item()

        step = env.step(step)
        hist = []
        for epoch in range(12):
            hist.append((step(X, y), opt.param_groups[0]["lr"]))
            sched.step()
        env.rec(name, (hist, model.weight, model.bias))


def no_grad_inference(torch, env):
    """Evaluation under no_grad and inference_mode, set_grad_enabled(phase == 'train') as
    the transfer-learning tutorial's train_model does, requires_grad flags of the outputs."""
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 6, 3), nn.BatchNorm2d(6), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    phases = {"train": [(torch.randn(4, 3, 8, 8), torch.randint(0, 4, (4,))) for _ in range(3)],
              "val": [(torch.randn(4, 3, 8, 8), torch.randint(0, 4, (4,))) for _ in range(2)]}

    def run(inputs, labels, phase):
        opt.zero_grad()
        with torch.set_grad_enabled(phase == "train"):
            outputs = model(inputs)
            _, preds = torch.max(outputs, 1)
            loss = nn.functional.cross_entropy(outputs, labels)
            if phase == "train":
                loss.backward()
                opt.step()
        return loss.item() * inputs.size(0), torch.sum(preds == labels.data).item(), \
            outputs.requires_grad

    run = env.step(run)
    for epoch in range(3):
        for phase in ["train", "val"]:
            model.train() if phase == "train" else model.eval()
            env.rec(f"{epoch} {phase}", [run(x, y, phase) for x, y in phases[phase]])
    with torch.inference_mode():
        out = model(phases["val"][0][0])
        env.rec("inference", (out, out.requires_grad, torch.is_inference_mode_enabled()))
    with torch.no_grad():
        env.rec("no_grad", (model(phases["val"][0][0]).requires_grad, torch.is_grad_enabled()))


PROGRAMS = {f.__name__: f for f in [
    custom_dataset_collate, dataset_combinators, buffers_and_containers,
    parametrize_weight_norm, lr_scheduler_zoo, no_grad_inference]}


# (over ~1.5 s each with their builds, on a machine the suite shares: in the slow run)
SLOW = {"custom_dataset_collate", "no_grad_inference"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], rtol=1e-4, atol=1e-6)
