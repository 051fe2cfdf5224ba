"""Vision and generative tutorial programs, written as the papers' reference code and the
blog posts write them (seeded with torch.manual_seed, modules built by their constructors;
see tutorial_harness.py): a masked autoencoder's random masking, ConvNeXt blocks with
DropPath, Swin's shifted window attention, Glow's ActNorm / invertible 1x1 conv / affine
coupling, MADE, planar flows, a feature pyramid for segmentation, an SE-ResNet, a point
cloud autoencoder with the Chamfer distance, a small WaveNet on mu-law audio."""
import math

import numpy as np

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def mae_random_masking(torch, env):
    """MAE: patches embedded with a strided Conv2d, per-sample random masking by argsort of
    torch.rand noise and gather, mask tokens put back with the restoring permutation, the
    loss on the masked patches only (normalised pixel targets from patchify via einsum)."""
    nn = torch.nn

    class MAE(nn.Module):
        def __init__(self, img=8, patch=2, dim=16, mask_ratio=0.75):
            super().__init__()
            self.patch, self.mask_ratio = patch, mask_ratio
            self.patch_embed = nn.Conv2d(1, dim, patch, patch)
            num_patches = (img // patch) ** 2
            self.pos_embed = nn.Parameter(torch.zeros(1, num_patches, dim))
            nn.init.normal_(self.pos_embed, std=0.02)
            self.encoder = nn.TransformerEncoderLayer(dim, 2, 32, dropout=0.0,
                                                      batch_first=True, norm_first=True)
            self.mask_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.decoder = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.GELU())
            self.pred = nn.Linear(dim, patch * patch)

        def patchify(self, imgs):
            p = self.patch
            h = w = imgs.shape[2] // p
            x = imgs.reshape(imgs.shape[0], 1, h, p, w, p)
            x = torch.einsum("nchpwq->nhwpqc", x)
            return x.reshape(imgs.shape[0], h * w, p * p)

        def random_masking(self, x):
            N, L, D = x.shape
            len_keep = int(L * (1 - self.mask_ratio))
            noise = torch.rand(N, L)
            ids_shuffle = torch.argsort(noise, dim=1)
            ids_restore = torch.argsort(ids_shuffle, dim=1)
            ids_keep = ids_shuffle[:, :len_keep]
            x_masked = torch.gather(x, dim=1, index=ids_keep.unsqueeze(-1).repeat(1, 1, D))
            mask = torch.ones([N, L])
            mask[:, :len_keep] = 0
            mask = torch.gather(mask, dim=1, index=ids_restore)
            return x_masked, mask, ids_restore

        def forward(self, imgs):
            x = self.patch_embed(imgs).flatten(2).transpose(1, 2) + self.pos_embed
            x, mask, ids_restore = self.random_masking(x)
            x = self.encoder(x)
            N, L = mask.shape
            mask_tokens = self.mask_token.repeat(N, L - x.shape[1], 1)
            x_ = torch.cat([x, mask_tokens], dim=1)
            x_ = torch.gather(x_, dim=1, index=ids_restore.unsqueeze(-1).repeat(1, 1, x.shape[2]))
            pred = self.pred(self.decoder(x_ + self.pos_embed))
            target = self.patchify(imgs)
            mean, var = target.mean(dim=-1, keepdim=True), target.var(dim=-1, keepdim=True)
            target = (target - mean) / (var + 1.e-6) ** .5
            loss = ((pred - target) ** 2).mean(dim=-1)
            return (loss * mask).sum() / mask.sum(), pred, mask

    torch.manual_seed(0)
    model = MAE()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.05)
    imgs = torch.rand(12, 1, 8, 8)

    def step(imgs):
        loss, _, mask = model(imgs)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), mask

    step = env.step(step)
    env.rec("hist", [step(imgs[i:i + 4]) for _ in range(2) for i in range(0, 12, 4)])
    env.rec("weights", model.state_dict())


def convnext_droppath(torch, env):
    """ConvNeXt: a patchify stem with a channels-first LayerNorm written by hand, blocks of
    7x7 depthwise conv, permute to channels-last, LayerNorm, inverted MLP, layer scale gamma
    and DropPath (x.new_empty(shape).bernoulli_(keep_prob).div_(keep_prob)), trunc_normal_
    init through apply, eval without DropPath."""
    nn, F = torch.nn, torch.nn.functional

    class DropPath(nn.Module):
        def __init__(self, drop_prob=0.0):
            super().__init__()
            self.drop_prob = drop_prob

        def forward(self, x):
            if self.drop_prob == 0. or not self.training:
                return x
            keep_prob = 1 - self.drop_prob
            shape = (x.shape[0],) + (1,) * (x.ndim - 1)
            random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
            if keep_prob > 0.0:
                random_tensor.div_(keep_prob)
            return x * random_tensor

    class LayerNorm(nn.Module):
        def __init__(self, normalized_shape, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(normalized_shape))
            self.bias = nn.Parameter(torch.zeros(normalized_shape))
            self.eps = eps

        def forward(self, x):
            u = x.mean(1, keepdim=True)
            s = (x - u).pow(2).mean(1, keepdim=True)
            x = (x - u) / torch.sqrt(s + self.eps)
            return self.weight[:, None, None] * x + self.bias[:, None, None]

    class Block(nn.Module):
        def __init__(self, dim, drop_path=0., layer_scale_init_value=0.1):
            super().__init__()
            self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
            self.norm = nn.LayerNorm(dim, eps=1e-6)
            self.pwconv1 = nn.Linear(dim, 4 * dim)
            self.act = nn.GELU()
            self.pwconv2 = nn.Linear(4 * dim, dim)
            self.gamma = nn.Parameter(layer_scale_init_value * torch.ones((dim)),
                                      requires_grad=True)
            self.drop_path = DropPath(drop_path) if drop_path > 0. else nn.Identity()

        def forward(self, x):
            input = x
            x = self.dwconv(x)
            x = x.permute(0, 2, 3, 1)
            x = self.pwconv2(self.act(self.pwconv1(self.norm(x))))
            x = self.gamma * x
            x = x.permute(0, 3, 1, 2)
            return input + self.drop_path(x)

    class ConvNeXt(nn.Module):
        def __init__(self, dims=(8, 16), num_classes=3, drop_path_rate=0.3):
            super().__init__()
            dp_rates = [x.item() for x in torch.linspace(0, drop_path_rate, 4)]
            self.stem = nn.Sequential(nn.Conv2d(3, dims[0], kernel_size=2, stride=2),
                                      LayerNorm(dims[0]))
            self.stage1 = nn.Sequential(*[Block(dims[0], dp_rates[j]) for j in range(2)])
            self.down = nn.Sequential(LayerNorm(dims[0]),
                                      nn.Conv2d(dims[0], dims[1], kernel_size=2, stride=2))
            self.stage2 = nn.Sequential(*[Block(dims[1], dp_rates[2 + j]) for j in range(2)])
            self.norm = nn.LayerNorm(dims[-1], eps=1e-6)
            self.head = nn.Linear(dims[-1], num_classes)
            self.apply(self._init_weights)

        def _init_weights(self, m):
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, std=.2)
                nn.init.constant_(m.bias, 0)

        def forward(self, x):
            x = self.stage2(self.down(self.stage1(self.stem(x))))
            return self.head(self.norm(x.mean([-2, -1])))

    torch.manual_seed(0)
    model = ConvNeXt()
    opt = torch.optim.AdamW(model.parameters(), lr=4e-3, weight_decay=0.05)
    X, y = torch.randn(16, 3, 8, 8), torch.randint(0, 3, (16,))
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

    def step(X, y):
        model.train()
        loss = criterion(model(X), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    env.rec("losses", [step(X[i:i + 8], y[i:i + 8]) for _ in range(3) for i in (0, 8)])
    model.eval()
    with torch.no_grad():
        env.rec("eval", model(X))
    env.rec("weights", model.state_dict())


def swin_shifted_windows(torch, env):
    """Swin Transformer blocks as the reference code writes them: window_partition /
    window_reverse with view and permute, a relative position bias table indexed through a
    registered buffer built with meshgrid, torch.roll for the shifted windows and their
    attention mask (masked_fill with -100)."""
    nn, F = torch.nn, torch.nn.functional

    def window_partition(x, ws):
        B, H, W, C = x.shape
        x = x.view(B, H // ws, ws, W // ws, ws, C)
        return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, ws, ws, C)

    def window_reverse(windows, ws, H, W):
        B = int(windows.shape[0] / (H * W / ws / ws))
        x = windows.view(B, H // ws, W // ws, ws, ws, -1)
        return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)

    class WindowAttention(nn.Module):
        def __init__(self, dim, ws, num_heads):
            super().__init__()
            self.dim, self.ws, self.num_heads = dim, ws, num_heads
            self.scale = (dim // num_heads) ** -0.5
            self.relative_position_bias_table = nn.Parameter(
                torch.zeros((2 * ws - 1) * (2 * ws - 1), num_heads))
            coords = torch.stack(torch.meshgrid([torch.arange(ws), torch.arange(ws)],
                                                indexing="ij"))
            coords_flatten = torch.flatten(coords, 1)
            relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]
            relative_coords = relative_coords.permute(1, 2, 0).contiguous()
            relative_coords[:, :, 0] += ws - 1
            relative_coords[:, :, 1] += ws - 1
            relative_coords[:, :, 0] *= 2 * ws - 1
            self.register_buffer("relative_position_index", relative_coords.sum(-1))
            self.qkv = nn.Linear(dim, dim * 3)
            self.proj = nn.Linear(dim, dim)
            nn.init.trunc_normal_(self.relative_position_bias_table, std=.02)
            self.softmax = nn.Softmax(dim=-1)

        def forward(self, x, mask=None):
            B_, N, C = x.shape
            qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads, C // self.num_heads)
            qkv = qkv.permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            attn = (q * self.scale) @ k.transpose(-2, -1)
            bias = self.relative_position_bias_table[self.relative_position_index.view(-1)]
            bias = bias.view(N, N, -1).permute(2, 0, 1).contiguous()
            attn = attn + bias.unsqueeze(0)
            if mask is not None:
                nW = mask.shape[0]
                attn = attn.view(B_ // nW, nW, self.num_heads, N, N)
                attn = attn + mask.unsqueeze(1).unsqueeze(0)
                attn = attn.view(-1, self.num_heads, N, N)
            attn = self.softmax(attn)
            return self.proj((attn @ v).transpose(1, 2).reshape(B_, N, C))

    class SwinBlock(nn.Module):
        def __init__(self, dim, res, ws, shift, heads=2):
            super().__init__()
            self.res, self.ws, self.shift = res, ws, shift
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.attn = WindowAttention(dim, ws, heads)
            self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
            if shift > 0:
                H = W = res
                img_mask = torch.zeros((1, H, W, 1))
                cnt = 0
                for h in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
                    for w in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
                        img_mask[:, h, w, :] = cnt
                        cnt += 1
                mask_windows = window_partition(img_mask, ws).view(-1, ws * ws)
                attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
                attn_mask = attn_mask.masked_fill(attn_mask != 0, float(-100.0)).masked_fill(
                    attn_mask == 0, float(0.0))
            else:
                attn_mask = None
            self.register_buffer("attn_mask", attn_mask)

        def forward(self, x):
            H = W = self.res
            B, L, C = x.shape
            shortcut = x
            x = self.norm1(x).view(B, H, W, C)
            if self.shift > 0:
                x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
            x_windows = window_partition(x, self.ws).view(-1, self.ws * self.ws, C)
            attn_windows = self.attn(x_windows, mask=self.attn_mask)
            x = window_reverse(attn_windows.view(-1, self.ws, self.ws, C), self.ws, H, W)
            if self.shift > 0:
                x = torch.roll(x, shifts=(self.shift, self.shift), dims=(1, 2))
            x = shortcut + x.view(B, H * W, C)
            return x + self.mlp(self.norm2(x))

    class Swin(nn.Module):
        def __init__(self, dim=16, classes=4):
            super().__init__()
            self.patch_embed = nn.Conv2d(3, dim, 2, 2)
            self.blocks = nn.Sequential(SwinBlock(dim, 8, 4, 0), SwinBlock(dim, 8, 4, 2))
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, classes)

        def forward(self, x):
            x = self.patch_embed(x).flatten(2).transpose(1, 2)
            x = self.norm(self.blocks(x))
            return self.head(x.mean(1))

    torch.manual_seed(0)
    model = Swin()
    env.rec("buffers", [(n, b.dtype, b) for n, b in model.named_buffers()])
    # (SGD: the key bias gets a gradient of rounding noise only (softmax ignores a shift
    # shared by all keys), which AdamW would turn into +-lr steps in any library)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    X, y = torch.randn(8, 3, 16, 16), torch.randint(0, 4, (8,))

    def step(X, y):
        loss = F.cross_entropy(model(X), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    env.rec("losses", [step(X[i:i + 4], y[i:i + 4]) for _ in range(2) for i in (0, 4)])
    env.rec("weights", model.state_dict())


def glow_flow(torch, env):
    """Glow (rosinality's glow-pytorch, shrunk): squeeze, ActNorm initialised from the first
    batch (an `initialized` uint8 buffer, .data.copy_), an invertible 1x1 conv started from
    torch.linalg.qr of randn with slogdet in float64, an affine coupling with a zero-init
    conv and sigmoid scale; the NLL in bits per dim, then sampling through the inverses.
    (The init batch is not a training batch: on it the loc gradient is rounding noise.)"""
    nn, F = torch.nn, torch.nn.functional
    logabs = lambda x: torch.log(torch.abs(x))  # noqa: E731

    class ActNorm(nn.Module):
        def __init__(self, in_channel):
            super().__init__()
            self.loc = nn.Parameter(torch.zeros(1, in_channel, 1, 1))
            self.scale = nn.Parameter(torch.ones(1, in_channel, 1, 1))
            self.register_buffer("initialized", torch.tensor(0, dtype=torch.uint8))

        def initialize(self, input):
            with torch.no_grad():
                flatten = input.permute(1, 0, 2, 3).contiguous().view(input.shape[1], -1)
                mean = flatten.mean(1).unsqueeze(1).unsqueeze(2).unsqueeze(3).permute(1, 0, 2, 3)
                std = flatten.std(1).unsqueeze(1).unsqueeze(2).unsqueeze(3).permute(1, 0, 2, 3)
                self.loc.data.copy_(-mean)
                self.scale.data.copy_(1 / (std + 1e-6))

        def forward(self, input):
            _, _, height, width = input.shape
            if self.initialized.item() == 0:
                self.initialize(input)
                self.initialized.fill_(1)
            logdet = height * width * torch.sum(logabs(self.scale))
            return self.scale * (input + self.loc), logdet

        def reverse(self, output):
            return output / self.scale - self.loc

    class InvConv2d(nn.Module):
        def __init__(self, in_channel):
            super().__init__()
            weight = torch.randn(in_channel, in_channel)
            q, _ = torch.linalg.qr(weight)
            self.weight = nn.Parameter(q.unsqueeze(2).unsqueeze(3))

        def forward(self, input):
            _, _, height, width = input.shape
            out = F.conv2d(input, self.weight)
            logdet = height * width * torch.slogdet(self.weight.squeeze().double())[1].float()
            return out, logdet

        def reverse(self, output):
            return F.conv2d(output, self.weight.squeeze().inverse().unsqueeze(2).unsqueeze(3))

    class ZeroConv2d(nn.Module):
        def __init__(self, in_channel, out_channel):
            super().__init__()
            self.conv = nn.Conv2d(in_channel, out_channel, 3, padding=1)
            self.conv.weight.data.zero_()
            self.conv.bias.data.zero_()
            self.scale = nn.Parameter(torch.zeros(1, out_channel, 1, 1))

        def forward(self, input):
            return self.conv(input) * torch.exp(self.scale * 3)

    class AffineCoupling(nn.Module):
        def __init__(self, in_channel, filter_size=16):
            super().__init__()
            self.net = nn.Sequential(nn.Conv2d(in_channel // 2, filter_size, 3, padding=1),
                                     nn.ReLU(inplace=True),
                                     nn.Conv2d(filter_size, filter_size, 1),
                                     nn.ReLU(inplace=True),
                                     ZeroConv2d(filter_size, in_channel))
            self.net[0].weight.data.normal_(0, 0.05)
            self.net[0].bias.data.zero_()

        def forward(self, input):
            in_a, in_b = input.chunk(2, 1)
            log_s, t = self.net(in_a).chunk(2, 1)
            s = torch.sigmoid(log_s + 2)
            out_b = (in_b + t) * s
            logdet = torch.sum(torch.log(s).view(input.shape[0], -1), 1)
            return torch.cat([in_a, out_b], 1), logdet

        def reverse(self, output):
            out_a, out_b = output.chunk(2, 1)
            log_s, t = self.net(out_a).chunk(2, 1)
            s = torch.sigmoid(log_s + 2)
            return torch.cat([out_a, out_b / s - t], 1)

    class Glow(nn.Module):
        def __init__(self, in_channel=4, n_flow=2):
            super().__init__()
            self.flows = nn.ModuleList()
            for _ in range(n_flow):
                self.flows.extend([ActNorm(in_channel), InvConv2d(in_channel),
                                   AffineCoupling(in_channel)])

        def forward(self, input):
            b, c, h, w = input.shape
            out = input.view(b, c, h // 2, 2, w // 2, 2).permute(0, 1, 3, 5, 2, 4)
            out = out.contiguous().view(b, c * 4, h // 2, w // 2)
            logdet = 0
            for flow in self.flows:
                out, det = flow(out)
                logdet = logdet + det
            log_p = (-0.5 * math.log(2 * math.pi) - 0.5 * out ** 2).view(b, -1).sum(1)
            return log_p, logdet, out

        def reverse(self, z):
            for flow in self.flows[::-1]:
                z = flow.reverse(z)
            b, c, h, w = z.shape
            x = z.view(b, c // 4, 2, 2, h, w).permute(0, 1, 4, 2, 5, 3)
            return x.contiguous().view(b, c // 4, h * 2, w * 2)

    torch.manual_seed(0)
    model = Glow()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    n_bins, n_pixel = 32.0, 1 * 8 * 8
    data = torch.floor(torch.rand(32, 1, 8, 8) * n_bins) / n_bins - 0.5
    with torch.no_grad():       # (ActNorm's data-dependent init on a batch of its own)
        model(data[24:] + torch.rand(8, 1, 8, 8) / n_bins)

    def step(image):
        image = image + torch.rand_like(image) / n_bins
        log_p, logdet, _ = model(image)
        logdet = logdet.mean()
        loss = -math.log(n_bins) * n_pixel + logdet + log_p.mean()
        loss = -loss / (math.log(2) * n_pixel)
        model.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), (log_p.mean() / (math.log(2) * n_pixel)).item()

    step = env.step(step)
    env.rec("hist", [step(data[i:i + 8]) for _ in range(2) for i in range(0, 24, 8)])
    env.rec("initialized", [f.initialized for f in model.flows if hasattr(f, "initialized")])
    with torch.no_grad():
        z = torch.randn(3, 4, 4, 4) * 0.7
        x = model.reverse(z)
        _, _, z_back = model(x)
    env.rec("sample", (x, z_back))
    env.rec("weights", model.state_dict())


def made_autoregressive(torch, env):
    """MADE (Karpathy's pytorch-made): MaskedLinear subclassing nn.Linear with a registered
    mask buffer set by copy_ from NumPy connectivity (RandomState degrees), BCE with logits
    on binarised data, then ancestral sampling one dimension at a time with bernoulli."""
    nn, F = torch.nn, torch.nn.functional

    class MaskedLinear(nn.Linear):
        def __init__(self, in_features, out_features, bias=True):
            super().__init__(in_features, out_features, bias)
            self.register_buffer("mask", torch.ones(out_features, in_features))

        def set_mask(self, mask):
            self.mask.data.copy_(torch.from_numpy(mask.astype(np.uint8).T))

        def forward(self, input):
            return F.linear(input, self.mask * self.weight, self.bias)

    class MADE(nn.Module):
        def __init__(self, nin, hidden_sizes, nout):
            super().__init__()
            self.nin, self.nout, self.hidden_sizes = nin, nout, hidden_sizes
            self.net = []
            hs = [nin] + hidden_sizes + [nout]
            for h0, h1 in zip(hs, hs[1:]):
                self.net.extend([MaskedLinear(h0, h1), nn.ReLU()])
            self.net.pop()
            self.net = nn.Sequential(*self.net)
            self.m = {}
            self.update_masks()

        def update_masks(self):
            L = len(self.hidden_sizes)
            rng = np.random.RandomState(0)
            self.m[-1] = np.arange(self.nin)
            for l in range(L):
                self.m[l] = rng.randint(self.m[l - 1].min(), self.nin - 1,
                                        size=self.hidden_sizes[l])
            masks = [self.m[l - 1][:, None] <= self.m[l][None, :] for l in range(L)]
            masks.append(self.m[L - 1][:, None] < self.m[-1][None, :])
            layers = [l for l in self.net.modules() if isinstance(l, MaskedLinear)]
            for l, m in zip(layers, masks):
                l.set_mask(m)

        def forward(self, x):
            return self.net(x)

    torch.manual_seed(0)
    D = 8
    model = MADE(D, [32, 32], D)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    probs = torch.linspace(0.1, 0.9, D)
    data = (torch.rand(64, D) < probs).float()

    def step(xb):
        logits = model(xb)
        loss = F.binary_cross_entropy_with_logits(logits, xb, reduction="sum") / xb.size(0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    env.rec("losses", [step(data[i:i + 16]) for _ in range(3) for i in range(0, 64, 16)])
    # autoregressive property: output d does not depend on inputs >= d
    x = torch.rand(1, D, requires_grad=True)
    model(x)[0, 3].backward()
    env.rec("dependency", x.grad != 0)

    @torch.no_grad()
    def sample(n):
        x = torch.zeros(n, D)
        for i in range(D):
            x[:, i] = torch.bernoulli(torch.sigmoid(model(x)[:, i]))
        return x

    env.rec("samples", sample(6))
    env.rec("weights", model.state_dict())


def planar_flows(torch, env):
    """Planar flows (Rezende & Mohamed) fitted by reverse KL to the paper's ring-shaped
    energy: u_hat from softplus so the flow stays invertible, log|1 + psi u|, base samples
    drawn with torch.randn inside the step."""
    nn, F = torch.nn, torch.nn.functional

    class PlanarFlow(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.w = nn.Parameter(torch.randn(1, dim) * 0.1)
            self.u = nn.Parameter(torch.randn(1, dim) * 0.1)
            self.b = nn.Parameter(torch.zeros(1))

        def forward(self, z):
            wu = (self.w @ self.u.t()).squeeze()
            u_hat = self.u + (-1 + F.softplus(wu) - wu) * self.w / (self.w.norm() ** 2)
            lin = z @ self.w.t() + self.b
            f = z + u_hat * torch.tanh(lin)
            psi = (1 - torch.tanh(lin) ** 2) * self.w
            log_det = torch.log((1 + psi @ u_hat.t()).abs() + 1e-8).squeeze(-1)
            return f, log_det

    def energy(z):
        z1, z2 = z[:, 0], z[:, 1]
        ring = 0.5 * ((torch.norm(z, dim=1) - 2) / 0.4) ** 2
        return ring - torch.log(torch.exp(-0.5 * ((z1 - 2) / 0.6) ** 2)
                                + torch.exp(-0.5 * ((z1 + 2) / 0.6) ** 2))

    torch.manual_seed(0)
    flows = nn.ModuleList([PlanarFlow(2) for _ in range(6)])
    opt = torch.optim.RMSprop(flows.parameters(), lr=1e-2, momentum=0.9)
    base = torch.distributions.MultivariateNormal(torch.zeros(2), torch.eye(2))

    def step(n):
        z = torch.randn(n, 2)
        log_q = base.log_prob(z)
        for flow in flows:
            z, log_det = flow(z)
            log_q = log_q - log_det
        loss = (log_q + energy(z)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    env.rec("losses", [step(64) for _ in range(10)])
    env.rec("weights", list(flows.parameters()))


def fpn_segmentation(torch, env):
    """A feature-pyramid segmentation net: strided conv stages, 1x1 laterals, top-down path
    with F.interpolate (nearest by scale_factor, bilinear to a size with
    align_corners=False), per-pixel cross entropy with ignore_index=255 plus a soft Dice
    term, and mean IoU from a bincount confusion matrix."""
    nn, F = torch.nn, torch.nn.functional

    def conv_bn(cin, cout, stride):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
                             nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    class FPN(nn.Module):
        def __init__(self, num_classes=3):
            super().__init__()
            self.c1, self.c2, self.c3 = conv_bn(3, 8, 1), conv_bn(8, 16, 2), conv_bn(16, 32, 2)
            self.lat1, self.lat2, self.lat3 = (nn.Conv2d(8, 16, 1), nn.Conv2d(16, 16, 1),
                                               nn.Conv2d(32, 16, 1))
            self.head = nn.Conv2d(16, num_classes, 3, padding=1)

        def forward(self, x):
            c1 = self.c1(x)
            c2 = self.c2(c1)
            c3 = self.c3(c2)
            p3 = self.lat3(c3)
            p2 = self.lat2(c2) + F.interpolate(p3, scale_factor=2, mode="nearest")
            p1 = self.lat1(c1) + F.interpolate(p2, size=c1.shape[-2:], mode="bilinear",
                                               align_corners=False)
            return self.head(p1)

    def dice_loss(logits, target, num_classes, ignore_index=255, eps=1.0):
        valid = (target != ignore_index).unsqueeze(1).float()
        probs = logits.softmax(dim=1) * valid
        onehot = F.one_hot(target.clamp(max=num_classes - 1), num_classes).permute(0, 3, 1, 2)
        onehot = onehot.float() * valid
        inter = (probs * onehot).sum(dim=(0, 2, 3))
        union = probs.sum(dim=(0, 2, 3)) + onehot.sum(dim=(0, 2, 3))
        return 1 - ((2 * inter + eps) / (union + eps)).mean()

    torch.manual_seed(0)
    model = FPN()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    X = torch.randn(6, 3, 12, 12)
    masks = (X[:, 0] > 0.5).long() + (X[:, 1] > 0.5).long()
    masks[:, :2, :2] = 255

    def step(X, masks):
        model.train()
        logits = model(X)
        loss = F.cross_entropy(logits, masks, ignore_index=255) + dice_loss(logits, masks, 3)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    env.rec("losses", [step(X[i:i + 3], masks[i:i + 3]) for _ in range(3) for i in (0, 3)])
    model.eval()
    with torch.no_grad():
        pred = model(X).argmax(1)
        keep = masks != 255
        conf = torch.bincount(masks[keep] * 3 + pred[keep], minlength=9).reshape(3, 3)
        iou = conf.diag() / (conf.sum(0) + conf.sum(1) - conf.diag()).clamp(min=1)
    env.rec("eval", (conf, iou, iou.mean()))
    env.rec("weights", model.state_dict())


def se_resnet(torch, env):
    """A small SE-ResNet: BasicBlocks with a squeeze-and-excitation gate
    (adaptive_avg_pool2d, Linear-ReLU-Linear-Sigmoid, expand_as), 1x1 downsample shortcuts,
    kaiming_normal_(mode='fan_out') through apply and zero-initialised last BN gamma,
    SGD with nesterov and CosineAnnealingLR, eval with running statistics."""
    nn, F = torch.nn, torch.nn.functional

    class SELayer(nn.Module):
        def __init__(self, channel, reduction=4):
            super().__init__()
            self.avg_pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Sequential(nn.Linear(channel, channel // reduction, bias=False),
                                    nn.ReLU(inplace=True),
                                    nn.Linear(channel // reduction, channel, bias=False),
                                    nn.Sigmoid())

        def forward(self, x):
            b, c, _, _ = x.size()
            y = self.avg_pool(x).view(b, c)
            y = self.fc(y).view(b, c, 1, 1)
            return x * y.expand_as(x)

    class SEBasicBlock(nn.Module):
        def __init__(self, inplanes, planes, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.se = SELayer(planes)
            self.downsample = None
            if stride != 1 or inplanes != planes:
                self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                                nn.BatchNorm2d(planes))

        def forward(self, x):
            residual = x if self.downsample is None else self.downsample(x)
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.se(self.bn2(self.conv2(out)))
            return F.relu(out + residual)

    class Net(nn.Module):
        def __init__(self, classes=4):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8),
                                      nn.ReLU(inplace=True))
            self.layer1 = SEBasicBlock(8, 8)
            self.layer2 = SEBasicBlock(8, 16, stride=2)
            self.fc = nn.Linear(16, classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)
            for m in self.modules():
                if isinstance(m, SEBasicBlock):
                    nn.init.constant_(m.bn2.weight, 0)

        def forward(self, x):
            x = self.layer2(self.layer1(self.stem(x)))
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1))

    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3)
    X, y = torch.randn(16, 3, 8, 8), torch.randint(0, 4, (16,))

    def step(X, y):
        loss = F.cross_entropy(model(X), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    hist = []
    for epoch in range(3):
        model.train()
        hist.append([step(X[i:i + 8], y[i:i + 8]) for i in (0, 8)])
        sched.step()
        model.eval()
        with torch.no_grad():
            hist.append((model(X).argmax(1) == y).sum().item())
    env.rec("hist", hist)
    env.rec("weights", model.state_dict())


def chamfer_pointcloud_ae(torch, env):
    """A point-cloud autoencoder: a PointNet-style shared MLP (Conv1d kernel 1) with a max
    over points, a Linear decoder to N x 3 points, the Chamfer distance from torch.cdist
    and min over both directions."""
    nn = torch.nn

    def chamfer(a, b):
        d = torch.cdist(a, b)
        return d.min(dim=2).values.pow(2).mean(1) + d.min(dim=1).values.pow(2).mean(1)

    class PointAE(nn.Module):
        def __init__(self, n_points=32, latent=16):
            super().__init__()
            self.n_points = n_points
            # (no bias before the BatchNorm: its gradient would be rounding noise, which
            # Adam turns into +-lr steps that the running mean then follows)
            self.encoder = nn.Sequential(nn.Conv1d(3, 32, 1, bias=False), nn.BatchNorm1d(32),
                                         nn.ReLU(),
                                         nn.Conv1d(32, latent, 1))
            self.decoder = nn.Sequential(nn.Linear(latent, 64), nn.ReLU(),
                                         nn.Linear(64, n_points * 3))

        def forward(self, pts):
            code = self.encoder(pts.transpose(1, 2)).max(dim=2)[0]
            return self.decoder(code).view(-1, self.n_points, 3), code

    torch.manual_seed(0)
    raw = torch.randn(16, 32, 3)
    radii = torch.rand(16, 1, 1) + 0.5
    clouds = raw / raw.norm(dim=-1, keepdim=True) * radii
    model = PointAE()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)

    def step(pts):
        recon, _ = model(pts)
        loss = chamfer(recon, pts).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    env.rec("losses", [step(clouds[i:i + 8]) for _ in range(4) for i in (0, 8)])
    model.eval()
    with torch.no_grad():
        recon, code = model(clouds)
        env.rec("eval", (chamfer(recon, clouds), code))


def wavenet_mulaw(torch, env):
    """A small WaveNet: mu-law companding (sign, log1p) to 64 classes, F.one_hot inputs,
    causal dilated Conv1d by left F.pad, gated tanh * sigmoid units with residual and skip
    1x1 convs, cross entropy over (B, C, T) logits, then sampling with multinomial."""
    nn, F = torch.nn, torch.nn.functional
    Q = 64

    def mu_law_encode(x, mu=Q - 1):
        y = torch.sign(x) * torch.log1p(mu * torch.abs(x)) / math.log1p(mu)
        return ((y + 1) / 2 * mu + 0.5).long()

    class CausalConv1d(nn.Conv1d):
        def __init__(self, cin, cout, kernel_size, dilation=1):
            super().__init__(cin, cout, kernel_size, dilation=dilation)
            self.left = (kernel_size - 1) * dilation

        def forward(self, x):
            return super().forward(F.pad(x, (self.left, 0)))

    class ResidualBlock(nn.Module):
        def __init__(self, channels, skip, dilation):
            super().__init__()
            self.filter = CausalConv1d(channels, channels, 2, dilation)
            self.gate = CausalConv1d(channels, channels, 2, dilation)
            self.res = nn.Conv1d(channels, channels, 1)
            self.skip = nn.Conv1d(channels, skip, 1)

        def forward(self, x):
            h = torch.tanh(self.filter(x)) * torch.sigmoid(self.gate(x))
            return x + self.res(h), self.skip(h)

    class WaveNet(nn.Module):
        def __init__(self, channels=16, skip=16, dilations=(1, 2, 4, 1, 2, 4)):
            super().__init__()
            self.input = CausalConv1d(Q, channels, 2)
            self.blocks = nn.ModuleList([ResidualBlock(channels, skip, d) for d in dilations])
            self.out = nn.Sequential(nn.ReLU(), nn.Conv1d(skip, skip, 1), nn.ReLU(),
                                     nn.Conv1d(skip, Q, 1))

        def forward(self, codes):
            x = self.input(F.one_hot(codes, Q).float().transpose(1, 2))
            skips = 0
            for block in self.blocks:
                x, s = block(x)
                skips = skips + s
            return self.out(skips)

    torch.manual_seed(0)
    t = torch.linspace(0, 1, 48)
    freqs = torch.rand(6, 1) * 8 + 2
    audio = 0.8 * torch.sin(2 * math.pi * freqs * t) * torch.exp(-t)
    codes = mu_law_encode(audio)
    env.rec("codes", codes)
    model = WaveNet()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def step(codes):
        logits = model(codes)
        loss = F.cross_entropy(logits[:, :, :-1], codes[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(step)
    env.rec("losses", [step(codes[i:i + 3]) for _ in range(3) for i in (0, 3)])
    model.eval()
    with torch.no_grad():
        seq = codes[:2, :8]
        env.rec("first probs", F.softmax(model(seq)[:, :, -1] / 0.8, dim=-1))
        for _ in range(6):
            probs = F.softmax(model(seq)[:, :, -1] / 0.8, dim=-1)
            seq = torch.cat([seq, torch.multinomial(probs, 1)], dim=1)
    env.rec("generated", seq, cross=False)
    env.rec("weights", model.state_dict())


PROGRAMS = {f.__name__: f for f in [
    mae_random_masking, convnext_droppath, swin_shifted_windows, glow_flow,
    made_autoregressive, planar_flows, fpn_segmentation, se_resnet, chamfer_pointcloud_ae,
    wavenet_mulaw]}

# (over ~1.5 s each with their LLVM builds, on a machine the suite shares: in the slow run)
SLOW = {"chamfer_pointcloud_ae", "convnext_droppath", "fpn_segmentation", "glow_flow",
        "mae_random_masking", "planar_flows", "se_resnet", "swin_shifted_windows",
        "wavenet_mulaw"}
XFAIL = {}
# (planar_flows: the loss is a difference of terms several times its size, computed on
# randn samples that agree with torch's to a few ulp: 1e-5 is out of reach by rounding)
RTOL = {"planar_flows": 1e-4}


@pytest.mark.parametrize("name", [pytest.param(n, marks=([pytest.mark.xfail(
    strict=True, reason=XFAIL[n])] if n in XFAIL else []) + ([pytest.mark.slow] if n in SLOW
                                                            else [])) for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], rtol=RTOL.get(name, 1e-5))
