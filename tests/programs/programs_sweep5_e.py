"""Programs of common kinds: a model with many heads trained on the loss modules a tutorial
reaches for (Poisson and Gaussian NLL, Huber, margin ranking, multi-margin, hinge
embedding, soft margin, multi-label soft margin, cosine embedding, triplet with a custom
distance, KL divergence with log targets, weighted NLL with ignore_index, cross entropy with
probability targets and label smoothing); one MLP trained by each optimiser PyTorch ships,
with schedulers that chain (SequentialLR, ChainedScheduler, CyclicLR, PolynomialLR,
CosineAnnealingWarmRestarts); quantisation-aware training with a straight-through
estimator (fake quantisation by round() with detach, and torch.fake_quantize_per_tensor_affine).
Programs `f(torch, env)`, see tutorial_harness.py."""


def losses_zoo(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class Heads(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(6, 16), nn.Tanh())
            self.count = nn.Linear(16, 1)
            self.gauss = nn.Linear(16, 2)
            self.cls = nn.Linear(16, 4)
            self.emb = nn.Linear(16, 5)

        def forward(self, x):
            h = self.trunk(x)
            mean, log_var = self.gauss(h).unbind(-1)
            return {"count": self.count(h).squeeze(-1), "mean": mean, "var": log_var.exp(),
                    "cls": self.cls(h), "emb": self.emb(h), "score": h.sum(-1)}

    model = env.init(Heads())
    optimizer = optim.Adam(model.parameters(), lr=5e-3)
    weight = torch.tensor([1.0, 2.0, 0.5, 1.5])
    crit = {
        "poisson": nn.PoissonNLLLoss(log_input=True, full=True),
        "gauss": nn.GaussianNLLLoss(full=True, eps=1e-4),
        "huber": nn.HuberLoss(delta=0.5),
        "rank": nn.MarginRankingLoss(margin=0.2),
        "multimargin": nn.MultiMarginLoss(p=1, margin=1.0, weight=weight),
        "hinge": nn.HingeEmbeddingLoss(margin=1.5),
        "soft": nn.SoftMarginLoss(),
        "multilabel": nn.MultiLabelSoftMarginLoss(weight=weight),
        "cosine": nn.CosineEmbeddingLoss(margin=0.1),
        "triplet": nn.TripletMarginWithDistanceLoss(
            distance_function=lambda a, b: 1.0 - F.cosine_similarity(a, b), margin=0.3,
            swap=True),
        "kl": nn.KLDivLoss(reduction="batchmean", log_target=True),
        "nll": nn.NLLLoss(weight=weight, ignore_index=-100),
        "ce_soft": nn.CrossEntropyLoss(label_smoothing=0.1),
        "ce": nn.CrossEntropyLoss(weight=weight, label_smoothing=0.05, ignore_index=3),
    }
    n = 12
    x = env.randn(n, 6)
    counts = env.randint(0, 5, (n,)).float()
    y_reg = env.randn(n)
    y_cls = env.randint(0, 4, (n,))
    y_nll = torch.where(env.rand(n) < 0.2, torch.full((n,), -100), y_cls)
    sign = torch.where(env.rand(n) < 0.5, -1.0, 1.0)
    multi_hot = (env.rand(n, 4) < 0.4).float()
    soft_targets = F.softmax(env.randn(n, 4), dim=1)
    teacher_log = F.log_softmax(env.randn(n, 4) * 2, dim=1)
    partner = env.randn(n, 5)

    def losses(out):
        emb = out["emb"]
        return {
            "poisson": crit["poisson"](out["count"], counts),
            "gauss": crit["gauss"](out["mean"], y_reg, out["var"]),
            "huber": crit["huber"](out["mean"], y_reg),
            "rank": crit["rank"](out["score"], out["mean"], sign),
            "multimargin": crit["multimargin"](out["cls"], y_cls),
            "hinge": crit["hinge"]((emb - partner).norm(dim=1), sign),
            "soft": crit["soft"](out["mean"], sign),
            "multilabel": crit["multilabel"](out["cls"], multi_hot),
            "cosine": crit["cosine"](emb, partner, sign),
            "triplet": crit["triplet"](emb, partner, emb.roll(1, 0)),
            "kl": crit["kl"](F.log_softmax(out["cls"], 1), teacher_log),
            "nll": crit["nll"](F.log_softmax(out["cls"], 1), y_nll),
            "ce_soft": crit["ce_soft"](out["cls"], soft_targets),
            "ce": crit["ce"](out["cls"], y_cls),
        }

    def train_step(x):
        optimizer.zero_grad()
        parts = losses(model(x))
        total = sum(parts.values())
        total.backward()
        optimizer.step()
        return total.item(), {k: v.detach() for k, v in parts.items()}

    train_step = env.step(train_step)
    for it in range(4):
        env.rec(f"step {it}", train_step(x))
    with torch.no_grad():
        out = model(x)
        env.rec("unreduced", (
            F.poisson_nll_loss(out["count"], counts, reduction="none"),
            F.gaussian_nll_loss(out["mean"], y_reg, out["var"], reduction="none"),
            F.multi_margin_loss(out["cls"], y_cls, reduction="none"),
            F.cosine_embedding_loss(out["emb"], partner, sign, reduction="none"),
            F.cross_entropy(out["cls"], y_cls, reduction="none", label_smoothing=0.2,
                            ignore_index=3),
            F.kl_div(F.log_softmax(out["cls"], 1), teacher_log, reduction="none",
                     log_target=True)))


def optimizer_zoo(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    sched = optim.lr_scheduler
    x, y = env.randn(16, 4), env.randint(0, 3, (16,))
    init = env.init(nn.Sequential(nn.Linear(4, 12), nn.ReLU(), nn.Linear(12, 3)))

    def make(name, params):
        if name == "sgd":
            o = optim.SGD(params, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=1e-3)
            return o, sched.SequentialLR(o, [sched.LinearLR(o, 0.1, total_iters=2),
                                             sched.ExponentialLR(o, 0.9)], milestones=[2])
        if name == "adagrad":
            o = optim.Adagrad(params, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1)
            return o, sched.PolynomialLR(o, total_iters=4, power=2.0)
        if name == "adadelta":
            o = optim.Adadelta(params, lr=1.0, rho=0.8, weight_decay=1e-3)
            return o, sched.ChainedScheduler([sched.ConstantLR(o, 0.5, total_iters=2),
                                              sched.ExponentialLR(o, 0.95)])
        if name == "adamax":
            o = optim.Adamax(params, lr=0.02)
            return o, sched.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2, eta_min=1e-3)
        if name == "nadam":
            o = optim.NAdam(params, lr=0.01, momentum_decay=4e-3, decoupled_weight_decay=True,
                            weight_decay=0.01)
            return o, sched.StepLR(o, 2)
        if name == "radam":
            o = optim.RAdam(params, lr=0.01, decoupled_weight_decay=True, weight_decay=0.01)
            return o, sched.LambdaLR(o, lambda e: 1.0 / (1 + e))
        if name == "asgd":
            o = optim.ASGD(params, lr=0.05, t0=2, lambd=1e-3)
            return o, None
        if name == "rprop":
            o = optim.Rprop(params, lr=0.01, etas=(0.4, 1.3), step_sizes=(1e-4, 1.0))
            return o, None
        if name == "rmsprop":
            o = optim.RMSprop(params, lr=0.01, centered=True, momentum=0.5)
            return o, sched.CyclicLR(o, base_lr=0.001, max_lr=0.01, step_size_up=2,
                                     cycle_momentum=False)
        o = optim.AdamW(params, lr=0.01, amsgrad=True, betas=(0.8, 0.9))
        return o, sched.OneCycleLR(o, max_lr=0.05, total_steps=8)

    for name in ["sgd", "adagrad", "adadelta", "adamax", "nadam", "radam", "asgd", "rprop",
                 "rmsprop", "adamw"]:
        model = nn.Sequential(nn.Linear(4, 12), nn.ReLU(), nn.Linear(12, 3))
        model.load_state_dict(init.state_dict())
        optimizer, scheduler = make(name, model.parameters())

        def train_step(x, y):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            return loss.item()

        train_step = env.step(train_step)
        for it in range(4):
            loss = train_step(x, y)
            lr = optimizer.param_groups[0]["lr"]
            if scheduler is not None:
                scheduler.step()
            env.rec(f"{name} {it}", (loss, lr))
        env.rec(f"{name} weights", model.state_dict())
        state = optimizer.state_dict()["state"][0]
        env.rec(f"{name} state", {k: v for k, v in state.items() if k != "step"})
    if hasattr(optim, "ASGD"):
        env.rec("asgd ax", optimizer.state_dict()["state"][0]["step"])


def qat_ste(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    def fake_quant_ste(x, scale, bits=4):
        qmax = 2 ** (bits - 1) - 1
        q = torch.clamp(torch.round(x / scale), -qmax - 1, qmax) * scale
        return x + (q - x).detach()          # forward: q; backward: identity

    class QuantLinear(nn.Linear):
        def __init__(self, in_f, out_f, builtin=False):
            super().__init__(in_f, out_f)
            self.builtin = builtin
            self.register_buffer("act_max", torch.tensor(1.0))

        def forward(self, x):
            scale_w = self.weight.detach().abs().max() / 7
            if self.builtin:
                w = torch.fake_quantize_per_tensor_affine(self.weight, scale_w.item(), 0, -8, 7)
            else:
                w = fake_quant_ste(self.weight, scale_w)
            if self.training:
                with torch.no_grad():
                    self.act_max.mul_(0.9).add_(0.1 * x.abs().max())
            return F.linear(fake_quant_ste(x, self.act_max / 127, bits=8), w, self.bias)

    for builtin in (False, True):
        model = env.init(nn.Sequential(QuantLinear(5, 16, builtin), nn.ReLU(),
                                       QuantLinear(16, 2, builtin)))
        optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        x, y = env.randn(20, 5), env.randint(0, 2, (20,))

        def train_step(x, y):
            model.train()
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            return loss.item()

        if not builtin:         # (fake_quantize_per_tensor_affine's scale is a Python float)
            train_step = env.step(train_step)
        for it in range(4):
            env.rec(f"{builtin} step {it}", train_step(x, y))
        env.rec(f"{builtin} state", model.state_dict())
        model.eval()
        with torch.no_grad():
            env.rec(f"{builtin} eval", model(x))
