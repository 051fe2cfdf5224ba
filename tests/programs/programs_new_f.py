"""Programs of common kinds: a capsule network (squash, dynamic routing by agreement,
margin loss, a masked reconstruction decoder); a temporal convolutional network (causal
dilated Conv1d with weight_norm, chomping) on the adding problem; exact Gaussian-process
regression (Cholesky, marginal likelihood, LBFGS over a compiled closure); prototypical
networks (few-shot episodes, squared Euclidean distances to class prototypes); Bayes by
Backprop (reparameterised weights, KL to the prior). Programs `f(torch, env)`, see
tutorial_harness.py."""
import math


def capsule_net(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    NUM_CLASSES, ROUTING_ITERATIONS = 3, 3

    def squash(tensor, dim=-1):
        squared_norm = (tensor ** 2).sum(dim=dim, keepdim=True)
        scale = squared_norm / (1 + squared_norm)
        return scale * tensor / torch.sqrt(squared_norm + 1e-8)

    class PrimaryCaps(nn.Module):
        def __init__(self, in_channels=8, num_capsules=4, capsule_dim=4):
            super().__init__()
            self.capsule_dim = capsule_dim
            self.conv = nn.Conv2d(in_channels, num_capsules * capsule_dim, kernel_size=3,
                                  stride=2)

        def forward(self, x):
            out = self.conv(x)                                    # (B, caps*dim, H, W)
            out = out.view(x.size(0), -1, self.capsule_dim, out.size(2), out.size(3))
            out = out.permute(0, 1, 3, 4, 2).contiguous().view(x.size(0), -1, self.capsule_dim)
            return squash(out)

    class DigitCaps(nn.Module):
        def __init__(self, num_routes, in_dim=4, num_capsules=NUM_CLASSES, out_dim=6):
            super().__init__()
            self.num_routes = num_routes
            self.W = nn.Parameter(0.1 * torch.randn(1, num_routes, num_capsules, out_dim, in_dim))

        def forward(self, x):
            batch_size = x.size(0)
            x = x[:, :, None, :, None]                            # (B, R, 1, in, 1)
            u_hat = torch.matmul(self.W, x).squeeze(-1)           # (B, R, C, out)
            b_ij = torch.zeros(batch_size, self.num_routes, NUM_CLASSES, 1)
            for iteration in range(ROUTING_ITERATIONS):
                c_ij = F.softmax(b_ij, dim=2)
                s_j = (c_ij * u_hat).sum(dim=1, keepdim=True)     # (B, 1, C, out)
                v_j = squash(s_j)
                if iteration < ROUTING_ITERATIONS - 1:
                    a_ij = (u_hat * v_j).sum(dim=-1, keepdim=True)
                    b_ij = b_ij + a_ij
            return v_j.squeeze(1)                                 # (B, C, out)

    class CapsNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 8, kernel_size=3)
            self.primary = PrimaryCaps()
            self.digits = DigitCaps(num_routes=4 * 4 * 4)
            self.decoder = nn.Sequential(nn.Linear(6 * NUM_CLASSES, 32), nn.ReLU(inplace=True),
                                         nn.Linear(32, 12 * 12), nn.Sigmoid())

        def forward(self, x, y=None):
            x = self.primary(F.relu(self.conv1(x)))
            v = self.digits(x)
            lengths = v.norm(dim=-1)                              # (B, C)
            if y is None:
                y = F.one_hot(lengths.argmax(dim=1), NUM_CLASSES)
            masked = (v * y[:, :, None].float()).view(x.size(0), -1)
            return lengths, self.decoder(masked)

    def margin_loss(lengths, labels, m_plus=0.9, m_minus=0.1, lam=0.5):
        t = F.one_hot(labels, NUM_CLASSES).float()
        left = F.relu(m_plus - lengths) ** 2
        right = F.relu(lengths - m_minus) ** 2
        return (t * left + lam * (1.0 - t) * right).sum(dim=1).mean()

    model = env.init(CapsNet())
    optimizer = optim.Adam(model.parameters(), lr=2e-3)
    images = env.rand(12, 1, 12, 12)
    labels = env.randint(0, NUM_CLASSES, (12,))

    def train_step(images, labels):
        optimizer.zero_grad()
        lengths, reconstruction = model(images, F.one_hot(labels, NUM_CLASSES))
        loss = margin_loss(lengths, labels) + 0.0005 * F.mse_loss(
            reconstruction, images.view(images.size(0), -1), reduction="sum")
        loss.backward()
        optimizer.step()
        return loss.item(), (lengths.argmax(1) == labels).sum().item()

    train_step = env.step(train_step)
    for epoch in range(3):
        env.rec(f"step {epoch}", train_step(images[:6], labels[:6]))
        env.rec(f"step {epoch} b", train_step(images[6:], labels[6:]))
    with torch.no_grad():
        lengths, reconstruction = model(images)
    env.rec("eval", (lengths, reconstruction[:2]))


def tcn(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    weight_norm = nn.utils.weight_norm

    class Chomp1d(nn.Module):
        def __init__(self, chomp_size):
            super(Chomp1d, self).__init__()
            self.chomp_size = chomp_size

        def forward(self, x):
            return x[:, :, :-self.chomp_size].contiguous()

    class TemporalBlock(nn.Module):
        def __init__(self, n_inputs, n_outputs, kernel_size, stride, dilation, padding,
                     dropout=0.0):
            super(TemporalBlock, self).__init__()
            self.conv1 = weight_norm(nn.Conv1d(n_inputs, n_outputs, kernel_size, stride=stride,
                                               padding=padding, dilation=dilation))
            self.chomp1 = Chomp1d(padding)
            self.relu1 = nn.ReLU()
            self.dropout1 = nn.Dropout(dropout)
            self.conv2 = weight_norm(nn.Conv1d(n_outputs, n_outputs, kernel_size, stride=stride,
                                               padding=padding, dilation=dilation))
            self.chomp2 = Chomp1d(padding)
            self.relu2 = nn.ReLU()
            self.dropout2 = nn.Dropout(dropout)
            self.net = nn.Sequential(self.conv1, self.chomp1, self.relu1, self.dropout1,
                                     self.conv2, self.chomp2, self.relu2, self.dropout2)
            self.downsample = nn.Conv1d(n_inputs, n_outputs, 1) if n_inputs != n_outputs else None
            self.relu = nn.ReLU()

        def forward(self, x):
            out = self.net(x)
            res = x if self.downsample is None else self.downsample(x)
            return self.relu(out + res)

    class TCN(nn.Module):
        def __init__(self, input_size, output_size, num_channels, kernel_size=2):
            super(TCN, self).__init__()
            layers = []
            for i in range(len(num_channels)):
                dilation_size = 2 ** i
                in_channels = input_size if i == 0 else num_channels[i - 1]
                layers += [TemporalBlock(in_channels, num_channels[i], kernel_size, stride=1,
                                         dilation=dilation_size,
                                         padding=(kernel_size - 1) * dilation_size)]
            self.network = nn.Sequential(*layers)
            self.linear = nn.Linear(num_channels[-1], output_size)

        def forward(self, inputs):
            y1 = self.network(inputs)                          # (N, C, L)
            return self.linear(y1[:, :, -1])

    # the adding problem: sum the two marked values of a sequence
    def adding_batch(n, length):
        values = env.rand(n, 1, length)
        marks = torch.zeros(n, 1, length)
        first, second = env.randint(0, length // 2, (n,)), env.randint(length // 2, length, (n,))
        marks[torch.arange(n), 0, first] = 1.0
        marks[torch.arange(n), 0, second] = 1.0
        target = (values * marks).sum(dim=2)
        return torch.cat([values, marks], dim=1), target

    model = env.init(TCN(2, 1, [8, 8, 8], kernel_size=3))
    optimizer = optim.Adam(model.parameters(), lr=4e-3)
    x_train, y_train = adding_batch(16, 20)

    def train_step(x, y):
        model.train()
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for epoch in range(4):
        env.rec(f"loss {epoch}", train_step(x_train[:8], y_train[:8]))
        env.rec(f"loss {epoch} b", train_step(x_train[8:], y_train[8:]))
    model.eval()
    x_test, y_test = adding_batch(6, 20)
    with torch.no_grad():
        env.rec("test", F.mse_loss(model(x_test), y_test))
    env.rec("state", model.state_dict())


def gp_regression(torch, env):
    nn, optim = torch.nn, torch.optim

    class ExactGP(nn.Module):
        def __init__(self):
            super().__init__()
            self.raw_lengthscale = nn.Parameter(torch.tensor(0.0))
            self.raw_outputscale = nn.Parameter(torch.tensor(0.0))
            self.raw_noise = nn.Parameter(torch.tensor(-2.0))

        def kernel(self, x1, x2):
            lengthscale = nn.functional.softplus(self.raw_lengthscale)
            outputscale = nn.functional.softplus(self.raw_outputscale)
            sqdist = torch.cdist(x1 / lengthscale, x2 / lengthscale).pow(2)
            return outputscale * torch.exp(-0.5 * sqdist)

        def noise(self):
            return nn.functional.softplus(self.raw_noise) + 1e-4

        def neg_marginal_log_likelihood(self, x, y):
            n = x.size(0)
            K = self.kernel(x, x) + self.noise() * torch.eye(n, dtype=x.dtype)
            L = torch.linalg.cholesky(K)
            alpha = torch.cholesky_solve(y.unsqueeze(-1), L).squeeze(-1)
            return (0.5 * y.dot(alpha) + torch.log(torch.diagonal(L)).sum()
                    + 0.5 * n * math.log(2 * math.pi)) / n

        @torch.no_grad()
        def predict(self, x, y, x_star):
            K = self.kernel(x, x) + self.noise() * torch.eye(x.size(0), dtype=x.dtype)
            L = torch.linalg.cholesky(K)
            K_s = self.kernel(x, x_star)
            alpha = torch.cholesky_solve(y.unsqueeze(-1), L)
            mean = (K_s.T @ alpha).squeeze(-1)
            v = torch.linalg.solve_triangular(L, K_s, upper=False)
            var = self.kernel(x_star, x_star).diagonal() - (v ** 2).sum(0)
            return mean, var.clamp_min(0)

    # (in double precision, as GP code usually runs: the marginal likelihood's terms cancel)
    x = torch.linspace(0, 1, 16, dtype=torch.float64).unsqueeze(1)
    y = torch.sin(6 * x.squeeze(1)) + 0.1 * env.randn(16).double()
    model = env.init(ExactGP()).double()
    optimizer = optim.LBFGS(model.parameters(), lr=0.5, max_iter=4, history_size=10,
                            line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = model.neg_marginal_log_likelihood(x, y)
        loss.backward()
        return loss

    closure = env.step(closure)
    for i in range(3):
        loss = optimizer.step(closure)
        env.rec(f"step {i}", (loss, {k: nn.functional.softplus(v.detach())
                                     for k, v in model.named_parameters()}))
    x_star = torch.linspace(-0.2, 1.2, 7, dtype=torch.float64).unsqueeze(1)
    mean, var = model.predict(x, y, x_star)
    lower, upper = mean - 2 * var.sqrt(), mean + 2 * var.sqrt()
    env.rec("predictive", (mean, var, lower, upper))


def prototypical_networks(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    n_way, n_support, n_query = 3, 2, 3

    def conv_block(in_channels, out_channels):
        return nn.Sequential(nn.Conv2d(in_channels, out_channels, 3, padding=1),
                             nn.BatchNorm2d(out_channels), nn.ReLU(), nn.MaxPool2d(2))

    def euclidean_dist(x, y):
        n, m, d = x.size(0), y.size(0), x.size(1)
        x = x.unsqueeze(1).expand(n, m, d)
        y = y.unsqueeze(0).expand(n, m, d)
        return torch.pow(x - y, 2).sum(2)

    class Protonet(nn.Module):
        def __init__(self, encoder):
            super(Protonet, self).__init__()
            self.encoder = encoder

        def loss(self, xs, xq):
            n_class, n_support_, n_query_ = xs.size(0), xs.size(1), xq.size(1)
            target_inds = torch.arange(0, n_class).view(n_class, 1, 1).expand(
                n_class, n_query_, 1).long()
            x = torch.cat([xs.view(n_class * n_support_, *xs.size()[2:]),
                           xq.view(n_class * n_query_, *xq.size()[2:])], 0)
            z = self.encoder(x)
            z_dim = z.size(-1)
            z_proto = z[:n_class * n_support_].view(n_class, n_support_, z_dim).mean(1)
            zq = z[n_class * n_support_:]
            dists = euclidean_dist(zq, z_proto)
            log_p_y = F.log_softmax(-dists, dim=1).view(n_class, n_query_, -1)
            loss_val = -log_p_y.gather(2, target_inds).squeeze().view(-1).mean()
            _, y_hat = log_p_y.max(2)
            acc_val = torch.eq(y_hat, target_inds.squeeze()).float().mean()
            return loss_val, {"loss": loss_val.item(), "acc": acc_val.item()}

    encoder = nn.Sequential(conv_block(1, 8), conv_block(8, 8), nn.Flatten())
    model = env.init(Protonet(encoder))
    # (SGD, not the paper's Adam: distances do not change when every embedding shifts
    # alike, so the gradients of the conv biases and the last BatchNorm's shift are rounding
    # noise, which Adam would scale up to full steps in directions that differ per library)
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = optim.lr_scheduler.StepLR(optimizer, 2, gamma=0.5)
    # 6 classes, each a mean image plus noise
    class_means = env.randn(6, 1, 8, 8)

    def episode():
        classes = [env.choice(6) for _ in range(n_way)]
        samples = torch.stack([class_means[c] + 1.5 * env.randn(n_support + n_query, 1, 8, 8)
                               for c in classes])
        return samples[:, :n_support].contiguous(), samples[:, n_support:].contiguous()

    def train_step(xs, xq):
        model.train()
        optimizer.zero_grad()
        loss, output = model.loss(xs, xq)
        loss.backward()
        optimizer.step()
        return output

    train_step = env.step(train_step)
    for epoch in range(3):
        for i in range(2):
            env.rec(f"episode {epoch} {i}", train_step(*episode()))
        scheduler.step()
    model.eval()
    with torch.no_grad():
        env.rec("eval", model.loss(*episode())[1])
    env.rec("state", model.state_dict())


def bayes_by_backprop(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    Normal, kl_divergence = torch.distributions.Normal, torch.distributions.kl_divergence

    class BayesianLinear(nn.Module):
        def __init__(self, in_features, out_features, prior_sigma=1.0):
            super().__init__()
            shape = (out_features, in_features)
            self.weight_mu = nn.Parameter(torch.empty(shape).uniform_(-0.3, 0.3))
            self.weight_rho = nn.Parameter(torch.empty(shape).uniform_(-5, -4))
            self.bias_mu = nn.Parameter(torch.empty(out_features).uniform_(-0.1, 0.1))
            self.bias_rho = nn.Parameter(torch.empty(out_features).uniform_(-5, -4))
            self.prior = Normal(0.0, prior_sigma)
            self.kl = 0.0

        def forward(self, x, sample=True):
            weight_sigma = torch.log1p(torch.exp(self.weight_rho))
            bias_sigma = F.softplus(self.bias_rho)
            if sample:
                weight = self.weight_mu + weight_sigma * torch.randn_like(weight_sigma)
                bias = self.bias_mu + bias_sigma * torch.randn_like(bias_sigma)
            else:
                weight, bias = self.weight_mu, self.bias_mu
            self.kl = kl_divergence(Normal(self.weight_mu, weight_sigma), self.prior).sum() + \
                kl_divergence(Normal(self.bias_mu, bias_sigma), self.prior).sum()
            return F.linear(x, weight, bias)

    class BayesianMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = BayesianLinear(1, 16)
            self.fc2 = BayesianLinear(16, 1)

        def forward(self, x, sample=True):
            return self.fc2(torch.relu(self.fc1(x, sample)), sample)

        def kl_loss(self):
            return self.fc1.kl + self.fc2.kl

    model = env.init(BayesianMLP())
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    x = torch.linspace(-2, 2, 32).unsqueeze(1)
    y = x.pow(3) / 4 + 0.1 * env.randn(32, 1)
    num_batches = 2

    def elbo_step(xb, yb, sample):
        optimizer.zero_grad()
        output = model(xb, sample)
        nll = F.gaussian_nll_loss(output, yb, torch.full_like(yb, 0.01), reduction="sum")
        kl = model.kl_loss() / num_batches
        loss = nll + kl
        loss.backward()
        optimizer.step()
        return nll.item(), kl.item()

    elbo_step = env.step(elbo_step)
    for epoch in range(3):      # (the mean weights first: the same numbers in every run)
        for b in range(num_batches):
            env.rec(f"mean {epoch} {b}", elbo_step(x[b::2], y[b::2], False))
    for epoch in range(3):
        for b in range(num_batches):
            env.rec(f"sampled {epoch} {b}", elbo_step(x[b::2], y[b::2], True), cross=False)
    model.eval()
    with torch.no_grad():
        samples = torch.stack([model(x) for _ in range(5)])
        env.rec("predictive", (samples.mean(0), samples.std(0)), cross=False)
        env.rec("kl", model.kl_loss(), cross=False)
    env.rec("state", model.state_dict(), cross=False)
