"""Sweep 17 (D), part 12: UvA tutorial 11's image normalizing flow at toy size
(dequantization with its log-det-Jacobian, checkerboard and channel masked affine couplings
with GatedConvNets, squeeze and split flows, bits per dim, sampling from the prior; the
rand_like inside the compiled step draws PyTorch's numbers) and LoRA as the from-scratch LLM
courses write it with torch.nn.utils.parametrize (a LoRAParametrization on each Linear's
weight, everything but lora_* frozen, enabled / disabled, parametrize.cached(),
remove_parametrizations). See tutorial_harness.py."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def flows(torch, env):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(42)

    def create_checkerboard_mask(h, w, invert=False):
        x, y = torch.arange(h, dtype=torch.int32), torch.arange(w, dtype=torch.int32)
        xx, yy = torch.meshgrid(x, y, indexing='ij')
        mask = torch.fmod(xx + yy, 2)
        mask = mask.to(torch.float32).view(1, 1, h, w)
        if invert:
            mask = 1 - mask
        return mask

    def create_channel_mask(c_in, invert=False):
        mask = torch.cat([torch.ones(c_in // 2, dtype=torch.float32),
                          torch.zeros(c_in - c_in // 2, dtype=torch.float32)])
        mask = mask.view(1, c_in, 1, 1)
        if invert:
            mask = 1 - mask
        return mask

    class Dequantization(nn.Module):
        def __init__(self, alpha=1e-5, quants=256):
            super().__init__()
            self.alpha, self.quants = alpha, quants
        def forward(self, z, ldj, reverse=False):
            if not reverse:
                z, ldj = self.dequant(z, ldj)
                z, ldj = self.sigmoid(z, ldj, reverse=True)
            else:
                z, ldj = self.sigmoid(z, ldj, reverse=False)
                z = z * self.quants
                ldj += np.log(self.quants) * np.prod(z.shape[1:])
                z = torch.floor(z).clamp(min=0, max=self.quants - 1).to(torch.int32)
            return z, ldj
        def sigmoid(self, z, ldj, reverse=False):
            if not reverse:
                ldj += (-z - 2 * F.softplus(-z)).sum(dim=[1, 2, 3])
                z = torch.sigmoid(z)
            else:
                z = z * (1 - self.alpha) + 0.5 * self.alpha
                ldj += np.log(1 - self.alpha) * np.prod(z.shape[1:])
                ldj += (-torch.log(z) - torch.log(1 - z)).sum(dim=[1, 2, 3])
                z = torch.log(z) - torch.log(1 - z)
            return z, ldj
        def dequant(self, z, ldj):
            z = z.to(torch.float32)
            z = z + torch.rand_like(z).detach()
            z = z / self.quants
            ldj -= np.log(self.quants) * np.prod(z.shape[1:])
            return z, ldj

    class ConcatELU(nn.Module):
        def forward(self, x):
            return torch.cat([F.elu(x), F.elu(-x)], dim=1)

    class LayerNormChannels(nn.Module):
        def __init__(self, c_in, eps=1e-5):
            super().__init__()
            self.gamma = nn.Parameter(torch.ones(1, c_in, 1, 1))
            self.beta = nn.Parameter(torch.zeros(1, c_in, 1, 1))
            self.eps = eps
        def forward(self, x):
            mean = x.mean(dim=1, keepdim=True)
            var = x.var(dim=1, unbiased=False, keepdim=True)
            y = (x - mean) / torch.sqrt(var + self.eps)
            return y * self.gamma + self.beta

    class GatedConv(nn.Module):
        def __init__(self, c_in, c_hidden):
            super().__init__()
            self.net = nn.Sequential(ConcatELU(), nn.Conv2d(2 * c_in, c_hidden, 3, padding=1),
                                     ConcatELU(), nn.Conv2d(2 * c_hidden, 2 * c_in, 1))
        def forward(self, x):
            out = self.net(x)
            val, gate = out.chunk(2, dim=1)
            return x + val * torch.sigmoid(gate)

    class GatedConvNet(nn.Module):
        def __init__(self, c_in, c_hidden=8, c_out=-1):
            super().__init__()
            c_out = c_out if c_out > 0 else 2 * c_in
            self.nn = nn.Sequential(nn.Conv2d(c_in, c_hidden, 3, padding=1),
                                    GatedConv(c_hidden, c_hidden), LayerNormChannels(c_hidden),
                                    ConcatELU(), nn.Conv2d(2 * c_hidden, c_out, 3, padding=1))
            self.nn[-1].weight.data.zero_()
            self.nn[-1].bias.data.zero_()
        def forward(self, x):
            return self.nn(x)

    class CouplingLayer(nn.Module):
        def __init__(self, network, mask, c_in):
            super().__init__()
            self.network = network
            self.scaling_factor = nn.Parameter(torch.zeros(c_in))
            self.register_buffer('mask', mask)
        def forward(self, z, ldj, reverse=False, orig_img=None):
            z_in = z * self.mask
            nn_out = self.network(z_in) if orig_img is None else self.network(torch.cat([z_in, orig_img], dim=1))
            s, t = nn_out.chunk(2, dim=1)
            s_fac = self.scaling_factor.exp().view(1, -1, 1, 1)
            s = torch.tanh(s / s_fac) * s_fac
            s = s * (1 - self.mask)
            t = t * (1 - self.mask)
            if not reverse:
                z = (z + t) * torch.exp(s)
                ldj += s.sum(dim=[1, 2, 3])
            else:
                z = (z * torch.exp(-s)) - t
                ldj -= s.sum(dim=[1, 2, 3])
            return z, ldj

    class SqueezeFlow(nn.Module):
        def forward(self, z, ldj, reverse=False):
            B, C, H, W = z.shape
            if not reverse:
                z = z.reshape(B, C, H // 2, 2, W // 2, 2)
                z = z.permute(0, 1, 3, 5, 2, 4)
                z = z.reshape(B, 4 * C, H // 2, W // 2)
            else:
                z = z.reshape(B, C // 4, 2, 2, H, W)
                z = z.permute(0, 1, 4, 2, 5, 3)
                z = z.reshape(B, C // 4, H * 2, W * 2)
            return z, ldj

    class SplitFlow(nn.Module):
        def __init__(self):
            super().__init__()
            self.prior = torch.distributions.normal.Normal(loc=0.0, scale=1.0)
        def forward(self, z, ldj, reverse=False):
            if not reverse:
                z, z_split = z.chunk(2, dim=1)
                ldj += self.prior.log_prob(z_split).sum(dim=[1, 2, 3])
            else:
                z_split = self.prior.sample(sample_shape=z.shape).to(z.device)
                z = torch.cat([z, z_split], dim=1)
                ldj -= self.prior.log_prob(z_split).sum(dim=[1, 2, 3])
            return z, ldj

    class ImageFlow(nn.Module):
        def __init__(self, flows):
            super().__init__()
            self.flows = nn.ModuleList(flows)
            self.prior = torch.distributions.normal.Normal(loc=0.0, scale=1.0)
        def encode(self, imgs):
            z, ldj = imgs, torch.zeros(imgs.shape[0], device=imgs.device)
            for flow in self.flows:
                z, ldj = flow(z, ldj, reverse=False)
            return z, ldj
        def _get_likelihood(self, imgs, return_ll=False):
            z, ldj = self.encode(imgs)
            log_pz = self.prior.log_prob(z).sum(dim=[1, 2, 3])
            log_px = ldj + log_pz
            nll = -log_px
            bpd = nll * np.log2(np.exp(1)) / np.prod(imgs.shape[1:])
            return bpd.mean() if not return_ll else log_px
        @torch.no_grad()
        def sample(self, img_shape, z_init=None):
            if z_init is None:
                z = self.prior.sample(sample_shape=img_shape)
            else:
                z = z_init
            ldj = torch.zeros(img_shape[0])
            for flow in reversed(self.flows):
                z, ldj = flow(z, ldj, reverse=True)
            return z

    flow_layers = [Dequantization()]
    for i in range(2):
        flow_layers += [CouplingLayer(network=GatedConvNet(c_in=1, c_hidden=4),
                                      mask=create_checkerboard_mask(h=8, w=8, invert=(i % 2 == 1)), c_in=1)]
    flow_layers += [SqueezeFlow()]
    for i in range(2):
        flow_layers += [CouplingLayer(network=GatedConvNet(c_in=4, c_hidden=8),
                                      mask=create_channel_mask(c_in=4, invert=(i % 2 == 1)), c_in=4)]
    flow_layers += [SplitFlow(), SqueezeFlow()]
    flow = ImageFlow(flow_layers)
    # perturb the zero-initialised output convs so the couplings do something
    with torch.no_grad():
        for m in flow.modules():
            if isinstance(m, CouplingLayer):
                m.network.nn[-1].weight.normal_(0, 0.05)
                m.scaling_factor.fill_(0.1)
    optimizer = torch.optim.Adam(flow.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.99)

    def step(imgs):
        loss = flow._get_likelihood(imgs)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss
    step = env.step(step)
    for i in range(3):
        imgs = env.randint(0, 256, (4, 1, 8, 8))
        env.rec(f"bpd {i}", step(imgs))
        scheduler.step()
    env.rec("state", flow.state_dict())
    with torch.no_grad():
        z = env.randn(2, 8, 2, 2)
        z_init = z
        ll = flow._get_likelihood(env.randint(0, 256, (2, 1, 8, 8)), return_ll=True)
        env.rec("ll", ll)
    torch.manual_seed(5)
    s = flow.sample(img_shape=[2, 8, 2, 2], z_init=z_init)
    env.rec("sample", s)
    env.rec("sample dtype", s.dtype)


def lora_parametrize(torch, env):
    nn, F = torch.nn, torch.nn.functional
    parametrize = torch.nn.utils.parametrize
    torch.manual_seed(0)

    class RichBoyNet(nn.Module):
        def __init__(self, hidden_size_1=32, hidden_size_2=16):
            super().__init__()
            self.linear1 = nn.Linear(12, hidden_size_1)
            self.linear2 = nn.Linear(hidden_size_1, hidden_size_2)
            self.linear3 = nn.Linear(hidden_size_2, 4)
            self.relu = nn.ReLU()
        def forward(self, img):
            x = img.view(-1, 12)
            x = self.relu(self.linear1(x))
            x = self.relu(self.linear2(x))
            return self.linear3(x)

    net = RichBoyNet()
    X = torch.randn(16, 12)
    Y = torch.randint(0, 4, (16,))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(net(X), Y).backward()
        opt.step()
    original_weights = {}
    for name, param in net.named_parameters():
        original_weights[name] = param.clone().detach()

    class LoRAParametrization(nn.Module):
        def __init__(self, features_in, features_out, rank=1, alpha=1):
            super().__init__()
            self.lora_A = nn.Parameter(torch.zeros((rank, features_out)))
            self.lora_B = nn.Parameter(torch.zeros((features_in, rank)))
            nn.init.normal_(self.lora_A, mean=0, std=1)
            self.scale = alpha / rank
            self.enabled = True
        def forward(self, original_weights):
            if self.enabled:
                return original_weights + torch.matmul(self.lora_B, self.lora_A).view(original_weights.shape) * self.scale
            return original_weights

    def linear_layer_parameterization(layer, rank=2, lora_alpha=1):
        features_in, features_out = layer.weight.shape
        return LoRAParametrization(features_in, features_out, rank=rank, alpha=lora_alpha)

    for lin in (net.linear1, net.linear2, net.linear3):
        parametrize.register_parametrization(lin, "weight", linear_layer_parameterization(lin))

    def enable_disable_lora(enabled=True):
        for layer in [net.linear1, net.linear2, net.linear3]:
            layer.parametrizations["weight"][0].enabled = enabled

    total_parameters_lora = 0
    total_parameters_non_lora = 0
    for index, layer in enumerate([net.linear1, net.linear2, net.linear3]):
        total_parameters_lora += layer.parametrizations["weight"][0].lora_A.nelement() + layer.parametrizations["weight"][0].lora_B.nelement()
        total_parameters_non_lora += layer.weight.nelement() + layer.bias.nelement()
    env.rec("counts", (total_parameters_lora, total_parameters_non_lora))
    env.rec("names", [n for n, _ in net.named_parameters()])
    env.rec("state keys", list(net.state_dict().keys()))
    for name, param in net.named_parameters():
        if 'lora' not in name:
            param.requires_grad = False
    opt = torch.optim.Adam([p for p in net.parameters() if p.requires_grad], lr=1e-2)
    def step(X, Y):
        loss = F.cross_entropy(net(X), Y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    step = env.step(step)
    for i in range(4):
        env.rec(f"lora loss {i}", step(X, Y))
    env.rec("frozen", torch.all(net.linear1.parametrizations.weight.original == original_weights['linear1.weight']).item())
    enable_disable_lora(enabled=True)
    env.rec("lora weight", net.linear1.weight)
    env.rec("equal", torch.equal(net.linear1.weight, net.linear1.parametrizations.weight.original
                                 + (net.linear1.parametrizations.weight[0].lora_B @ net.linear1.parametrizations.weight[0].lora_A) * net.linear1.parametrizations.weight[0].scale))
    enable_disable_lora(enabled=False)
    env.rec("disabled", torch.equal(net.linear1.weight, original_weights['linear1.weight']))
    with torch.no_grad():
        env.rec("out disabled", net(X))
    enable_disable_lora(enabled=True)
    with parametrize.cached():
        env.rec("out cached", net(X))
    parametrize.remove_parametrizations(net.linear2, "weight", leave_parametrized=True)
    env.rec("removed", (parametrize.is_parametrized(net.linear2), parametrize.is_parametrized(net.linear1), net.linear2.weight))


@pytest.mark.parametrize("program", [pytest.param(flows, marks=pytest.mark.slow),
                                     lora_parametrize])
def test_program(program):
    run_tutorial(program)
