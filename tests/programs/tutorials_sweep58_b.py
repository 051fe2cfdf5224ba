"""Sweep 58 (H2, b): a hand-written Lion optimizer (an Optimizer subclass) under a
hand-written warm-up + cosine LRScheduler subclass, checkpointed mid-run with torch.save
(model, optimizer, scheduler, step) and resumed into fresh objects by torch.load; MoCo's
momentum key encoder (an EMA by hand under no_grad) with its queue of negatives, a buffer
written in place through a pointer buffer; a multi-task model choosing a ModuleDict head
and a ParameterDict task embedding by name, with a non-persistent buffer of running feature
means, a forward pre-hook, register_module and get_submodule; an IterableDataset sharded by
get_worker_info into an EMA of weights and buffers (AveragedModel(use_buffers=True)).
Synthetic data. Programs `f(torch, env)`, see tutorial_harness.py."""
import math


def lion_checkpoint_resume(torch, env):
    nn = torch.nn

    class Lion(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
            if not 0.0 <= lr:
                raise ValueError('Invalid learning rate: {}'.format(lr))
            defaults = dict(lr=lr, betas=betas, weight_decay=weight_decay)
            super().__init__(params, defaults)

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                for p in group['params']:
                    if p.grad is None:
                        continue
                    p.data.mul_(1 - group['lr'] * group['weight_decay'])
                    grad = p.grad
                    state = self.state[p]
                    if len(state) == 0:
                        state['exp_avg'] = torch.zeros_like(p)
                    exp_avg = state['exp_avg']
                    beta1, beta2 = group['betas']
                    update = exp_avg * beta1 + grad * (1 - beta1)
                    p.add_(update.sign_(), alpha=-group['lr'])
                    exp_avg.mul_(beta2).add_(grad, alpha=1 - beta2)
            return loss

    class WarmupCosine(torch.optim.lr_scheduler.LRScheduler):
        def __init__(self, optimizer, warmup, total, last_epoch=-1):
            self.warmup, self.total = warmup, total
            super().__init__(optimizer, last_epoch)

        def get_lr(self):
            s = self.last_epoch
            if s < self.warmup:
                f = (s + 1) / self.warmup
            else:
                f = 0.5 * (1 + math.cos(math.pi * (s - self.warmup) / (self.total - self.warmup)))
            return [base * f for base in self.base_lrs]

    def make():
        model = nn.Sequential(nn.Linear(6, 10), nn.LayerNorm(10), nn.GELU(), nn.Linear(10, 1))
        opt = Lion(model.parameters(), lr=1e-2, weight_decay=0.1)
        return model, opt, WarmupCosine(opt, warmup=2, total=8)

    model, opt, sched = make()
    env.init(model)
    x, y = env.randn(16, 6), env.randn(16, 1)

    def train_step(model, opt, x, y):
        def closure():
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            return loss
        return opt.step(closure)

    step = env.step(train_step)
    for i in range(3):
        env.rec(f"loss {i}", step(model, opt, x, y))
        sched.step()
    path = env.path("ckpt.pt")
    torch.save({"step": 3, "model": model.state_dict(), "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict()}, path)
    for i in range(3, 6):       # (the uninterrupted run)
        env.rec(f"loss {i}", step(model, opt, x, y))
        sched.step()
    env.rec("params", dict(model.state_dict()))

    model2, opt2, sched2 = make()
    ckpt = torch.load(path)
    model2.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["optimizer"])
    sched2.load_state_dict(ckpt["scheduler"])
    env.rec("resumed lr", sched2.get_last_lr())
    for i in range(ckpt["step"], 6):
        env.rec(f"resumed loss {i}", step(model2, opt2, x, y))
        sched2.step()
    env.rec("resumed params", dict(model2.state_dict()))
    env.rec("resumed state", [opt2.state[p]["exp_avg"] for p in model2.parameters()])
    env.rec("same", all(torch.equal(a, b) for a, b in zip(model.parameters(),
                                                           model2.parameters())))


def moco_queue(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class MoCo(nn.Module):
        def __init__(self, dim=8, K=12, m=0.9, T=0.2):
            super().__init__()
            self.K, self.m, self.T = K, m, T
            self.encoder_q = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, dim))
            self.encoder_k = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, dim))
            for param_q, param_k in zip(self.encoder_q.parameters(),
                                        self.encoder_k.parameters()):
                param_k.data.copy_(param_q.data)
                param_k.requires_grad = False
            self.register_buffer("queue", torch.zeros(dim, K))
            self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

        @torch.no_grad()
        def _momentum_update_key_encoder(self):
            for param_q, param_k in zip(self.encoder_q.parameters(),
                                        self.encoder_k.parameters()):
                param_k.data = param_k.data * self.m + param_q.data * (1. - self.m)

        @torch.no_grad()
        def _dequeue_and_enqueue(self, keys):
            batch_size = keys.shape[0]
            ptr = int(self.queue_ptr)
            assert self.K % batch_size == 0
            self.queue[:, ptr:ptr + batch_size] = keys.T
            ptr = (ptr + batch_size) % self.K
            self.queue_ptr[0] = ptr

        def forward(self, im_q, im_k):
            q = F.normalize(self.encoder_q(im_q), dim=1)
            with torch.no_grad():
                self._momentum_update_key_encoder()
                k = F.normalize(self.encoder_k(im_k), dim=1)
            l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
            l_neg = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])
            logits = torch.cat([l_pos, l_neg], dim=1) / self.T
            labels = torch.zeros(logits.shape[0], dtype=torch.long)
            self._dequeue_and_enqueue(k)
            return logits, labels

    model = env.init(MoCo())
    model.queue.copy_(F.normalize(env.randn(8, 12), dim=0))
    optimizer = torch.optim.SGD(model.encoder_q.parameters(), lr=0.1, momentum=0.9,
                                weight_decay=1e-4)
    criterion = nn.CrossEntropyLoss()

    def train_step(im_q, im_k):
        output, target = model(im_q, im_k)
        loss = criterion(output, target)
        acc = (output.argmax(1) == target).float().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item(), acc.item()

    step = env.step(train_step)
    x = env.randn(4, 10)
    for i in range(5):      # (the pointer goes round the queue: 0, 4, 8, 0, ...)
        im_q, im_k = x + 0.1 * env.randn(4, 10), x + 0.1 * env.randn(4, 10)
        env.rec(f"step {i}", step(im_q, im_k))
        env.rec(f"ptr {i}", model.queue_ptr)
    env.rec("state", dict(model.state_dict()))


def multitask_moduledict(torch, env):
    nn = torch.nn

    class MultiTask(nn.Module):
        def __init__(self, tasks):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(6, 12), nn.ReLU())
            self.heads = nn.ModuleDict({t: nn.Linear(12, n) for t, n in tasks.items()})
            self.task_emb = nn.ParameterDict({t: nn.Parameter(torch.zeros(12))
                                              for t in tasks})
            self.register_module("norm", nn.LayerNorm(12))
            self.register_buffer("feat_mean", torch.zeros(12), persistent=False)
            self.register_buffer("seen", torch.zeros((), dtype=torch.long))

        def forward(self, x, task):
            h = self.trunk(x)
            if self.training:
                with torch.no_grad():
                    self.seen += 1
                    self.feat_mean.mul_(0.9).add_(h.mean(0), alpha=0.1)
            h = self.norm(h + self.task_emb[task])
            if task == "seg":
                out = self.heads[task](h).view(-1, 2, 2, 2)
                return nn.Softmax2d()(out)
            return self.heads[task](h)

    def scale_input(module, args):
        x, task = args
        return x * 0.5, task

    model = env.init(MultiTask({"cls": 3, "reg": 1, "seg": 8}))
    model.get_submodule("trunk.0").register_forward_pre_hook(
        lambda m, inp: (inp[0].clamp(-2, 2),))
    handle = model.register_forward_pre_hook(scale_input)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, y, task):
        optimizer.zero_grad(set_to_none=True)
        out = model(x, task)
        if task == "cls":
            loss = nn.functional.cross_entropy(out, y)
        elif task == "reg":
            loss = nn.functional.smooth_l1_loss(out.squeeze(1), y)
        else:
            loss = -(y * out.clamp_min(1e-6).log()).sum(1).mean()
        loss.backward()
        optimizer.step()
        return loss

    step = env.step(train_step)
    x = env.randn(6, 6, scale=2.0)
    data = {"cls": env.randint(0, 3, (6,)), "reg": env.randn(6),
            "seg": env.rand(6, 2, 2, 2).softmax(1)}
    for i in range(6):
        task = ["cls", "reg", "seg"][i % 3]
        env.rec(f"{task} {i}", step(x, data[task], task))
    handle.remove()
    env.rec("after remove", step(x, data["cls"], "cls"))
    env.rec("state keys", sorted(model.state_dict().keys()))
    env.rec("state", dict(model.state_dict()))
    env.rec("feat_mean", model.feat_mean)
    env.rec("grads none", [p.grad is None for p in model.parameters()])


def stream_ema_use_buffers(torch, env):
    """An IterableDataset that shards itself by get_worker_info() (None in the main
    process), batched by the DataLoader's default collate; an EMA of the weights and of the
    BatchNorm buffers (AveragedModel(use_buffers=True) with get_ema_multi_avg_fn) updated
    after each compiled step, evaluated at the end."""
    nn, data = torch.nn, torch.utils.data
    swa_utils = torch.optim.swa_utils
    xs, ys = env.randn(20, 4), env.randint(0, 3, (20,))

    class Stream(data.IterableDataset):
        def __init__(self, start, end):
            super().__init__()
            self.start, self.end = start, end

        def __iter__(self):
            worker_info = data.get_worker_info()
            if worker_info is None:
                iter_start, iter_end = self.start, self.end
            else:
                per_worker = int(math.ceil((self.end - self.start) / float(worker_info.num_workers)))
                iter_start = self.start + worker_info.id * per_worker
                iter_end = min(iter_start + per_worker, self.end)
            for i in range(iter_start, iter_end):
                yield {"x": xs[i], "y": ys[i]}

    loader = data.DataLoader(Stream(0, 20), batch_size=5)
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(),
                                   nn.Linear(8, 3)))
    ema = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.9),
                                  use_buffers=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    criterion = nn.CrossEntropyLoss()

    def train_step(batch):
        optimizer.zero_grad()
        loss = criterion(model(batch["x"]), batch["y"])
        loss.backward()
        optimizer.step()
        return loss.detach()

    step = env.step(train_step)
    for epoch in range(2):
        for i, batch in enumerate(loader):
            env.rec(f"loss {epoch} {i}", step(batch))
            ema.update_parameters(model)
    env.rec("n_averaged", ema.n_averaged)
    env.rec("ema", dict(ema.module.state_dict()))
    ema.eval()
    with torch.no_grad():
        env.rec("ema eval", ema(xs[:6]))
