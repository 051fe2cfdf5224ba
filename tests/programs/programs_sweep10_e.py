"""Tutorial programs on convolutional architectures, written as blog posts write them
(seeded with torch.manual_seed, modules built by their constructors; see
tutorial_harness.py): ConvNeXt blocks (depthwise 7x7, channels-last LayerNorm, layer
scale, stochastic depth), ShuffleNet units (grouped 1x1 convs, channel shuffle), CBAM
attention (channel + spatial), FiLM-conditioned GroupNorm convs, weight-standardised
convolutions, a DeepLab ASPP head with dilated convs and bilinear upsampling, a feature
pyramid with nearest upsampling, a WaveNet with gated dilated causal convs and mu-law
targets."""
import math


def convnext_drop_path(torch, env):
    """ConvNeXt: a patchify stem (4x4 stride 4), blocks of depthwise 7x7 conv
    (groups=C), permute to channels-last for LayerNorm / Linear / GELU / Linear, a layer
    scale gamma, DropPath (stochastic depth) by a per-sample torch.rand mask floor_'d
    and rescaled; AdamW with a OneCycleLR; train() / eval() switch stochastic depth."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    C = 8

    class DropPath(nn.Module):
        def __init__(self, p):
            super().__init__()
            self.p = p

        def forward(self, x):
            if not self.training or self.p == 0.0:
                return x
            keep = 1 - self.p
            mask = keep + torch.rand((x.shape[0],) + (1,) * (x.dim() - 1), dtype=x.dtype)
            mask.floor_()
            return x.div(keep) * mask

    class Block(nn.Module):
        def __init__(self, drop):
            super().__init__()
            self.dw = nn.Conv2d(C, C, 7, padding=3, groups=C)
            self.norm = nn.LayerNorm(C, eps=1e-6)
            self.pw1, self.pw2 = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
            self.act = nn.GELU()
            self.gamma = nn.Parameter(1e-1 * torch.ones(C))
            self.drop_path = DropPath(drop)

        def forward(self, x):
            h = self.dw(x).permute(0, 2, 3, 1)
            h = self.pw2(self.act(self.pw1(self.norm(h)))) * self.gamma
            return x + self.drop_path(h.permute(0, 3, 1, 2))

    model = nn.Sequential(nn.Conv2d(3, C, 4, stride=4), Block(0.0), Block(0.3),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(C),
                          nn.Linear(C, 4))
    x, y = torch.randn(8, 3, 12, 12), torch.randint(0, 4, (8,))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=5e-3, total_steps=6)

    def train_step(x, y):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    hist = []
    for _ in range(6):
        hist.append(step(x, y))
        sched.step()
    env.rec("hist", hist)
    env.rec("lr", sched.get_last_lr())
    model.eval()
    with torch.no_grad():
        env.rec("eval logits", model(x))
    env.rec("params", list(model.parameters()))


def shufflenet_units(torch, env):
    """ShuffleNet v1 units: grouped 1x1 convolutions (groups=2), channel shuffle by
    view(B, g, C // g, H, W).transpose(1, 2).contiguous().view(B, C, H, W), a depthwise
    3x3 conv; the stride-2 unit concatenates an avg-pooled shortcut, the stride-1 unit
    adds it; BatchNorm running stats compared after training."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    def channel_shuffle(x, groups):
        B, C, H, W = x.shape
        return x.view(B, groups, C // groups, H, W).transpose(1, 2).contiguous().view(B, C, H, W)

    class Unit(nn.Module):
        def __init__(self, c_in, c_out, stride, g=2):
            super().__init__()
            self.stride, self.g = stride, g
            mid = c_out // 4
            branch_out = c_out - c_in if stride == 2 else c_out
            self.gconv1 = nn.Conv2d(c_in, mid, 1, groups=g, bias=False)
            self.bn1 = nn.BatchNorm2d(mid)
            self.dw = nn.Conv2d(mid, mid, 3, stride=stride, padding=1, groups=mid, bias=False)
            self.bn2 = nn.BatchNorm2d(mid)
            self.gconv2 = nn.Conv2d(mid, branch_out, 1, groups=g, bias=False)
            self.bn3 = nn.BatchNorm2d(branch_out)

        def forward(self, x):
            h = F.relu(self.bn1(self.gconv1(x)))
            h = channel_shuffle(h, self.g)
            h = self.bn2(self.dw(h))
            h = self.bn3(self.gconv2(h))
            if self.stride == 2:
                return F.relu(torch.cat([F.avg_pool2d(x, 3, stride=2, padding=1), h], 1))
            return F.relu(x + h)

    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          Unit(8, 16, 2), Unit(16, 16, 1),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 3))
    data = torch.randn(12, 3, 8, 8)
    labels = torch.randint(0, 3, (12,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data, labels),
                                         batch_size=6, shuffle=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=4e-5)

    def train_step(x, y):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(3) for x, y in loader])
    env.rec("shuffle", channel_shuffle(torch.arange(8.0).view(1, 8, 1, 1), 2).flatten())
    env.rec("buffers", list(model.buffers()))
    env.rec("params", list(model.parameters()))


def cbam_attention(torch, env):
    """CBAM on a small CNN: channel attention from a shared MLP over adaptive avg- and
    max-pooled descriptors, spatial attention from a 7x7 conv over the channel-wise mean
    and max (torch.max(dim=1, keepdim=True) returning values, indices); the attention
    maps are recorded with forward hooks."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class ChannelAttention(nn.Module):
        def __init__(self, c, r=2):
            super().__init__()
            self.mlp = nn.Sequential(nn.Conv2d(c, c // r, 1), nn.ReLU(), nn.Conv2d(c // r, c, 1))

        def forward(self, x):
            a = self.mlp(F.adaptive_avg_pool2d(x, 1)) + self.mlp(F.adaptive_max_pool2d(x, 1))
            return torch.sigmoid(a)

    class SpatialAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 1, 7, padding=3, bias=False)

        def forward(self, x):
            mx, _ = torch.max(x, dim=1, keepdim=True)
            return torch.sigmoid(self.conv(torch.cat([x.mean(1, keepdim=True), mx], 1)))

    class CBAM(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.ca, self.sa = ChannelAttention(c), SpatialAttention()

        def forward(self, x):
            x = x * self.ca(x)
            return x * self.sa(x)

    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), CBAM(8), nn.MaxPool2d(2),
                          nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), CBAM(8),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
    def keep_map(module, inputs, output):
        module.last_map = output.detach()

    model[2].sa.register_forward_hook(keep_map)
    x = torch.randn(6, 1, 8, 8)
    y = (x[:, 0, :4, :4].mean((1, 2)) > 0).long()
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(5)])
    env.rec("last map", model[2].sa.last_map)
    env.rec("params", list(model.parameters()))


def film_weight_standardization(torch, env):
    """A conditional CNN: convolutions with weight standardisation (an nn.Conv2d subclass
    whose forward standardises self.weight with var_mean over (1, 2, 3) before F.conv2d),
    GroupNorm(affine=False), FiLM layers where a class embedding produces per-channel
    gamma / beta (chunk, view(-1, C, 1, 1)); eval with every class to pick the best."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class WSConv2d(nn.Conv2d):
        def forward(self, x):
            var, mean = torch.var_mean(self.weight, dim=(1, 2, 3), keepdim=True,
                                       unbiased=False)
            w = (self.weight - mean) / torch.sqrt(var + 1e-5)
            return F.conv2d(x, w, self.bias, self.stride, self.padding, self.dilation,
                            self.groups)

    class FiLMBlock(nn.Module):
        def __init__(self, c_in, c, n_cond):
            super().__init__()
            self.conv = WSConv2d(c_in, c, 3, padding=1)
            self.gn = nn.GroupNorm(2, c, affine=False)
            self.film = nn.Linear(n_cond, 2 * c)

        def forward(self, x, cond):
            gamma, beta = self.film(cond).chunk(2, dim=-1)
            h = self.gn(self.conv(x))
            return F.relu(h * (1 + gamma[:, :, None, None]) + beta[:, :, None, None])

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(3, 6)
            self.b1, self.b2 = FiLMBlock(1, 8, 6), FiLMBlock(8, 8, 6)
            self.head = nn.Linear(8, 1)

        def forward(self, x, c):
            e = self.embed(c)
            h = self.b2(F.max_pool2d(self.b1(x, e), 2), e)
            return self.head(h.mean((2, 3))).squeeze(-1)

    model = Net()
    x = torch.randn(9, 1, 6, 6)
    c = torch.arange(9) % 3
    target = x.mean((1, 2, 3)) * (c.float() - 1)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(x, c, t):
        opt.zero_grad()
        loss = F.mse_loss(model(x, c), t)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(x, c, target) for _ in range(5)])
    with torch.no_grad():
        scores = torch.stack([model(x, torch.full((9,), k)) for k in range(3)], 1)
    env.rec("scores", scores)
    env.rec("params", list(model.parameters()))


def aspp_fpn_segmentation(torch, env):
    """Segmentation heads: a backbone with two strided stages, a feature pyramid (lateral
    1x1 convs, F.interpolate(scale_factor=2, mode="nearest") top-down), an ASPP module of
    parallel dilated 3x3 convs (dilation 1, 2, 3) plus image pooling upsampled with
    F.interpolate(size=..., mode="bilinear", align_corners=False), logits upsampled to the
    input size; a pixel-wise cross entropy with ignore_index=255 and mean IoU at eval."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    K = 3

    class ASPP(nn.Module):
        def __init__(self, c_in, c):
            super().__init__()
            # (bias=False before the BatchNorm: a constant per channel gets a zero gradient,
            # which Adam would turn from rounding noise into steps)
            self.branches = nn.ModuleList(
                [nn.Conv2d(c_in, c, 1, bias=False)] +
                [nn.Conv2d(c_in, c, 3, padding=d, dilation=d, bias=False) for d in (2, 3)])
            self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c_in, c, 1, bias=False))
            self.project = nn.Sequential(nn.Conv2d(4 * c, c, 1, bias=False), nn.BatchNorm2d(c),
                                         nn.ReLU())

        def forward(self, x):
            outs = [b(x) for b in self.branches]
            outs.append(F.interpolate(self.pool(x), size=x.shape[-2:], mode="bilinear",
                                      align_corners=False))
            return self.project(torch.cat(outs, 1))

    class SegNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.s1 = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.ReLU())
            self.s2 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU())
            self.lat1, self.lat2 = nn.Conv2d(8, 8, 1), nn.Conv2d(16, 8, 1)
            self.aspp = ASPP(8, 8)
            self.cls = nn.Conv2d(8, K, 1)

        def forward(self, x):
            c1 = self.s1(x)
            c2 = self.s2(c1)
            p2 = self.lat2(c2)
            p1 = self.lat1(c1) + F.interpolate(p2, scale_factor=2, mode="nearest")
            out = self.cls(self.aspp(p1))
            return F.interpolate(out, size=x.shape[-2:], mode="bilinear", align_corners=False)

    model = SegNet()
    x = torch.randn(4, 1, 8, 8)
    target = (x > 0.5).long() + (x > 1.2).long()
    target = target.squeeze(1)
    target[:, 0, :] = 255
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(x, t):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), t, ignore_index=255)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(x, target) for _ in range(5)])
    model.eval()
    with torch.no_grad():
        pred = model(x).argmax(1)
    valid = target != 255
    ious = []
    for k in range(K):
        inter = ((pred == k) & (target == k) & valid).sum().item()
        union = (((pred == k) | (target == k)) & valid).sum().item()
        if union:
            ious.append(inter / union)
    env.rec("ious", ious)
    env.rec("params", list(model.parameters()))


def wavenet_gated(torch, env):
    """A small WaveNet: mu-law companding (sign * log1p(mu |x|) / log1p(mu)) quantised to
    16 classes as targets, a causal conv (F.pad on the left), residual blocks of dilated
    Conv1d (dilation 1, 2, 4) with gated tanh * sigmoid activations, 1x1 residual and skip
    convs, skip sum -> ReLU -> 1x1 -> logits; cross entropy over classes with (B, C, T)
    logits; the receptive field checked by a gradient w.r.t. the input."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    Q, R = 16, 8

    def mu_law(x, mu=Q - 1):
        y = torch.sign(x) * torch.log1p(mu * x.abs()) / math.log1p(mu)
        return ((y + 1) / 2 * mu + 0.5).long().clamp(0, mu)

    class CausalConv(nn.Conv1d):
        def forward(self, x):
            pad = (self.kernel_size[0] - 1) * self.dilation[0]
            return super().forward(F.pad(x, (pad, 0)))

    class ResBlock(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.filt = CausalConv(R, R, 2, dilation=d)
            self.gate = CausalConv(R, R, 2, dilation=d)
            self.res, self.skip = nn.Conv1d(R, R, 1), nn.Conv1d(R, R, 1)

        def forward(self, x):
            h = torch.tanh(self.filt(x)) * torch.sigmoid(self.gate(x))
            return x + self.res(h), self.skip(h)

    class WaveNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = CausalConv(1, R, 2)
            self.blocks = nn.ModuleList([ResBlock(d) for d in (1, 2, 4)])
            self.out = nn.Sequential(nn.ReLU(), nn.Conv1d(R, R, 1), nn.ReLU(), nn.Conv1d(R, Q, 1))

        def forward(self, x):
            h = self.inp(x)
            skips = 0
            for blk in self.blocks:
                h, s = blk(h)
                skips = skips + s
            return self.out(skips)

    model = WaveNet()
    t = torch.arange(24.0)
    wave = (torch.sin(t / 3)[None] * torch.linspace(0.3, 0.9, 3)[:, None]).unsqueeze(1)
    targets = mu_law(wave[:, 0, 1:])
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def train_step(wave, targets):
        opt.zero_grad()
        logits = model(wave[:, :, :-1])
        loss = F.cross_entropy(logits, targets)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("targets", targets)
    env.rec("hist", [step(wave, targets) for _ in range(5)])
    probe = wave[:1, :, :-1].clone().requires_grad_(True)
    model(probe)[0, :, 12].sum().backward()
    env.rec("receptive", (probe.grad[0, 0] != 0).nonzero().flatten())
    env.rec("params", list(model.parameters()))
