"""Eager per-op overhead on 16-element tensors, a 64x64 matmul-tanh-sum forward +
backward, and the demo MLP's training step by part (train_step.py's nn.Sequential 2-64-64-3
tanh, batch 128, CrossEntropyLoss, Adam: zero_grad, forward, loss, backward, step), llgrad
beside PyTorch eager (when installed), both pinned to one thread.

    python bench/eager_overhead.py [--repeat 7] [--number 2000] [--demo-steps 1000]

Prints median CPU microseconds per call over `repeat` blocks and the ratio llgrad / torch; the
demo step's parts in CPU time (time.process_time around each part of each step, summed
over a block of demo-steps steps; 0 leaves them out).
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
# (llgrad too: at its default of the usable CPUs, its products of 262,144+ multiply-adds
# go to its pool, whose workers spin 1 ms after each, CPU time the demo table would count)
os.environ.setdefault("LLGRAD_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import llgrad  # noqa: E402

try:
    import torch
    torch.set_num_threads(1)
except ImportError:
    torch = None


def median_us(fn, number, repeat):
    # (process CPU time: on a machine shared with other work, wall time counts their turns)
    fn()
    blocks = []
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(number):
            fn()
        blocks.append((time.process_time() - t0) / number * 1e6)
    return statistics.median(blocks)


def cases(lib, a, b, w1, w2):
    x = lib.tensor(a)
    y = lib.tensor(b)
    xg = lib.tensor(a, requires_grad=True)
    m = lib.tensor(w1, requires_grad=True)
    v = lib.tensor(w2, requires_grad=True)

    def mm_tanh_sum():
        loss = (m @ v).tanh().sum()
        loss.backward()
        m.grad = None
        v.grad = None

    return {
        "add (no grad)": lambda: x + y,
        "mul (no grad)": lambda: x * y,
        "exp (no grad)": lambda: x.exp(),
        "sum (no grad)": lambda: x.sum(),
        "view x[2:10]": lambda: x[2:10],
        "mul (grad)": lambda: xg * y,
        "tanh (grad)": lambda: xg.tanh(),
        "mul+sum+backward (grad)": lambda: (xg * y).sum().backward(),
        "64x64 matmul-tanh-sum fwd+bwd": mm_tanh_sum,
    }


_PARTS = ("zero_grad", "forward", "loss", "backward", "step")


def demo_parts(lib, steps, repeat):
    """{part: median CPU us per step} of the demo MLP's training step (train_step.py's)."""
    import train_step
    sizes, _, batch = train_step.CONFIGS["demo MLP 2-64-64-3 tanh, batch 128"]
    params, x, y = train_step.data(sizes, batch)
    layers = []
    for k in range(0, len(params), 2):
        lin = lib.nn.Linear(params[k].shape[1], params[k].shape[0])
        with lib.no_grad():
            lin.weight.copy_(lib.tensor(params[k]))
            lin.bias.copy_(lib.tensor(params[k + 1]))
        layers += [lin, lib.nn.Tanh()]
    model = lib.nn.Sequential(*layers[:-1])
    opt = lib.optim.Adam(model.parameters(), lr=train_step.LR)
    loss_fn, xt, yt = lib.nn.CrossEntropyLoss(), lib.tensor(x), lib.tensor(y)
    clock = time.process_time

    def block(n):
        spent = [0.0] * len(_PARTS)
        for _ in range(n):
            t0 = clock()
            opt.zero_grad()
            t1 = clock()
            out = model(xt)
            t2 = clock()
            loss = loss_fn(out, yt)
            t3 = clock()
            loss.backward()
            t4 = clock()
            opt.step()
            t5 = clock()
            for i, (a, b) in enumerate(((t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5))):
                spent[i] += b - a
        return [v / n * 1e6 for v in spent]
    block(max(steps // 20, 10))
    blocks = [block(steps) for _ in range(repeat)]
    return {p: statistics.median(b[i] for b in blocks) for i, p in enumerate(_PARTS)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--number", type=int, default=2000)
    p.add_argument("--demo-steps", type=int, default=1000)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    arrays = (rng.standard_normal(16).astype(np.float32),
              rng.standard_normal(16).astype(np.float32),
              rng.standard_normal((64, 64)).astype(np.float32) * 0.1,
              rng.standard_normal((64, 64)).astype(np.float32) * 0.1)
    ours = cases(llgrad, *arrays)
    theirs = cases(torch, *arrays) if torch is not None else {}
    print(f"# eager overhead, median us per call ({args.repeat} blocks x {args.number}), "
          f"1 thread; numpy {np.__version__}" + (f", torch {torch.__version__}" if torch else ""))
    print(f"{'case':34s} {'llgrad':>9s} {'torch':>9s} {'ratio':>7s}")
    for name, fn in ours.items():
        n = args.number if "64x64" not in name else max(args.number // 10, 50)
        a = median_us(fn, n, args.repeat)
        if name in theirs:
            b = median_us(theirs[name], n, args.repeat)
            print(f"{name:34s} {a:9.2f} {b:9.2f} {a / b:7.2f}")
        else:
            print(f"{name:34s} {a:9.2f} {'-':>9s} {'-':>7s}")
    if args.demo_steps > 0:
        print(f"# demo MLP step by part, median CPU us per step ({args.repeat} blocks x "
              f"{args.demo_steps} steps)")
        ours = demo_parts(llgrad, args.demo_steps, args.repeat)
        theirs = demo_parts(torch, args.demo_steps, args.repeat) if torch is not None else {}
        ours["total"] = sum(ours.values())
        if theirs:
            theirs["total"] = sum(theirs.values())
        for name, a in ours.items():
            b = theirs.get(name)
            print(f"{'demo ' + name:34s} {a:9.1f} " + (f"{b:9.1f} {a / b:7.2f}" if b else
                                                        f"{'-':>9s} {'-':>7s}"))


if __name__ == "__main__":
    main()
