"""Batch 24 (s75, u1): tutorial programs with PyTorch, llgrad eagerly and llgrad compiling
the step (tutorial_harness.py): a Kipf GCN over a captured sparse COO adjacency
(torch.sparse.mm; compile guards the adjacency's entries, it used to run eagerly), exact
Gaussian-process regression (cdist RBF kernel, cholesky, cholesky_solve, solve_triangular,
softplus hyperparameters), a random-Fourier-feature kernel SVM (MultiMarginLoss with p=2 and
class weights, a squared hinge), MC dropout (eval mode with the Dropout modules back in train,
T stochastic passes, predictive variance and entropy), a world-models MDN-RNN (LSTM, a
Gaussian-mixture head, logsumexp of Normal.log_prob, RMSprop, a temperature sample) and a
Neural-LinUCB contextual bandit (Sherman-Morrison updates of A^-1, UCB arm choice)."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]     # (1-4 s a program: the slow set)

def gcn_sparse(torch, env):
    """Kipf & Welling GCN: a normalised sparse adjacency D^-1/2 (A+I) D^-1/2 as a COO tensor,
    torch.sparse.mm(adj, X W), two layers, node classification on a train mask."""
    nn, F = torch.nn, torch.nn.functional
    N, Fin, H, C = 12, 6, 8, 3
    src = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 2, 4, 6, 8]
    dst = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 5, 7, 9, 11, 3]
    rows = torch.tensor(src + dst + list(range(N)))
    cols = torch.tensor(dst + src + list(range(N)))
    vals = torch.ones(rows.numel())
    deg = torch.zeros(N).index_add_(0, rows, vals)
    dinv = deg.pow(-0.5)
    norm = dinv[rows] * vals * dinv[cols]
    adj = torch.sparse_coo_tensor(torch.stack([rows, cols]), norm, (N, N)).coalesce()
    env.rec("adj", (adj._nnz(), adj.to_dense()))

    class GraphConv(nn.Module):
        def __init__(self, i, o):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(i, o))
            self.bias = nn.Parameter(torch.zeros(o))
            nn.init.xavier_uniform_(self.weight)

        def forward(self, x, adj):
            support = x @ self.weight
            return torch.sparse.mm(adj, support) + self.bias

    class GCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.gc1, self.gc2 = GraphConv(Fin, H), GraphConv(H, C)

        def forward(self, x, adj):
            x = F.relu(self.gc1(x, adj))
            x = F.dropout(x, 0.5, self.training)
            return F.log_softmax(self.gc2(x, adj), dim=1)

    model = env.init(GCN())
    opt = torch.optim.Adam(model.parameters(), lr=0.02, weight_decay=5e-4)
    x = env.randn(N, Fin)
    y = env.randint(0, C, (N,))
    train_mask = torch.arange(N) < 8

    def train_step():
        model.train()
        opt.zero_grad()
        out = model(x, adj)
        loss = F.nll_loss(out[train_mask], y[train_mask])
        loss.backward()
        opt.step()
        return loss.detach()

    @torch.no_grad()
    def evaluate():
        model.eval()
        pred = model(x, adj).argmax(dim=1)
        return (pred[~train_mask] == y[~train_mask]).float().mean()

    step, ev = env.step(train_step), env.step(evaluate)
    for epoch in range(4):
        env.rec(f"loss {epoch}", step(), cross=False)      # (dropout: llgrad's stream)
        env.rec(f"acc {epoch}", ev(), cross=False)
    env.rec("eval out", model(x, adj).detach(), cross=False)


def gp_regression(torch, env):
    """Exact GP regression: an RBF kernel (cdist), softplus-positive hyperparameters, the
    negative log marginal likelihood via cholesky, Adam on the hyperparameters, then the
    predictive mean and variance with cholesky_solve."""
    nn, F = torch.nn, torch.nn.functional
    X = torch.linspace(0, 1, 15).unsqueeze(1)
    y = torch.sin(6 * X).squeeze(1) + env.randn(15, scale=0.1)
    Xs = torch.linspace(-0.1, 1.1, 7).unsqueeze(1)

    class GP(nn.Module):
        def __init__(self):
            super().__init__()
            self.raw_ls = nn.Parameter(torch.tensor(0.0))
            self.raw_os = nn.Parameter(torch.tensor(0.0))
            self.raw_noise = nn.Parameter(torch.tensor(-2.0))

        def kernel(self, a, b):
            ls, os_ = F.softplus(self.raw_ls), F.softplus(self.raw_os)
            d2 = torch.cdist(a / ls, b / ls).pow(2)
            return os_ * torch.exp(-0.5 * d2)

        def nll(self, X, y):
            n = X.shape[0]
            K = self.kernel(X, X) + (F.softplus(self.raw_noise) + 1e-4) * torch.eye(n)
            L = torch.linalg.cholesky(K)
            alpha = torch.cholesky_solve(y.unsqueeze(1), L)
            fit = 0.5 * (y.unsqueeze(1) * alpha).sum()
            logdet = torch.log(torch.diagonal(L)).sum()
            return (fit + logdet + 0.5 * n * math.log(2 * math.pi)) / n

        def predict(self, X, y, Xs):
            K = self.kernel(X, X) + (F.softplus(self.raw_noise) + 1e-4) * torch.eye(X.shape[0])
            L = torch.linalg.cholesky(K)
            Ks = self.kernel(X, Xs)
            mean = Ks.t() @ torch.cholesky_solve(y.unsqueeze(1), L)
            v = torch.linalg.solve_triangular(L, Ks, upper=False)
            var = self.kernel(Xs, Xs).diagonal() - v.pow(2).sum(0)
            return mean.squeeze(1), var.clamp_min(1e-9)

    gp = GP()
    opt = torch.optim.Adam(gp.parameters(), lr=0.1)

    def train_step():
        opt.zero_grad()
        loss = gp.nll(X, y)
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):
        loss = step()
        env.rec(f"nll {it}", loss)
        env.rec(f"print {it}", f"Iter {it + 1}/5 - Loss: {loss.item():.3f}  lengthscale: "
                               f"{F.softplus(gp.raw_ls).item():.3f}  noise: "
                               f"{F.softplus(gp.raw_noise).item():.3f}")
    with torch.no_grad():
        mean, var = gp.predict(X, y, Xs)
        lower, upper = mean - 2 * var.sqrt(), mean + 2 * var.sqrt()
    env.rec("predictive", (mean, var, torch.stack([lower, upper])))
    env.rec("params", dict(gp.named_parameters()))


def rff_svm(torch, env):
    """A kernel SVM by random Fourier features: fixed random projection (a buffer), cos
    features, a linear layer trained with the multiclass hinge (nn.MultiMarginLoss) and a
    binary squared hinge, SGD with weight decay, accuracy printed."""
    nn, F = torch.nn, torch.nn.functional
    D, R, C = 4, 32, 3

    class RFF(nn.Module):
        def __init__(self, gamma=0.5):
            super().__init__()
            self.register_buffer("W", torch.zeros(D, R))
            self.register_buffer("b", torch.zeros(R))
            self.gamma = gamma

        def forward(self, x):
            return math.sqrt(2.0 / R) * torch.cos(math.sqrt(2 * self.gamma) * x @ self.W + self.b)

    feat = RFF()
    feat.W.copy_(env.randn(D, R))
    feat.b.copy_(env.rand(R) * 2 * math.pi)
    clf = env.init(nn.Linear(R, C))
    binary = env.init(nn.Linear(R, 1))
    crit = nn.MultiMarginLoss(margin=1.0)
    crit2 = nn.MultiMarginLoss(p=2, margin=0.5, weight=torch.tensor([1.0, 2.0, 0.5]))
    opt = torch.optim.SGD(list(clf.parameters()) + list(binary.parameters()), lr=0.5,
                          momentum=0.9, weight_decay=1e-3)
    x = env.randn(24, D)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    yb = torch.where(x[:, 2] > 0, 1.0, -1.0)

    def train_step(x, y, yb):
        phi = feat(x)
        scores = clf(phi)
        loss_mc = crit(scores, y) + 0.5 * crit2(scores, y)
        margin = yb * binary(phi).squeeze(1)
        loss_bin = torch.clamp(1 - margin, min=0).pow(2).mean()
        loss = loss_mc + loss_bin
        opt.zero_grad()
        loss.backward()
        opt.step()
        acc = (scores.argmax(1) == y).float().mean()
        sv = (margin < 1).sum()
        return loss_mc.detach(), loss_bin.detach(), acc, sv

    step = env.step(train_step)
    for epoch in range(5):
        lm, lb, acc, sv = step(x, y, yb)
        env.rec(f"epoch {epoch}", f"epoch {epoch}: hinge {lm.item():.4f} sq-hinge "
                                  f"{lb.item():.4f} acc {acc.item() * 100:.1f}% sv {sv.item()}")
        env.rec(f"losses {epoch}", torch.stack([lm, lb]))
    env.rec("clf", dict(clf.named_parameters()))
    env.rec("binary", dict(binary.named_parameters()))


def mc_dropout(torch, env):
    """MC dropout: train a regressor with dropout and BatchNorm, then predict with the model in
    eval mode but its Dropout modules switched back to train, T stochastic passes -> the
    predictive mean, the epistemic variance, and a classifier's predictive entropy."""
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(3, 16, bias=False), nn.BatchNorm1d(16), nn.ReLU(),
                                      nn.Dropout(0.2), nn.Linear(16, 16), nn.ReLU(),
                                      nn.Dropout(0.2))
            self.reg = nn.Linear(16, 1)
            self.cls = nn.Linear(16, 4)

        def forward(self, x):
            h = self.body(x)
            return self.reg(h).squeeze(-1), self.cls(h)

    model = env.init(Net())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = env.randn(20, 3)
    y = x.sum(1) + env.randn(20, scale=0.1)
    c = env.randint(0, 4, (20,))

    def train_step(x, y, c):
        model.train()
        r, logits = model(x)
        loss = F.mse_loss(r, y) + F.cross_entropy(logits, c)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    def enable_dropout(m):
        for mod in m.modules():
            if isinstance(mod, nn.Dropout):
                mod.train()

    @torch.no_grad()
    def mc_predict(x, T=8):
        model.eval()
        enable_dropout(model)
        rs, ps = [], []
        for _ in range(T):
            r, logits = model(x)
            rs.append(r)
            ps.append(F.softmax(logits, dim=-1))
        rs, ps = torch.stack(rs), torch.stack(ps)
        mean_p = ps.mean(0)
        entropy = -(mean_p * torch.log(mean_p + 1e-12)).sum(-1)
        return rs.mean(0), rs.var(0, unbiased=True), entropy

    step, pred = env.step(train_step), env.step(mc_predict)
    for t in range(4):
        env.rec(f"loss {t}", step(x, y, c), cross=False)
    xt = env.randn(5, 3)
    mean, var, ent = pred(xt)
    env.rec("predictive", (mean, var, ent), cross=False)
    env.rec("modes", [m.training for m in model.modules()])
    env.rec("running", dict(model.named_buffers()), cross=False)
    env.rec("deterministic", model.eval()(xt)[0].detach(), cross=False)


def mdn_rnn(torch, env):
    """World-models MDN-RNN: an LSTM over (z, action) predicts a mixture of K Gaussians for the
    next latent z; loss -logsumexp(log pi + Normal(mu, sigma).log_prob(z')) plus a done BCE;
    gradient clipping, then a temperature-scaled sample of the next z."""
    nn, F = torch.nn, torch.nn.functional
    Z, A, Hd, K, T, B = 4, 2, 16, 3, 6, 2
    D = torch.distributions

    class MDNRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(Z + A, Hd, batch_first=True)
            self.mdn = nn.Linear(Hd, K * (2 * Z + 1) + 1)

        def forward(self, z, a, hidden=None):
            out, hidden = self.rnn(torch.cat([z, a], dim=-1), hidden)
            p = self.mdn(out)
            stride = K * Z
            mu = p[..., :stride].view(*p.shape[:-1], K, Z)
            log_sigma = p[..., stride:2 * stride].view(*p.shape[:-1], K, Z)
            log_pi = F.log_softmax(p[..., 2 * stride:2 * stride + K], dim=-1)
            done = p[..., -1]
            return mu, log_sigma, log_pi, done, hidden

    def gmm_loss(z_next, mu, log_sigma, log_pi):
        z_next = z_next.unsqueeze(-2)
        normal = D.Normal(mu, log_sigma.exp())
        g_log_probs = normal.log_prob(z_next).sum(dim=-1)
        return -torch.logsumexp(log_pi + g_log_probs, dim=-1).mean() / Z

    model = env.init(MDNRNN())
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3, alpha=0.9)
    z = env.randn(B, T + 1, Z)
    a = env.randn(B, T, A)
    done = torch.zeros(B, T).index_fill_(1, torch.tensor([T - 1]), 1.0)

    def train_step(z, a, done):
        mu, log_sigma, log_pi, d, _ = model(z[:, :-1], a)
        gmm = gmm_loss(z[:, 1:], mu, log_sigma, log_pi)
        bce = F.binary_cross_entropy_with_logits(d, done)
        loss = gmm + bce
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.detach(), gmm.detach(), bce.detach()

    step = env.step(train_step)
    for it in range(4):
        loss, gmm, bce = step(z, a, done)
        env.rec(f"losses {it}", torch.stack([loss, gmm, bce]))
    with torch.no_grad():
        mu, log_sigma, log_pi, d, (h, c) = model(z[:, :1], a[:, :1])
        tau = 1.15
        probs = F.softmax(log_pi[:, -1] / tau, dim=-1)
        k = torch.multinomial(probs, 1).squeeze(1)
        idx = torch.arange(B)
        sample = mu[idx, -1, k] + log_sigma[idx, -1, k].exp() * math.sqrt(tau) * torch.randn(B, Z)
    env.rec("probs, h", (probs, h))
    env.rec("sample", sample, cross=False)
    env.rec("params", dict(model.named_parameters()))


def neural_linucb(torch, env):
    """Neural-LinUCB contextual bandit: a network embeds context-action pairs; the last layer's
    features drive a LinUCB score with A^-1 kept by Sherman-Morrison updates under no_grad;
    the chosen arm's reward trains the network; the regret is printed."""
    nn, F = torch.nn, torch.nn.functional
    arms, d, m, lam, nu = 4, 5, 8, 1.0, 0.5
    theta_true = env.randn(d)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(d, m)
            self.fc2 = nn.Linear(m, 1)

        def features(self, x):
            return torch.tanh(self.fc1(x))

        def forward(self, x):
            return self.fc2(self.features(x)).squeeze(-1)

    net = env.init(Net())
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    A_inv = torch.eye(m) / lam
    history_x, history_r = [], []

    def choose(ctx):
        with torch.no_grad():
            phi = net.features(ctx)
            mean = net(ctx)
            bonus = torch.sqrt(torch.einsum("ai,ij,aj->a", phi, A_inv, phi))
            ucb = mean + nu * bonus
            arm = torch.argmax(ucb)
        return arm, phi[arm], ucb

    def train_step(xs, rs):
        opt.zero_grad()
        loss = F.mse_loss(net(xs), rs)
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    regret = 0.0
    for t in range(5):
        ctx = env.randn(arms, d)
        rewards = ctx @ theta_true
        arm, phi, ucb = choose(ctx)
        with torch.no_grad():
            Av = A_inv @ phi
            A_inv -= torch.outer(Av, Av) / (1 + phi @ Av)
        regret += (rewards.max() - rewards[arm]).item()
        history_x.append(ctx[arm])
        history_r.append(rewards[arm])
        loss = step(torch.stack(history_x), torch.stack(history_r))
        env.rec(f"t {t}", f"round {t}: arm {arm.item()} ucb {ucb.max().item():.4f} "
                          f"loss {loss.item():.4f} regret {regret:.4f}")
        env.rec(f"ucb {t}", ucb)
    env.rec("A_inv", A_inv)
    env.rec("params", dict(net.named_parameters()))


PROGRAMS = {f.__name__: f for f in (gcn_sparse, gp_regression, rff_svm, mc_dropout, mdn_rnn,
                                    neural_linucb)}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
