"""Tutorial programs in the shapes training frameworks give them, written as blog posts
write them (seeded with torch.manual_seed, modules built by their constructors; see
tutorial_harness.py): a Hugging Face style Trainer (dict batches, a dataclass output, warmup
by LambdaLR, no-decay parameter groups, gradient accumulation), a Lightning style module
whose compiled training_step returns the loss that the loop backpropagates, batch-hard
triplet mining, an echo state network read out by least squares then fine-tuned, DeepAR
(a Gaussian likelihood with teacher forcing, then sampling), StyleGAN2's lazy R1
penalty."""
import dataclasses
import math
from typing import Optional


def hf_style_trainer(torch, env):
    """A Hugging Face style training loop: batches are dicts (input_ids, attention_mask,
    labels), the model returns a dataclass ModelOutput(loss, logits); AdamW with the
    bias/LayerNorm parameters in a no-decay group; get_linear_schedule_with_warmup written
    as a LambdaLR; gradient accumulation over two micro-batches with clip_grad_norm_."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    @dataclasses.dataclass
    class SequenceClassifierOutput:
        loss: Optional[object] = None
        logits: Optional[object] = None

    class TinyBert(nn.Module):
        def __init__(self, vocab=20, d=8, n_labels=3):
            super().__init__()
            self.embeddings = nn.Embedding(vocab, d, padding_idx=0)
            self.LayerNorm = nn.LayerNorm(d)
            self.dense = nn.Linear(d, d)
            self.classifier = nn.Linear(d, n_labels)

        def forward(self, input_ids, attention_mask, labels=None):
            h = self.LayerNorm(self.embeddings(input_ids))
            h = torch.tanh(self.dense(h))
            mask = attention_mask.unsqueeze(-1).to(h.dtype)
            pooled = (h * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            logits = self.classifier(pooled)
            loss = F.cross_entropy(logits, labels) if labels is not None else None
            return SequenceClassifierOutput(loss=loss, logits=logits)

    def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
        def lr_lambda(current_step):
            if current_step < num_warmup_steps:
                return float(current_step) / float(max(1, num_warmup_steps))
            return max(0.0, float(num_training_steps - current_step)
                       / float(max(1, num_training_steps - num_warmup_steps)))
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)

    model = TinyBert()
    no_decay = ["bias", "LayerNorm.weight"]
    groups = [
        {"params": [p for n, p in model.named_parameters()
                    if not any(nd in n for nd in no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters()
                    if any(nd in n for nd in no_decay)], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=5e-3, eps=1e-8)
    scheduler = get_linear_schedule_with_warmup(optimizer, 2, 6)
    batches = []
    for i in range(4):
        ids = torch.randint(1, 20, (3, 6))
        lengths = torch.randint(2, 7, (3,))
        attn = (torch.arange(6).unsqueeze(0) < lengths.unsqueeze(1)).long()
        batches.append({"input_ids": ids * attn, "attention_mask": attn,
                        "labels": torch.randint(0, 3, (3,))})
    accum = 2

    def training_step(model, inputs):
        model.train()
        outputs = model(**inputs)
        loss = outputs.loss / accum
        loss.backward()
        return loss.detach()

    step = env.step(training_step)
    log = []
    for epoch in range(3):
        tr_loss = 0.0
        for i, batch in enumerate(batches):
            tr_loss += step(model, batch).item()
            if (i + 1) % accum == 0:
                norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
                log.append((tr_loss, norm.item(), scheduler.get_last_lr()))
                tr_loss = 0.0
    env.rec("log", log)
    model.eval()
    with torch.no_grad():
        out = model(batches[0]["input_ids"], batches[0]["attention_mask"])
    env.rec("eval", (out.loss is None, out.logits))
    env.rec("params", list(model.parameters()))


def lightning_style_module(torch, env):
    """A Lightning style LightningModule: training_step(batch, batch_idx) returns a dict
    with the loss and logged values; a hand-written trainer calls it (compiled), then
    backward() on the returned loss outside the compiled call, optimizer and scheduler
    from configure_optimizers (a list of each), validation_step under no_grad in eval."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class LitClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(5, 12), nn.BatchNorm1d(12), nn.ReLU(),
                                     nn.Dropout(0.1), nn.Linear(12, 3))
            self.logged = {}

        def log(self, name, value):
            self.logged[name] = value

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            logits = self(x)
            loss = F.cross_entropy(logits, y)
            acc = (logits.argmax(1) == y).float().mean()
            self.log("train_acc", acc.detach())
            return {"loss": loss, "acc": acc}

        def validation_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self(x), y)

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)
            return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)]

    lit = LitClassifier()
    (opt,), (sched,) = lit.configure_optimizers()
    data = [(torch.randn(6, 5), torch.randint(0, 3, (6,))) for _ in range(3)]
    val = (torch.randn(6, 5), torch.randint(0, 3, (6,)))
    training_step = env.step(lit.training_step)
    log = []
    for epoch in range(3):
        lit.train()
        for batch_idx, batch in enumerate(data):
            out = training_step(batch, batch_idx)
            opt.zero_grad()
            out["loss"].backward()
            opt.step()
            log.append((out["loss"].item(), out["acc"].item(),
                        lit.logged["train_acc"].item(), out["loss"].grad_fn is not None))
        sched.step()
        lit.eval()
        with torch.no_grad():
            log.append(lit.validation_step(val, 0).item())
    env.rec("log", log)
    env.rec("params", list(lit.parameters()))
    env.rec("buffers", list(lit.buffers()))


def batch_hard_triplet(torch, env):
    """Batch-hard triplet mining (Hermans et al.): pairwise distances by torch.cdist of the
    normalised embeddings, positive/negative masks from label equality without the
    diagonal, the hardest positive (max) and hardest negative (min after adding the max to
    the positives), softplus (soft margin) or a hinge margin."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    x = torch.randn(12, 6)
    labels = torch.arange(4).repeat_interleave(3)

    def batch_hard_loss(emb, labels, margin=None):
        dist = torch.cdist(emb, emb, p=2)
        same = labels.unsqueeze(0) == labels.unsqueeze(1)
        eye = torch.eye(len(labels), dtype=torch.bool)
        pos_mask, neg_mask = same & ~eye, ~same
        hardest_pos = (dist * pos_mask.float()).max(dim=1)[0]
        max_dist = dist.max(dim=1, keepdim=True)[0]
        hardest_neg = (dist + max_dist * (~neg_mask).float()).min(dim=1)[0]
        if margin is None:
            return F.softplus(hardest_pos - hardest_neg).mean()
        return F.relu(hardest_pos - hardest_neg + margin).mean()

    def train_step(x, labels, margin):
        opt.zero_grad()
        emb = F.normalize(net(x), dim=1)
        loss = batch_hard_loss(emb, labels, margin)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(x, labels, m) for m in (None, 0.3, None, 0.3, 0.3)])
    env.rec("params", list(net.parameters()))


def echo_state_ridge(torch, env):
    """An echo state network: a fixed random reservoir (spectral radius rescaled by the
    largest singular value, torch.linalg.matrix_norm(ord=2)) driven by a sine; the readout solved
    in closed form by ridge regression (torch.linalg.solve), then fine-tuned by SGD."""
    nn = torch.nn
    torch.manual_seed(0)
    n_res = 10
    W_in = torch.rand(n_res, 1) - 0.5
    W = torch.rand(n_res, n_res) - 0.5
    rho = torch.linalg.matrix_norm(W, ord=2)
    W = W * (0.9 / rho)
    u = torch.sin(torch.arange(40, dtype=torch.float32) * 0.3).unsqueeze(1)
    x = torch.zeros(n_res)
    states = []
    for t in range(39):
        x = torch.tanh(W_in @ u[t] + W @ x)
        states.append(x)
    X = torch.stack(states[5:])
    Y = u[6:]
    lam = 1e-1       # (a ridge that keeps X.T @ X + lam I well conditioned in float32)
    W_out = torch.linalg.solve(X.T @ X + lam * torch.eye(n_res), X.T @ Y)
    env.rec("ridge mse", ((X @ W_out - Y) ** 2).mean().item())
    readout = nn.Linear(n_res, 1)
    with torch.no_grad():
        readout.weight.copy_(W_out.T)
        readout.bias.zero_()
    opt = torch.optim.SGD(readout.parameters(), lr=0.05)

    def train_step(X, Y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(readout(X), Y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(X, Y) for _ in range(4)])
    env.rec("readout", list(readout.parameters()))


def deepar_gaussian(torch, env):
    """DeepAR: an LSTM over lagged targets and covariates outputs a Gaussian's mean and
    softplus scale; the training step maximises the likelihood under teacher forcing;
    forecasting samples from Normal autoregressively (the sample fed back)."""
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    torch.manual_seed(0)

    class DeepAR(nn.Module):
        def __init__(self, hidden=8):
            super().__init__()
            self.lstm = nn.LSTM(2, hidden, batch_first=True)
            self.mu = nn.Linear(hidden, 1)
            self.sigma = nn.Linear(hidden, 1)

        def forward(self, z_prev, cov, state=None):
            out, state = self.lstm(torch.cat([z_prev, cov], -1), state)
            return self.mu(out), F.softplus(self.sigma(out)) + 1e-3, state

    model = DeepAR()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    t = torch.arange(13, dtype=torch.float32)
    series = torch.stack([torch.sin(t * 0.5 + p) for p in (0.0, 1.0, 2.0)]).unsqueeze(-1)
    cov = (t / 13).expand(3, 13).unsqueeze(-1)

    def train_step(series, cov):
        opt.zero_grad()
        mu, sigma, _ = model(series[:, :-1], cov[:, 1:])
        nll = -D.Normal(mu, sigma).log_prob(series[:, 1:]).mean()
        nll.backward()
        opt.step()
        return nll.item()

    step = env.step(train_step)
    env.rec("hist", [step(series, cov) for _ in range(5)])
    with torch.no_grad():
        _, _, state = model(series[:, :-1], cov[:, 1:])
        z = series[:, -1:]
        samples = []
        for k in range(3):
            mu, sigma, state = model(z, cov[:, -1:], state)
            z = D.Normal(mu, sigma).sample()
            samples.append(z)
    env.rec("samples", torch.cat(samples, 1))


def r1_lazy_regularisation(torch, env):
    """StyleGAN2's lazy R1 regularisation: every second discriminator step adds
    gamma/2 * E||grad_x D(x)||^2 on real images (autograd.grad with create_graph inside
    the step), scaled by the interval; the non-saturating softplus losses."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(3, 16), nn.LeakyReLU(0.2), nn.Linear(16, 4))
    D = nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.0, 0.99))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-3, betas=(0.0, 0.99))
    real = torch.randn(8, 4) + 1.0
    z = torch.randn(8, 3)
    gamma, interval = 10.0, 2

    def d_step(real, z, do_r1):
        opt_d.zero_grad()
        fake = G(z).detach()
        loss = F.softplus(D(fake)).mean() + F.softplus(-D(real)).mean()
        r1 = torch.zeros(())
        if do_r1:
            real = real.detach().requires_grad_(True)
            out = D(real)
            (g,) = torch.autograd.grad(out.sum(), real, create_graph=True)
            r1 = g.pow(2).sum(1).mean()
            loss = loss + gamma / 2 * r1 * interval
        loss.backward()
        opt_d.step()
        return loss.item(), r1.item()

    def g_step(z):
        opt_g.zero_grad()
        loss = F.softplus(-D(G(z))).mean()
        loss.backward()
        opt_g.step()
        return loss.item()

    d_step, g_step = env.step(d_step), env.step(g_step)
    hist = []
    for i in range(6):
        hist.append((d_step(real, z, i % interval == 0), g_step(z)))
    env.rec("hist", hist)
    env.rec("G", list(G.parameters()))
    env.rec("D", list(D.parameters()))
