"""untuned_models_twentysecond.py's Neural CDE, SuperGlue and Growing Neural Cellular Automata
(the docstring there says what each is)."""
import math

import numpy as np


def _ncde(lib, small):
    # (torchcde's README / example/time_series_classification.py: CDEFunc, NeuralCDE, spirals;
    # linear_interpolation_coeffs's derivative constant on each interval, cdeint's
    # f(z) @ dX/dt, and torchdiffeq's rk4 on the knots written out)
    nn = lib.nn
    batch, length, hidden = (4, 6, 8) if small else (128, 50, 32)
    input_channels, output_channels, width = 3, 1, 16 if small else 128

    class CDEFunc(nn.Module):
        def __init__(self, input_channels, hidden_channels):
            super(CDEFunc, self).__init__()
            self.input_channels = input_channels
            self.hidden_channels = hidden_channels
            self.linear1 = nn.Linear(hidden_channels, width)
            self.linear2 = nn.Linear(width, input_channels * hidden_channels)

        def forward(self, t, z):
            z = self.linear1(z)
            z = z.relu()
            z = self.linear2(z)
            z = z.tanh()
            return z.view(z.size(0), self.hidden_channels, self.input_channels)

    def cdeint(X, z0, func):
        # (X: (batch, length, channels) on the knots 0..length-1, one rk4 step per interval)
        def vector_field(t, z, i):
            dXdt = X[:, i + 1] - X[:, i]
            return (func(t, z) @ dXdt.unsqueeze(-1)).squeeze(-1)

        z = z0
        for i in range(X.size(1) - 1):
            t0, dt = float(i), 1.0
            k1 = vector_field(t0, z, i)
            k2 = vector_field(t0 + dt / 3, z + dt * k1 / 3, i)
            k3 = vector_field(t0 + dt * 2 / 3, z + dt * (k2 - k1 / 3), i)
            k4 = vector_field(t0 + dt, z + dt * (k1 - k2 + k3), i)
            z = z + (k1 + 3 * (k2 + k3) + k4) * dt * 0.125
        return z

    class NeuralCDE(nn.Module):
        def __init__(self, input_channels, hidden_channels, output_channels):
            super(NeuralCDE, self).__init__()
            self.func = CDEFunc(input_channels, hidden_channels)
            self.initial = nn.Linear(input_channels, hidden_channels)
            self.readout = nn.Linear(hidden_channels, output_channels)

        def forward(self, coeffs):
            X0 = coeffs[:, 0]
            z0 = self.initial(X0)
            z_T = cdeint(coeffs, z0, self.func)
            return self.readout(z_T)

    # (get_data(): clockwise and anticlockwise spirals, time as the first channel)
    rng = np.random.RandomState(1)
    t = np.linspace(0., 4 * math.pi, length)
    start = rng.rand(batch) * 2 * math.pi
    x_pos = np.cos(start[:, None] + t[None, :]) * t[None, :] / (1 + 0.5 * t[None, :])
    y_pos = np.sin(start[:, None] + t[None, :]) * t[None, :] / (1 + 0.5 * t[None, :])
    y_pos[:batch // 2] *= -1
    X = np.stack([np.broadcast_to(t, x_pos.shape), x_pos, y_pos], 2)
    X += 0.1 * rng.randn(*X.shape)
    perm = rng.permutation(batch)
    y = (np.arange(batch) < batch // 2).astype(np.float32)[perm]
    coeffs = lib.tensor(X[perm].astype(np.float32))
    y = lib.tensor(y)
    model = NeuralCDE(input_channels, hidden, output_channels)
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)

    def loss():
        pred_y = model(coeffs).squeeze(-1)
        return lib.nn.functional.binary_cross_entropy_with_logits(pred_y, y)
    return model, opt, loss


def _superglue(lib, small):
    # (models/superglue.py: MLP, normalize_keypoints, KeypointEncoder, attention,
    # MultiHeadedAttention, AttentionalPropagation, AttentionalGNN, log_sinkhorn_iterations,
    # log_optimal_transport; the training repos' loss: -log P of each ground-truth pair, the
    # unmatched keypoints to the dustbins)
    nn = lib.nn
    batch, n_kp, dim, layers, heads, iters = (2, 6, 16, 2, 2, 5) if small else (
        8, 128, 64, 4, 4, 20)
    n_matched = n_kp * 2 // 3

    def MLP(channels, do_bn=True):
        n = len(channels)
        layers_ = []
        for i in range(1, n):
            layers_.append(nn.Conv1d(channels[i - 1], channels[i], kernel_size=1, bias=True))
            if i < (n - 1):
                if do_bn:
                    layers_.append(nn.BatchNorm1d(channels[i]))
                layers_.append(nn.ReLU())
        return nn.Sequential(*layers_)

    class KeypointEncoder(nn.Module):
        def __init__(self, feature_dim, layers):
            super().__init__()
            self.encoder = MLP([3] + layers + [feature_dim])
            nn.init.constant_(self.encoder[-1].bias, 0.0)

        def forward(self, kpts, scores):
            inputs = [kpts.transpose(1, 2), scores.unsqueeze(1)]
            return self.encoder(lib.cat(inputs, dim=1))

    def attention(query, key, value):
        dim = query.shape[1]
        scores = lib.einsum("bdhn,bdhm->bhnm", query, key) / dim ** .5
        prob = lib.nn.functional.softmax(scores, dim=-1)
        return lib.einsum("bhnm,bdhm->bdhn", prob, value), prob

    class MultiHeadedAttention(nn.Module):
        def __init__(self, num_heads, d_model):
            super().__init__()
            self.dim = d_model // num_heads
            self.num_heads = num_heads
            self.merge = nn.Conv1d(d_model, d_model, kernel_size=1)
            self.proj = nn.ModuleList([nn.Conv1d(d_model, d_model, 1) for _ in range(3)])

        def forward(self, query, key, value):
            batch_dim = query.size(0)
            query, key, value = [l(x).view(batch_dim, self.dim, self.num_heads, -1)
                                 for l, x in zip(self.proj, (query, key, value))]
            x, _ = attention(query, key, value)
            return self.merge(x.contiguous().view(batch_dim, self.dim * self.num_heads, -1))

    class AttentionalPropagation(nn.Module):
        def __init__(self, feature_dim, num_heads):
            super().__init__()
            self.attn = MultiHeadedAttention(num_heads, feature_dim)
            self.mlp = MLP([feature_dim * 2, feature_dim * 2, feature_dim])
            nn.init.constant_(self.mlp[-1].bias, 0.0)

        def forward(self, x, source):
            message = self.attn(x, source, source)
            return self.mlp(lib.cat([x, message], dim=1))

    class AttentionalGNN(nn.Module):
        def __init__(self, feature_dim, layer_names):
            super().__init__()
            self.layers = nn.ModuleList([AttentionalPropagation(feature_dim, heads)
                                         for _ in range(len(layer_names))])
            self.names = layer_names

        def forward(self, desc0, desc1):
            for layer, name in zip(self.layers, self.names):
                if name == "cross":
                    src0, src1 = desc1, desc0
                else:
                    src0, src1 = desc0, desc1
                delta0, delta1 = layer(desc0, src0), layer(desc1, src1)
                desc0, desc1 = (desc0 + delta0), (desc1 + delta1)
            return desc0, desc1

    def log_sinkhorn_iterations(Z, log_mu, log_nu, iters):
        u, v = lib.zeros_like(log_mu), lib.zeros_like(log_nu)
        for _ in range(iters):
            u = log_mu - lib.logsumexp(Z + v.unsqueeze(1), dim=2)
            v = log_nu - lib.logsumexp(Z + u.unsqueeze(2), dim=1)
        return Z + u.unsqueeze(2) + v.unsqueeze(1)

    def log_optimal_transport(scores, alpha, iters):
        b, m, n = scores.shape
        one = scores.new_tensor(1)
        ms, ns = (m * one).to(scores), (n * one).to(scores)
        bins0 = alpha.expand(b, m, 1)
        bins1 = alpha.expand(b, 1, n)
        alpha = alpha.expand(b, 1, 1)
        couplings = lib.cat([lib.cat([scores, bins0], -1), lib.cat([bins1, alpha], -1)], 1)
        norm = - (ms + ns).log()
        log_mu = lib.cat([norm.expand(m), ns.log()[None] + norm])
        log_nu = lib.cat([norm.expand(n), ms.log()[None] + norm])
        log_mu, log_nu = log_mu[None].expand(b, -1), log_nu[None].expand(b, -1)
        Z = log_sinkhorn_iterations(couplings, log_mu, log_nu, iters)
        return Z - norm

    def normalize_keypoints(kpts, image_shape):
        _, _, height, width = image_shape
        one = kpts.new_tensor(1)
        size = lib.stack([one * width, one * height])[None]
        center = size / 2
        scaling = size.max(1, keepdim=True).values * 0.7
        return (kpts - center[:, None, :]) / scaling[:, None, :]

    class SuperGlue(nn.Module):
        def __init__(self):
            super().__init__()
            self.kenc = KeypointEncoder(dim, [8, 16] if small else [32, 64, 128])
            self.gnn = AttentionalGNN(dim, ["self", "cross"] * (layers // 2))
            self.final_proj = nn.Conv1d(dim, dim, kernel_size=1, bias=True)
            self.register_parameter("bin_score", nn.Parameter(lib.tensor(1.)))

        def forward(self, data):
            desc0, desc1 = data["descriptors0"], data["descriptors1"]
            kpts0 = normalize_keypoints(data["keypoints0"], data["image0"].shape)
            kpts1 = normalize_keypoints(data["keypoints1"], data["image1"].shape)
            desc0 = desc0 + self.kenc(kpts0, data["scores0"])
            desc1 = desc1 + self.kenc(kpts1, data["scores1"])
            desc0, desc1 = self.gnn(desc0, desc1)
            mdesc0, mdesc1 = self.final_proj(desc0), self.final_proj(desc1)
            scores = lib.einsum("bdn,bdm->bnm", mdesc0, mdesc1)
            scores = scores / dim ** .5
            return log_optimal_transport(scores, self.bin_score, iters=iters)

    model = SuperGlue()
    opt = lib.optim.Adam(model.parameters(), lr=1e-4)
    rng = np.random.RandomState(1)
    H = W = 64
    kp0 = rng.rand(batch, n_kp, 2) * W
    perm = np.stack([rng.permutation(n_kp) for _ in range(batch)])
    kp1 = np.take_along_axis(kp0, perm[..., None], 1) + rng.randn(batch, n_kp, 2)
    kp1[:, n_matched:] = rng.rand(batch, n_kp - n_matched, 2) * W   # (unmatched)
    d0 = rng.randn(batch, dim, n_kp)
    d1 = np.take_along_axis(d0, perm[:, None, :], 2) + 0.3 * rng.randn(batch, dim, n_kp)
    f32 = lambda a: lib.tensor(np.asarray(a, np.float32)).to(lib.get_default_dtype())  # noqa: E731
    data = {"descriptors0": f32(d0), "descriptors1": f32(d1), "keypoints0": f32(kp0),
            "keypoints1": f32(kp1), "scores0": f32(rng.rand(batch, n_kp)),
            "scores1": f32(rng.rand(batch, n_kp)), "image0": lib.zeros(batch, 1, H, W),
            "image1": lib.zeros(batch, 1, H, W)}
    # (kp1[j] = kp0[perm[j]] for j < n_matched: pairs (perm[j], j); the rest to the dustbins)
    bi, i0, i1 = [], [], []
    for b in range(batch):
        matched = set(perm[b, :n_matched].tolist())
        for j in range(n_matched):
            bi.append(b), i0.append(perm[b, j]), i1.append(j)
        for i in range(n_kp):
            if i not in matched:
                bi.append(b), i0.append(i), i1.append(n_kp)
        for j in range(n_matched, n_kp):
            bi.append(b), i0.append(n_kp), i1.append(j)
    bi, i0, i1 = (lib.tensor(np.array(a)) for a in (bi, i0, i1))

    def loss():
        Z = model(data)
        return -Z[bi, i0, i1].mean()
    return model, opt, loss


def _nca(lib, small):
    # (chenmingxiang110/Growing-Neural-Cellular-Automata's lib/CAModel.py; its training loop's
    # seed, MSE on the RGBA channels and Adam, the update count fixed in place of
    # np.random.randint(64, 96) so that one compiled step serves every step)
    nn, F = lib.nn, lib.nn.functional
    batch, size, channel_n, hidden, n_steps = (2, 8, 8, 16, 6) if small else (8, 40, 16, 128, 16)

    class CAModel(nn.Module):
        def __init__(self, channel_n, fire_rate, hidden_size=128):
            super(CAModel, self).__init__()
            self.channel_n = channel_n
            self.fc0 = nn.Linear(channel_n * 3, hidden_size)
            self.fc1 = nn.Linear(hidden_size, channel_n, bias=False)
            with lib.no_grad():
                self.fc1.weight.mul_(0.1)    # (zero_() there: a first step with no gradient)
            self.fire_rate = fire_rate

        def alive(self, x):
            return F.max_pool2d(x[:, 3:4, :, :], kernel_size=3, stride=1, padding=1) > 0.1

        def perceive(self, x, angle):
            def _perceive_with(x, weight):
                conv_weights = lib.from_numpy(weight.astype(np.float32))
                conv_weights = conv_weights.view(1, 1, 3, 3).repeat(self.channel_n, 1, 1, 1)
                return F.conv2d(x, conv_weights, padding=1, groups=self.channel_n)
            dx = np.outer([1, 2, 1], [-1, 0, 1]) / 8.0
            dy = dx.T
            c = np.cos(angle * np.pi / 180)
            s = np.sin(angle * np.pi / 180)
            w1 = c * dx - s * dy
            w2 = s * dx + c * dy
            y1 = _perceive_with(x, w1)
            y2 = _perceive_with(x, w2)
            return lib.cat((x, y1, y2), 1)

        def update(self, x, fire_rate, angle):
            x = x.transpose(1, 3)
            pre_life_mask = self.alive(x)
            dx = self.perceive(x, angle)
            dx = dx.transpose(1, 3)
            dx = self.fc0(dx)
            dx = F.relu(dx)
            dx = self.fc1(dx)
            if fire_rate is None:
                fire_rate = self.fire_rate
            stochastic = lib.rand([dx.size(0), dx.size(1), dx.size(2), 1]) > fire_rate
            stochastic = stochastic.float()
            dx = dx * stochastic
            x = x + dx.transpose(1, 3)
            post_life_mask = self.alive(x)
            life_mask = (pre_life_mask & post_life_mask).float()
            x = x * life_mask
            return x.transpose(1, 3)

        def forward(self, x, steps=1, fire_rate=None, angle=0.0):
            for step in range(steps):
                x = self.update(x, fire_rate, angle)
            return x

    model = CAModel(channel_n, 0.5, hidden)
    opt = lib.optim.Adam(model.parameters(), lr=2e-3, betas=(0.5, 0.5))
    seed = np.zeros([size, size, channel_n], np.float32)
    seed[size // 2, size // 2, 3:] = 1.0
    x0 = lib.from_numpy(np.repeat(seed[None, ...], batch, 0))
    yy, xx = np.mgrid[:size, :size] - size / 2 + 0.5
    disk = (np.sqrt(xx ** 2 + yy ** 2) < size / 3).astype(np.float32)
    rgba = np.stack([disk * 0.9, disk * 0.3, disk * 0.5, disk], -1)
    target = lib.from_numpy(np.repeat(rgba[None], batch, 0))

    def loss():
        x = model(x0, n_steps)
        return F.mse_loss(x[:, :, :, :4], target)
    return model, opt, loss
