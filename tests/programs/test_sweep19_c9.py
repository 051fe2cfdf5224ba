"""Sweep 19 (C), part 9: PixelCNN++'s discretised mixture of logistics loss (pixel-cnn-pp's
discretized_mix_logistic_loss: the mixture's means coupled across channels, the three cases
of the bin edges chosen with nested torch.where, log_sum_exp written with max and keepdim,
softplus and the log-prob of the centre for the cliff) on a tiny conv net, and a Neural
Additive Model (one small net per feature with ExU hidden units exp(w) * (x - b) clipped by
ReLU-n, outputs summed with a bias, feature dropout and an output penalty). Run with
PyTorch, with llgrad eagerly and with llgrad.compile (tutorial_harness.py)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def dmol_loss(torch, env):
    nn, F = torch.nn, torch.nn.functional

    def log_sum_exp(x):
        axis = len(x.size()) - 1
        m, _ = torch.max(x, dim=axis)
        m2, _ = torch.max(x, dim=axis, keepdim=True)
        return m + torch.log(torch.sum(torch.exp(x - m2), dim=axis))

    def log_prob_from_logits(x):
        axis = len(x.size()) - 1
        m, _ = torch.max(x, dim=axis, keepdim=True)
        return x - m - torch.log(torch.sum(torch.exp(x - m), dim=axis, keepdim=True))

    def discretized_mix_logistic_loss(x, l):
        x = x.permute(0, 2, 3, 1)
        l = l.permute(0, 2, 3, 1)
        xs = [int(y) for y in x.size()]
        ls = [int(y) for y in l.size()]
        nr_mix = int(ls[-1] / 10)
        logit_probs = l[:, :, :, :nr_mix]
        l = l[:, :, :, nr_mix:].contiguous().view(xs + [nr_mix * 3])
        means = l[:, :, :, :, :nr_mix]
        log_scales = torch.clamp(l[:, :, :, :, nr_mix:2 * nr_mix], min=-7.)
        coeffs = torch.tanh(l[:, :, :, :, 2 * nr_mix:3 * nr_mix])
        x = x.contiguous()
        x = x.unsqueeze(-1) + torch.zeros(xs + [nr_mix], requires_grad=False)
        m2 = (means[:, :, :, 1, :] + coeffs[:, :, :, 0, :] * x[:, :, :, 0, :]).view(xs[0], xs[1], xs[2], 1, nr_mix)
        m3 = (means[:, :, :, 2, :] + coeffs[:, :, :, 1, :] * x[:, :, :, 0, :] +
              coeffs[:, :, :, 2, :] * x[:, :, :, 1, :]).view(xs[0], xs[1], xs[2], 1, nr_mix)
        means = torch.cat((means[:, :, :, 0, :].unsqueeze(3), m2, m3), dim=3)
        centered_x = x - means
        inv_stdv = torch.exp(-log_scales)
        plus_in = inv_stdv * (centered_x + 1. / 255.)
        cdf_plus = torch.sigmoid(plus_in)
        min_in = inv_stdv * (centered_x - 1. / 255.)
        cdf_min = torch.sigmoid(min_in)
        log_cdf_plus = plus_in - F.softplus(plus_in)
        log_one_minus_cdf_min = -F.softplus(min_in)
        cdf_delta = cdf_plus - cdf_min
        mid_in = inv_stdv * centered_x
        log_pdf_mid = mid_in - log_scales - 2. * F.softplus(mid_in)
        inner_inner_cond = (cdf_delta > 1e-5).float()
        inner_inner_out = inner_inner_cond * torch.log(torch.clamp(cdf_delta, min=1e-12)) + (
            1. - inner_inner_cond) * (log_pdf_mid - np.log(127.5))
        inner_cond = (x > 0.999).float()
        inner_out = inner_cond * log_one_minus_cdf_min + (1. - inner_cond) * inner_inner_out
        cond = (x < -0.999).float()
        log_probs = cond * log_cdf_plus + (1. - cond) * inner_out
        log_probs = torch.sum(log_probs, dim=3) + log_prob_from_logits(logit_probs)
        return -torch.sum(log_sum_exp(log_probs))

    nr_mix = 3
    net = env.init(nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ELU(),
                                 nn.Conv2d(8, 10 * nr_mix, 1)))
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.999995)
    levels = torch.linspace(-1, 1, 256)
    x = levels[env.randint(0, 256, (2, 3, 4, 4))]
    x[0, :, 0, 0] = 1.0
    x[1, :, 1, 1] = -1.0

    def train_step(x):
        loss = discretized_mix_logistic_loss(x, net(x))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        return loss / (np.log(2.) * x.numel())      # bits per dimension
    train_step = env.step(train_step)
    for i in range(5):
        env.rec(f"bpd{i}", train_step(x))
    env.rec("params", list(net.parameters()))


def neural_additive_model(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class ExU(nn.Module):
        def __init__(self, in_features, out_features):
            super().__init__()
            self.weights = nn.Parameter(torch.Tensor(in_features, out_features))
            self.bias = nn.Parameter(torch.Tensor(in_features))
            torch.nn.init.trunc_normal_(self.weights, mean=4.0, std=0.5)
            torch.nn.init.trunc_normal_(self.bias, std=0.5)

        def forward(self, inputs, n=1):
            output = (inputs - self.bias).matmul(torch.exp(self.weights))
            output = F.relu(output)
            return torch.clamp(output, 0, n)

    class FeatureNN(nn.Module):
        def __init__(self, num_units, hidden_sizes=(8,), dropout=0.1):
            super().__init__()
            self.first = ExU(1, num_units)
            layers = []
            for in_f, out_f in zip([num_units] + list(hidden_sizes), hidden_sizes):
                layers += [nn.Linear(in_f, out_f), nn.ReLU(), nn.Dropout(dropout)]
            layers.append(nn.Linear(hidden_sizes[-1], 1, bias=False))
            self.model = nn.Sequential(*layers)

        def forward(self, inputs):
            return self.model(self.first(inputs.unsqueeze(1)))

    class NAM(nn.Module):
        def __init__(self, num_inputs, num_units=6):
            super().__init__()
            self.feature_nns = nn.ModuleList([FeatureNN(num_units) for _ in range(num_inputs)])
            self.dropout = nn.Dropout(p=0.1)
            self.bias = nn.Parameter(torch.zeros(1))

        def forward(self, inputs):
            individual_outputs = [fnn(inputs[:, i]) for i, fnn in enumerate(self.feature_nns)]
            conc_out = torch.cat(individual_outputs, dim=-1)
            dropout_out = self.dropout(conc_out)
            out = torch.sum(dropout_out, dim=-1)
            return out + self.bias, dropout_out

    model = env.init(NAM(4))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-5)
    X = env.rand(32, 4) * 2 - 1
    y = (X[:, 0] ** 2 + torch.sin(3 * X[:, 1]) - X[:, 2] > 0.3).float()

    def penalized_loss(logits, targets, fnn_out, output_regularization=1e-3, l2=1e-4):
        loss = F.binary_cross_entropy_with_logits(logits.view(-1), targets.view(-1))
        loss = loss + output_regularization * (fnn_out ** 2).sum() / fnn_out.shape[1]
        num_networks = len(model.feature_nns)
        l2_losses = [(p ** 2).sum() for p in model.parameters()]
        return loss + l2 * sum(l2_losses) / num_networks

    def train_step(X, y):
        model.eval()        # (the dropouts are the library's streams: compared off)
        logits, fnns_out = model(X)
        loss = penalized_loss(logits, y, fnns_out)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, ((logits > 0).float() == y).float().mean()
    train_step = env.step(train_step)
    for i in range(6):
        env.rec(f"step{i}", train_step(X, y))
    model.train()
    torch.manual_seed(3)
    logits, _ = model(X)
    env.rec("train mode", logits, cross=False)
    with torch.no_grad():
        model.eval()
        grid = torch.linspace(-1, 1, 9)
        env.rec("shape fn 0", model.feature_nns[0](grid))
    env.rec("state", model.state_dict())


def test_dmol_loss():
    # (exp(-log_scales) up to e^7 over sums of 100 terms: float32 gradients agree with
    # torch's to ~1e-5 of their scale, the same in float64 to 1e-13; Adam divides that out)
    run_tutorial(dmol_loss, rtol=1e-4)


def test_neural_additive_model():
    run_tutorial(neural_additive_model)
