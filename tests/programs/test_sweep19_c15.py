"""Sweep 19 (C), part 15: speech front end and encoder: a log-mel spectrogram without FFT
(frames by unfold, a Hann window, the DFT as matmuls with cos/sin tables, triangular mel
filters built from the mel scale with torch.clamp, log with an epsilon, per-utterance
normalisation), SpecAugment's time and frequency masks (positions from NumPy, written with
masked_fill over broadcast aranges) and a Conformer block (macaron half-step feed-forwards
with SiLU, multi-head self-attention with a key padding mask, the convolution module:
pointwise conv, GLU, depthwise conv, BatchNorm1d, SiLU) trained with CTC. Run with PyTorch,
with llgrad eagerly and with llgrad.compile (tutorial_harness.py)."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def conformer_ctc(torch, env):
    nn, F = torch.nn, torch.nn.functional
    sr, n_fft, hop, n_mels, D, V = 800, 32, 16, 8, 16, 6

    def hz_to_mel(f):
        return 2595.0 * torch.log10(1.0 + f / 700.0)

    def mel_to_hz(m):
        return 700.0 * (10 ** (m / 2595.0) - 1.0)

    n_freqs = n_fft // 2 + 1
    all_freqs = torch.linspace(0, sr // 2, n_freqs)
    m_pts = torch.linspace(hz_to_mel(torch.tensor(0.0)).item(), hz_to_mel(torch.tensor(sr / 2)).item(), n_mels + 2)
    f_pts = mel_to_hz(m_pts)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    fb = torch.clamp(torch.min(down, up), min=0)                   # (n_freqs, n_mels)
    k = torch.arange(n_freqs, dtype=torch.float32)[:, None]
    n = torch.arange(n_fft, dtype=torch.float32)[None, :]
    cos_t, sin_t = torch.cos(2 * math.pi * k * n / n_fft), -torch.sin(2 * math.pi * k * n / n_fft)
    window = torch.hann_window(n_fft)

    def log_mel(wave):
        frames = F.pad(wave, (n_fft // 2, n_fft // 2), mode="reflect").unfold(-1, n_fft, hop) * window
        power = (frames @ cos_t.T) ** 2 + (frames @ sin_t.T) ** 2
        mel = torch.log(power @ fb + 1e-6)
        return (mel - mel.mean(dim=(1, 2), keepdim=True)) / (mel.std(dim=(1, 2), keepdim=True) + 1e-5)

    def spec_augment(x, t_starts, t_width, f_starts, f_width):
        T, Fq = x.shape[1], x.shape[2]
        t = torch.arange(T)[None, :, None]
        f = torch.arange(Fq)[None, None, :]
        tmask = (t >= t_starts[:, None, None]) & (t < t_starts[:, None, None] + t_width)
        fmask = (f >= f_starts[:, None, None]) & (f < f_starts[:, None, None] + f_width)
        return x.masked_fill(tmask | fmask, 0.0)

    class FeedForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.LayerNorm(D), nn.Linear(D, 4 * D), nn.SiLU(),
                                     nn.Dropout(0.0), nn.Linear(4 * D, D))

        def forward(self, x):
            return self.net(x)

    class ConvModule(nn.Module):
        def __init__(self, kernel_size=5):
            super().__init__()
            self.ln = nn.LayerNorm(D)
            self.pw1 = nn.Conv1d(D, 2 * D, 1)
            self.dw = nn.Conv1d(D, D, kernel_size, padding=kernel_size // 2, groups=D)
            self.bn = nn.BatchNorm1d(D)
            self.pw2 = nn.Conv1d(D, D, 1)

        def forward(self, x):
            x = self.ln(x).transpose(1, 2)
            x = F.glu(self.pw1(x), dim=1)
            x = F.silu(self.bn(self.dw(x)))
            return self.pw2(x).transpose(1, 2)

    class ConformerBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.ff1, self.ff2 = FeedForward(), FeedForward()
            self.ln_att = nn.LayerNorm(D)
            self.att = nn.MultiheadAttention(D, 2, batch_first=True)
            self.conv = ConvModule()
            self.ln_out = nn.LayerNorm(D)

        def forward(self, x, pad_mask):
            x = x + 0.5 * self.ff1(x)
            h = self.ln_att(x)
            x = x + self.att(h, h, h, key_padding_mask=pad_mask, need_weights=False)[0]
            x = x + self.conv(x)
            x = x + 0.5 * self.ff2(x)
            return self.ln_out(x)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(n_mels, D)
            self.block = ConformerBlock()
            self.out = nn.Linear(D, V)

        def forward(self, feats, pad_mask):
            return self.out(self.block(self.inp(feats), pad_mask)).log_softmax(-1)

    model = env.init(Model())
    # (SGD: the attention's key bias has a zero gradient up to rounding, which Adam would
    # turn into lr-sized steps of either sign)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ctc = nn.CTCLoss(blank=0, zero_infinity=True)
    B, L = 3, 160
    wave = env.randn(B, L) * 0.3
    frames_len = L // hop + 1
    feat_lens = torch.tensor([frames_len, frames_len - 2, frames_len - 4])
    targets = env.randint(1, V, (B, 3))
    target_lens = torch.tensor([3, 2, 3])
    rng = np.random.default_rng(7)

    def train_step(wave, t_starts, f_starts):
        feats = spec_augment(log_mel(wave), t_starts, 2, f_starts, 2)
        pad_mask = torch.arange(feats.shape[1])[None, :] >= feat_lens[:, None]
        logp = model(feats, pad_mask)
        loss = ctc(logp.transpose(0, 1), targets, feat_lens, target_lens)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    train_step = env.step(train_step)
    for i in range(4):
        t_starts = torch.tensor(rng.integers(0, frames_len - 2, B))
        f_starts = torch.tensor(rng.integers(0, n_mels - 2, B))
        env.rec(f"loss{i}", train_step(wave, t_starts, f_starts))
    env.rec("fb", fb)
    env.rec("log mel", log_mel(wave))
    env.rec("state", model.state_dict())
    model.eval()
    with torch.no_grad():
        best = model(log_mel(wave), None).argmax(-1)
        env.rec("greedy", torch.unique_consecutive(best[0]))


def test_conformer_ctc():
    run_tutorial(conformer_ctc)
