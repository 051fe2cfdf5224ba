"""How each step of lowering scales with the size of graphs of a few shapes: every simplify
pass, the verifier, the printer and the plan, each timed (process CPU) at N and at 4N
nodes-ish, with the ratio (4.0 is linear; the script marks steps over 6 that take over 20
ms). The shapes are the ones that found quadratic steps: a chain of single-use adds (a
gradient summed over a loop's steps), a chain of elementwise ops, one cat of many values,
a residual chain of products, and many per-step views of one input read at the end.

    python bench/compile_scaling.py [--n 300]"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from llgrad.codegen import build  # noqa: E402
from llgrad.codegen.lowerings.ops_matmul import small_gemm_bound  # noqa: E402
from llgrad.ir import Builder, TensorType  # noqa: E402
from llgrad.ir.verify import verify  # noqa: E402


def add_chain(n):
    bld = Builder("add_chain")
    x = bld.input(TensorType("float32", (8, 16)), "x")
    acc = bld.add("exp", [x])
    for i in range(n):
        acc = bld.add("add", [acc, bld.add("mul", [x, float(i)])], {"alpha": 1})
    return bld.ret(acc)


def elementwise_chain(n):
    bld = Builder("elementwise_chain")
    v = x = bld.input(TensorType("float32", (8, 16)), "x")
    for _ in range(n):
        v = bld.add("tanh", [bld.add("mul", [v, 0.5])])
    return bld.ret(v)


def one_cat(n):
    bld = Builder("one_cat")
    x = bld.input(TensorType("float32", (8, 16)), "x")
    return bld.ret(bld.add("cat", [bld.add("mul", [x, float(i)]) for i in range(n)], {"dim": 0}))


def residual_products(n):
    bld = Builder("residual_products")
    x = bld.input(TensorType("float32", (8, 16)), "x")
    w = bld.input(TensorType("float32", (16, 16)), "w")
    v = x
    for _ in range(n):
        v = bld.add("add", [v, bld.add("tanh", [bld.add("mm", [v, w])])], {"alpha": 1})
    return bld.ret(bld.add("sum", [v]))


def step_views(n):
    bld = Builder("step_views")
    x = bld.input(TensorType("float32", (n, 16)), "x")
    outs = [bld.add("exp", [bld.add("select", [x], {"dim": 0, "index": i}, view_of=x)])
            for i in range(n)]
    return bld.ret(bld.add("stack", outs, {"dim": 0}))


SHAPES = (add_chain, elementwise_chain, one_cat, residual_products, step_views)


def _steps(graph):
    times, out = {}, graph
    for p in build.PASSES:
        t = time.process_time()
        out = p(out)
        times[p.__name__] = time.process_time() - t
    for name, fn in (("verify", verify), ("print", str)):
        t = time.process_time()
        fn(out)
        times[name] = time.process_time() - t
    t = time.process_time()
    build.plan_graph(out, {"blas": True, "small_gemm": small_gemm_bound()})
    times["plan"] = time.process_time() - t
    return times


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=300)
    args = p.parse_args(argv)
    for make in SHAPES:
        small, big = _steps(make(args.n)), _steps(make(4 * args.n))
        cells = []
        for k in small:
            ratio = big[k] / max(small[k], 1e-4)
            flag = " !" if ratio > 6 and big[k] > 0.02 else ""
            if big[k] > 0.002:
                cells.append(f"{k} {1000 * big[k]:.0f} ms x{ratio:.1f}{flag}")
        print(f"{make.__name__} (n {args.n} -> {4 * args.n}): " + ", ".join(cells), flush=True)


if __name__ == "__main__":
    main()
