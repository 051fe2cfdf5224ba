"""Small CNN on llgrad.datasets.bars (8x8 images of a horizontal, vertical or diagonal bar),
trained with SGD + momentum.

    python examples/cnn.py                 # compiled training step (default)
    python examples/cnn.py --eager         # op-by-op eager autograd
    python examples/cnn.py --epochs 2      # shorter run
"""
import argparse
import time

import numpy as np

import llgrad
import llgrad.nn as nn
from llgrad.datasets import bars, split


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--compile", dest="compile", action="store_true", default=True,
                      help="run the training step through llgrad.compile (default)")
    mode.add_argument("--eager", dest="compile", action="store_false",
                      help="run the training step eagerly")
    return p.parse_args()


def make_model():
    return nn.Sequential(
        nn.Conv2d(1, 8, kernel_size=3, padding=1), nn.ReLU(),    # 8 x 8x8
        nn.MaxPool2d(2),                                         # 8 x 4x4
        nn.Conv2d(8, 16, kernel_size=3, padding=1), nn.ReLU(),   # 16 x 4x4
        nn.MaxPool2d(2),                                         # 16 x 2x2
        nn.Flatten(),
        nn.Linear(16 * 2 * 2, 32), nn.ReLU(),
        nn.Linear(32, 3),
    )


def train_step(model, opt, loss_fn, xb, yb):
    opt.zero_grad()
    loss = loss_fn(model(xb), yb)
    loss.backward()
    opt.step()
    return loss.detach()


def accuracy(model, x, y):
    with llgrad.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def main():
    args = parse_args()
    llgrad.manual_seed(args.seed)
    (xtr, ytr), (xte, yte) = split(*bars(n=1200, seed=args.seed))
    xtr, ytr = llgrad.from_numpy(xtr), llgrad.from_numpy(ytr)
    xte, yte = llgrad.from_numpy(xte), llgrad.from_numpy(yte)

    model = make_model()
    n_params = sum(p.numel() for p in model.parameters())
    opt = llgrad.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    loss_fn = nn.CrossEntropyLoss()
    step = llgrad.compile(train_step) if args.compile else train_step

    print(f"bars: {len(ytr)} train / {len(yte)} test images (1x8x8, 3 classes); "
          f"CNN with {n_params} parameters; SGD lr={args.lr} momentum={args.momentum}; "
          f"{'compiled' if args.compile else 'eager'} step")
    rng = np.random.default_rng(args.seed)
    n_batches = len(ytr) // args.batch       # full batches only: one shape, one trace
    t0 = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(ytr))
        losses = []
        for b in range(n_batches):
            idx = llgrad.from_numpy(order[b * args.batch:(b + 1) * args.batch])
            losses.append(step(model, opt, loss_fn, xtr[idx], ytr[idx]).item())
        print(f"epoch {epoch:2d}  loss {np.mean(losses):.4f}  "
              f"train acc {accuracy(model, xtr, ytr):.3f}  "
              f"test acc {accuracy(model, xte, yte):.3f}")
    traced = f" (step traced {step.n_traces}x)" if args.compile else ""
    print(f"trained in {time.perf_counter() - t0:.1f} s{traced}")
    print(f"final test accuracy {accuracy(model, xte, yte):.3f}")


if __name__ == "__main__":
    main()
