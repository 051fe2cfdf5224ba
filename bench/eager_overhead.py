"""Eager per-op overhead on 16-element tensors, and a 64x64 matmul-tanh-sum forward +
backward, llgrad beside PyTorch eager (when installed), both pinned to one thread.

    python bench/eager_overhead.py [--repeat 7] [--number 2000]

Prints median microseconds per call over `repeat` blocks and the ratio llgrad / torch.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import llgrad  # noqa: E402

try:
    import torch
    torch.set_num_threads(1)
except ImportError:
    torch = None


def median_us(fn, number, repeat):
    fn()
    blocks = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        blocks.append((time.perf_counter() - t0) / number * 1e6)
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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--number", type=int, default=2000)
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


if __name__ == "__main__":
    main()
