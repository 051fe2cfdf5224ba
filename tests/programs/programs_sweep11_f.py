"""Tutorial programs on probabilistic and physics-informed models (see
tutorial_harness.py): Stein variational gradient descent with an RBF kernel and the median
heuristic, Hamiltonian Monte Carlo with leapfrog steps by autograd.grad, a Lagrangian neural
network whose accelerations come from torch.func.hessian / jacrev under vmap, Bayesian
linear layers with the local reparameterisation trick, a TransformedDistribution
(SigmoidTransform o AffineTransform) fitted by maximum likelihood, and a mixture density
network written with MixtureSameFamily."""
import math


def svgd_logreg(torch, env):
    """SVGD (Liu & Wang) on Bayesian logistic regression: particles [P, D]; the score by
    torch.autograd.grad(log_prob.sum(), theta) of a leaf clone; the RBF kernel from
    torch.cdist(...) ** 2 with bandwidth median / log(P) (torch.median of the flattened
    distances, under no_grad), its gradient term by sum over particles; a manual Adagrad-like
    update under no_grad."""
    torch.manual_seed(0)
    P, D, N = 6, 3, 30
    X = torch.randn(N, D)
    y = (X @ torch.tensor([1.5, -2.0, 0.5]) > 0).float()
    theta = torch.randn(P, D)
    hist_g = torch.zeros(P, D)

    def log_prob(th):
        logits = X @ th.T
        ll = -torch.nn.functional.binary_cross_entropy_with_logits(
            logits, y.unsqueeze(1).expand(N, P), reduction="none").sum(0)
        return ll - 0.5 * (th ** 2).sum(1)

    def svgd_step(theta, hist_g):
        th = theta.detach().clone().requires_grad_(True)
        (score,) = torch.autograd.grad(log_prob(th).sum(), th)
        with torch.no_grad():
            d2 = torch.cdist(theta, theta) ** 2
            h = torch.median(d2.flatten()) / math.log(P)
            k = torch.exp(-d2 / h)
            grad_k = -(k.unsqueeze(2) * (theta.unsqueeze(1) - theta.unsqueeze(0))).sum(0) \
                * 2 / h
            phi = (k @ score + grad_k) / P
            hist_g.mul_(0.9).add_(phi ** 2, alpha=0.1)
            theta.add_(0.1 * phi / (hist_g.sqrt() + 1e-6))
        return log_prob(theta).mean()

    step = env.step(svgd_step)
    env.rec("hist", [step(theta, hist_g).item() for _ in range(8)])
    env.rec("theta", theta)


def hmc_leapfrog(torch, env):
    """Hamiltonian Monte Carlo on a correlated Gaussian: the potential's gradient by
    torch.autograd.grad inside each leapfrog step (L = 5), momenta and the
    Metropolis-Hastings uniforms given, the acceptance decided with torch.where (no Python
    branch) so the compiled transition is one graph; the chain's mean at the end."""
    torch.manual_seed(0)
    prec = torch.tensor([[2.0, -1.2], [-1.2, 1.5]])

    def potential(q):
        return 0.5 * ((q @ prec) * q).sum(-1)

    def grad_u(q):
        q = q.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(potential(q).sum(), q)
        return g

    def transition(q, p, u, eps):
        q0, h0 = q, potential(q) + 0.5 * (p ** 2).sum(-1)
        p = p - 0.5 * eps * grad_u(q)
        for i in range(5):
            q = q + eps * p
            if i < 4:
                p = p - eps * grad_u(q)
        p = p - 0.5 * eps * grad_u(q)
        h1 = potential(q) + 0.5 * (p ** 2).sum(-1)
        accept = torch.log(u) < (h0 - h1)
        return torch.where(accept.unsqueeze(-1), q, q0), accept.float().mean()

    step = env.step(transition)
    q = torch.zeros(4, 2)
    moms, us = env.randn(10, 4, 2), env.rand(10, 4)
    samples, rates = [], []
    for t in range(10):
        q, rate = step(q, moms[t], us[t], 0.3)
        samples.append(q)
        rates.append(rate.item())
    env.rec("rates", rates)
    env.rec("mean", torch.stack(samples).mean((0, 1)))
    env.rec("q", q)


def lagrangian_nn(torch, env):
    """A Lagrangian neural network (Cranmer et al.) for a 1-D oscillator: L(q, qdot) an
    MLP; per sample, the Hessian w.r.t. qdot and the mixed term via torch.func.hessian and
    torch.func.jacrev of the gradient, vmapped over the batch; qddot = (dL/dq -
    d2L/dqdot dq qdot) / d2L/dqdot2, fitted to the true accelerations with Adam."""
    nn, F = torch.nn, torch.nn.functional
    tf = torch.func
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(2, 16), nn.Softplus(), nn.Linear(16, 1))
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    state = torch.randn(12, 2)
    target = -state[:, :1]          # (qddot = -q)

    def lag(s):
        return net(s).squeeze(-1)

    def qddot(s):
        g = tf.grad(lag)(s)
        h = tf.hessian(lag)(s)
        return (g[0] - h[1, 0] * s[1]) / (h[1, 1] + 1e-3)

    def train_step(state, target):
        opt.zero_grad()
        pred = tf.vmap(qddot)(state).unsqueeze(1)
        loss = F.mse_loss(pred, target)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(state, target).item() for _ in range(5)])
    env.rec("params", list(net.parameters()))


def local_reparam_bayes(torch, env):
    """Bayes by backprop with the local reparameterisation trick (Kingma et al.): weights'
    means and rho (sigma = softplus(rho)), activations sampled as mu_a + sqrt(var_a) * eps
    with mu_a = x @ mu and var_a = x^2 @ sigma^2, eps from torch.randn_like (the library's
    stream), the closed-form KL to N(0, 1) scaled by 1 / N; MC predictive mean at the end."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class BayesLinear(nn.Module):
        def __init__(self, fin, fout):
            super().__init__()
            self.mu = nn.Parameter(torch.randn(fin, fout) * 0.1)
            self.rho = nn.Parameter(torch.full((fin, fout), -4.0))
            self.bias = nn.Parameter(torch.zeros(fout))

        def forward(self, x):
            sigma = F.softplus(self.rho)
            mu_a = x @ self.mu + self.bias
            var_a = (x ** 2) @ sigma ** 2
            return mu_a + var_a.sqrt() * torch.randn_like(mu_a)

        def kl(self):
            sigma = F.softplus(self.rho)
            return (0.5 * (sigma ** 2 + self.mu ** 2 - 1) - torch.log(sigma)).sum()

    l1, l2 = BayesLinear(3, 12), BayesLinear(12, 1)
    params = list(l1.parameters()) + list(l2.parameters())
    opt = torch.optim.Adam(params, lr=1e-2)
    x = torch.randn(32, 3)
    y = torch.sin(x[:, :1] * 2) + 0.1 * x[:, 1:2]

    def train_step(x, y):
        opt.zero_grad()
        pred = l2(torch.relu(l1(x)))
        loss = F.mse_loss(pred, y, reduction="sum") + (l1.kl() + l2.kl()) / 32
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(6)])
    env.rec("params", params)
    with torch.no_grad():
        env.rec("predictive", torch.stack([l2(torch.relu(l1(x[:4]))) for _ in range(5)]).mean(0))


def transformed_distribution_mle(torch, env):
    """A logit-normal fitted by maximum likelihood: TransformedDistribution(Normal(loc,
    scale), [AffineTransform(shift, scale2), SigmoidTransform()]) built inside the step
    from nn.Parameters (scale via exp), -log_prob(data).mean() minimised; Independent(Normal,
    1) log_prob and rsample with a given base noise; entropy of a Normal."""
    nn = torch.nn
    D = torch.distributions
    torch.manual_seed(0)
    loc, log_scale = nn.Parameter(torch.zeros(2)), nn.Parameter(torch.zeros(2))
    shift = nn.Parameter(torch.tensor([0.1, -0.1]))
    opt = torch.optim.Adam([loc, log_scale, shift], lr=0.05)
    data = torch.sigmoid(torch.randn(40, 2) * torch.tensor([0.5, 1.5]) + torch.tensor([1.0, -0.5]))

    def train_step(data):
        opt.zero_grad()
        base = D.Normal(loc, log_scale.exp())
        dist = D.TransformedDistribution(base, [D.transforms.AffineTransform(shift, 1.0),
                                                D.transforms.SigmoidTransform()])
        nll = -dist.log_prob(data).mean()
        ind = D.Independent(D.Normal(loc, log_scale.exp()), 1)
        reg = -ind.log_prob(torch.zeros(2)) * 1e-3 + base.entropy().sum() * 1e-3
        loss = nll + reg
        loss.backward()
        opt.step()
        return nll, ind.batch_shape, ind.event_shape

    step = env.step(train_step)
    hist = []
    for _ in range(8):
        nll, bs, es = step(data)
        hist.append(nll.item())
    env.rec("hist", hist)
    env.rec("shapes", (tuple(bs), tuple(es)))
    env.rec("params", [loc, log_scale, shift])


def mdn_mixture_same_family(torch, env):
    """A mixture density network (Bishop) with torch.distributions: the net's outputs split
    into logits, means and log-stds; MixtureSameFamily(Categorical(logits=...),
    Normal(mu, sigma)) built in the step, the negative log likelihood of y minimised, the
    mixture's mean and variance properties and a component sample at the end."""
    nn = torch.nn
    D = torch.distributions
    torch.manual_seed(0)
    K = 3
    net = nn.Sequential(nn.Linear(1, 20), nn.Tanh(), nn.Linear(20, 3 * K))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    x = torch.linspace(-1, 1, 40).unsqueeze(1)
    y = torch.where(torch.arange(40) % 2 == 0, torch.sin(3 * x[:, 0]), -x[:, 0] ** 2)

    def mixture(x):
        logits, mu, log_sigma = net(x).chunk(3, dim=-1)
        return D.MixtureSameFamily(D.Categorical(logits=logits),
                                   D.Normal(mu, log_sigma.clamp(-5, 3).exp()))

    def train_step(x, y):
        opt.zero_grad()
        nll = -mixture(x).log_prob(y).mean()
        nll.backward()
        opt.step()
        return nll

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(8)])
    with torch.no_grad():
        m = mixture(x[:5])
        env.rec("mean var", (m.mean, m.variance))
        env.rec("sample", m.sample((2,)), cross=False)
    env.rec("params", list(net.parameters()))
