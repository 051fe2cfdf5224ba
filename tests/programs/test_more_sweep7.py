"""Tutorial programs (seeded with torch.manual_seed, modules initialised by their own
constructors, data from torch's random functions; see test_basics_sweep7.py): a Conv1d
text CNN dropping out permuted embeddings, an nn.Transformer seq2seq with causal masks and
dropout in training, a small CIFAR-style CNN with hand-written random flips and crops,
and a policy-gradient bandit sampling from torch.distributions.Categorical."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def text_cnn_permuted_dropout(torch, env):
    """Embedding -> Dropout -> permute(0, 2, 1) -> Conv1d branches -> max over time ->
    cat -> Dropout -> Linear, as sentence-classification CNNs write it; dropout is applied
    once before and once after the permute (a non-contiguous input)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class TextCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(40, 12, padding_idx=0)
            self.convs = nn.ModuleList([nn.Conv1d(12, 6, k) for k in (2, 3, 4)])
            self.drop = nn.Dropout(0.3)
            self.fc = nn.Linear(18, 2)

        def forward(self, x):
            e = self.drop(self.emb(x)).permute(0, 2, 1)
            e = self.drop(e)
            pooled = [F.relu(conv(e)).max(dim=2).values for conv in self.convs]
            return self.fc(self.drop(torch.cat(pooled, dim=1)))

    model = TextCNN()
    opt = torch.optim.Adam(model.parameters(), lr=0.005)
    X, y = torch.randint(0, 40, (16, 9)), torch.randint(0, 2, (16,))

    def step(X, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(X), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    env.rec("losses", [step(X[i:i + 8], y[i:i + 8]) for _ in range(4) for i in (0, 8)])
    model.eval()
    with torch.no_grad():
        env.rec("eval", model(X))
    env.rec("weights", model.state_dict())


def transformer_seq2seq(torch, env):
    """nn.Transformer(batch_first=True) for a copy task: generate_square_subsequent_mask,
    src / tgt key padding masks, dropout 0.1 in training, greedy decoding in eval."""
    import math
    nn = torch.nn
    torch.manual_seed(0)
    V, D, PAD, BOS = 12, 16, 0, 1

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.src_emb = nn.Embedding(V, D)
            self.tgt_emb = nn.Embedding(V, D)
            self.transformer = nn.Transformer(D, 2, 1, 1, 32, dropout=0.1, batch_first=True)
            self.generator = nn.Linear(D, V)

        def forward(self, src, tgt):
            # (a bool causal mask, of the padding masks' type: a float one warns of the
            # mismatch, in PyTorch and llgrad alike)
            tgt_mask = torch.triu(torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool), 1)
            out = self.transformer(self.src_emb(src) * math.sqrt(D),
                                   self.tgt_emb(tgt) * math.sqrt(D), tgt_mask=tgt_mask,
                                   src_key_padding_mask=src == PAD,
                                   tgt_key_padding_mask=tgt == PAD,
                                   memory_key_padding_mask=src == PAD)
            return self.generator(out)

    model = Seq2Seq()
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    loss_fn = nn.CrossEntropyLoss(ignore_index=PAD)
    src = torch.randint(2, V, (8, 6))
    src[:3, 4:] = PAD
    tgt = torch.cat([torch.full((8, 1), BOS), src], dim=1)

    def step(src, tgt):
        opt.zero_grad()
        logits = model(src, tgt[:, :-1])
        loss = loss_fn(logits.reshape(-1, V), tgt[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    env.rec("losses", [step(src[i:i + 4], tgt[i:i + 4]) for _ in range(3) for i in (0, 4)])
    model.eval()
    with torch.no_grad():
        ys = torch.full((2, 1), BOS)
        for _ in range(5):
            nxt = model(src[:2], ys)[:, -1].argmax(-1, keepdim=True)
            ys = torch.cat([ys, nxt], dim=1)
        env.rec("greedy", ys)


def cifar_augment(torch, env):
    """A small CIFAR-style CNN (Conv/BatchNorm2d/Dropout2d/MaxPool) with augmentation by
    hand: random horizontal flips chosen by torch.rand, random 4-pixel-padded crops at
    torch.randint offsets; SGD with momentum and nesterov, MultiStepLR."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Dropout2d(0.2),
        nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(16, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[2], gamma=0.1)
    images, labels = torch.rand(12, 3, 12, 12), torch.randint(0, 10, (12,))
    mean = images.mean(dim=(0, 2, 3), keepdim=True)
    std = images.std(dim=(0, 2, 3), keepdim=True)

    def augment(x):
        flip = torch.rand(x.size(0)) < 0.5
        x = torch.where(flip[:, None, None, None], x.flip(3), x)
        padded = F.pad(x, (2, 2, 2, 2), mode="reflect")
        i, j = torch.randint(0, 5, (2,)).tolist()
        return padded[:, :, i:i + 12, j:j + 12]

    def step(x, y):
        opt.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        return loss.item(), (out.argmax(1) == y).float().mean().item()

    step = env.step(step)
    for epoch in range(3):
        model.train()
        perm = torch.randperm(12)
        env.rec(f"epoch {epoch}", [step(augment((images[idx] - mean) / std), labels[idx])
                                   for idx in perm.split(4)])
        sched.step()
    model.eval()
    with torch.no_grad():
        env.rec("eval", model((images - mean) / std))
    env.rec("weights", model.state_dict())


def categorical_bandit(torch, env):
    """REINFORCE on a contextual bandit: a policy net's Categorical samples actions (the
    seeded stream), log_prob times a baseline-subtracted reward, entropy bonus."""
    nn = torch.nn
    Categorical = torch.distributions.Categorical
    torch.manual_seed(0)
    n_arms, ctx = 4, 3
    true_w = torch.randn(ctx, n_arms)
    policy = nn.Sequential(nn.Linear(ctx, 16), nn.Tanh(), nn.Linear(16, n_arms))
    opt = torch.optim.Adam(policy.parameters(), lr=0.02)
    baseline = torch.zeros(())

    def step(context, baseline):
        dist = Categorical(logits=policy(context))
        action = dist.sample()
        reward = (context @ true_w).gather(1, action.unsqueeze(1)).squeeze(1) \
            + 0.1 * torch.randn(context.size(0))
        loss = -(dist.log_prob(action) * (reward - baseline)).mean() - 0.01 * dist.entropy().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return action, reward.mean().detach(), loss.item()

    step = env.step(step)
    hist = []
    for it in range(15):
        action, r, loss = step(torch.randn(8, ctx), baseline)
        baseline = 0.9 * baseline + 0.1 * r
        hist.append((action, r, loss))
    env.rec("hist", hist)
    env.rec("policy", policy.state_dict())


PROGRAMS = {f.__name__: f for f in [
    text_cnn_permuted_dropout, transformer_seq2seq, cifar_augment, categorical_bandit]}


# (over ~1.5 s each with their builds, on a machine the suite shares: in the slow run)
SLOW = {"cifar_augment", "text_cnn_permuted_dropout", "transformer_seq2seq"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], rtol=1e-4, atol=1e-6)
