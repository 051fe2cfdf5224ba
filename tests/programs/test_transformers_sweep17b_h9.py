"""Sweep 17b (H), part 9: a masked autoencoder (MAE) at toy size: patches by Tensor.unfold
twice and back by einsum, F.unfold / F.fold, random masking by argsort of torch.rand and
gather with ids_restore, a mask token, the normalised-pixel loss over masked patches; then a
small training loop logging with SummaryWriter (scalars, histograms of weights and grads, the
learning rate, hparams) whose records equal torch.utils.tensorboard's. Run with PyTorch, with
llgrad eagerly and compiled (tutorial_harness.py)."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tensorboard")

from tutorial_harness import run_tutorial  # noqa: E402
from google.protobuf.json_format import MessageToDict  # noqa: E402
from tensorboard.backend.event_processing.event_file_loader import \
    LegacyEventFileLoader  # noqa: E402

import llgrad  # noqa: E402

pytestmark = pytest.mark.torch


def mae(torch, env):
    nn = torch.nn
    F = nn.functional
    C, S, P, D = 3, 8, 2, 16
    N = (S // P) ** 2

    def patchify(x):
        B = x.shape[0]
        p = x.unfold(2, P, P).unfold(3, P, P)               # B, C, h, w, P, P
        return p.permute(0, 2, 3, 4, 5, 1).reshape(B, N, P * P * C)

    def unpatchify(t):
        B = t.shape[0]
        h = S // P
        t = t.reshape(B, h, h, P, P, C)
        t = torch.einsum("nhwpqc->nchpwq", t)
        return t.reshape(B, C, h * P, h * P)

    class MAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(P * P * C, D)
            self.pos = nn.Parameter(torch.randn(1, N, D) * 0.02)
            self.enc = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, batch_first=True)
            self.mask_token = nn.Parameter(torch.zeros(1, 1, D))
            self.dec = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, batch_first=True)
            self.pred = nn.Linear(D, P * P * C)

        def forward(self, imgs, ratio=0.75):
            x = patchify(imgs)
            t = self.embed(x) + self.pos
            B, L, _ = t.shape
            keep = int(L * (1 - ratio))
            noise = torch.rand(B, L)
            ids_shuffle = torch.argsort(noise, dim=1)
            ids_restore = torch.argsort(ids_shuffle, dim=1)
            ids_keep = ids_shuffle[:, :keep]
            t = torch.gather(t, 1, ids_keep.unsqueeze(-1).repeat(1, 1, D))
            mask = torch.ones(B, L)
            mask[:, :keep] = 0
            mask = torch.gather(mask, 1, ids_restore)
            h = self.enc(t)
            toks = self.mask_token.repeat(B, L - keep, 1)
            full = torch.cat([h, toks], 1)
            full = torch.gather(full, 1, ids_restore.unsqueeze(-1).expand(-1, -1, D))
            pred = self.pred(self.dec(full + self.pos))
            target = x
            mean = target.mean(-1, keepdim=True)
            var = target.var(-1, keepdim=True)
            target = (target - mean) / (var + 1e-6) ** .5
            loss = ((pred - target) ** 2).mean(-1)
            loss = (loss * mask).sum() / mask.sum()
            return loss, pred, mask

    model = env.init(MAE())
    imgs = env.rand(3, C, S, S)
    env.rec("roundtrip", torch.equal(unpatchify(patchify(imgs)), imgs))
    env.rec("patches", patchify(imgs))
    cols = F.unfold(imgs, P, stride=P)
    env.rec("fold", F.fold(cols, (S, S), P, stride=P))
    opt = torch.optim.AdamW(model.parameters(), lr=1.5e-3, betas=(0.9, 0.95), weight_decay=0.05)

    def step(imgs):
        opt.zero_grad()
        loss, pred, mask = model(imgs)
        loss.backward()
        opt.step()
        return loss, mask
    step = env.step(step)
    torch.manual_seed(1)
    for i in range(4):
        loss, mask = step(imgs)
        env.rec(f"loss{i}", loss)
        env.rec(f"mask{i}", mask)
    model.eval()
    with torch.no_grad():
        loss, pred, mask = model(imgs, ratio=0.5)
        env.rec("recon", unpatchify(pred))


def test_mae():
    run_tutorial(mae)


def _logged_run(lib, writer_cls, logdir):
    """A short training run logging as training scripts do; the writer's records."""
    nn = lib.nn
    lib.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 3))
    with lib.no_grad():     # (weights with short binary fractions: both runs round alike)
        for p in model.parameters():
            w = np.arange(p.numel(), dtype=np.float32).reshape(p.shape) % 5 / 8 - 0.25
            p.copy_(lib.tensor(w))
    x = lib.tensor(np.arange(24, dtype=np.float32).reshape(6, 4) % 7 / 4)
    y = lib.tensor([0, 1, 2, 0, 1, 2])
    opt = lib.optim.SGD(model.parameters(), lr=0.5)
    sched = lib.optim.lr_scheduler.StepLR(opt, 2, gamma=0.5)
    with writer_cls(logdir, flush_secs=3600) as w:
        for step in range(4):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            w.add_scalar("train/loss", loss.item(), step)
            w.add_scalar("train/lr", sched.get_last_lr()[0], global_step=step)
            w.add_scalars("norms", {n.replace(".", "_"): p.grad.norm() for n, p in
                                    model.named_parameters() if p.dim() > 1}, step)
            for name, p in model.named_parameters():
                w.add_histogram(name, p, step)
                w.add_histogram(name + ".grad", p.grad, step)
            opt.step()
            sched.step()
        w.add_hparams({"lr": 0.5, "gamma": 0.5, "opt": "sgd"}, {"hparam/loss": loss.item()},
                      run_name="hp")
    runs = {}
    for dirpath, _, files in os.walk(logdir):
        for name in sorted(f for f in files if "tfevents" in f):
            events = []
            for e in LegacyEventFileLoader(os.path.join(dirpath, name)).Load():
                e.ClearField("wall_time")
                events.append(e)
            runs.setdefault(os.path.relpath(dirpath, logdir), []).extend(events)
    return runs


def test_training_log_matches_torch(tmp_path):
    from torch.utils.tensorboard import SummaryWriter as TorchWriter
    from llgrad.utils.tensorboard import SummaryWriter as LlgradWriter
    want = _logged_run(torch, TorchWriter, str(tmp_path / "torch"))
    got = _logged_run(llgrad, LlgradWriter, str(tmp_path / "llgrad"))
    assert sorted(got) == sorted(want)
    for run in want:
        assert len(got[run]) == len(want[run]), run
        for a, b in zip(want[run], got[run]):
            _same(MessageToDict(a), MessageToDict(b), run)


def _same(a, b, where):
    """Equal records, floats to float32 rounding (the two libraries' gradients may differ in
    the last bit: exp, log and sums)."""
    if isinstance(a, dict):     # (a float field at 0 is left out of the record: proto3)
        assert isinstance(b, dict), where
        for k in sorted(set(a) | set(b)):
            assert k in a and k in b or isinstance(a.get(k, b.get(k)), float), f"{where}.{k}"
            _same(a.get(k, 0.0), b.get(k, 0.0), f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: lengths"
        for k, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{k}]")
    elif isinstance(a, float) and isinstance(b, float):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-7, err_msg=where)
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"
