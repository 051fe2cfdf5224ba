"""Tabular, causal, federated and optimiser programs the other files leave out: TabNet (ghost
batch norm over chunks, sparsemax attentive masks with prior scales, the entropy sparsity
loss); Dragonnet (propensity head, targeted regularisation with a learned epsilon);
federated averaging (clients' copies made by copy.deepcopy, one compiled local step taking
the model and its optimiser as arguments, the server's state_dict averaged with
torch.stack); a schedule-free SGD written as an Optimizer subclass (its z and x states,
optimizer.train() / eval() swapping the parameters); RotatE knowledge-graph embeddings
(rotations by cos / sin of phases, self-adversarial negative sampling weights made with
softmax(...).detach()).
Programs `f(torch, env)`, see tutorial_harness.py."""
import copy
import math


def tabnet(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_in, n_d, n_steps, vbs, gamma = 6, 4, 2, 4, 1.3

    def sparsemax(z, dim=-1):
        z_sorted, _ = torch.sort(z, dim=dim, descending=True)
        k = torch.arange(1, z.size(dim) + 1, dtype=z.dtype).view(1, -1)
        z_cumsum = z_sorted.cumsum(dim) - 1
        support = (k * z_sorted > z_cumsum).to(z.dtype)
        k_z = support.sum(dim=dim, keepdim=True)
        tau = z_cumsum.gather(dim, k_z.long() - 1) / k_z
        return torch.clamp(z - tau, min=0)

    class GBN(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.bn = nn.BatchNorm1d(d, momentum=0.02)

        def forward(self, x):
            chunks = x.chunk(int(math.ceil(x.shape[0] / vbs)), 0)
            return torch.cat([self.bn(x_) for x_ in chunks], dim=0)

    class GLU(nn.Module):
        def __init__(self, i, o):
            super().__init__()
            self.fc, self.bn = nn.Linear(i, 2 * o, bias=False), GBN(2 * o)

        def forward(self, x):
            return F.glu(self.bn(self.fc(x)), dim=-1)

    class TabNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.initial_bn = nn.BatchNorm1d(n_in, momentum=0.01)
            self.shared = GLU(n_in, 2 * n_d)
            self.steps = nn.ModuleList([GLU(2 * n_d, 2 * n_d) for _ in range(n_steps + 1)])
            self.att = nn.ModuleList([nn.Sequential(nn.Linear(n_d, n_in, bias=False), GBN(n_in))
                                      for _ in range(n_steps)])
            self.final = nn.Linear(n_d, 2)

        def feat(self, x, i):
            h = self.shared(x)
            return (h + self.steps[i](h)) * math.sqrt(0.5)

        def forward(self, x):
            x = self.initial_bn(x)
            prior = torch.ones_like(x)
            M_loss, out = 0, 0
            att = self.feat(x, 0)[:, n_d:]
            for step in range(n_steps):
                M = sparsemax(self.att[step](att) * prior)
                M_loss = M_loss + torch.mean(torch.sum(M * torch.log(M + 1e-15), dim=1))
                prior = (gamma - M) * prior
                h = self.feat(M * x, step + 1)
                out = out + F.relu(h[:, :n_d])
                att = h[:, n_d:]
            return self.final(out), M_loss / n_steps

    model = env.init(TabNet())
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.9)

    def train_step(x, y, lambda_sparse=1e-3):
        model.train()
        logits, M_loss = model(x)
        loss = F.cross_entropy(logits, y) - lambda_sparse * M_loss
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss, M_loss

    step = env.step(train_step)
    x, y = env.randn(12, n_in), env.randint(0, 2, (12,))
    for epoch in range(4):
        env.rec(f"epoch{epoch}", step(x, y))
        sched.step()
    env.rec("bn", (model.initial_bn.running_mean, model.shared.bn.bn.running_var))
    model.eval()
    with torch.no_grad():
        env.rec("eval", model(x[:5])[0])


def dragonnet(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Dragonnet(nn.Module):
        def __init__(self, d=5, h=16):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(d, h), nn.ELU(), nn.Linear(h, h), nn.ELU())
            self.t_pred = nn.Linear(h, 1)
            self.y0 = nn.Sequential(nn.Linear(h, 8), nn.ELU(), nn.Linear(8, 1))
            self.y1 = nn.Sequential(nn.Linear(h, 8), nn.ELU(), nn.Linear(8, 1))
            self.epsilon = nn.Linear(1, 1)
            torch.nn.init.xavier_normal_(self.epsilon.weight)

        def forward(self, x):
            z = self.body(x)
            t_pred = torch.sigmoid(self.t_pred(z))
            eps = self.epsilon(torch.ones_like(t_pred)[:, 0:1])
            return self.y0(z), self.y1(z), t_pred, eps

    model = env.init(Dragonnet())
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9, nesterov=True)

    def tarreg_loss(y_true, t_true, y0, y1, t_pred, eps, alpha=1.0, beta=1.0):
        t_pred = (t_pred + 0.01) / 1.02
        loss_t = torch.sum(F.binary_cross_entropy(t_pred, t_true))
        loss0 = torch.sum((1.0 - t_true) * torch.square(y_true - y0))
        loss1 = torch.sum(t_true * torch.square(y_true - y1))
        vanilla = loss0 + loss1 + alpha * loss_t
        y_pred = t_true * y1 + (1 - t_true) * y0
        h = t_true / t_pred - (1 - t_true) / (1 - t_pred)
        y_pert = y_pred + eps * h
        return vanilla + beta * torch.sum((y_true - y_pert) ** 2)

    def train_step(x, y, t):
        y0, y1, t_pred, eps = model(x)
        loss = tarreg_loss(y, t, y0, y1, t_pred, eps)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    x = env.randn(16, 5)
    t = (env.rand(16, 1) > 0.5).float()
    y = x[:, :1] + 2 * t + env.randn(16, 1, scale=0.1)
    for it in range(5):
        env.rec(f"it{it}", step(x, y, t))
    with torch.no_grad():
        y0, y1, _, eps = model(x)
        env.rec("ate", (y1 - y0).mean())
        env.rec("eps", eps[0])


def fedavg(torch, env, n_clients=3):
    """(Each client's fresh optimiser makes its state at its first step, which a compiled
    call cannot replay: those calls run eagerly, and count no trace past the first.)"""
    nn, F = torch.nn, torch.nn.functional
    global_model = env.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)))
    local_epochs = 2
    data = [(env.randn(6, 4), env.randint(0, 3, (6,))) for _ in range(n_clients)]

    def local_step(model, opt, x, y):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    local_step = env.step(local_step)
    for rnd in range(2):
        states, sizes = [], []
        for c, (x, y) in enumerate(data):
            local = copy.deepcopy(global_model)
            opt = torch.optim.SGD(local.parameters(), lr=0.1, momentum=0.5)
            for e in range(local_epochs):
                env.rec(f"round{rnd} client{c} epoch{e}", local_step(local, opt, x, y))
            states.append(local.state_dict())
            sizes.append(len(x))
        total = sum(sizes)
        new_state = {k: torch.stack([s[k] * (n / total) for s, n in zip(states, sizes)]).sum(0)
                     for k in states[0]}
        global_model.load_state_dict(new_state)
        env.rec(f"global{rnd}", global_model.state_dict())
    if env.compiled:
        assert local_step.n_traces <= 2, local_step.n_traces


def schedule_free_sgd(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class SGDScheduleFree(torch.optim.Optimizer):
        def __init__(self, params, lr=1.0, momentum=0.9, warmup_steps=0, weight_decay=0.0):
            defaults = dict(lr=lr, momentum=momentum, weight_decay=weight_decay, k=0,
                            warmup_steps=warmup_steps, train_mode=True, weight_sum=0.0,
                            lr_max=-1.0)
            super().__init__(params, defaults)

        @torch.no_grad()
        def eval(self):
            for group in self.param_groups:
                if group["train_mode"]:
                    for p in group["params"]:
                        state = self.state[p]
                        if "z" in state:
                            p.lerp_(end=state["z"], weight=1 - 1 / group["momentum"])
                    group["train_mode"] = False

        @torch.no_grad()
        def train(self):
            for group in self.param_groups:
                if not group["train_mode"]:
                    for p in group["params"]:
                        state = self.state[p]
                        if "z" in state:
                            p.lerp_(end=state["z"], weight=1 - group["momentum"])
                    group["train_mode"] = True

        @torch.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                momentum, lr, k = group["momentum"], group["lr"], group["k"]
                sched = (k + 1) / group["warmup_steps"] if k < group["warmup_steps"] else 1.0
                lr = lr * sched
                lr_max = group["lr_max"] = max(lr, group["lr_max"])
                weight = lr_max ** 2
                weight_sum = group["weight_sum"] = group["weight_sum"] + weight
                ckp1 = weight / weight_sum if weight_sum != 0 else 0
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if "z" not in state:
                        state["z"] = torch.clone(p, memory_format=torch.preserve_format)
                    z = state["z"]
                    grad = p.grad.add(p, alpha=group["weight_decay"])
                    p.lerp_(end=z, weight=ckp1)
                    p.add_(grad, alpha=lr * (momentum * (1 - ckp1) - 1))
                    z.sub_(grad, alpha=lr)
                group["k"] = k + 1

    model = env.init(nn.Sequential(nn.Linear(5, 10), nn.Tanh(), nn.Linear(10, 1)))
    opt = SGDScheduleFree(model.parameters(), lr=0.05, warmup_steps=3, weight_decay=1e-3)

    def train_step(x, y):
        model.train()
        opt.train()
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    def evaluate(x, y):
        model.eval()
        opt.eval()
        with torch.no_grad():
            return F.mse_loss(model(x), y)

    step, ev = env.step(train_step), env.step(evaluate)
    x, y = env.randn(12, 5), env.randn(12, 1)
    for it in range(6):
        env.rec(f"train{it}", step(x, y))
        if it % 2 == 1:
            env.rec(f"eval{it}", ev(x, y))
    env.rec("group", {k: v for k, v in opt.param_groups[0].items() if k != "params"})
    env.rec("params", list(model.parameters()))


def rotate_kge(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_ent, n_rel, d, gamma, adv_t, neg = 10, 3, 4, 6.0, 1.0, 5
    eps = 2.0
    emb_range = (gamma + eps) / d

    class RotatE(nn.Module):
        def __init__(self):
            super().__init__()
            self.entity = nn.Parameter(torch.zeros(n_ent, 2 * d))
            self.relation = nn.Parameter(torch.zeros(n_rel, d))
            nn.init.uniform_(self.entity, -emb_range, emb_range)
            nn.init.uniform_(self.relation, -emb_range, emb_range)

        def score(self, head, rel, tail):
            re_head, im_head = torch.chunk(head, 2, dim=-1)
            re_tail, im_tail = torch.chunk(tail, 2, dim=-1)
            phase = rel / (emb_range / math.pi)
            re_rel, im_rel = torch.cos(phase), torch.sin(phase)
            re_score = re_head * re_rel - im_head * im_rel - re_tail
            im_score = re_head * im_rel + im_head * re_rel - im_tail
            score = torch.stack([re_score, im_score], dim=0).norm(dim=0)
            return gamma - score.sum(dim=-1)

        def forward(self, pos, neg_tails):
            h = self.entity[pos[:, 0]].unsqueeze(1)
            r = self.relation[pos[:, 1]].unsqueeze(1)
            t = self.entity[pos[:, 2]].unsqueeze(1)
            pos_score = self.score(h, r, t).squeeze(1)
            neg_score = self.score(h, r, torch.index_select(self.entity, 0, neg_tails.view(-1))
                                   .view(neg_tails.size(0), neg_tails.size(1), -1))
            return pos_score, neg_score

    model = env.init(RotatE())
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)

    def train_step(pos, neg_tails):
        pos_score, neg_score = model(pos, neg_tails)
        neg_score = (F.softmax(neg_score * adv_t, dim=1).detach()
                     * F.logsigmoid(-neg_score)).sum(dim=1)
        pos_score = F.logsigmoid(pos_score)
        loss = (-pos_score.mean() - neg_score.mean()) / 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    pos = torch.stack([env.randint(0, n_ent, (6,)), env.randint(0, n_rel, (6,)),
                       env.randint(0, n_ent, (6,))], 1)
    for it in range(5):
        env.rec(f"it{it}", step(pos, env.randint(0, n_ent, (6, neg))))
    with torch.no_grad():   # (ranking every tail for the first triple)
        h, r = model.entity[pos[:1, 0]], model.relation[pos[:1, 1]]
        env.rec("ranks", model.score(h.unsqueeze(1), r.unsqueeze(1), model.entity.unsqueeze(0))
                .argsort(dim=1, descending=True))
