"""A small vision transformer on nn.TransformerEncoderLayer: 16x16 images of a horizontal,
vertical or diagonal bar (llgrad.datasets.bars, generated on the spot) cut into 4x4 patches
by a strided Conv2d, a class token and learned position embeddings, a 2-layer pre-norm
nn.TransformerEncoder, trained with AdamW and a cosine learning-rate schedule.

    python examples/vit.py                 # compiled training step (default)
    python examples/vit.py --eager         # op-by-op eager autograd
    python examples/vit.py --epochs 2      # shorter run
"""
import argparse
import time
import warnings

import numpy as np

import llgrad
import llgrad.nn as nn
from llgrad.datasets import bars, split


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--image", type=int, default=16)
    p.add_argument("--patch", type=int, default=4)
    p.add_argument("--d-model", type=int, default=32)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--compile", dest="compile", action="store_true", default=True,
                      help="run the training step through llgrad.compile (default)")
    mode.add_argument("--eager", dest="compile", action="store_false",
                      help="run the training step eagerly")
    return p.parse_args()


class ViT(nn.Module):
    def __init__(self, image, patch, d_model, heads, layers, classes, dropout):
        super().__init__()
        n_patches = (image // patch) ** 2
        self.patch_embed = nn.Conv2d(1, d_model, kernel_size=patch, stride=patch)
        self.cls_token = nn.Parameter(llgrad.zeros(1, 1, d_model))
        self.pos_embed = nn.Parameter(llgrad.randn(1, n_patches + 1, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=2 * d_model,
                                           dropout=dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        with warnings.catch_warnings():       # "enable_nested_tensor ... norm_first was True"
            warnings.simplefilter("ignore")
            self.encoder = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)          # B, patches, d
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = llgrad.cat([cls, x], dim=1) + self.pos_embed
        x = self.encoder(x)
        return self.head(self.norm(x[:, 0]))                         # the class token


def train_step(model, opt, loss_fn, xb, yb):
    opt.zero_grad()
    loss = loss_fn(model(xb), yb)
    loss.backward()
    opt.step()
    return loss.detach()


def accuracy(model, x, y):
    model.eval()
    with llgrad.no_grad():
        acc = (model(x).argmax(1) == y).float().mean().item()
    model.train()
    return acc


def main():
    args = parse_args()
    llgrad.manual_seed(args.seed)
    (xtr, ytr), (xte, yte) = split(*bars(n=1200, size=args.image, seed=args.seed))
    xtr, ytr = llgrad.from_numpy(xtr), llgrad.from_numpy(ytr)
    xte, yte = llgrad.from_numpy(xte), llgrad.from_numpy(yte)

    model = ViT(args.image, args.patch, args.d_model, args.heads, args.layers, 3, args.dropout)
    n_params = sum(p.numel() for p in model.parameters())
    n_batches = len(ytr) // args.batch       # full batches only: one shape, one trace
    opt = llgrad.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.05)
    sched = llgrad.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * n_batches)
    loss_fn = nn.CrossEntropyLoss()
    step = llgrad.compile(train_step) if args.compile else train_step
    print(f"bars: {len(ytr)} train / {len(yte)} test images (1x{args.image}x{args.image}, 3 "
          f"classes); ViT patch {args.patch}, d={args.d_model}, heads={args.heads}, "
          f"layers={args.layers}, {n_params} parameters; AdamW lr={args.lr} (cosine); "
          f"{'compiled' if args.compile else 'eager'} step")

    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(ytr))
        losses = []
        for b in range(n_batches):
            idx = llgrad.from_numpy(order[b * args.batch:(b + 1) * args.batch])
            losses.append(step(model, opt, loss_fn, xtr[idx], ytr[idx]).item())
            sched.step()
        print(f"epoch {epoch:2d}  loss {np.mean(losses):.4f}  "
              f"train acc {accuracy(model, xtr, ytr):.3f}  "
              f"test acc {accuracy(model, xte, yte):.3f}  ({time.perf_counter() - t0:.1f} s)")
    traced = f" (step traced {step.n_traces}x)" if args.compile else ""
    print(f"trained in {time.perf_counter() - t0:.1f} s{traced}")
    print(f"final test accuracy {accuracy(model, xte, yte):.3f}")


if __name__ == "__main__":
    main()
