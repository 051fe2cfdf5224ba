"""A compiled training step called at new batch sizes: what each new size costs (its trace,
lowering and any LLVM build) and the speed of the code that then runs, three ways, each in
a fresh process with a cold kernel cache: the default (from the third size on, entries made
from a template of the first two traces, no trace: compile/size_templates.py, and code
shared between sizes), a trace per size with shared code (LLGRAD_DYNAMIC_SIZES=0), and a
trace and code specialised per size (both off: LLGRAD_SHARE_SIZES=0 too).

    python bench/batch_sizes.py [--sizes 32,24,17,9,40,3,12,64] [--model gpt|mlp] [--threads 1]
    python bench/batch_sizes.py --vary seq [--sizes 32,24,17,9,28,5,12,20]

--vary seq varies the gpt model's sequence length (batch 16; positions `arange(T)` and the
causal mask change with it) in place of the batch size.

One thread unless --threads says otherwise (LLGRAD_NUM_THREADS). "first 3 calls" is the wall time of a size's first three
calls (the first traces, the second builds the size's code; at the first size, an
optimiser's first step runs eagerly before those), each setting in its own process; "per
call" the median of 40 calls once every size has its code, the shared and the specialised
code timed in one process in alternating rounds (the first size's code is the same in
both). The processes that trace every size are compared bit for bit, the templates' losses
to them by their largest relative difference (a size's first call runs compiled code there,
eager's traced run here)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def _model(kind):
    import llgrad
    kind, _, vary = kind.partition(":")
    import llgrad.nn as nn
    import llgrad.nn.functional as F
    llgrad.manual_seed(0)
    if kind == "gpt":
        sys.path.insert(0, os.path.join(ROOT, "examples"))
        import char_transformer as ct
        model = ct.TinyGPT(65, 48, 4, 2, 32)
        opt = llgrad.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01)

        def batch(rng, b):
            shape = (16, b) if vary == "seq" else (b, 32)
            return (llgrad.from_numpy(rng.integers(0, 65, shape)),
                    llgrad.from_numpy(rng.integers(0, 65, shape)))
        return model, opt, ct.train_step, batch
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.LayerNorm(256),
                          nn.Linear(256, 10))
    opt = llgrad.optim.Adam(model.parameters(), lr=1e-3)

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    def batch(rng, b):
        return (llgrad.from_numpy(rng.standard_normal((b, 784)).astype("float32")),
                llgrad.from_numpy(rng.integers(0, 10, b)))
    return model, opt, step, batch


def _child(kind, sizes):
    sys.path.insert(0, ROOT)
    import numpy as np
    import llgrad
    model, opt, step_fn, batch = _model(kind)
    step = llgrad.compile(step_fn, recompile_limit=len(sizes) + 2)
    rng = np.random.default_rng(0)
    data = {b: batch(rng, b) for b in sizes}
    firsts, losses = {}, []
    for b in sizes:         # (a size's first call traces, the second builds its code)
        t = time.perf_counter()
        losses += [step(model, opt, *data[b]).item() for _ in range(3)]
        firsts[b] = time.perf_counter() - t
    params = np.concatenate([p.detach().numpy().ravel() for p in model.parameters()])
    traces, builds, per_call = step.n_traces, step.n_llvm_compiles, {}
    if os.environ["LLGRAD_SHARE_SIZES"] == "1":
        per_call = _per_call(step, model, opt, data, sizes)
    print(json.dumps({"first": firsts, "per_call": per_call, "llvm": builds,
                      "traces": traces, "losses": losses,
                      "params": params.tobytes().hex()[:4096]}))


def _per_call(step, model, opt, data, sizes):
    """Per-call medians of the shared code and of code specialised to each size, in this
    process, in alternating rounds (a copy of the model and optimiser for the second)."""
    import copy
    import numpy as np
    import llgrad
    other_model, other_opt = copy.deepcopy((model, opt))
    other = llgrad.compile(step.fn, recompile_limit=len(sizes) + 2)
    os.environ["LLGRAD_SHARE_SIZES"] = "0"
    for b in sizes:
        for _ in range(3):
            other(other_model, other_opt, *data[b])
    os.environ["LLGRAD_SHARE_SIZES"] = "1"
    times = {(b, k): [] for b in sizes for k in ("shared", "specialised")}
    for _ in range(5):
        for b in sizes:
            for k, (f, m, o) in (("shared", (step, model, opt)),
                                 ("specialised", (other, other_model, other_opt))):
                for _ in range(8):
                    t = time.perf_counter()
                    f(m, o, *data[b])
                    times[(b, k)].append(time.perf_counter() - t)
    return {f"{b} {k}": float(np.median(v)) for (b, k), v in times.items()}


def _run(kind, sizes, share, threads, dynamic=True):
    env = dict(os.environ, LLGRAD_NUM_THREADS=str(threads), LLGRAD_COMPILE="sync",
               LLGRAD_SHARE_SIZES="1" if share else "0", LLGRAD_QUIET="1",
               LLGRAD_DYNAMIC_SIZES="1" if dynamic else "0")
    with tempfile.TemporaryDirectory() as cache:
        env["LLGRAD_CACHE_DIR"] = cache
        out = subprocess.run([sys.executable, __file__, "--child", kind,
                              "--sizes", ",".join(map(str, sizes))],
                             env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="32,24,17,9,40,3,12,64")
    p.add_argument("--model", default="gpt", choices=["gpt", "mlp"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--vary", default="batch", choices=["batch", "seq"])
    p.add_argument("--child", default=None)
    args = p.parse_args(argv)
    if args.vary == "seq" and args.sizes == p.get_default("sizes"):
        args.sizes = "32,24,17,9,28,5,12,20"        # (the model's context is 32)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.child:
        return _child(args.child, sizes)
    kind = "gpt:seq" if args.vary == "seq" else args.model
    shared = _run(kind, sizes, True, args.threads)
    traced = _run(kind, sizes, True, args.threads, dynamic=False)
    spec = _run(kind, sizes, False, args.threads, dynamic=False)
    # (a trace per size: each size's first call is the traced, eager, run; with templates it
    # runs compiled code: equal to float32 rounding, not bit for bit)
    same = traced["losses"] == spec["losses"] and traced["params"] == spec["params"]
    drift = max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(shared["losses"],
                                                                 traced["losses"]))
    print(f"{args.model} training step, {args.vary} sizes {sizes}, {args.threads} thread(s), "
          "cold cache")
    print(f"traces: templates {shared['traces']}, a trace per size {traced['traces']}, "
          f"specialised {spec['traces']}; LLVM builds: {shared['llvm']}, {traced['llvm']}, "
          f"{spec['llvm']}; a trace per size and specialised bitwise equal: {same}; "
          f"templates' losses against a trace per size: max relative difference {drift:.1e}")
    print(f"| {args.vary} | first 3 calls: templates | a trace per size | specialised | "
          "per call: shared code | specialised | ratio |")
    print("|---|---|---|---|---|---|---|")
    for b in sizes:
        k = str(b)
        a, s = shared["per_call"][f"{b} shared"], shared["per_call"][f"{b} specialised"]
        print(f"| {b} | {shared['first'][k] * 1e3:.0f} ms | {traced['first'][k] * 1e3:.0f} ms"
              f" | {spec['first'][k] * 1e3:.0f} ms | {a * 1e3:.2f} ms | {s * 1e3:.2f} ms | "
              f"{a / s:.2f} |")
    tot = [sum(r["first"].values()) for r in (shared, traced, spec)]
    print(f"first 3 calls of every size: templates {tot[0]:.2f} s, a trace per size "
          f"{tot[1]:.2f} s, specialised {tot[2]:.2f} s")


if __name__ == "__main__":
    main()
