"""Training programs (s79, E, b): a checkpoint saved with torch.save mid-run and loaded into
a fresh model / optimizer / scheduler (the resumed numbers equal an uninterrupted run's);
EMA and SWA with AveragedModel and update_bn; a frozen backbone unfrozen later with a new
param group; weight tying; mixed losses with detached targets; bfloat16 autocast."""


def _net(nn, bn=False):
    mid = [nn.BatchNorm1d(12)] if bn else []
    return nn.Sequential(nn.Linear(5, 12), *mid, nn.ReLU(), nn.Linear(12, 3))


def checkpoint_resume(torch, env):
    """Train 15 steps, torch.save the state dicts, train 15 more; load the checkpoint into a
    fresh model / optimizer / scheduler and train the same 15: equal numbers."""
    nn, F = torch.nn, torch.nn.functional
    x, y = env.randn(12, 5), env.randint(0, 3, (12,))

    def make():
        model = _net(nn)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05, amsgrad=True)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=7, gamma=0.5)
        return model, opt, sched

    def stepper(model, opt, sched):
        def train_step(xb, yb):
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            return loss.detach()
        return env.step(train_step)

    model, opt, sched = make()
    env.init(model)
    step = stepper(model, opt, sched)
    for t in range(15):
        env.rec(f"loss {t}", step(x, y))
        sched.step()
    path = env.path("ckpt.pt")
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                "sched": sched.state_dict(), "step": 15}, path)
    tail = []
    for t in range(15, 30):
        tail.append(step(x, y))
        sched.step()
    env.rec("tail", tail)
    env.rec("final", model.state_dict())

    ckpt = torch.load(path)
    model2, opt2, sched2 = make()
    model2.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["opt"])
    sched2.load_state_dict(ckpt["sched"])
    step2 = stepper(model2, opt2, sched2)
    resumed = []
    for t in range(ckpt["step"], 30):
        resumed.append(step2(x, y))
        sched2.step()
    env.rec("resumed", resumed)
    env.rec("resumed final", model2.state_dict())
    # (eager is bit-exact as torch is; a compiled step traced on the loaded state rounds
    # in a different order than the one traced at the first step: to float32 rounding)
    close = lambda a, b: torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    env.rec("same", all(close(a, b) for a, b in zip(tail, resumed))
            and all(close(a, b) for a, b in zip(model.state_dict().values(),
                                                model2.state_dict().values())))


def ema_update_bn(torch, env):
    """An EMA AveragedModel (use_buffers=True) and an SWA AveragedModel with SWALR after a
    start epoch; update_bn over a loader; evaluation of both."""
    nn, F = torch.nn, torch.nn.functional
    swa_utils = torch.optim.swa_utils
    model = env.init(_net(nn, bn=True))
    ema = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.9),
                                  use_buffers=True)
    swa = swa_utils.AveragedModel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    swa_sched = swa_utils.SWALR(opt, swa_lr=0.02, anneal_epochs=3, anneal_strategy="linear")
    x, y = env.randn(24, 5), env.randint(0, 3, (24,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)

    def train_step(xb, yb):
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        ema.update_parameters(model)
        return loss.detach()
    step = env.step(train_step)
    for epoch in range(12):
        model.train()
        for i, (xb, yb) in enumerate(loader):
            env.rec(f"loss {epoch} {i}", step(xb, yb))
        if epoch >= 6:
            swa.update_parameters(model)
            swa_sched.step()
        env.rec(f"lr {epoch}", opt.param_groups[0]["lr"])
    swa_utils.update_bn(loader, swa)
    env.rec("n", (ema.n_averaged, swa.n_averaged))
    env.rec("ema", ema.module.state_dict())
    env.rec("swa", swa.module.state_dict())
    ema.eval()
    swa.eval()
    with torch.no_grad():
        env.rec("eval", (ema(x), swa(x)))


def freeze_then_unfreeze(torch, env):
    """A frozen backbone (requires_grad_(False), eval BatchNorm) trains the head; then it is
    unfrozen and added as a new param group with a smaller lr."""
    nn, F = torch.nn, torch.nn.functional
    # (no bias before the BatchNorm: its gradient is zero up to rounding, which Adam's
    # normalised step would amplify)
    backbone = env.init(nn.Sequential(nn.Linear(5, 10, bias=False), nn.BatchNorm1d(10),
                                      nn.GELU()))
    head = env.init(nn.Linear(10, 3))
    backbone.requires_grad_(False)
    opt = torch.optim.Adam(head.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.98)

    def train_step(x, y):
        loss = F.cross_entropy(head(backbone(x)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    x, y = env.randn(10, 5), env.randint(0, 3, (10,))
    backbone.eval()
    for t in range(20):
        env.rec(f"loss {t}", step(x, y))
        sched.step()
    env.rec("frozen grads", [p.grad is None for p in backbone.parameters()])
    backbone.requires_grad_(True)
    backbone.train()
    opt.add_param_group({"params": backbone.parameters(), "lr": 1e-3})
    for t in range(20, 40):
        env.rec(f"loss {t}", step(x, y))
        sched.step()
    env.rec("lrs", [g["lr"] for g in opt.param_groups])
    env.rec("backbone", backbone.state_dict())
    env.rec("head", head.state_dict())
    if env.compiled:
        assert step.n_traces <= 3, step.n_traces


def tied_lm(torch, env):
    """A language model whose decoder shares the embedding's weight; cross_entropy with
    ignore_index for padding and label smoothing; perplexity from .item()."""
    nn, F = torch.nn, torch.nn.functional
    V, D, PAD = 12, 8, 0

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D, padding_idx=PAD)
            self.rnn = nn.GRU(D, D, batch_first=True)
            self.decoder = nn.Linear(D, V)
            self.decoder.weight = self.emb.weight

        def forward(self, tokens):
            h, _ = self.rnn(self.emb(tokens))
            return self.decoder(h)

    model = env.init(LM())
    env.rec("tied", model.decoder.weight is model.emb.weight)
    env.rec("n params", len(list(model.parameters())))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(tokens):
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), tokens[:, 1:].reshape(-1),
                               ignore_index=PAD, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    tokens = env.randint(1, V, (4, 7))
    tokens[1, 5:] = PAD
    tokens[3, 4:] = PAD
    for t in range(30):
        loss = step(tokens)
        env.rec(f"loss {t}", loss)
    env.rec("ppl", float(torch.exp(loss).item()))
    env.rec("still tied", model.decoder.weight is model.emb.weight)
    env.rec("params", model.state_dict())


def distill_detached(torch, env):
    """A student learns from a teacher's detached soft targets (kl_div, log_target) and
    hidden features (mse to .detach()), plus the hard labels; the teacher trains too."""
    nn, F = torch.nn, torch.nn.functional
    teacher = env.init(nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 3)))
    student = env.init(nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 3)))
    proj = env.init(nn.Linear(6, 16))
    t_opt = torch.optim.SGD(teacher.parameters(), lr=0.1)
    s_opt = torch.optim.Adam(list(student.parameters()) + list(proj.parameters()), lr=1e-2)
    T = 2.0

    def train_step(x, y):
        t_hidden = teacher[1](teacher[0](x))
        t_logits = teacher[2](t_hidden)
        t_loss = F.cross_entropy(t_logits, y)
        s_hidden = student[1](student[0](x))
        s_logits = student[2](s_hidden)
        soft = F.kl_div(F.log_softmax(s_logits / T, -1),
                        F.log_softmax(t_logits.detach() / T, -1),
                        reduction="batchmean", log_target=True) * T * T
        feat = F.mse_loss(proj(s_hidden), t_hidden.detach())
        s_loss = 0.5 * F.cross_entropy(s_logits, y) + 0.4 * soft + 0.1 * feat
        t_opt.zero_grad()
        s_opt.zero_grad()
        (t_loss + s_loss).backward()
        t_opt.step()
        s_opt.step()
        return t_loss.detach(), s_loss.detach(), soft.detach()
    step = env.step(train_step)
    x, y = env.randn(12, 5), env.randint(0, 3, (12,))
    for t in range(30):
        env.rec(f"step {t}", step(x, y))
    env.rec("teacher", teacher.state_dict())
    env.rec("student", student.state_dict())


def autocast_bf16(torch, env):
    """The forward under autocast(device_type="cpu", dtype=torch.bfloat16): linear in
    bfloat16, the loss in float32; master weights stay float32."""
    nn, F = torch.nn, torch.nn.functional
    model = env.init(_net(nn))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def train_step(x, y):
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), logits.dtype, loss.dtype
    step = env.step(train_step)
    x, y = env.randn(8, 5), env.randint(0, 3, (8,))
    for t in range(30):
        env.rec(f"step {t}", step(x, y))
    env.rec("dtypes", [p.dtype for p in model.parameters()])
    env.rec("params", model.state_dict())


PROGRAMS = {
    "checkpoint_resume": checkpoint_resume,
    "ema_update_bn": ema_update_bn,
    "freeze_then_unfreeze": freeze_then_unfreeze,
    "tied_lm": tied_lm,
    "distill_detached": distill_detached,
    "autocast_bf16": autocast_bf16,
}
