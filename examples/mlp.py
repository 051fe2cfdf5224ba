"""MLP classifier on llgrad.datasets.spirals (3 interleaved 2-D spirals), written as a
PyTorch training script: a DataLoader over a TensorDataset, Adam with a OneCycleLR
schedule, gradient clipping, and a checkpoint saved and loaded back (in PyTorch's format:
torch.load reads it too).

    python examples/mlp.py                 # compiled training step (default)
    python examples/mlp.py --eager         # op-by-op eager autograd
    python examples/mlp.py --epochs 5      # shorter run
"""
import argparse
import os
import tempfile
import time

import numpy as np

import llgrad
import llgrad.nn as nn
from llgrad.datasets import spirals, split
from llgrad.utils.data import DataLoader, TensorDataset


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.02, help="the peak learning rate")
    p.add_argument("--clip", type=float, default=1.0, help="max gradient norm")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", default=None,
                   help="where to save the checkpoint (default: a temporary directory)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--compile", dest="compile", action="store_true", default=True,
                      help="run the training step through llgrad.compile (default)")
    mode.add_argument("--eager", dest="compile", action="store_false",
                      help="run the training step eagerly")
    return p.parse_args()


def make_model(hidden):
    return nn.Sequential(nn.Linear(2, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                         nn.Linear(hidden, 3))


def train_step(model, opt, loss_fn, xb, yb, max_norm):
    # zero_grad / forward / backward / clip / step: llgrad.compile traces all of it as one
    # function (clip_grad_norm_ has no branch on the norm, so nothing re-traces)
    opt.zero_grad()
    loss = loss_fn(model(xb), yb)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), max_norm)
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
    # shuffled batches each epoch, in an order fixed by the seed; full batches only (one
    # shape, so one trace of the compiled step)
    loader = DataLoader(TensorDataset(xtr, ytr), batch_size=args.batch, shuffle=True,
                        drop_last=True, generator=llgrad.Generator().manual_seed(args.seed))

    h = args.hidden
    model = make_model(h)
    # the scheduler changes the learning rate at every step: the compiled step reads it at
    # each call (an input of its graph) instead of tracing again for each new value
    opt = llgrad.optim.Adam(model.parameters(), lr=args.lr)
    sched = llgrad.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, epochs=args.epochs,
                                                 steps_per_epoch=len(loader),
                                                 cycle_momentum=False)
    loss_fn = nn.CrossEntropyLoss()
    step = llgrad.compile(train_step) if args.compile else train_step

    print(f"spirals: {len(ytr)} train / {len(yte)} test points; MLP 2-{h}-{h}-3; Adam, "
          f"OneCycleLR to lr={args.lr}, grad norm <= {args.clip}; "
          f"{'compiled' if args.compile else 'eager'} step")
    t0 = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        losses = []
        for xb, yb in loader:
            losses.append(step(model, opt, loss_fn, xb, yb, args.clip).item())
            sched.step()
        if epoch == 1 or epoch % 5 == 0 or epoch == args.epochs:
            print(f"epoch {epoch:3d}  loss {np.mean(losses):.4f}  "
                  f"lr {sched.get_last_lr()[0]:.5f}  "
                  f"train acc {accuracy(model, xtr, ytr):.3f}  "
                  f"test acc {accuracy(model, xte, yte):.3f}")
    traced = f" (step traced {step.n_traces}x)" if args.compile else ""
    print(f"trained in {time.perf_counter() - t0:.1f} s{traced}")

    # a checkpoint as PyTorch users write one, loaded back into a fresh model
    with tempfile.TemporaryDirectory() as tmp:
        path = args.checkpoint or os.path.join(tmp, "mlp.pt")
        llgrad.save({"epoch": args.epochs, "model": model.state_dict(),
                     "optimizer": opt.state_dict(), "scheduler": sched.state_dict()}, path)
        ckpt = llgrad.load(path)             # weights_only=True: tensors and plain values
        restored = make_model(h)
        restored.load_state_dict(ckpt["model"])
        print(f"checkpoint {os.path.basename(path)} ({os.path.getsize(path)} bytes, epoch "
              f"{ckpt['epoch']}) reloaded: test acc {accuracy(restored, xte, yte):.3f}")
    print(f"final test accuracy {accuracy(model, xte, yte):.3f}")


if __name__ == "__main__":
    main()
