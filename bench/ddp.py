"""DistributedDataParallel on MPI: time per training step on 1 and 2 processes of 1 thread
each (LLGRAD_NUM_THREADS=1), for the W2-sized MLP (784-512-256-10 relu, 256 samples per
process per step, SGD with momentum) and the transformer of examples/char_transformer.py
(d=48, 4 heads, 2 layers, context 32, 16 sequences per process, AdamW), beside torch's DDP
with the gloo backend when torch is installed. llgrad runs three ways: the eager step; the
step through llgrad.compile (which runs eagerly: DDP's forward is a graph break); and an
eager step on DistributedDataParallel(llgrad.compile(model)) (compiled forward and
backward, the all-reduce from the hooks, the optimiser eager).

    python bench/ddp.py [--steps 30] [--json out.json]

The per-process batch is fixed (weak scaling): 2 processes do twice the work of 1 per
step, so throughput(2) / throughput(1) = 2 * t1 / t2, and the scaling efficiency is
t1 / t2. "hidden" is the fraction of the all-reduce time the backward hides: 1 - (the 2-process
step's time less the same step's under no_sync, which all-reduces nothing) / (the same
buckets' all-reduce run blocking, on their own); "hook wait" is the time the last gradient
hook waited for the all-reduces (it includes waiting for the slower rank). Medians over the timed steps, rank 0's clock; each run a fresh
`mpiexec -n N` (torch: N processes on a loopback rendezvous)."""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

# steady-state figures: native code is built before the call that needs it, not in the
# background while calls run eagerly (bench/first_steps.py times the background builds)
os.environ.setdefault("LLGRAD_COMPILE", "sync")

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
           "LLGRAD_NUM_THREADS"):
    os.environ[_v] = "1"

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MLP = (784, 512, 256, 10)
MLP_BATCH = 256
GPT = dict(vocab=40, d=48, heads=4, layers=2, context=32)
GPT_BATCH = 16


def batch(workload, rank, seed=0):
    rng = np.random.default_rng(seed + 1000 * rank)
    if workload == "mlp":
        return (rng.standard_normal((MLP_BATCH, MLP[0])).astype(np.float32),
                rng.integers(0, MLP[-1], MLP_BATCH).astype(np.int64))
    tokens = rng.integers(0, GPT["vocab"], (GPT_BATCH, GPT["context"] + 1)).astype(np.int64)
    return tokens[:, :-1].copy(), tokens[:, 1:].copy()


def timed(step, n_warm, n_steps, barrier):
    for _ in range(n_warm):
        step()
    barrier()
    times = []
    for _ in range(n_steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return times


# ---- llgrad (run under mpiexec) ------------------------------------------------------------
def llgrad_worker(workload, mode, n_steps, bucket_cap_mb=25.0):
    import llgrad
    import llgrad.distributed as dist
    import llgrad.nn as nn
    import llgrad.nn.functional as F
    from llgrad.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("mpi")
    rank = dist.get_rank()
    llgrad.manual_seed(0)
    if workload == "mlp":
        layers = []
        for a, b in zip(MLP[:-1], MLP[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        model = nn.Sequential(*layers[:-1])
        opt_fn = lambda ps: llgrad.optim.SGD(ps, lr=0.01, momentum=0.9)  # noqa: E731
    else:
        sys.path.insert(0, os.path.join(ROOT, "examples"))
        from char_transformer import TinyGPT
        model = TinyGPT(GPT["vocab"], GPT["d"], GPT["heads"], GPT["layers"], GPT["context"])
        opt_fn = lambda ps: llgrad.optim.AdamW(ps, lr=1e-3, weight_decay=0.01)  # noqa: E731
    ddp = DDP(llgrad.compile(model) if mode == "compiled_model" else model,
              bucket_cap_mb=bucket_cap_mb)
    opt = opt_fn(ddp.parameters())
    x, y = (llgrad.from_numpy(a) for a in batch(workload, rank))

    def train_step(model, opt, x, y):
        opt.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss.detach()

    import warnings
    warnings.simplefilter("ignore")
    fn = llgrad.compile(train_step) if mode == "compiled" else train_step
    waits = []

    def step():
        fn(ddp, opt, x, y)
        waits.append(ddp._reducer.last_wait_s)
    times = timed(step, 5, n_steps, dist.barrier)
    waits = waits[5:]

    def local_step():           # the same step without the all-reduce (no_sync)
        with ddp.no_sync():
            fn(ddp, opt, x, y)
    local = timed(local_step, 2, n_steps, dist.barrier)
    # the same buckets all-reduced blocking, on their own
    from mpi4py import MPI
    comm = ddp.process_group.comm
    blocking = []
    for _ in range(max(10, n_steps // 2)):
        comm.Barrier()
        t0 = time.perf_counter()
        for b in ddp._reducer.buckets:
            comm.Allreduce(MPI.IN_PLACE, b.flat, op=MPI.SUM)
        blocking.append(time.perf_counter() - t0)
    path = "eager"
    if mode == "compiled":
        path = "eager (graph break)" if fn.graph_breaks else "compiled"
    elif mode == "compiled_model":
        path = "compiled forward+backward, eager all-reduce and optimiser"
    if rank == 0:
        print("RESULT " + json.dumps({
            "step_s": statistics.median(times), "wait_s": statistics.median(waits),
            "local_s": statistics.median(local),
            "allreduce_s": statistics.median(blocking), "path": path,
            "buckets": ddp._reducer.bucket_sizes(),
            "params": sum(p.numel() for p in model.parameters())}), flush=True)
    dist.destroy_process_group()


# ---- torch DDP with gloo (processes started by the driver) ----------------------------------
def torch_worker(workload, n_steps):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    if workload == "mlp":
        layers = []
        for a, b in zip(MLP[:-1], MLP[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        model = nn.Sequential(*layers[:-1])
        opt_fn = lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9)  # noqa: E731
    else:
        model = _torch_gpt(torch, nn, F)
        opt_fn = lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01)  # noqa: E731
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = opt_fn(ddp.parameters())
    x, y = (torch.from_numpy(a) for a in batch(workload, rank))

    def step():
        opt.zero_grad()
        out = ddp(x)
        F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1)).backward()
        opt.step()
    times = timed(step, 5, n_steps, dist.barrier)
    if rank == 0:
        print("RESULT " + json.dumps({"step_s": statistics.median(times)}), flush=True)
    dist.destroy_process_group()


def _torch_gpt(torch, nn, F):
    V, d, H, L, T = (GPT[k] for k in ("vocab", "d", "heads", "layers", "context"))

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), 1))

        def forward(self, x):
            B, T_, C = x.shape
            q, k, v = (t.reshape(B, T_, H, C // H).transpose(1, 2)
                       for t in self.qkv(x).split(C, dim=2))
            att = (q @ k.transpose(-2, -1)) / (C // H) ** 0.5
            att = att.masked_fill(self.mask[:T_, :T_], float("-inf"))
            return self.proj((F.softmax(att, -1) @ v).transpose(1, 2).reshape(B, T_, C))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2, self.attn = nn.LayerNorm(d), nn.LayerNorm(d), Attn()
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * d, d))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class TorchGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(V, d), nn.Embedding(T, d)
            self.blocks = nn.ModuleList([Block() for _ in range(L)])
            self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, V)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln_f(x))
    return TorchGPT()


# ---- the driver -----------------------------------------------------------------------------
def _result(proc, what):
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{what} failed:\n{proc.stdout}\n{proc.stderr}")


def run_llgrad(workload, mode, n, steps, bucket_cap_mb=25.0):
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    mpiexec = mpiexec if os.access(mpiexec, os.X_OK) else shutil.which("mpiexec")
    proc = subprocess.run([mpiexec, "-n", str(n), sys.executable, __file__, "--worker",
                           workload, mode, str(steps), str(bucket_cap_mb)],
                          capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    return _result(proc, f"llgrad {workload} {mode} n={n}")


def run_torch(workload, n, steps):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(n):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r),
                   WORLD_SIZE=str(n), GLOO_SOCKET_IFNAME="lo")
        procs.append(subprocess.Popen([sys.executable, __file__, "--torch-worker", workload,
                                       str(steps)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, cwd=ROOT))
    outs = [p.communicate(timeout=600) for p in procs]
    return _result(subprocess.CompletedProcess([], procs[0].returncode, *outs[0]),
                   f"torch {workload} n={n}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--json", default=None, help="also write the figures here")
    p.add_argument("--bucket-cap-mb", type=float, default=None,
                   help="also run the eager llgrad step with this bucket size (torch's "
                        "default 25 MB, first bucket 1 MiB, puts both models in one bucket)")
    p.add_argument("--only", choices=("mlp", "transformer"), default=None)
    args = p.parse_args()
    try:
        import importlib.util
        has_torch = importlib.util.find_spec("torch") is not None
    except ImportError:
        has_torch = False
    rows, out = [], {}
    for workload, title in (("mlp", f"MLP {'-'.join(map(str, MLP))} relu, {MLP_BATCH}/process"),
                            ("transformer", f"transformer (examples/char_transformer.py), "
                                            f"{GPT_BATCH}x{GPT['context']} tokens/process")):
        systems = [("llgrad eager step", lambda n: run_llgrad(workload, "eager", n, args.steps)),
                   ("llgrad.compile(step)",
                    lambda n: run_llgrad(workload, "compiled", n, args.steps)),
                   ("DDP(compile(model))",
                    lambda n: run_llgrad(workload, "compiled_model", n, args.steps))]
        if workload != (args.only or workload):
            continue
        if args.bucket_cap_mb:
            cap = args.bucket_cap_mb
            systems.insert(1, (f"eager, {cap:g} MB buckets",
                               lambda n: run_llgrad(workload, "eager", n, args.steps, cap)))
        if has_torch:
            systems.append(("torch DDP gloo", lambda n: run_torch(workload, n, args.steps)))
        for name, run in systems:
            one, two = run(1), run(2)
            row = {"workload": title, "system": name, "t1_ms": one["step_s"] * 1e3,
                   "t2_ms": two["step_s"] * 1e3, "speedup": 2 * one["step_s"] / two["step_s"],
                   "efficiency": one["step_s"] / two["step_s"]}
            if "wait_s" in two:
                # the step's cost over the same step without the all-reduce, against the
                # all-reduce's own time: what the backward did not hide
                exposed = max(0.0, two["step_s"] - two["local_s"])
                row["hidden"] = max(0.0, 1 - exposed / two["allreduce_s"]) \
                    if two["allreduce_s"] > 0 else None
                row["exposed_ms"] = exposed * 1e3
                row["allreduce_ms"] = two["allreduce_s"] * 1e3
                row["wait_ms"] = two["wait_s"] * 1e3
                row["path"] = two["path"]
                row["buckets"] = len(two["buckets"])
            rows.append(row)
            out.setdefault(workload, []).append(row)
            _print_row(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


def _print_row(r):
    extra = ""
    if "hidden" in r:
        extra = (f"  all-reduce {r['allreduce_ms']:.2f} ms in {r['buckets']} bucket(s), "
                 f"step - no_sync step {r['exposed_ms']:.2f} ms, hook wait "
                 f"{r['wait_ms']:.2f} ms, hidden {100 * (r['hidden'] or 0):.0f}%"
                 f"  [{r['path']}]")
    print(f"{r['workload'][:44]:44s} {r['system']:22s} 1 proc {r['t1_ms']:8.2f} ms  2 procs "
          f"{r['t2_ms']:8.2f} ms  throughput x{r['speedup']:.2f}  efficiency "
          f"{100 * r['efficiency']:.0f}%{extra}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        llgrad_worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
    elif len(sys.argv) > 1 and sys.argv[1] == "--torch-worker":
        torch_worker(sys.argv[2], int(sys.argv[3]))
    else:
        main()
