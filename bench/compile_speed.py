"""Trace and compile time, and peak memory, against graph size: a chain of residual
MLP/LayerNorm blocks (forward and backward), each size in a fresh process, with a cold
kernel cache and then a warm one; and a stack of identical transformer-like blocks
against one block.

    python bench/compile_speed.py [--blocks 1,4,16,64,128] [--width 16] [--stack 12]
                                  [--bytecode cached,source]

One thread (LLGRAD_NUM_THREADS=1). "ops" counts the forward and backward IR nodes.
The last column says whether the children read Python bytecode written beforehand
("cached": as a pip-installed wheel's .pyc files; one warm-up child per kind writes it
under a temporary PYTHONPYCACHEPREFIX, never into the source tree) or compile llgrad's
modules from source ("source": PYTHONDONTWRITEBYTECODE=1 and no .pyc, llgrad's own
modules' bytecode then goes to the empty kernel cache directory, _bytecode.py); the
build imports ~70 code-generator modules, so the cold figures differ by their compiling.
"cpu s": the CPU time of the cold process's first two calls (trace, build and runs) plus
the compile worker's (its start-up and LLVM): steadier than wall times on a busy machine.
Peak memory is the process's maximum resident set (trace + compile + run) less the
resident set after `import llgrad` and building the inputs."""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def _child(blocks, width, kind):
    sys.path.insert(0, ROOT)
    import llgrad
    import llgrad.nn.functional as F
    from llgrad import _bytecode
    from llgrad.codegen.native import jit
    from llgrad.compile.log import build_seconds

    rng = llgrad.Generator().manual_seed(0) if hasattr(llgrad, "Generator") else None
    del rng
    llgrad.manual_seed(0)
    params = []
    for _ in range(blocks):
        params += [llgrad.ones(width), llgrad.zeros(width),
                   llgrad.randn(width, 2 * width) * 0.1, llgrad.zeros(2 * width),
                   llgrad.randn(2 * width, width) * 0.1, llgrad.zeros(width)]
    for p in params:
        p.requires_grad_(True)
    x = llgrad.randn(8, width)

    def mlp_chain(x, *ps):
        for i in range(blocks):
            g, b, w1, b1, w2, b2 = ps[6 * i:6 * i + 6]
            h = F.layer_norm(x, (width,), g, b)
            x = x + F.gelu(h @ w1 + b1) @ w2 + b2
        return (x * x).mean()

    if kind == "stack":             # identical transformer encoder blocks
        import llgrad.nn as nn
        model = nn.Sequential(*[nn.TransformerEncoderLayer(width, 4, 2 * width, dropout=0.0,
                                                           batch_first=True)
                                for _ in range(blocks)])
        params = list(model.parameters())
        x = llgrad.randn(4, 16, width)

        def mlp_chain(x, *ps):         # noqa: F811 (the function compiled)
            y = model(x)
            return (y * y).mean()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    f = llgrad.compile(mlp_chain)
    t0, c0 = time.perf_counter(), time.process_time()
    loss = f(x, *params)
    loss.backward()
    first = time.perf_counter() - t0
    loss = f(x, *params)        # (the second call runs native code: built by now)
    loss.backward()
    build_cpu = time.process_time() - c0
    entry = f.entries[-1]
    t = entry.timings
    n_ops = len(entry.forward.nodes) + (len(entry.backward.nodes) if entry.backward else 0)
    # the compiled result must be eager's
    for p in params:
        p.grad = None
    with llgrad.no_grad():
        pass
    eager = mlp_chain(x, *params)
    assert abs(eager.item() - loss.item()) <= 1e-5 * max(1.0, abs(eager.item())), \
        (eager.item(), loss.item())
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({
        "blocks": blocks, "ops": n_ops, "first_call": first,
        "trace": t.get("trace_total", 0.0), "forward": t.get("forward", 0.0),
        "backward": t.get("backward", 0.0), "how": t.get("forward_how", ""),
        # (the forward and backward build side by side: the wall time from the first
        # starting to the last ending, not their sum)
        "compile": build_seconds(t),
        "llvm_builds": getattr(jit, "stats", {}).get("compiles", None)
        if isinstance(getattr(jit, "stats", None), dict) else None,
        "peak_mib": (rss1 - rss0) / 1024.0, "build_cpu": build_cpu,
        "worker_cpu": _worker_cpu(),
        # (llgrad's modules this process compiled from source: 0 where .pyc files served)
        "compiled_modules": _bytecode.counts["compiled"], "timeline": _timeline()}))


def _timeline():
    """[(what, seconds since the trace began)] of this process's and the compile worker's
    marks, in order (LLGRAD_TIMELINE=1; else empty): the cold build's critical path."""
    from llgrad.codegen.native import timeline, worker
    marks = timeline.marks() + worker.worker_timeline()
    if not marks:
        return []
    t0 = min(t for what, t in marks if what == "trace start")
    return [(what, round(t - t0, 4)) for what, t in sorted(marks, key=lambda m: m[1])]


def _worker_cpu():
    """The compile worker's CPU seconds so far (its start-up and LLVM), 0.0 without one."""
    from llgrad.codegen.native import worker
    proc = worker._proc
    try:
        with open(f"/proc/{proc.pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (AttributeError, OSError, ValueError, IndexError):
        return 0.0


def _env(pycache):
    """The children's bytecode settings: pycache, a PYTHONPYCACHEPREFIX directory whose .pyc
    files they read (None: llgrad's modules from source, no bytecode written)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if pycache is not None:
        env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def _write_bytecode(pycache, width):
    """Fill pycache with the bytecode of every module the children import (llgrad's, the
    standard library's, NumPy's, the compile worker's llvmlite): one child of each kind
    that writes it, on its own empty kernel cache."""
    env = {k: v for k, v in _env(pycache).items() if k != "PYTHONDONTWRITEBYTECODE"}
    for kind, w in (("mlp", width), ("stack", 64)):
        with tempfile.TemporaryDirectory() as cache:
            _run(1, w, cache, kind, env)


def _run(blocks, width, cache, kind="mlp", base=None):
    env = dict(os.environ if base is None else base, LLGRAD_NUM_THREADS="1",
               LLGRAD_CACHE_DIR=cache, LLGRAD_COMPILE="sync", LLGRAD_QUIET="1",
               PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, __file__, "--child", str(blocks), "--width",
                          str(width), "--kind", kind], env=env, capture_output=True,
                         text=True, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"child failed ({blocks} blocks):\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _stack(n, envs, width=64):
    """One transformer block against a stack of n identical ones, cold cache."""
    for mode, env in envs:
        with tempfile.TemporaryDirectory() as cache:
            one = _run(1, width, cache, "stack", env)
        with tempfile.TemporaryDirectory() as cache:
            many = _run(n, width, cache, "stack", env)
        t1, tn = one["compile"], many["compile"]
        print(f"transformer blocks (width {width}): 1 block {one['ops']} ops, trace "
              f"{one['trace']:.2f} s, compile {t1:.2f} s; {n} blocks {many['ops']} ops, trace "
              f"{many['trace']:.2f} s, compile {tn:.2f} s ({tn / t1:.2f}x), bytecode {mode}",
              flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--blocks", default="1,4,16,64,128,256")
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--child", type=int, default=None)
    p.add_argument("--kind", default="mlp")
    p.add_argument("--stack", type=int, default=12)
    p.add_argument("--bytecode", default="cached,source",
                   help="cached: the children read .pyc files written beforehand; source: "
                        "llgrad's modules compiled from source in each child (both: "
                        "interleaved, size by size)")
    args = p.parse_args(argv)
    if args.child is not None:
        return _child(args.child, args.width, args.kind)
    modes = [m.strip() for m in args.bytecode.split(",") if m.strip()]
    if not modes or set(modes) - {"cached", "source"}:
        p.error("--bytecode takes cached, source or both")
    with tempfile.TemporaryDirectory() as pycache:
        envs = []
        for mode in modes:
            if mode == "cached":
                _write_bytecode(pycache, args.width)
            envs.append((mode, _env(pycache if mode == "cached" else None)))
        return _table(args, envs)


def _table(args, envs):
    if args.stack:
        _stack(args.stack, envs)
    print(f"{'blocks':>6} {'ops':>6} {'trace s':>8} {'ms/op':>6} {'compile s':>9} "
          f"{'ms/op':>6} {'warm s':>7} {'peak MiB':>8} {'bytecode':>8} {'cpu s':>6}")
    rows = []
    for n in [int(b) for b in args.blocks.split(",")]:
        for mode, env in envs:
            with tempfile.TemporaryDirectory() as cache:
                cold = _run(n, args.width, cache, "mlp", env)
                warm = _run(n, args.width, cache, "mlp", env)
            comp = cold["compile"]
            rows.append((n, cold, warm, mode))
            print(f"{n:>6} {cold['ops']:>6} {cold['trace']:>8.3f} "
                  f"{1e3 * cold['trace'] / cold['ops']:>6.3f} {comp:>9.3f} "
                  f"{1e3 * comp / cold['ops']:>6.3f} {warm['compile']:>7.3f} "
                  f"{cold['peak_mib']:>8.1f} {mode:>8} "
                  f"{cold['build_cpu'] + cold['worker_cpu']:>6.3f}", flush=True)
    return rows


if __name__ == "__main__":
    main()
