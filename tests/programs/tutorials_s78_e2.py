"""Stop 78 (E), part 2: fast.ai part 2's miniai (Hooks recording activation means, stds
and torch.histc histograms with GeneralRelu and kaiming init by leak, LSUV init by a hook,
a BatchSchedCB stepping OneCycleLR per batch and recording lr and betas) and Raschka's LLMs
from scratch appendices D (linear warm-up, cosine decay and clipping after warm-up, the lr
set into param_groups each step) and E (LoRALayer, LinearWithLoRA put in place by
replace_linear_with_lora over named_children, everything else frozen). Synthetic data.
Programs `f(torch, env)`, see tutorial_harness.py."""
import math
from functools import partial


def _miniai_model(torch, nn):
    class GeneralRelu(nn.Module):
        def __init__(self, leak=None, sub=None, maxv=None):
            super().__init__()
            self.leak, self.sub, self.maxv = leak, sub, maxv

        def forward(self, x):
            x = torch.nn.functional.leaky_relu(x, self.leak) if self.leak is not None \
                else torch.nn.functional.relu(x)
            if self.sub is not None:
                x -= self.sub
            if self.maxv is not None:
                x.clamp_max_(self.maxv)
            return x

    def conv(ni, nf, ks=3, stride=2, act=nn.ReLU):
        res = nn.Conv2d(ni, nf, stride=stride, kernel_size=ks, padding=ks // 2)
        if act:
            res = nn.Sequential(res, act())
        return res

    act_gr = partial(GeneralRelu, leak=0.1, sub=0.4)
    layers = [conv(1, 4, act=act_gr), conv(4, 8, act=act_gr), conv(8, 8, act=act_gr),
              conv(8, 10, act=None), nn.Flatten()]
    return nn.Sequential(*layers)


def miniai_activation_stats(torch, env):
    nn = torch.nn

    def init_weights(m, leaky=0.):
        if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
            torch.nn.init.kaiming_normal_(m.weight, a=leaky)

    class Hook():
        def __init__(self, m, f):
            self.hook = m.register_forward_hook(partial(f, self))

        def remove(self):
            self.hook.remove()

        def __del__(self):
            self.remove()

    class Hooks(list):
        def __init__(self, ms, f):
            super().__init__([Hook(m, f) for m in ms])

        def __enter__(self, *args):
            return self

        def __exit__(self, *args):
            self.remove()

        def __del__(self):
            self.remove()

        def __delitem__(self, i):
            self[i].remove()
            super().__delitem__(i)

        def remove(self):
            for h in self:
                h.remove()

    def append_stats(hook, mod, inp, outp):
        if not hasattr(hook, "stats"):
            hook.stats = ([], [], [])
        acts = outp.detach()
        hook.stats[0].append(acts.mean())
        hook.stats[1].append(acts.std())
        hook.stats[2].append(acts.abs().histc(40, 0, 10))

    model = _miniai_model(torch, nn)
    model.apply(partial(init_weights, leaky=0.1))
    env.init(model)
    xb = env.randn(8, 1, 16, 16)
    yb = env.randint(0, 10, (8,))
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)

    def train_step(xb, yb):
        preds = model(xb)
        loss = torch.nn.functional.cross_entropy(preds, yb)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    train_step = env.step(train_step)
    with Hooks(model[:4], append_stats) as hooks:
        for i in range(4):
            env.rec(f"loss {i}", train_step(xb, yb))
        for k, h in enumerate(hooks):
            ms, ss, hi = h.stats
            env.rec(f"hook {k} means", torch.stack(ms))
            env.rec(f"hook {k} stds", torch.stack(ss))
            h1 = torch.stack(hi).t().float()
            env.rec(f"hook {k} hist", h1)
            env.rec(f"hook {k} min", h1[0] / h1.sum(0))
    env.rec("hooks removed", [len(m._forward_hooks) for m in model[:4]])


def miniai_lsuv(torch, env):
    nn = torch.nn
    model = env.init(_miniai_model(torch, nn))
    xb = env.randn(16, 1, 16, 16)
    yb = env.randint(0, 10, (16,))

    def _lsuv_stats(hook, mod, inp, outp):
        acts = outp.detach()
        hook.mean = acts.mean()
        hook.std = acts.std()

    class Hook():
        def __init__(self, m, f):
            self.hook = m.register_forward_hook(partial(f, self))

        def remove(self):
            self.hook.remove()

    def lsuv_init(model, m, m_in, xb):
        h = Hook(m, _lsuv_stats)
        n = 0
        with torch.no_grad():
            while model(xb) is not None and (abs(h.std - 1) > 1e-3 or abs(h.mean) > 1e-3):
                m_in.bias -= h.mean
                m_in.weight.data /= h.std
                n += 1
                if n == 5:
                    break
        h.remove()

    relus = [o[1] for o in model[:3]]
    convs = [o[0] for o in model[:3]]
    for ms in zip(relus, convs):
        lsuv_init(model, *ms, xb)
    env.rec("lsuv state", dict(model.state_dict()))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, eps=1e-5)

    def train_step(xb, yb):
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    train_step = env.step(train_step)
    for i in range(4):
        env.rec(f"loss {i}", train_step(xb, yb))
    env.rec("trained", dict(model.state_dict()))


def miniai_onecycle(torch, env):
    nn = torch.nn
    lr_scheduler = torch.optim.lr_scheduler

    class Callback():
        order = 0

    class BaseSchedCB(Callback):
        def __init__(self, sched):
            self.sched = sched

        def before_fit(self, learn):
            self.schedo = self.sched(learn.opt)

        def _step(self, learn):
            if learn.training:
                self.schedo.step()

    class BatchSchedCB(BaseSchedCB):
        def after_batch(self, learn):
            self._step(learn)

    class RecorderCB(Callback):
        def __init__(self, **d):
            self.d = d

        def before_fit(self, learn):
            self.recs = {k: [] for k in self.d}
            self.pg = learn.opt.param_groups[0]

        def after_batch(self, learn):
            if not learn.training:
                return
            for k, v in self.d.items():
                self.recs[k].append(v(self))

    class Learner():
        def __init__(self, model, batches, loss_func, lr, cbs, opt_func):
            self.model, self.batches, self.loss_func = model, batches, loss_func
            self.lr, self.cbs, self.opt_func = lr, cbs, opt_func
            self.training = True

        def callback(self, name):
            for cb in sorted(self.cbs, key=lambda c: c.order):
                method = getattr(cb, name, None)
                if method is not None:
                    method(self)

        def fit(self, n_epochs, step):
            self.opt = self.opt_func(self.model.parameters(), self.lr)
            self.callback("before_fit")
            self.losses = []
            for self.epoch in range(n_epochs):
                for xb, yb in self.batches:
                    self.losses.append(step(xb, yb))
                    self.callback("after_batch")

    model = env.init(nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3)))
    batches = [(env.randn(5, 6), env.randint(0, 3, (5,))) for _ in range(3)]
    n_epochs = 3
    tmax = n_epochs * len(batches)
    sched = partial(lr_scheduler.OneCycleLR, max_lr=6e-2, total_steps=tmax)

    def _lr(cb):
        return cb.pg["lr"]

    def _beta1(cb):
        return cb.pg["betas"][0]

    rec = RecorderCB(lr=_lr, mom=_beta1)
    learn = Learner(model, batches, nn.functional.cross_entropy, lr=2e-2,
                    cbs=[BatchSchedCB(sched), rec], opt_func=torch.optim.AdamW)

    def train_step(xb, yb):
        learn.preds = learn.model(xb)
        learn.loss = learn.loss_func(learn.preds, yb)
        learn.loss.backward()
        learn.opt.step()
        learn.opt.zero_grad()
        return learn.loss

    learn.fit(n_epochs, env.step(train_step))
    env.rec("losses", learn.losses)
    env.rec("lrs", rec.recs["lr"])
    env.rec("moms", rec.recs["mom"])
    env.rec("trained", dict(model.state_dict()))


def llm_appendix_d_loop(torch, env):
    nn = torch.nn
    model = env.init(nn.Sequential(nn.Embedding(20, 8), nn.Linear(8, 8), nn.GELU(),
                                   nn.Linear(8, 20)))
    inputs = [env.randint(0, 20, (2, 6)) for _ in range(3)]
    targets = [env.randint(0, 20, (2, 6)) for _ in range(3)]
    peak_lr, initial_lr, min_lr = 0.01, 0.0001, 0.1 * 0.01
    n_epochs, warmup_steps = 3, 3
    optimizer = torch.optim.AdamW(model.parameters(), weight_decay=0.1)
    total_training_steps = len(inputs) * n_epochs
    lr_increment = (peak_lr - initial_lr) / warmup_steps
    global_step = -1
    track_lrs = []

    def calc_loss_batch(input_batch, target_batch, model):
        logits = model(input_batch)
        return nn.functional.cross_entropy(logits.flatten(0, 1), target_batch.flatten())

    def loss_and_backward(input_batch, target_batch):
        optimizer.zero_grad()
        loss = calc_loss_batch(input_batch, target_batch, model)
        loss.backward()
        return loss

    def update(clip):
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()

    loss_and_backward = env.step(loss_and_backward)
    update = env.step(update)
    for epoch in range(n_epochs):
        model.train()
        for input_batch, target_batch in zip(inputs, targets):
            global_step += 1
            if global_step < warmup_steps:
                lr = initial_lr + global_step * lr_increment
            else:
                progress = ((global_step - warmup_steps) /
                            (total_training_steps - warmup_steps))
                lr = min_lr + (peak_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))
            for param_group in optimizer.param_groups:
                param_group["lr"] = lr
            track_lrs.append(lr)
            loss = loss_and_backward(input_batch, target_batch)
            update(global_step > warmup_steps)
            env.rec(f"step {global_step}", loss)
    env.rec("lrs", track_lrs)
    env.rec("trained", dict(model.state_dict()))


def llm_appendix_e_lora(torch, env):
    nn = torch.nn

    class LoRALayer(torch.nn.Module):
        def __init__(self, in_dim, out_dim, rank, alpha):
            super().__init__()
            self.A = torch.nn.Parameter(torch.empty(in_dim, rank))
            torch.nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
            self.B = torch.nn.Parameter(torch.zeros(rank, out_dim))
            self.alpha = alpha

        def forward(self, x):
            x = self.alpha * (x @ self.A @ self.B)
            return x

    class LinearWithLoRA(torch.nn.Module):
        def __init__(self, linear, rank, alpha):
            super().__init__()
            self.linear = linear
            self.lora = LoRALayer(linear.in_features, linear.out_features, rank, alpha)

        def forward(self, x):
            return self.linear(x) + self.lora(x)

    def replace_linear_with_lora(model, rank, alpha):
        for name, module in model.named_children():
            if isinstance(module, torch.nn.Linear):
                setattr(model, name, LinearWithLoRA(module, rank, alpha))
            else:
                replace_linear_with_lora(module, rank, alpha)

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_emb = nn.Embedding(16, 8)
            self.trf = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8))
            self.final_norm = nn.LayerNorm(8)
            self.out_head = nn.Linear(8, 2)

        def forward(self, idx):
            x = self.trf(self.tok_emb(idx))
            return self.out_head(self.final_norm(x))

    model = env.init(Classifier())
    total_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    env.rec("before", f"Total trainable parameters before: {total_params:,}")
    for param in model.parameters():
        param.requires_grad = False
    total_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    env.rec("after freeze", f"Total trainable parameters after: {total_params:,}")
    replace_linear_with_lora(model, rank=2, alpha=4)
    env.init(model)     # (the LoRA A matrices: torch's kaiming_uniform_ draws)
    total_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    env.rec("lora", f"Total trainable LoRA parameters: {total_params:,}")
    env.rec("repr", repr(model))
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.1)
    input_batch = env.randint(0, 16, (4, 5))
    target_batch = env.randint(0, 2, (4,))

    def calc_loss_batch(input_batch, target_batch, model):
        logits = model(input_batch)[:, -1, :]
        return torch.nn.functional.cross_entropy(logits, target_batch)

    def train_step(input_batch, target_batch):
        optimizer.zero_grad()
        loss = calc_loss_batch(input_batch, target_batch, model)
        loss.backward()
        optimizer.step()
        return loss

    train_step = env.step(train_step)
    model.train()
    for i in range(4):
        env.rec(f"loss {i}", train_step(input_batch, target_batch))
    with torch.no_grad():
        logits = model(input_batch)[:, -1, :]
        predicted_labels = torch.argmax(logits, dim=-1)
    env.rec("accuracy", (predicted_labels == target_batch).sum().item() / 4)
    env.rec("trained", dict(model.state_dict()))
    env.rec("frozen grads", [p.grad is None for n, p in model.named_parameters()
                             if "lora" not in n])
