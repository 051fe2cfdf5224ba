"""Tutorial programs on autograd extension points and training utilities (see
tutorial_harness.py): a custom autograd.Function returning indices marked
non-differentiable, MAML written with torch.func (functional_call, grad, vmap over tasks),
checkpoint_sequential over a deep MLP, chained / sequential LR schedulers with a
plateau scheduler in mode="max", layer-wise learning-rate decay parameter groups, and a
weight EMA kept in a copy.deepcopy of the model."""
import copy


def custom_function_topk_nondiff(torch, env):
    """A top-k pooling written as an autograd.Function: forward returns (values, indices),
    ctx.save_for_backward(indices), ctx.mark_non_differentiable(indices),
    ctx.set_materialize_grads(False) and a backward that handles a None grad and checks
    ctx.needs_input_grad; the pooled features feed a linear classifier."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class TopKPool(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            vals, idx = x.topk(k, dim=1)
            ctx.save_for_backward(idx)
            ctx.mark_non_differentiable(idx)
            ctx.set_materialize_grads(False)
            ctx.shape = x.shape
            return vals, idx

        @staticmethod
        def backward(ctx, g_vals, g_idx):
            (idx,) = ctx.saved_tensors
            if g_vals is None or not ctx.needs_input_grad[0]:
                return None, None
            gx = torch.zeros(ctx.shape, dtype=g_vals.dtype)
            return gx.scatter(1, idx, g_vals), None

    enc = nn.Linear(5, 12)
    head = nn.Linear(3, 2)
    opt = torch.optim.SGD(list(enc.parameters()) + list(head.parameters()), lr=0.2,
                          momentum=0.9, nesterov=True)
    x = torch.randn(16, 5)
    y = (x[:, 0] * x[:, 1] > 0).long()

    def train_step(x, y):
        opt.zero_grad()
        vals, idx = TopKPool.apply(torch.tanh(enc(x)), 3)
        loss = F.cross_entropy(head(vals), y)
        loss.backward()
        opt.step()
        return loss, idx, idx.requires_grad

    step = env.step(train_step)
    hist = []
    for _ in range(6):
        loss, idx, rg = step(x, y)
        hist.append(loss.item())
    env.rec("hist", hist)
    env.rec("idx", idx)
    env.rec("idx requires_grad", rg)
    env.rec("params", list(enc.parameters()) + list(head.parameters()))


def maml_func_vmap(torch, env):
    """MAML on sine regression with torch.func: an inner SGD step per task computed by
    torch.func.grad of a loss written with torch.func.functional_call, vmapped over a batch
    of tasks (in_dims for the support / query sets, None for the parameters), the
    second-order meta-gradient by backward through it, Adam as the outer optimiser."""
    nn, F = torch.nn, torch.nn.functional
    from_func = torch.func
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
    meta_opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    n_tasks = 4
    amp = env.rand(5, n_tasks, 1, 1) * 2 + 0.5
    phase = env.rand(5, n_tasks, 1, 1) * 3
    xs = env.rand(5, n_tasks, 10, 1) * 6 - 3
    xq = env.rand(5, n_tasks, 10, 1) * 6 - 3

    def loss_fn(params, x, y):
        return F.mse_loss(from_func.functional_call(model, params, (x,)), y)

    def adapted_query_loss(params, xs, ys, xq, yq):
        grads = from_func.grad(loss_fn)(params, xs, ys)
        fast = {k: p - 0.1 * grads[k] for k, p in params.items()}
        return loss_fn(fast, xq, yq)

    def meta_step(xs, ys, xq, yq):
        params = dict(model.named_parameters())
        losses = from_func.vmap(adapted_query_loss, in_dims=(None, 0, 0, 0, 0))(
            params, xs, ys, xq, yq)
        meta_opt.zero_grad()
        losses.mean().backward()
        meta_opt.step()
        return losses.detach()

    step = env.step(meta_step)
    hist = []
    for it in range(5):
        a, p = amp[it], phase[it]
        ys, yq = a * torch.sin(xs[it] + p), a * torch.sin(xq[it] + p)
        hist.append(step(xs[it], ys, xq[it], yq))
    env.rec("hist", hist)
    env.rec("params", list(model.parameters()))


def checkpoint_sequential_mlp(torch, env):
    """Activation checkpointing as the docs show it: torch.utils.checkpoint.
    checkpoint_sequential over a deep nn.Sequential in 3 segments (use_reentrant=False)
    plus checkpoint(fn, x, use_reentrant=False) around a residual block, AdamW."""
    nn, F = torch.nn, torch.nn.functional
    from_cp = torch.utils.checkpoint
    torch.manual_seed(0)
    layers = []
    for _ in range(6):
        layers += [nn.Linear(8, 8), nn.GELU()]
    body = nn.Sequential(*layers)
    block = nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 8), nn.SiLU())
    head = nn.Linear(8, 3)
    params = list(body.parameters()) + list(block.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=2e-3, weight_decay=0.05)
    x, y = torch.randn(20, 8), torch.randint(0, 3, (20,))

    def forward(x):
        h = from_cp.checkpoint_sequential(body, 3, x, use_reentrant=False)
        h = h + from_cp.checkpoint(block, h, use_reentrant=False)
        return head(h)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(forward(x), y)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    hist = [step(x, y).item() for _ in range(5)]
    env.rec("hist", hist)
    env.rec("params", params)


def chained_plateau_schedulers(torch, env):
    """Three scheduler recipes on one model: SequentialLR(LinearLR warmup ->
    CosineAnnealingWarmRestarts(T_0=3, T_mult=2)) on the encoder's optimiser,
    ChainedScheduler(ExponentialLR, MultiStepLR) on the head's, and a ReduceLROnPlateau in
    mode="max" (threshold_mode="abs", cooldown=1, min_lr) on a validation accuracy; the
    learning rates each epoch and the schedulers' state_dict round trip."""
    nn, F = torch.nn, torch.nn.functional
    lrs = torch.optim.lr_scheduler
    torch.manual_seed(0)
    enc, head = nn.Linear(4, 8), nn.Linear(8, 3)
    opt_a = torch.optim.SGD(enc.parameters(), lr=0.1, momentum=0.9)
    opt_b = torch.optim.RMSprop(head.parameters(), lr=0.01, alpha=0.9)
    s_a = lrs.SequentialLR(opt_a, [lrs.LinearLR(opt_a, start_factor=0.2, total_iters=2),
                                   lrs.CosineAnnealingWarmRestarts(opt_a, T_0=3, T_mult=2,
                                                                   eta_min=1e-3)],
                           milestones=[2])
    s_b = lrs.ChainedScheduler([lrs.ExponentialLR(opt_b, gamma=0.9),
                                lrs.MultiStepLR(opt_b, milestones=[3, 6], gamma=0.5)])
    plateau = lrs.ReduceLROnPlateau(opt_b, mode="max", factor=0.5, patience=1,
                                    threshold=0.05, threshold_mode="abs", cooldown=1,
                                    min_lr=1e-4)
    x, y = torch.randn(24, 4), torch.randint(0, 3, (24,))

    def train_step(x, y):
        opt_a.zero_grad()
        opt_b.zero_grad()
        logits = head(torch.relu(enc(x)))
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt_a.step()
        opt_b.step()
        return loss, (logits.argmax(1) == y).float().mean()

    step = env.step(train_step)
    hist = []
    for epoch in range(10):
        loss, acc = step(x, y)
        s_a.step()
        s_b.step()
        plateau.step(round(acc.item(), 2))
        hist.append((loss.item(), s_a.get_last_lr()[0], opt_b.param_groups[0]["lr"]))
    env.rec("hist", hist)
    state = s_a.state_dict()
    env.rec("last_epoch", state["last_epoch"])
    env.rec("plateau", (plateau.num_bad_epochs, plateau.cooldown_counter,
                        plateau.state_dict()["best"]))
    env.rec("params", list(enc.parameters()) + list(head.parameters()))


def layerwise_lr_decay(torch, env):
    """BERT fine-tuning's layer-wise learning-rate decay: one AdamW parameter group per
    encoder layer with lr = base * decay ** (depth - i), biases and LayerNorm weights
    without weight decay (grouped by parameter name), a LinearLR warmup that scales every
    group; the classifier on the [CLS] position."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    D, L = 16, 3

    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(12, D)
            self.layers = nn.ModuleList(nn.TransformerEncoderLayer(
                D, 2, 32, dropout=0.0, batch_first=True) for _ in range(L))
            self.cls = nn.Linear(D, 2)

        def forward(self, x):
            h = self.emb(x)
            for layer in self.layers:
                h = layer(h)
            return self.cls(h[:, 0])

    model = Enc()
    base, decay = 2e-3, 0.7
    groups = []
    for i, part in enumerate([model.emb] + list(model.layers) + [model.cls]):
        lr = base * decay ** (L + 1 - i)
        named = list(part.named_parameters())
        no_wd = [p for n, p in named if n.endswith("bias") or "norm" in n]
        wd = [p for n, p in named if not (n.endswith("bias") or "norm" in n)]
        groups += [{"params": wd, "lr": lr, "weight_decay": 0.01},
                   {"params": no_wd, "lr": lr, "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    opt = torch.optim.AdamW(groups, lr=base)
    sched = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=3)
    x = torch.randint(0, 12, (8, 6))
    y = (x[:, 1] > 5).long()

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    hist = []
    for _ in range(6):
        hist.append(step(x, y).item())
        sched.step()
    env.rec("hist", hist)
    env.rec("group lrs", [g["lr"] for g in opt.param_groups])
    env.rec("params", [p for n, p in model.named_parameters()
                       if not n.endswith("in_proj_bias")])


def ema_deepcopy_model(torch, env):
    """timm's ModelEmaV2 written out: ema = copy.deepcopy(model).eval() with
    requires_grad_(False); after each step, under torch.no_grad(), ema parameters
    .mul_(decay).add_(p, alpha=1 - decay) and buffers (BatchNorm statistics) copy_; the EMA
    model evaluated at the end. The EMA update is compiled too."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 10), nn.BatchNorm1d(10), nn.ReLU(), nn.Linear(10, 2))
    ema = copy.deepcopy(model).eval()
    ema.requires_grad_(False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x, y = torch.randn(24, 5), torch.randint(0, 2, (24,))

    def train_step(x, y):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def ema_update(decay):
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.mul_(decay).add_(p, alpha=1 - decay)
            for e, b in zip(ema.buffers(), model.buffers()):
                e.copy_(b)

    step, update = env.step(train_step), env.step(ema_update)
    hist = []
    for it in range(8):
        hist.append(step(x, y).item())
        update(min(0.9, (1 + it) / (10 + it)))
    env.rec("hist", hist)
    env.rec("ema params", list(ema.parameters()))
    env.rec("ema buffers", list(ema.buffers()))
    env.rec("ema requires_grad", [p.requires_grad for p in ema.parameters()])
    with torch.no_grad():
        env.rec("ema logits", ema(x))
