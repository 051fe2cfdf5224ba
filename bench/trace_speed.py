"""Seconds to trace a 2,000-op function (issue 3's figure: under 0.5 s here), and to
verify, print and interpret the graph.

    python bench/trace_speed.py [--ops 2000] [--repeat 5]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import llgrad  # noqa: E402
from llgrad.ir import interpret, verify  # noqa: E402


def chain(n):
    def f(x, w):
        h = x
        for i in range(n // 4):
            h = (h @ w).tanh() * 0.5 + x
        return h.sum()
    return f


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    f = chain(args.ops)
    x, w = llgrad.randn(8, 16), llgrad.randn(16, 16) * 0.1
    times, g = [], None
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        g = llgrad.trace(f, x, w)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    verify(g)
    t_verify = time.perf_counter() - t0
    t0 = time.perf_counter()
    text = str(g)
    t_print = time.perf_counter() - t0
    t0 = time.perf_counter()
    interpret(g, x.numpy(), w.numpy())
    t_interp = time.perf_counter() - t0
    print(f"# {len(g.nodes)} nodes, {len(text.splitlines())} lines of IR")
    print(f"trace (incl. verify), median of {args.repeat}: {statistics.median(times):.3f} s")
    print(f"verify {t_verify:.3f} s, print {t_print:.3f} s, interpret {t_interp:.3f} s")


if __name__ == "__main__":
    main()
