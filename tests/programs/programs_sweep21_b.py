"""Generative and long-sequence programs the other files leave out: a neural spline flow
(rational-quadratic coupling with torch.searchsorted, cumsum bin edges, F.pad); StyleGAN2's
modulated convolution (weight demodulation, a grouped conv over the batch, noise injection,
a generator EMA kept with lerp_); a variational RNN (per-step prior and posterior,
kl_divergence between Normals); EDM's preconditioned denoiser (c_skip / c_out / c_in /
c_noise, log-normal sigmas, a Heun sampler under no_grad); a Hyena-style long convolution
through torch.fft.rfft / irfft with an implicit filter; Performer's FAVOR+ attention with
orthogonal random features redrawn by a counter the module keeps.
Programs `f(torch, env)`, see tutorial_harness.py."""
import copy
import math


def _searchsorted(torch, bin_locations, inputs, eps=1e-6):
    bin_locations = bin_locations.clone()
    bin_locations[..., -1] += eps
    return torch.sum(inputs[..., None] >= bin_locations, dim=-1) - 1


def rq_spline(torch, inputs, uw, uh, ud, bound=3.0, min_w=1e-3, min_h=1e-3, min_d=1e-3,
              use_searchsorted=True):
    """The rational-quadratic spline of Durkan et al. (forward direction, identity tails)."""
    F = torch.nn.functional
    inside = (inputs >= -bound) & (inputs <= bound)
    ud = F.pad(ud, (1, 1))
    const = math.log(math.exp(1 - min_d) - 1)
    ud[..., 0] = const
    ud[..., -1] = const
    x = inputs.clamp(-bound, bound)
    nb = uw.shape[-1]
    widths = F.softmax(uw, dim=-1)
    widths = min_w + (1 - min_w * nb) * widths
    cumwidths = torch.cumsum(widths, dim=-1)
    cumwidths = F.pad(cumwidths, pad=(1, 0), mode="constant", value=0.0)
    cumwidths = 2 * bound * cumwidths - bound
    cumwidths[..., 0] = -bound
    cumwidths[..., -1] = bound
    widths = cumwidths[..., 1:] - cumwidths[..., :-1]
    derivatives = min_d + F.softplus(ud)
    heights = F.softmax(uh, dim=-1)
    heights = min_h + (1 - min_h * nb) * heights
    cumheights = torch.cumsum(heights, dim=-1)
    cumheights = F.pad(cumheights, pad=(1, 0), mode="constant", value=0.0)
    cumheights = 2 * bound * cumheights - bound
    cumheights[..., 0] = -bound
    cumheights[..., -1] = bound
    heights = cumheights[..., 1:] - cumheights[..., :-1]
    if use_searchsorted:
        edges = cumwidths.detach().clone()
        edges[..., -1] += 1e-6
        bin_idx = (torch.searchsorted(edges.contiguous(), x[..., None].contiguous(),
                                      right=True) - 1).clamp(0, nb - 1)
    else:
        bin_idx = _searchsorted(torch, cumwidths, x)[..., None]
    input_cumwidths = cumwidths.gather(-1, bin_idx)[..., 0]
    input_bin_widths = widths.gather(-1, bin_idx)[..., 0]
    input_cumheights = cumheights.gather(-1, bin_idx)[..., 0]
    delta = heights / widths
    input_delta = delta.gather(-1, bin_idx)[..., 0]
    input_derivatives = derivatives.gather(-1, bin_idx)[..., 0]
    input_derivatives_plus_one = derivatives[..., 1:].gather(-1, bin_idx)[..., 0]
    input_heights = heights.gather(-1, bin_idx)[..., 0]
    theta = (x - input_cumwidths) / input_bin_widths
    theta_one_minus_theta = theta * (1 - theta)
    numerator = input_heights * (input_delta * theta.pow(2) + input_derivatives * theta_one_minus_theta)
    denominator = input_delta + ((input_derivatives + input_derivatives_plus_one - 2 * input_delta)
                                 * theta_one_minus_theta)
    outputs = input_cumheights + numerator / denominator
    derivative_numerator = input_delta.pow(2) * (
        input_derivatives_plus_one * theta.pow(2) + 2 * input_delta * theta_one_minus_theta
        + input_derivatives * (1 - theta).pow(2))
    logabsdet = torch.log(derivative_numerator) - 2 * torch.log(denominator)
    outputs = torch.where(inside, outputs, inputs)
    logabsdet = torch.where(inside, logabsdet, torch.zeros_like(logabsdet))
    return outputs, logabsdet


def neural_spline_flow(torch, env, use_searchsorted=True):
    nn = torch.nn
    D = torch.distributions
    dim, nb = 4, 5

    class Coupling(nn.Module):
        def __init__(self, flip):
            super().__init__()
            self.flip = flip
            self.net = nn.Sequential(nn.Linear(dim // 2, 16), nn.Tanh(),
                                     nn.Linear(16, (dim // 2) * (3 * nb - 1)))

        def forward(self, x):
            x0, x1 = x.chunk(2, dim=1)
            if self.flip:
                x0, x1 = x1, x0
            params = self.net(x0).view(x.size(0), dim // 2, 3 * nb - 1)
            W, H, Dv = params[..., :nb], params[..., nb:2 * nb], params[..., 2 * nb:]
            y1, ld = rq_spline(torch, x1, W, H, Dv, use_searchsorted=use_searchsorted)
            out = torch.cat([y1, x0], 1) if self.flip else torch.cat([x0, y1], 1)
            return out, ld.sum(1)

    flows = env.init(nn.ModuleList([Coupling(i % 2 == 1) for i in range(3)]))
    base = D.Normal(torch.zeros(dim), torch.ones(dim))
    opt = torch.optim.Adam(flows.parameters(), lr=5e-3)

    def train_step(x):
        log_det = torch.zeros(x.size(0))
        z = x
        for f in flows:
            z, ld = f(z)
            log_det = log_det + ld
        nll = -(base.log_prob(z).sum(1) + log_det).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        return nll, z

    step = env.step(train_step)
    x = env.randn(12, dim) * 1.5
    x[0, 0] = 4.0      # (one value outside the spline's bound: the identity tail)
    for it in range(5):
        env.rec(f"it{it}", step(x))
    env.rec("flows", flows.state_dict())


def stylegan_modulated_conv(torch, env):
    nn, F = torch.nn, torch.nn.functional
    w_dim, C, K = 8, 4, 3

    class ModulatedConv(nn.Module):
        def __init__(self, cin, cout, demodulate=True):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(1, cout, cin, K, K))
            self.affine = nn.Linear(w_dim, cin)
            self.scale = 1 / math.sqrt(cin * K * K)
            self.demodulate = demodulate
            self.noise_strength = nn.Parameter(torch.zeros([]))

        def forward(self, x, w, noise):
            b, cin, hgt, wid = x.shape
            style = self.affine(w).view(b, 1, cin, 1, 1)
            weight = self.scale * self.weight * style
            if self.demodulate:
                demod = torch.rsqrt(weight.pow(2).sum([2, 3, 4]) + 1e-8)
                weight = weight * demod.view(b, -1, 1, 1, 1)
            weight = weight.view(b * weight.size(1), cin, K, K)
            x = x.reshape(1, b * cin, hgt, wid)
            out = F.conv2d(x, weight, padding=K // 2, groups=b)
            out = out.view(b, -1, hgt, wid)
            return F.leaky_relu(out + noise * self.noise_strength, 0.2) * math.sqrt(2)

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.mapping = nn.Sequential(nn.Linear(w_dim, w_dim), nn.LeakyReLU(0.2),
                                         nn.Linear(w_dim, w_dim))
            self.const = nn.Parameter(torch.ones(1, C, 4, 4))
            self.conv1 = ModulatedConv(C, C)
            self.conv2 = ModulatedConv(C, C)
            self.to_rgb = ModulatedConv(C, 1, demodulate=False)

        def forward(self, z, noise):
            w = self.mapping(F.normalize(z, dim=1))
            x = self.const.expand(z.size(0), -1, -1, -1)
            x = self.conv1(x, w, noise[:, :1, ::2, ::2])
            x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
            x = self.conv2(x, w, noise[:, 1:2])
            return self.to_rgb(x, w, torch.zeros_like(x[:, :1]))

    G = Generator()
    with torch.no_grad():
        for m in G.modules():
            if isinstance(m, ModulatedConv):
                m.weight.copy_(env.randn(*m.weight.shape))
                m.affine.bias.fill_(1.0)
    env.init(G)
    G_ema = copy.deepcopy(G).eval().requires_grad_(False)
    opt = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.0, 0.99))
    target = env.rand(3, 1, 8, 8)

    def train_step(z, noise):
        img = G(z, noise)
        loss = F.mse_loss(img, target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        with torch.no_grad():
            for p_ema, p in zip(G_ema.parameters(), G.parameters()):
                p_ema.copy_(p.lerp(p_ema, 0.9))
        return loss

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"it{it}", step(env.randn(3, w_dim), env.randn(3, 2, 8, 8)))
    with torch.no_grad():
        env.rec("ema sample", G_ema(env.randn(2, w_dim), torch.zeros(2, 2, 8, 8)))


def vrnn(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    x_dim, h_dim, z_dim = 5, 12, 3

    class VRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.phi_x = nn.Sequential(nn.Linear(x_dim, h_dim), nn.ReLU())
            self.phi_z = nn.Sequential(nn.Linear(z_dim, h_dim), nn.ReLU())
            self.enc = nn.Linear(2 * h_dim, 2 * z_dim)
            self.prior = nn.Linear(h_dim, 2 * z_dim)
            self.dec = nn.Linear(2 * h_dim, x_dim)
            self.rnn = nn.GRU(2 * h_dim, h_dim, 1)

        def forward(self, x, eps):
            h = torch.zeros(1, x.size(1), h_dim)
            kld, nll = 0, 0
            for t in range(x.size(0)):
                phi_x_t = self.phi_x(x[t])
                enc_mean, enc_std = self.enc(torch.cat([phi_x_t, h[-1]], 1)).chunk(2, 1)
                prior_mean, prior_std = self.prior(h[-1]).chunk(2, 1)
                enc_std, prior_std = F.softplus(enc_std), F.softplus(prior_std)
                z_t = enc_mean + enc_std * eps[t]
                phi_z_t = self.phi_z(z_t)
                dec_mean = torch.sigmoid(self.dec(torch.cat([phi_z_t, h[-1]], 1)))
                _, h = self.rnn(torch.cat([phi_x_t, phi_z_t], 1).unsqueeze(0), h)
                kld = kld + D.kl_divergence(D.Normal(enc_mean, enc_std),
                                            D.Normal(prior_mean, prior_std)).sum()
                nll = nll + F.binary_cross_entropy(dec_mean, x[t], reduction="sum")
            return kld, nll

    model = env.init(VRNN())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def train_step(x, eps):
        opt.zero_grad()
        kld, nll = model(x, eps)
        loss = kld + nll
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 10)
        opt.step()
        return kld.item(), nll.item()

    step = env.step(train_step)
    x = (env.rand(4, 3, x_dim) > 0.5).float()
    for it in range(4):
        env.rec(f"it{it}", step(x, env.randn(4, 3, z_dim)))


def edm_denoiser(torch, env):
    nn = torch.nn
    sigma_data, P_mean, P_std = 0.5, -1.2, 1.2

    class Precond(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = nn.Sequential(nn.Linear(3, 32), nn.SiLU(), nn.Linear(32, 2))

        def forward(self, x, sigma):
            sigma = sigma.reshape(-1, 1)
            c_skip = sigma_data ** 2 / (sigma ** 2 + sigma_data ** 2)
            c_out = sigma * sigma_data / (sigma ** 2 + sigma_data ** 2).sqrt()
            c_in = 1 / (sigma_data ** 2 + sigma ** 2).sqrt()
            c_noise = sigma.log() / 4
            F_x = self.model(torch.cat([c_in * x, c_noise], 1))
            return c_skip * x + c_out * F_x

    net = env.init(Precond())
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)

    def train_step(y, rnd_normal, n):
        sigma = (rnd_normal * P_std + P_mean).exp()
        weight = (sigma ** 2 + sigma_data ** 2) / (sigma * sigma_data) ** 2
        D_yn = net(y + n * sigma, sigma)
        loss = (weight * ((D_yn - y) ** 2)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    y = env.randn(16, 2) * 0.5
    for it in range(5):
        env.rec(f"it{it}", step(y, env.randn(16, 1), env.randn(16, 2)))

    num_steps, sigma_min, sigma_max, rho = 5, 0.002, 20.0, 7
    i = torch.arange(num_steps, dtype=torch.float64)
    t_steps = (sigma_max ** (1 / rho) + i / (num_steps - 1)
               * (sigma_min ** (1 / rho) - sigma_max ** (1 / rho))) ** rho
    t_steps = torch.cat([t_steps, torch.zeros_like(t_steps[:1])])

    @torch.no_grad()
    def heun(latents):
        x_next = latents.to(torch.float64) * t_steps[0]
        for i, (t_cur, t_next) in enumerate(zip(t_steps[:-1], t_steps[1:])):
            x_cur = x_next
            denoised = net(x_cur.float(), t_cur.float().expand(x_cur.size(0))).to(torch.float64)
            d_cur = (x_cur - denoised) / t_cur
            x_next = x_cur + (t_next - t_cur) * d_cur
            if i < num_steps - 1:
                denoised = net(x_next.float(), t_next.float().expand(x_cur.size(0))).to(torch.float64)
                d_prime = (x_next - denoised) / t_next
                x_next = x_cur + (t_next - t_cur) * (0.5 * d_cur + 0.5 * d_prime)
        return x_next

    env.rec("samples", env.step(heun)(env.randn(4, 2)))
