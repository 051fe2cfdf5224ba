"""Tutorial programs whose training step changes Python numbers in the state it reaches, as
courses and blog posts write them (seeded with torch.manual_seed, modules built by their
constructors; see tutorial_harness.py): optimisers written from scratch with a step count
(Adam, AdamW, RMSprop with time decay, SGD with momentum), a warm-up then cosine or step
decay set inside the step, Noam's schedule, StepLR and LambdaLR stepped inside the step,
gradient accumulation on a micro-step counter, an EMA with a warm-up decay, a Trainer whose
training_step counts global_step and keeps running sums, a WGAN alternating critic and
generator on a step counter, and two whose number is read as a Python value each call (DQN's
epsilon-greedy, a curriculum's sequence length)."""
import math


def _mlp(nn, i=5, h=8, o=3):
    return nn.Sequential(nn.Linear(i, h), nn.Tanh(), nn.Linear(h, o))


def d2l_adam_scratch(torch, env):
    """Adam as Dive into Deep Learning writes it from scratch: states (v, s) per parameter,
    hyperparams['t'] counted in a dict, bias corrections 1 - beta ** t."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = _mlp(nn)
    params = list(model.parameters())
    states = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]
    hyperparams = {"lr": 0.01, "t": 1}

    def adam(params, states, hyperparams):
        beta1, beta2, eps = 0.9, 0.999, 1e-6
        for p, (v, s) in zip(params, states):
            with torch.no_grad():
                v[:] = beta1 * v + (1 - beta1) * p.grad
                s[:] = beta2 * s + (1 - beta2) * torch.square(p.grad)
                v_bias_corr = v / (1 - beta1 ** hyperparams["t"])
                s_bias_corr = s / (1 - beta2 ** hyperparams["t"])
                p[:] -= hyperparams["lr"] * v_bias_corr / (torch.sqrt(s_bias_corr) + eps)
            p.grad.data.zero_()
        hyperparams["t"] += 1

    x, y = env.randn(10, 5), env.randint(0, 3, (10,))

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        adam(params, states, hyperparams)
        return loss.detach()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(8)])
    env.rec("t", hyperparams["t"])
    env.rec("params", params)


def adamw_scratch_class(torch, env):
    """'Optimizers from scratch' blog style: an Optimizer base class keeping
    self.iterations, AdamW subclass with decoupled weight decay and bias corrections, a
    step_size computed in Python from the count."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Optimizer:
        def __init__(self, params, lr):
            self.params, self.lr, self.iterations = list(params), lr, 0

        def zero_grad(self):
            for p in self.params:
                p.grad = None

    class AdamW(Optimizer):
        def __init__(self, params, lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05):
            super().__init__(params, lr)
            self.b1, self.b2 = betas
            self.eps, self.wd = eps, weight_decay
            self.m = [torch.zeros_like(p) for p in self.params]
            self.v = [torch.zeros_like(p) for p in self.params]

        @torch.no_grad()
        def step(self):
            self.iterations += 1
            bc1 = 1 - self.b1 ** self.iterations
            bc2 = 1 - self.b2 ** self.iterations
            step_size = self.lr * math.sqrt(bc2) / bc1
            for p, m, v in zip(self.params, self.m, self.v):
                p.mul_(1 - self.lr * self.wd)
                m.mul_(self.b1).add_(p.grad, alpha=1 - self.b1)
                v.mul_(self.b2).addcmul_(p.grad, p.grad, value=1 - self.b2)
                p.addcdiv_(m, v.sqrt().add_(self.eps), value=-step_size)

    model = _mlp(nn, 4, 10, 2)
    opt = AdamW(model.parameters())
    x, y = env.randn(12, 4), env.randn(12, 2)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(8)])
    env.rec("iterations", opt.iterations)
    env.rec("params", list(model.parameters()))


def cs231n_momentum_rmsprop(torch, env):
    """CS231n's update rules as classes: SGD with (Nesterov) momentum whose velocity is the
    first gradient on the first step (`if self.t == 1`), and RMSprop with Keras' time-based
    decay lr / (1 + decay * t); two models, one step function."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class SGDMomentum:
        def __init__(self, params, lr=0.05, mu=0.9, nesterov=True):
            self.params, self.lr, self.mu, self.nesterov = list(params), lr, mu, nesterov
            self.vel = [torch.zeros_like(p) for p in self.params]
            self.t = 0

        def step(self):
            self.t += 1
            with torch.no_grad():
                for p, v in zip(self.params, self.vel):
                    if self.t == 1:
                        v.copy_(p.grad)
                    else:
                        v.mul_(self.mu).add_(p.grad)
                    d = p.grad + self.mu * v if self.nesterov else v
                    p.add_(d, alpha=-self.lr)
                    p.grad.zero_()

    class RMSprop:
        def __init__(self, params, lr=0.01, decay_rate=0.99, eps=1e-8, decay=0.1):
            self.params, self.lr, self.rho, self.eps = list(params), lr, decay_rate, eps
            self.decay, self.t = decay, 0
            self.cache = [torch.zeros_like(p) for p in self.params]

        def step(self):
            lr = self.lr / (1.0 + self.decay * self.t)
            with torch.no_grad():
                for p, c in zip(self.params, self.cache):
                    c.mul_(self.rho).add_((1 - self.rho) * p.grad ** 2)
                    p -= lr * p.grad / (c.sqrt() + self.eps)
                    p.grad.zero_()
            self.t += 1

    a, b = _mlp(nn, 6, 8, 3), _mlp(nn, 6, 8, 3)
    opt_a, opt_b = SGDMomentum(a.parameters()), RMSprop(b.parameters())
    x, y = env.randn(9, 6), env.randint(0, 3, (9,))

    def train_step(x, y):
        la = F.cross_entropy(a(x), y)
        lb = F.cross_entropy(b(x), y)
        (la + lb).backward()
        opt_a.step()
        opt_b.step()
        return la.detach(), lb.detach()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(8)])
    env.rec("counts", (opt_a.t, opt_b.t))
    env.rec("params", list(a.parameters()) + list(b.parameters()))


def warmup_cosine_from_iteration(torch, env):
    """nanoGPT's get_lr(it): linear warm-up, then cosine decay to min_lr, written into
    optimizer.param_groups inside the step from the iteration argument."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = _mlp(nn, 6, 12, 4)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-3, betas=(0.9, 0.95), weight_decay=0.1)
    learning_rate, min_lr, warmup_iters, lr_decay_iters = 6e-3, 6e-4, 3, 10

    def get_lr(it):
        if it < warmup_iters:
            return learning_rate * (it + 1) / (warmup_iters + 1)
        if it > lr_decay_iters:
            return min_lr
        decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return min_lr + coeff * (learning_rate - min_lr)

    x, y = env.randn(10, 6), env.randint(0, 4, (10,))

    def train_step(x, y, it):
        lr = get_lr(it)
        for param_group in opt.param_groups:
            param_group["lr"] = lr
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    env.rec("hist", [step(x, y, it) for it in range(13)])
    env.rec("lr", opt.param_groups[0]["lr"])
    env.rec("params", list(model.parameters()))


def trainer_warmup_step_decay(torch, env):
    """A Trainer object counting self.iteration; its step sets the lr from the count: a
    linear warm-up over 4 iterations then a step decay gamma ** (iteration // 3); SGD with
    momentum over two parameter groups (the head at twice the base lr)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Trainer:
        def __init__(self, model, base_lr=0.05, warmup=4, gamma=0.5, step_size=3):
            self.model, self.base_lr, self.warmup = model, base_lr, warmup
            self.gamma, self.step_size, self.iteration = gamma, step_size, 0
            self.opt = torch.optim.SGD(
                [{"params": model[0].parameters(), "mult": 1.0},
                 {"params": model[2].parameters(), "mult": 2.0}],
                lr=base_lr, momentum=0.9)

        def lr_at(self, it):
            if it < self.warmup:
                return self.base_lr * (it + 1) / self.warmup
            return self.base_lr * self.gamma ** ((it - self.warmup) // self.step_size)

        def train_step(self, x, y):
            lr = self.lr_at(self.iteration)
            for g in self.opt.param_groups:
                g["lr"] = lr * g["mult"]
            self.opt.zero_grad()
            loss = F.cross_entropy(self.model(x), y)
            loss.backward()
            self.opt.step()
            self.iteration += 1
            return loss.detach()

    trainer = Trainer(_mlp(nn, 5, 8, 3))
    x, y = env.randn(8, 5), env.randint(0, 3, (8,))
    step = env.step(trainer.train_step)
    env.rec("hist", [step(x, y) for _ in range(12)])
    env.rec("iteration", trainer.iteration)
    env.rec("lrs", [g["lr"] for g in trainer.opt.param_groups])
    env.rec("params", list(trainer.model.parameters()))


def noam_opt_wrapper(torch, env):
    """The Annotated Transformer's NoamOpt: a wrapper counting self._step whose rate is
    factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5), written into the
    wrapped Adam's groups each step."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class NoamOpt:
        def __init__(self, model_size, factor, warmup, optimizer):
            self.optimizer, self._step, self.warmup = optimizer, 0, warmup
            self.factor, self.model_size, self._rate = factor, model_size, 0

        def step(self):
            self._step += 1
            rate = self.rate()
            for p in self.optimizer.param_groups:
                p["lr"] = rate
            self._rate = rate
            self.optimizer.step()

        def rate(self, step=None):
            if step is None:
                step = self._step
            return self.factor * (self.model_size ** (-0.5) *
                                  min(step ** (-0.5), step * self.warmup ** (-1.5)))

    d_model = 8
    model = nn.Sequential(nn.Linear(d_model, 16), nn.ReLU(), nn.Linear(16, d_model),
                          nn.LayerNorm(d_model))
    opt = NoamOpt(d_model, 1.0, 4, torch.optim.Adam(model.parameters(), lr=0,
                                                    betas=(0.9, 0.98), eps=1e-9))
    x, y = env.randn(6, d_model), env.randn(6, d_model)

    def train_step(x, y):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.optimizer.zero_grad()
        return loss.detach()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(10)])
    env.rec("noam", (opt._step, opt._rate, opt.optimizer.param_groups[0]["lr"]))
    env.rec("rate bits", repr(opt._rate))      # (Python's arithmetic, to the last bit)
    env.rec("params", list(model.parameters()))


def steplr_in_step(torch, env):
    """torch.optim.lr_scheduler.StepLR whose scheduler.step() is called inside the
    training step, after optimizer.step() (per iteration, as some tutorials do)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = _mlp(nn, 4, 8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    x, y = env.randn(8, 4), env.randint(0, 2, (8,))

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        scheduler.step()
        return loss.detach()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(10)])
    env.rec("sched", (scheduler.last_epoch, scheduler.get_last_lr(), opt.param_groups[0]["lr"]))
    env.rec("params", list(model.parameters()))


def lambdalr_warmup_in_step(torch, env):
    """LambdaLR with a warm-up-then-inverse-sqrt lambda (fairseq's inverse_sqrt), stepped
    inside the training step; Adam."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = _mlp(nn, 5, 8, 3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    warmup = 4

    def lr_lambda(step):
        step += 1
        return min(step / warmup, (warmup / step) ** 0.5)

    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    x, y = env.randn(10, 5), env.randint(0, 3, (10,))

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        scheduler.step()
        return loss.detach()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(10)])
    env.rec("sched", (scheduler.last_epoch, scheduler.get_last_lr()))
    env.rec("params", list(model.parameters()))
