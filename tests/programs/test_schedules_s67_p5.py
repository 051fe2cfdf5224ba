"""Session 67 (p5), tutorial-style programs of training schedules and losses, run with
PyTorch, with llgrad eagerly and with llgrad compiling the training step
(tutorial_harness.py):

- gradient accumulation: the compiled micro-step backpropagates loss / accum_steps, the
  loop clips with clip_grad_norm_ (its norm compared), steps and zeroes, a partial group
  flushed at the end;
- an EMA of the weights (timm's ModelEmaV2) inside the compiled step under no_grad:
  mul_/add_(alpha=1 - d) for the parameters, lerp_ for the BatchNorm buffers, the decay
  warmed up from a step counter in a dict;
- class-weighted, label-smoothed cross-entropy with ignore_index, also on (N, C, L) logits,
  beside a focal term from log_softmax().gather;
- k-fold cross-validation: one model and one compiled step for every fold, the parameters
  reset by reset_parameters() (compared between llgrad's runs: llgrad's RNG draws them),
  a new optimiser per fold;
- seq2seq with the tutorial's per-batch teacher forcing (random.random() < ratio in the
  loop, a bool argument);
- a VAE with a cyclical KL weight computed by a model method from a step counter the
  compiled step increments, free bits clamping the KL.

seq2seq_teacher_forcing draws random.random() inside the compiled step (per decoding step):
such a call ran eagerly with a warning until session 68 (compile/py_draws.py: compiled calls
make the draws again, their comparisons guarded)."""
import copy
import random

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def grad_accumulation(torch, env):
    """Gradient accumulation: the compiled micro-step scales the loss by 1/accum_steps and
    backpropagates; every accum_steps micro-batches the loop clips (clip_grad_norm_,
    returning the norm), steps and zeroes; a final partial group is flushed too."""
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(5, 12), nn.SiLU(), nn.Linear(12, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    accum_steps = 3

    def micro_step(x, y):
        loss = F.smooth_l1_loss(model(x).squeeze(-1), y, beta=0.5) / accum_steps
        loss.backward()
        return loss.detach() * accum_steps

    step = env.step(micro_step)
    opt.zero_grad()
    n = 8
    for i in range(n):
        loss = step(env.randn(6, 5), env.randn(6))
        env.rec(f"loss {i}", loss)
        if (i + 1) % accum_steps == 0 or i + 1 == n:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
            env.rec(f"norm {i}", norm)
            opt.step()
            opt.zero_grad(set_to_none=True)
    env.rec("params", dict(model.state_dict()))


def ema_weights(torch, env):
    """An exponential moving average of the weights (timm's ModelEmaV2 style), updated inside
    the compiled step under no_grad with a warm-up decay computed from the step counter
    (min(decay, (1 + n) / (10 + n))): ema.mul_(d).add_(p, alpha=1 - d) for the weights,
    lerp_ for the buffers; the EMA model evaluated between steps."""
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 10, bias=False)      # (a bias before BatchNorm: no gradient)
            self.bn, self.fc2 = nn.BatchNorm1d(10), nn.Linear(10, 2)

        def forward(self, x):
            return self.fc2(F.relu(self.bn(self.fc1(x))))

    model = env.init(Net())
    ema = copy.deepcopy(model).eval()
    for p in ema.parameters():
        p.requires_grad_(False)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    state = {"updates": 0}

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        state["updates"] += 1
        n = state["updates"]
        d = min(0.99, (1 + n) / (10 + n))
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.mul_(d).add_(p.detach(), alpha=1 - d)
            for e, b in zip(ema.buffers(), model.buffers()):
                if e.dtype.is_floating_point:
                    e.lerp_(b, 1 - d)
                else:
                    e.copy_(b)
        return loss.detach()

    step = env.step(train_step)
    x_val = env.randn(6, 4)
    for it in range(6):
        env.rec(f"loss {it}", step(env.randn(8, 4), env.randint(0, 2, (8,))))
        with torch.no_grad():
            env.rec(f"ema out {it}", ema(x_val))
    env.rec("ema", dict(ema.state_dict()))
    env.rec("updates", state["updates"])


def weighted_smoothed_ce(torch, env):
    """An imbalanced classifier: class weights from the inverse class frequencies,
    label-smoothed cross-entropy with those weights and an ignore_index for unlabelled rows,
    also on (N, C, L) sequence logits; a focal-style term from log_softmax.gather."""
    nn, F = torch.nn, torch.nn.functional
    C = 4
    counts = torch.tensor([40.0, 10.0, 5.0, 25.0])
    weights = counts.sum() / (C * counts)
    model = env.init(nn.Linear(6, C))
    conv = env.init(nn.Conv1d(3, C, 3, padding=1))
    opt = torch.optim.SGD(list(model.parameters()) + list(conv.parameters()), lr=0.1)

    def train_step(x, y, seq, seq_y):
        logits = model(x)
        ce = F.cross_entropy(logits, y, weight=weights, label_smoothing=0.15,
                             ignore_index=-100)
        seq_ce = F.cross_entropy(conv(seq), seq_y, weight=weights, label_smoothing=0.05,
                                 reduction="sum", ignore_index=-100)
        logp = logits.log_softmax(-1)
        safe = y.clamp(min=0)
        pt = logp.gather(1, safe[:, None]).squeeze(1).exp()
        focal = ((1 - pt) ** 2 * -logp.gather(1, safe[:, None]).squeeze(1))[y >= 0].mean()
        loss = ce + 0.01 * seq_ce + 0.5 * focal
        opt.zero_grad()
        loss.backward()
        opt.step()
        return ce.detach(), seq_ce.detach(), focal.detach()

    step = env.step(train_step)
    for it in range(4):
        y = env.randint(0, C, (10,))
        y[it % 3] = -100
        seq_y = env.randint(0, C, (2, 5))
        seq_y[0, 1] = -100
        env.rec(f"step {it}", step(env.randn(10, 6), y, env.randn(2, 3, 5), seq_y))
    env.rec("params", (dict(model.state_dict()), dict(conv.state_dict())))


def kfold_reset(torch, env):
    """k-fold cross-validation: one model and one compiled step reused for every fold, its
    parameters reset by each module's reset_parameters() (a draw from the library's RNG:
    compared between llgrad's runs) and a new optimiser per fold; the folds' validation
    losses averaged."""
    nn, F = torch.nn, torch.nn.functional
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    X, Y = env.randn(12, 3), env.randn(12, 1)
    k = 3
    fold = 12 // k
    holder = {}

    def train_step(x, y):
        loss = F.mse_loss(model(x), y)
        holder["opt"].zero_grad()
        loss.backward()
        holder["opt"].step()
        return loss.detach()

    step = env.step(train_step)
    scores = []
    for f in range(k):
        for m in model.modules():
            if hasattr(m, "reset_parameters"):
                m.reset_parameters()
        holder["opt"] = torch.optim.Adam(model.parameters(), lr=0.05)
        val = torch.arange(f * fold, (f + 1) * fold)
        train = torch.cat([torch.arange(0, f * fold), torch.arange((f + 1) * fold, 12)])
        for epoch in range(3):
            env.rec(f"fold {f} loss {epoch}", step(X[train], Y[train]), cross=False)
        with torch.no_grad():
            scores.append(F.mse_loss(model(X[val]), Y[val]).item())
    env.rec("scores", scores, cross=False)
    env.rec("mean", sum(scores) / k, cross=False)


def teacher_forcing_per_batch(torch, env):
    """The seq2seq tutorial's per-batch teacher forcing decision, drawn by the loop with
    random.random() < ratio and passed to the compiled step as a bool."""
    nn, F = torch.nn, torch.nn.functional
    V, H, T = 6, 10, 3

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, H)
            self.enc = nn.GRU(H, H, batch_first=True)
            self.dec = nn.GRUCell(H, H)
            self.out = nn.Linear(H, V)

        def forward(self, src, tgt, use_tf):
            _, h = self.enc(self.emb(src))
            h = h[0]
            inp = torch.zeros(src.shape[0], dtype=torch.long)
            logits = []
            for t in range(tgt.shape[1]):
                h = self.dec(self.emb(inp), h)
                step_logits = self.out(h)
                logits.append(step_logits)
                inp = tgt[:, t] if use_tf else step_logits.argmax(-1).detach()
            return torch.stack(logits, 1)

    model = env.init(Seq2Seq())
    opt = torch.optim.Adam(model.parameters(), lr=0.02)

    def train_step(src, tgt, use_tf):
        logits = model(src, tgt, use_tf)
        loss = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    rng = random.Random(7)
    ratio = 0.9
    for it in range(6):
        use_tf = rng.random() < ratio
        env.rec(f"loss {it}", (step(env.randint(1, V, (3, 4)), env.randint(1, V, (3, T)),
                                    use_tf), use_tf))
        ratio *= 0.7
    env.rec("params", dict(model.state_dict()))


def seq2seq_teacher_forcing(torch, env):
    """A GRU encoder-decoder whose compiled step decides teacher forcing per decoding step by
    random.random() < ratio (Python's own generator, seeded alike in every run), the ratio
    decayed by the loop; greedy inputs are the detached argmax."""
    nn, F = torch.nn, torch.nn.functional
    V, H, T = 7, 12, 4

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, H)
            self.enc = nn.GRU(H, H, batch_first=True)
            self.dec = nn.GRUCell(H, H)
            self.out = nn.Linear(H, V)

        def forward(self, src, tgt, ratio):
            _, h = self.enc(self.emb(src))
            h = h[0]
            inp = torch.zeros(src.shape[0], dtype=torch.long)     # (BOS = 0)
            logits = []
            for t in range(tgt.shape[1]):
                h = self.dec(self.emb(inp), h)
                step_logits = self.out(h)
                logits.append(step_logits)
                inp = tgt[:, t] if random.random() < ratio else step_logits.argmax(-1).detach()
            return torch.stack(logits, 1)

    model = env.init(Seq2Seq())
    opt = torch.optim.Adam(model.parameters(), lr=0.02)

    def train_step(src, tgt, ratio):
        logits = model(src, tgt, ratio)
        loss = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    random.seed(1234)
    ratio = 1.0
    for it in range(6):
        env.rec(f"loss {it}", step(env.randint(1, V, (3, 5)), env.randint(1, V, (3, T)), ratio))
        ratio *= 0.8
    env.rec("after", random.random())
    env.rec("params", dict(model.state_dict()))
    if env.compiled:        # (a trace per new outcome pattern of the draws, at most)
        assert step.n_traces <= 6, step.n_traces


def vae_kl_annealing(torch, env):
    """A VAE with a KL weight annealed from the step counter kept on the model (cyclical
    schedule: beta = min(1, (step % cycle) / (cycle * 0.5))), the reparameterisation noise
    given as an input, the ELBO terms returned, free bits clamping the per-dimension KL."""
    nn, F = torch.nn, torch.nn.functional
    D, Z = 6, 2

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(D, 2 * Z)
            self.dec = nn.Sequential(nn.Linear(Z, 8), nn.ReLU(), nn.Linear(8, D))
            self.step = 0
            self.cycle = 4

        def kl_weight(self):
            return min(1.0, (self.step % self.cycle) / (self.cycle * 0.5))

        def forward(self, x, eps):
            mu, logvar = self.enc(x).chunk(2, -1)
            z = mu + eps * (0.5 * logvar).exp()
            return self.dec(z), mu, logvar

    vae = env.init(VAE())
    opt = torch.optim.Adam(vae.parameters(), lr=0.01)

    def train_step(x, eps):
        recon, mu, logvar = vae(x, eps)
        rec = F.binary_cross_entropy_with_logits(recon, x, reduction="sum") / x.shape[0]
        kl_dim = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).mean(0)
        kl = kl_dim.clamp(min=0.05).sum()
        beta = vae.kl_weight()
        loss = rec + beta * kl
        opt.zero_grad()
        loss.backward()
        opt.step()
        vae.step += 1
        return {"loss": loss.detach(), "rec": rec.detach(), "kl": kl.detach(), "beta": beta}

    step = env.step(train_step)
    for it in range(9):
        env.rec(f"step {it}", step(env.rand(5, D), env.randn(5, Z)))
    env.rec("params", dict(vae.state_dict()))
    env.rec("count", vae.step)
    if env.compiled:
        assert step.n_traces <= 3, step.n_traces


PROGRAMS = {
    "grad_accumulation": grad_accumulation,
    "ema_weights": ema_weights,
    "weighted_smoothed_ce": weighted_smoothed_ce,
    "kfold_reset": kfold_reset,
    "teacher_forcing_per_batch": teacher_forcing_per_batch,
    "seq2seq_teacher_forcing": seq2seq_teacher_forcing,
    "vae_kl_annealing": vae_kl_annealing,
}


@pytest.mark.parametrize("name,program", program_params(PROGRAMS, slow=tuple(PROGRAMS)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
