"""Tutorial programs on optimisation recipes (see tutorial_harness.py): PCGrad gradient
surgery with torch.autograd.grad per task and hand-assigned .grad, a Lookahead optimiser
wrapping Adam, a max-norm constraint with torch.renorm plus an orthogonality penalty,
hypergradient descent adapting its own learning rate, annealed gradient noise, and virtual
adversarial training by power iteration."""


def pcgrad_multitask(torch, env):
    """PCGrad (Yu et al.): a shared trunk with two heads; each task's gradient w.r.t. the
    shared parameters from torch.autograd.grad(retain_graph=True), flattened with
    torch.cat([g.flatten() ...]), projected off the other task's when their dot product is
    negative (torch.where on the dot, no Python branch), summed and written back with
    p.grad = chunk.view_as(p); the heads get their own loss's gradients by backward."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Linear(5, 12), nn.ReLU())
    head_a, head_b = nn.Linear(12, 1), nn.Linear(12, 3)
    shared = list(trunk.parameters())
    params = shared + list(head_a.parameters()) + list(head_b.parameters())
    opt = torch.optim.Adam(params, lr=5e-3)
    x = torch.randn(20, 5)
    ya, yb = x[:, :1] * 2 - x[:, 1:2], (x[:, 2] > 0).long() + (x[:, 3] > 0).long()

    def train_step(x, ya, yb):
        opt.zero_grad()
        h = trunk(x)
        la, lb = F.mse_loss(head_a(h), ya), F.cross_entropy(head_b(h), yb)
        ga = torch.cat([g.flatten() for g in torch.autograd.grad(la, shared,
                                                                  retain_graph=True)])
        gb = torch.cat([g.flatten() for g in torch.autograd.grad(lb, shared,
                                                                  retain_graph=True)])
        dot = ga @ gb
        pa = torch.where(dot < 0, ga - dot / gb.pow(2).sum() * gb, ga)
        pb = torch.where(dot < 0, gb - dot / ga.pow(2).sum() * ga, gb)
        (la + lb).backward(inputs=list(head_a.parameters()) + list(head_b.parameters()))
        offset = 0
        for p in shared:
            n = p.numel()
            p.grad = (pa[offset:offset + n] + pb[offset:offset + n]).view_as(p)
            offset += n
        opt.step()
        return la.detach(), lb.detach(), dot.detach()

    step = env.step(train_step)
    hist = []
    for _ in range(6):
        la, lb, dot = step(x, ya, yb)
        hist.append((la.item(), lb.item(), dot.item()))
    env.rec("hist", hist)
    env.rec("params", params)


def lookahead_optimizer(torch, env):
    """Lookahead (Zhang et al.) as the popular wrapper class: slow weights cloned in the
    constructor, the inner Adam's param_groups exposed, every k-th step
    slow.add_(p - slow, alpha=alpha) then p.copy_(slow) under no_grad; a counter kept in
    the wrapper's state (a Python int) decides when."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Lookahead:
        def __init__(self, base, k=3, alpha=0.5):
            self.base, self.k, self.alpha, self.counter = base, k, alpha, 0
            self.param_groups = base.param_groups
            self.slow = [[p.detach().clone() for p in g["params"]] for g in self.param_groups]

        def zero_grad(self, set_to_none=True):
            self.base.zero_grad(set_to_none=set_to_none)

        @torch.no_grad()
        def step(self):
            self.base.step()
            self.counter += 1
            if self.counter % self.k == 0:
                for group, slows in zip(self.param_groups, self.slow):
                    for p, slow in zip(group["params"], slows):
                        slow.add_(p - slow, alpha=self.alpha)
                        p.copy_(slow)

    model = nn.Sequential(nn.Linear(4, 10), nn.Tanh(), nn.Linear(10, 1))
    opt = Lookahead(torch.optim.Adam(model.parameters(), lr=1e-2))
    x = torch.randn(16, 4)
    y = x.sum(1, keepdim=True).sin()

    def train_step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(7)])
    env.rec("counter", opt.counter)
    env.rec("slow", opt.slow[0])
    env.rec("params", list(model.parameters()))


def maxnorm_orthogonal(torch, env):
    """Two weight constraints from the dropout paper and BigGAN: after each step the first
    layer's rows are projected with p.copy_(torch.renorm(p, 2, 0, maxnorm)) under no_grad,
    and the loss has an orthogonality penalty ||W W^T * (1 - I)||_F^2 on the second layer
    (torch.eye, torch.linalg.matrix_norm)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    l1, l2, l3 = nn.Linear(6, 10), nn.Linear(10, 10), nn.Linear(10, 2)
    params = [p for m in (l1, l2, l3) for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=0.5, momentum=0.5)
    x, y = torch.randn(24, 6) * 3, torch.randint(0, 2, (24,))

    def train_step(x, y):
        opt.zero_grad()
        logits = l3(F.relu(l2(F.relu(l1(x)))))
        w = l2.weight
        ortho = torch.linalg.matrix_norm(w @ w.T * (1 - torch.eye(10))) ** 2
        loss = F.cross_entropy(logits, y) + 1e-2 * ortho
        loss.backward()
        opt.step()
        with torch.no_grad():
            l1.weight.copy_(torch.renorm(l1.weight, 2, 0, 0.8))
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(5)])
    env.rec("row norms", l1.weight.norm(dim=1))
    env.rec("params", params)


def hypergradient_sgd(torch, env):
    """Hypergradient descent (Baydin et al.) written by hand: the learning rate is a
    0-dim tensor updated by lr += beta * (g_t . g_{t-1}) each step, the previous flattened
    gradient kept in a list the step reads and replaces, parameters updated with
    p.sub_(lr * p.grad) under torch.no_grad."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    params = list(model.parameters())
    lr = torch.tensor(0.01)
    prev = [torch.zeros(sum(p.numel() for p in params))]
    x = torch.randn(20, 3)
    y = x[:, :1] ** 2 - x[:, 1:2]

    def train_step(x, y):
        for p in params:
            p.grad = None
        loss = F.mse_loss(model(x), y)
        loss.backward()
        with torch.no_grad():
            g = torch.cat([p.grad.reshape(-1) for p in params])
            lr.add_(1e-3 * (g @ prev[0]))
            for p in params:
                p.sub_(lr * p.grad)
        prev[0] = g
        return loss

    step = env.step(train_step)
    hist = []
    for _ in range(8):
        hist.append((step(x, y).item(), lr.item()))
    env.rec("hist", hist)
    env.rec("params", params)


def annealed_gradient_noise(torch, env):
    """Neelakantan et al.'s gradient noise: after backward, each p.grad.add_(
    torch.randn_like(p.grad) * sigma) with sigma = sqrt(eta / (1 + t) ** 0.55) where t is
    the step number passed to the step; then clip_grad_value_ and SGD. The noise comes
    from the library's generator (the same stream in torch and llgrad)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))

    def train_step(x, y, t):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        sigma = (0.01 / (1 + t) ** 0.55) ** 0.5
        for p in model.parameters():
            p.grad.add_(torch.randn_like(p.grad) * sigma)
        torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y, t).item() for t in range(6)])
    env.rec("params", list(model.parameters()))
    env.rec("rng after", torch.rand(3))


def virtual_adversarial(torch, env):
    """Virtual adversarial training (Miyato et al.): a random direction d (given), one
    power iteration: d = xi * normalize(d) (xi = 10 as the popular port has it) made a leaf
    with requires_grad_(), the KL between p(y|x) (detached) and p(y|x + d),
    torch.autograd.grad w.r.t. d, r_adv = eps * normalize(grad); the LDS term added to a
    supervised loss on the labelled half."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    x = torch.randn(16, 4)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    ds = env.randn(6, 16, 4)

    def l2_normalize(d):
        return d / (d.flatten(1).norm(dim=1).view(-1, 1) + 1e-8)

    def train_step(x, y, d):
        opt.zero_grad()
        with torch.no_grad():
            p = F.softmax(model(x), dim=1)
        d = (10.0 * l2_normalize(d)).requires_grad_()
        adv = F.kl_div(F.log_softmax(model(x + d), dim=1), p, reduction="batchmean")
        (grad,) = torch.autograd.grad(adv, d)
        r_adv = 0.5 * l2_normalize(grad)
        lds = F.kl_div(F.log_softmax(model(x + r_adv), dim=1), p, reduction="batchmean")
        sup = F.cross_entropy(model(x[:8]), y[:8])
        loss = sup + lds
        loss.backward()
        opt.step()
        return sup.detach(), lds.detach()

    step = env.step(train_step)
    hist = []
    for i in range(6):
        sup, lds = step(x, y, ds[i])
        hist.append((sup.item(), lds.item()))
    env.rec("hist", hist)
    env.rec("params", list(model.parameters()))
