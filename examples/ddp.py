"""Data-parallel training across processes (DistributedDataParallel on MPI), written as a
PyTorch DDP script: every process holds the whole model and reads its own shard of the
data (DistributedSampler); gradients are averaged over the processes during the backward.

    pip install -e ".[mpi]"                       # mpi4py and MPICH, from wheels
    mpiexec -n 2 python examples/ddp.py           # 2 processes on this machine
    mpiexec -n 2 python examples/ddp.py --compile # the step through llgrad.compile
    python examples/ddp.py                        # 1 process works too

Each rank takes --batch samples per step, so the global batch is world_size * --batch. Rank 0 prints; at the end every rank checks that
all ranks hold the same parameters."""
import argparse
import os
import time

os.environ.setdefault("LLGRAD_NUM_THREADS", "1")    # one thread per process (2 cores: 2 ranks)

import llgrad  # noqa: E402
import llgrad.distributed as dist  # noqa: E402
import llgrad.nn as nn  # noqa: E402
from llgrad.datasets import spirals, split  # noqa: E402
from llgrad.nn.parallel import DistributedDataParallel as DDP  # noqa: E402
from llgrad.utils.data import DataLoader, DistributedSampler, TensorDataset  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch", type=int, default=64, help="samples per process per step")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compile", action="store_true",
                   help="run the training step through llgrad.compile")
    return p.parse_args()


def train_step(model, opt, loss_fn, xb, yb):
    opt.zero_grad()
    loss = loss_fn(model(xb), yb)
    loss.backward()             # DDP averages the gradients over the ranks in here
    opt.step()
    return loss.detach()


def accuracy(model, x, y):
    with llgrad.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def main():
    args = parse_args()
    dist.init_process_group(backend="mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    say = print if rank == 0 else (lambda *a, **k: None)

    (xtr, ytr), (xte, yte) = split(*spirals(n_per_class=500, seed=args.seed))
    xtr, ytr = llgrad.from_numpy(xtr), llgrad.from_numpy(ytr)
    xte, yte = llgrad.from_numpy(xte), llgrad.from_numpy(yte)
    dataset = TensorDataset(xtr, ytr)
    sampler = DistributedSampler(dataset, shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(dataset, batch_size=args.batch, sampler=sampler, drop_last=True)

    llgrad.manual_seed(args.seed + rank)    # different on purpose: DDP broadcasts rank 0's
    h = args.hidden
    model = nn.Sequential(nn.Linear(2, h), nn.Tanh(), nn.Linear(h, h), nn.Tanh(),
                          nn.Linear(h, 3))
    ddp = DDP(model)
    opt = llgrad.optim.Adam(ddp.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    step = llgrad.compile(train_step) if args.compile else train_step

    say(f"{world} process(es) x {args.batch} samples per step (global batch "
        f"{world * args.batch}); spirals {len(ytr)} train / {len(yte)} test; MLP 2-{h}-{h}-3, "
        f"Adam lr={args.lr}; {'compiled' if args.compile else 'eager'} step")
    t0 = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)            # a new shuffle each epoch, the same on all ranks
        total = llgrad.zeros(2)
        for xb, yb in loader:
            loss = step(ddp, opt, loss_fn, xb, yb)
            total += llgrad.stack([loss, llgrad.tensor(1.0)])
        dist.all_reduce(total)              # the mean loss over every rank's batches
        if epoch == 1 or epoch % 5 == 0 or epoch == args.epochs:
            say(f"epoch {epoch:3d}  loss {(total[0] / total[1]).item():.4f}  "
                f"test acc {accuracy(model, xte, yte):.3f}")
    elapsed = time.perf_counter() - t0

    # every rank holds the same parameters: rank 0's broadcast equals its own everywhere
    flat = llgrad.cat([p.detach().reshape(-1) for p in model.parameters()])
    mine = flat.clone()
    dist.broadcast(flat, src=0)
    same = llgrad.tensor(float((flat - mine).abs().max().item() == 0.0))
    dist.all_reduce(same, op=dist.ReduceOp.MIN)
    say(f"trained in {elapsed:.1f} s; parameters identical on all {world} ranks: "
        f"{bool(same.item())}; final test accuracy {accuracy(model, xte, yte):.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
