"""untuned_models_seventeenth.py's Glow training step: _glow(lib, small) -> (model,
optimiser, loss closure) as the fifth set's training_step takes them (InvConv2dLU's start
drawn by NumPy, seeded by build)."""
import math

import numpy as np


def _glow(lib, small):
    # (glow-pytorch's model.py with affine coupling and LU, train.py's calc_loss and step at
    # n_bits 5; the first batch initialises the ActNorms under no_grad, as train.py's i == 0)
    from scipy import linalg as la
    nn, F = lib.nn, lib.nn.functional
    batch, size, n_flow, n_block, filt = (2, 8, 2, 2, 8) if small else (16, 32, 4, 3, 128)
    n_bits = 5
    n_bins = 2.0 ** n_bits
    logabs = lambda x: lib.log(lib.abs(x))

    class ActNorm(nn.Module):
        def __init__(self, in_channel, logdet=True):
            super().__init__()
            self.loc = nn.Parameter(lib.zeros(1, in_channel, 1, 1))
            self.scale = nn.Parameter(lib.ones(1, in_channel, 1, 1))
            self.register_buffer("initialized", lib.tensor(0, dtype=lib.uint8))
            self.logdet = logdet

        def initialize(self, input):
            with lib.no_grad():
                flatten = input.permute(1, 0, 2, 3).contiguous().view(input.shape[1], -1)
                mean = (flatten.mean(1).unsqueeze(1).unsqueeze(2).unsqueeze(3).permute(1, 0, 2, 3))
                std = (flatten.std(1).unsqueeze(1).unsqueeze(2).unsqueeze(3).permute(1, 0, 2, 3))
                self.loc.data.copy_(-mean)
                self.scale.data.copy_(1 / (std + 1e-6))

        def forward(self, input):
            _, _, height, width = input.shape
            if self.initialized.item() == 0:
                self.initialize(input)
                self.initialized.fill_(1)
            log_abs = logabs(self.scale)
            logdet = height * width * lib.sum(log_abs)
            return self.scale * (input + self.loc), logdet

    class InvConv2dLU(nn.Module):
        def __init__(self, in_channel):
            super().__init__()
            weight = np.random.randn(in_channel, in_channel)
            q, _ = la.qr(weight)
            w_p, w_l, w_u = la.lu(q.astype(np.float32))
            w_s = np.diag(w_u)
            w_u = np.triu(w_u, 1)
            u_mask = np.triu(np.ones_like(w_u), 1)
            l_mask = u_mask.T
            # (float32 there; .to(the default dtype) added so that the tests run it in float64)
            as_tensor = lambda a: lib.from_numpy(a.copy()).to(lib.get_default_dtype())
            w_p, w_l, w_s, w_u = as_tensor(w_p), as_tensor(w_l), as_tensor(w_s), as_tensor(w_u)
            self.register_buffer("w_p", w_p)
            self.register_buffer("u_mask", as_tensor(u_mask))
            self.register_buffer("l_mask", as_tensor(l_mask))
            self.register_buffer("s_sign", lib.sign(w_s))
            self.register_buffer("l_eye", lib.eye(l_mask.shape[0]))
            self.w_l = nn.Parameter(w_l)
            self.w_s = nn.Parameter(logabs(w_s))
            self.w_u = nn.Parameter(w_u)

        def forward(self, input):
            _, _, height, width = input.shape
            weight = self.calc_weight()
            out = F.conv2d(input, weight)
            logdet = height * width * lib.sum(self.w_s)
            return out, logdet

        def calc_weight(self):
            weight = (self.w_p @ (self.w_l * self.l_mask + self.l_eye)
                      @ ((self.w_u * self.u_mask) + lib.diag(self.s_sign * lib.exp(self.w_s))))
            return weight.unsqueeze(2).unsqueeze(3)

    class ZeroConv2d(nn.Module):
        def __init__(self, in_channel, out_channel, padding=1):
            super().__init__()
            self.conv = nn.Conv2d(in_channel, out_channel, 3, padding=0)
            self.conv.weight.data.zero_()
            self.conv.bias.data.zero_()
            self.scale = nn.Parameter(lib.zeros(1, out_channel, 1, 1))

        def forward(self, input):
            out = F.pad(input, [1, 1, 1, 1], value=1)
            out = self.conv(out)
            return out * lib.exp(self.scale * 3)

    class AffineCoupling(nn.Module):
        def __init__(self, in_channel, filter_size=512):
            super().__init__()
            self.net = nn.Sequential(nn.Conv2d(in_channel // 2, filter_size, 3, padding=1),
                                     nn.ReLU(inplace=True), nn.Conv2d(filter_size, filter_size, 1),
                                     nn.ReLU(inplace=True), ZeroConv2d(filter_size, in_channel))
            self.net[0].weight.data.normal_(0, 0.05)
            self.net[0].bias.data.zero_()
            self.net[2].weight.data.normal_(0, 0.05)
            self.net[2].bias.data.zero_()

        def forward(self, input):
            in_a, in_b = input.chunk(2, 1)
            log_s, t = self.net(in_a).chunk(2, 1)
            s = F.sigmoid(log_s + 2)
            out_b = (in_b + t) * s
            logdet = lib.sum(lib.log(s).view(input.shape[0], -1), 1)
            return lib.cat([in_a, out_b], 1), logdet

    class Flow(nn.Module):
        def __init__(self, in_channel):
            super().__init__()
            self.actnorm = ActNorm(in_channel)
            self.invconv = InvConv2dLU(in_channel)
            self.coupling = AffineCoupling(in_channel, filt)

        def forward(self, input):
            out, logdet = self.actnorm(input)
            out, det1 = self.invconv(out)
            out, det2 = self.coupling(out)
            logdet = logdet + det1
            if det2 is not None:
                logdet = logdet + det2
            return out, logdet

    def gaussian_log_p(x, mean, log_sd):
        return -0.5 * math.log(2 * math.pi) - log_sd - 0.5 * (x - mean) ** 2 / lib.exp(2 * log_sd)

    class Block(nn.Module):
        def __init__(self, in_channel, n_flow, split=True):
            super().__init__()
            squeeze_dim = in_channel * 4
            self.flows = nn.ModuleList([Flow(squeeze_dim) for i in range(n_flow)])
            self.split = split
            self.prior = (ZeroConv2d(in_channel * 2, in_channel * 4) if split
                          else ZeroConv2d(in_channel * 4, in_channel * 8))

        def forward(self, input):
            b_size, n_channel, height, width = input.shape
            squeezed = input.view(b_size, n_channel, height // 2, 2, width // 2, 2)
            squeezed = squeezed.permute(0, 1, 3, 5, 2, 4)
            out = squeezed.contiguous().view(b_size, n_channel * 4, height // 2, width // 2)
            logdet = 0
            for flow in self.flows:
                out, det = flow(out)
                logdet = logdet + det
            if self.split:
                out, z_new = out.chunk(2, 1)
                mean, log_sd = self.prior(out).chunk(2, 1)
                log_p = gaussian_log_p(z_new, mean, log_sd)
                log_p = log_p.view(b_size, -1).sum(1)
            else:
                zero = lib.zeros_like(out)
                mean, log_sd = self.prior(zero).chunk(2, 1)
                log_p = gaussian_log_p(out, mean, log_sd)
                log_p = log_p.view(b_size, -1).sum(1)
                z_new = out
            return out, logdet, log_p, z_new

    class Glow(nn.Module):
        def __init__(self, in_channel, n_flow, n_block):
            super().__init__()
            self.blocks = nn.ModuleList()
            n_channel = in_channel
            for i in range(n_block - 1):
                self.blocks.append(Block(n_channel, n_flow))
                n_channel *= 2
            self.blocks.append(Block(n_channel, n_flow, split=False))

        def forward(self, input):
            log_p_sum, logdet, out, z_outs = 0, 0, input, []
            for block in self.blocks:
                out, det, log_p, z_new = block(out)
                z_outs.append(z_new)
                logdet = logdet + det
                if log_p is not None:
                    log_p_sum = log_p_sum + log_p
            return log_p_sum, logdet, z_outs

    def calc_loss(log_p, logdet, image_size, n_bins):
        n_pixel = image_size * image_size * 3
        loss = -math.log(n_bins) * n_pixel
        loss = loss + logdet + log_p
        return ((-loss / (math.log(2) * n_pixel)).mean(), (log_p / (math.log(2) * n_pixel)).mean(),
                (logdet / (math.log(2) * n_pixel)).mean())

    model = Glow(3, n_flow, n_block)
    optimizer = lib.optim.Adam(model.parameters(), lr=1e-4)
    image = lib.floor(lib.rand(batch, 3, size, size) * 255 / 2 ** (8 - n_bits)) / n_bins - 0.5
    with lib.no_grad():
        model(image + lib.rand_like(image) / n_bins)

    def loss():
        log_p, logdet, _ = model(image + lib.rand_like(image) / n_bins)
        logdet = logdet.mean()
        loss, log_p, log_det = calc_loss(log_p, logdet, size, n_bins)
        return loss
    return model, optimizer, loss
