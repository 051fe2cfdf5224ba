"""Sweep 65 (p1), vision and field-prediction programs as tutorials write them, run with
PyTorch, with llgrad eagerly and with llgrad compiling the training step
(tutorial_harness.py):

- SqueezeNet's Fire modules (squeeze 1x1, expand 1x1 and 3x3 concatenated),
  MaxPool2d(ceil_mode=True), a final 1x1 classifier conv and AdaptiveAvgPool2d, SGD with
  Nesterov momentum;
- a CNN stepping a diffusion on a torus: Conv2d(padding_mode="circular"), the target made
  by torch.roll;
- LLaVA-style multimodal input: projected image features written into the text
  embeddings at the image-token positions by masked_scatter, a TransformerEncoderLayer,
  cross_entropy with ignore_index over the text positions;
- deformable sampling: offsets predicted by a conv, added to a base grid, F.grid_sample
  (padding_mode="border"), then a conv head;
- total-variation denoising with torch.diff on an image Parameter beside a data term;
- SincNet's band-pass filters rebuilt every forward from learnable cut-off frequencies
  (sin differences over a Hamming window, flipped and concatenated around the centre tap)
  feeding WaveNet blocks (causal F.pad, dilated Conv1d, tanh * sigmoid gates, residual and
  skip 1x1 convs), trained on mu-law-quantised next samples;
- a classifier's expected calibration error by torch.histc over confidences and a
  bucketize-sorted accuracy per bin.

calibration_ece found histc sending the step to eager with a warning (it is traced now when
its range is given: tests/compile/test_histc_traced_s65_p1.py), llava_masked_scatter the
same for masked_scatter (traced now: tests/compile/test_masked_scatter_traced_s65_p1.py)."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def squeezenet_fire(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Fire(nn.Module):
        def __init__(self, inplanes, squeeze, e1, e3):
            super().__init__()
            self.squeeze = nn.Conv2d(inplanes, squeeze, 1)
            self.expand1x1 = nn.Conv2d(squeeze, e1, 1)
            self.expand3x3 = nn.Conv2d(squeeze, e3, 3, padding=1)
            self.act = nn.ReLU(inplace=True)

        def forward(self, x):
            x = self.act(self.squeeze(x))
            return torch.cat([self.act(self.expand1x1(x)), self.act(self.expand3x3(x))], 1)

    class SqueezeNet(nn.Module):
        def __init__(self, num_classes=5):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 16, 3, stride=2), nn.ReLU(inplace=True),
                nn.MaxPool2d(3, 2, ceil_mode=True),
                Fire(16, 4, 8, 8), Fire(16, 4, 8, 8),
                nn.MaxPool2d(3, 2, ceil_mode=True), Fire(16, 6, 12, 12))
            self.classifier = nn.Sequential(nn.Conv2d(24, num_classes, 1), nn.ReLU(inplace=True),
                                            nn.AdaptiveAvgPool2d((1, 1)))

        def forward(self, x):
            return torch.flatten(self.classifier(self.features(x)), 1)

    model = env.init(SqueezeNet())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)

    def train_step(x, y):
        out = model(x)
        loss = F.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), out.detach()

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"step {it}", step(env.randn(4, 3, 23, 23), env.randint(0, 5, (4,))))
    env.rec("params", dict(model.state_dict()))


def circular_diffusion(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1, padding_mode="circular"), nn.Tanh(),
        nn.Conv2d(8, 1, 3, padding=1, padding_mode="circular")))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def laplacian_step(u, k=0.1):
        lap = (torch.roll(u, 1, -1) + torch.roll(u, -1, -1) + torch.roll(u, 1, -2)
               + torch.roll(u, -1, -2) - 4 * u)
        return u + k * lap

    def train_step(u):
        target = laplacian_step(u)
        pred = u + model(u)
        loss = F.mse_loss(pred, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):
        env.rec(f"loss {it}", step(env.randn(4, 1, 10, 12)))
    env.rec("params", dict(model.state_dict()))


def llava_masked_scatter(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, D, IMG, n_patches, L = 20, 16, 19, 3, 9

    class TinyVLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, D)
            self.vision = nn.Linear(12, D)
            self.projector = nn.Sequential(nn.Linear(D, D), nn.GELU(), nn.Linear(D, D))
            self.block = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, batch_first=True)
            self.lm_head = nn.Linear(D, V)

        def forward(self, ids, patches):
            emb = self.embed(ids)
            feats = self.projector(self.vision(patches))          # (B, n_patches, D)
            mask = (ids == IMG).unsqueeze(-1).expand_as(emb)
            emb = emb.masked_scatter(mask, feats.to(emb.dtype))
            causal = nn.Transformer.generate_square_subsequent_mask(ids.shape[1])
            return self.lm_head(self.block(emb, src_mask=causal, is_causal=True))

    model = env.init(TinyVLM())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)

    def train_step(ids, patches, labels):
        logits = model(ids, patches)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1),
                               ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        text = env.randint(0, IMG, (2, L - n_patches))
        start = env.choice(L - n_patches)
        ids = torch.cat([text[:, :start], torch.full((2, n_patches), IMG), text[:, start:]], 1)
        labels = torch.where(ids == IMG, torch.full_like(ids, -100), ids)
        env.rec(f"loss {it}", step(ids, env.randn(2, n_patches, 12), labels))
    # (the key projection's bias shifts every score of a query alike, so softmax cancels it:
    # its gradient is rounding noise that AdamW scales to lr-sized steps: left out)
    params = dict(model.state_dict())
    bias = params.pop("block.self_attn.in_proj_bias")
    env.rec("params", params)
    env.rec("q and v bias", (bias[:D], bias[2 * D:]))


def deformable_sampling(torch, env):
    nn, F = torch.nn, torch.nn.functional
    H = W = 8

    class Deform(nn.Module):
        def __init__(self):
            super().__init__()
            self.offset = nn.Conv2d(2, 2, 3, padding=1)
            self.head = nn.Sequential(nn.Conv2d(2, 6, 3, padding=1), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 3))
            with torch.no_grad():
                self.offset.weight.mul_(0.1)

        def forward(self, x):
            ys, xs = torch.meshgrid(torch.linspace(-1, 1, H), torch.linspace(-1, 1, W),
                                    indexing="ij")
            base = torch.stack([xs, ys], -1).unsqueeze(0)
            off = torch.tanh(self.offset(x)).permute(0, 2, 3, 1) * 0.25
            warped = F.grid_sample(x, base + off, mode="bilinear", padding_mode="border",
                                   align_corners=True)
            return self.head(warped)

    model = env.init(Deform())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"loss {it}", step(env.randn(4, 2, H, W), env.randint(0, 3, (4,))))
    env.rec("params", dict(model.state_dict()))


def tv_denoise(torch, env):
    clean = torch.zeros(1, 1, 12, 12)
    clean[..., 3:9, 4:10] = 1.0
    noisy = clean + 0.3 * env.randn(1, 1, 12, 12)
    img = torch.nn.Parameter(noisy.clone())
    opt = torch.optim.Adam([img], lr=0.05)

    def train_step(weight):
        dx = torch.diff(img, dim=-1)
        dy = torch.diff(img, dim=-2)
        tv = torch.sqrt(dx[..., :-1, :] ** 2 + dy[..., :, :-1] ** 2 + 1e-6).sum()
        loss = 0.5 * ((img - noisy) ** 2).sum() + weight * tv
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), tv.detach()

    step = env.step(train_step)
    for it in range(6):
        env.rec(f"step {it}", step(0.2))
    env.rec("img", img)
    env.rec("psnr", -10 * torch.log10(((img.detach() - clean) ** 2).mean()))


def calibration_ece(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_bins = 5
    model = env.init(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)

    def train_step(x, y):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            conf, pred = F.softmax(logits, 1).max(1)
            correct = (pred == y).float()
            counts = torch.histc(conf, bins=n_bins, min=0.0, max=1.0)
            edges = torch.linspace(0, 1, n_bins + 1)[1:-1]
            which = torch.bucketize(conf, edges, right=True)
            acc = torch.zeros(n_bins).index_add_(0, which, correct)
            mean_conf = torch.zeros(n_bins).index_add_(0, which, conf)
            ece = (acc - mean_conf).abs().sum() / conf.numel()
        return loss.detach(), counts, ece

    step = env.step(train_step)
    for it in range(5):
        x = env.randn(32, 6)
        env.rec(f"step {it}", step(x, (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()))
    env.rec("params", dict(model.state_dict()))


def sincnet_wavenet(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class SincConv(nn.Module):

        def __init__(self, out_ch=4, k=9, sr=16000):
            super().__init__()
            self.k, self.sr = k, sr
            self.low_hz = nn.Parameter(torch.linspace(30, 3000, out_ch).view(-1, 1))
            self.band_hz = nn.Parameter(torch.full((out_ch, 1), 500.0))
            n = (k - 1) / 2
            self.register_buffer("n_", 2 * math.pi * torch.arange(-n, 0).view(1, -1) / sr)
            self.register_buffer("window_", 0.54 - 0.46 * torch.cos(
                2 * math.pi * torch.linspace(0, n - 1, int(n)) / k))

        def forward(self, x):
            low = 50 + torch.abs(self.low_hz)
            high = torch.clamp(low + 50 + torch.abs(self.band_hz), 50, self.sr / 2)
            band = (high - low)[:, 0]
            f_low, f_high = low @ self.n_, high @ self.n_
            left = ((torch.sin(f_high) - torch.sin(f_low)) / (self.n_ / 2)) * self.window_
            center = 2 * band.view(-1, 1)
            right = torch.flip(left, dims=[1])
            bp = torch.cat([left, center, right], dim=1) / (2 * band[:, None])
            return F.conv1d(x, bp.view(-1, 1, self.k), padding=self.k // 2)

    class WaveNetBlock(nn.Module):

        def __init__(self, ch, dil):
            super().__init__()
            self.dil = dil
            self.conv = nn.Conv1d(ch, 2 * ch, 2, dilation=dil)
            self.res = nn.Conv1d(ch, ch, 1)
            self.skip = nn.Conv1d(ch, ch, 1)

        def forward(self, x):
            h = self.conv(F.pad(x, (self.dil, 0)))
            a, b = h.chunk(2, 1)
            z = torch.tanh(a) * torch.sigmoid(b)
            return x + self.res(z), self.skip(z)

    class Net(nn.Module):

        def __init__(self):
            super().__init__()
            self.sinc = SincConv()
            self.blocks = nn.ModuleList([WaveNetBlock(4, d) for d in (1, 2, 4)])
            self.out = nn.Conv1d(4, 8, 1)

        def forward(self, x):
            h = self.sinc(x)
            skips = 0
            for b in self.blocks:
                h, s = b(h)
                skips = skips + s
            return self.out(F.relu(skips))

    def mu_law(x, mu=7):
        y = torch.sign(x) * torch.log1p(mu * x.abs()) / math.log1p(mu)
        return ((y + 1) / 2 * mu + 0.5).long().clamp(0, mu)
    model = env.init(Net())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def step(x):
        target = mu_law(x[:, 0, 1:])
        logits = model(x)[..., :-1]
        loss = F.cross_entropy(logits, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    train_step = env.step(step)
    t = torch.linspace(0, 1, 32)
    for it in range(4):
        wave = torch.sin(2 * math.pi * (3 + it) * t).view(1, 1, -1) * 0.8
        env.rec(f"loss {it}", train_step(wave + 0.1 * env.randn(2, 1, 32)))
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {"squeezenet_fire": squeezenet_fire, "sincnet_wavenet": sincnet_wavenet,
            "circular_diffusion": circular_diffusion,
            "llava_masked_scatter": llava_masked_scatter,
            "deformable_sampling": deformable_sampling, "tv_denoise": tv_denoise,
            "calibration_ece": calibration_ece}

# (the default run keeps the quickest; the others are marked slow)
FAST = ("tv_denoise", "calibration_ece")


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
