"""The fused W3-style forward `sum(tanh(x*w + b) * sigmoid(x) + 0.5*x*x)` on 1M float32
elements: the LLVM kernel (one fused loop nest) beside NumPy, one thread.

    python bench/llvm_elementwise.py [--repeat 21] [--n 1000]

Prints median microseconds per call (x, w: n x n; b: n) and the speed-up."""
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
from llgrad.codegen.lower import lower  # noqa: E402
from llgrad.ir import Builder, TensorType  # noqa: E402
from llgrad.ir.interpret import evaluate  # noqa: E402


def median_us(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def w3_graph(n):
    bld = Builder("w3")
    x = bld.input(TensorType("float32", (n, n)), "x")
    w = bld.input(TensorType("float32", (n, n)), "w")
    b = bld.input(TensorType("float32", (n,)), "b")
    t = bld.add("tanh", [bld.add("add", [bld.add("mul", [x, w]), b], {"alpha": 1})])
    s = bld.add("mul", [t, bld.add("sigmoid", [x])])
    q = bld.add("mul", [bld.add("mul", [x, 0.5]), x])
    out = bld.add("sum", [bld.add("add", [s, q], {"alpha": 1})], {"dim": None, "keepdim": False})
    return bld.ret(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--n", type=int, default=1000)
    args = ap.parse_args()
    n = args.n
    rng = np.random.default_rng(0)
    x, w = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    b = rng.standard_normal(n).astype(np.float32)
    g = w3_graph(n)
    t0 = time.perf_counter()
    k = lower(g)
    compile_ms = (time.perf_counter() - t0) * 1e3
    arrays = [x, w, b]

    def numpy_plain():
        return (np.tanh(x * w + b) * (1 / (1 + np.exp(-x))) + 0.5 * x * x).sum()

    (got,), (want,) = k(arrays), evaluate(g, arrays)[0]
    assert abs(float(got) - float(want)) <= 1e-5 * abs(float(want)), (got, want)
    t_kernel = median_us(lambda: k(arrays), args.repeat)
    t_interp = median_us(lambda: evaluate(g, arrays), args.repeat)
    t_numpy = median_us(numpy_plain, args.repeat)
    print(f"W3 forward, {n * n} float32 elements, 1 thread (median of {args.repeat}):")
    print(f"  llvm kernel (fused)      {t_kernel:10.0f} us   (compile {compile_ms:.0f} ms)")
    print(f"  numpy, plain expression  {t_numpy:10.0f} us   x{t_numpy / t_kernel:.1f}")
    print(f"  numpy, ir.interpret      {t_interp:10.0f} us   x{t_interp / t_kernel:.1f}")


if __name__ == "__main__":
    main()
