"""MLP classifier on llgrad.datasets.spirals (3 interleaved 2-D spirals), trained with Adam.

    python examples/mlp.py                 # compiled training step (default)
    python examples/mlp.py --eager         # op-by-op eager autograd
    python examples/mlp.py --epochs 5      # shorter run
"""
import argparse
import time

import numpy as np

import llgrad
import llgrad.nn as nn
from llgrad.datasets import spirals, split


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--compile", dest="compile", action="store_true", default=True,
                      help="run the training step through llgrad.compile (default)")
    mode.add_argument("--eager", dest="compile", action="store_false",
                      help="run the training step eagerly")
    return p.parse_args()


def train_step(model, opt, loss_fn, xb, yb):
    # zero_grad / forward / backward / step: llgrad.compile traces all of it as one function
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
    (xtr, ytr), (xte, yte) = split(*spirals(n_per_class=500, seed=args.seed))
    xtr, ytr = llgrad.from_numpy(xtr), llgrad.from_numpy(ytr)
    xte, yte = llgrad.from_numpy(xte), llgrad.from_numpy(yte)

    h = args.hidden
    model = nn.Sequential(nn.Linear(2, h), nn.Tanh(), nn.Linear(h, h), nn.Tanh(),
                          nn.Linear(h, 3))
    opt = llgrad.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    step = llgrad.compile(train_step) if args.compile else train_step

    print(f"spirals: {len(ytr)} train / {len(yte)} test points; MLP 2-{h}-{h}-3; "
          f"Adam lr={args.lr}; {'compiled' if args.compile else 'eager'} step")
    rng = np.random.default_rng(args.seed)
    n_batches = len(ytr) // args.batch       # full batches only: one shape, one trace
    t0 = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(ytr))
        losses = []
        for b in range(n_batches):
            idx = llgrad.from_numpy(order[b * args.batch:(b + 1) * args.batch])
            losses.append(step(model, opt, loss_fn, xtr[idx], ytr[idx]).item())
        if epoch == 1 or epoch % 5 == 0 or epoch == args.epochs:
            print(f"epoch {epoch:3d}  loss {np.mean(losses):.4f}  "
                  f"train acc {accuracy(model, xtr, ytr):.3f}  "
                  f"test acc {accuracy(model, xte, yte):.3f}")
    traced = f" (step traced {step.n_traces}x)" if args.compile else ""
    print(f"trained in {time.perf_counter() - t0:.1f} s{traced}")
    print(f"final test accuracy {accuracy(model, xte, yte):.3f}")


if __name__ == "__main__":
    main()
