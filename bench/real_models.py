"""Real models, forward + all gradients (issue 20): a pre-LN transformer block, a small CNN
and an LSTM sequence model, as llgrad compiled and llgrad eager beside torch eager,
torch.compile and jax.jit (where installed), each system pinned to 1 thread and then to 2.

    python bench/real_models.py [--threads 1,2] [--workloads block,cnn,lstm] [--quick]
                                [--separate] [--json FILE]
    python bench/real_models.py --profile block [--threads 2]   # llgrad.profile table

Every system starts from the same weights and data (torch's, loaded into llgrad); the loss
and every gradient of every system are checked against torch eager's (relative to the
largest entry of each gradient). Every (system, thread count) runs in one process, blocks
interleaved (measure.py's scheme: the order rotates, so the noise of a shared machine
falls on all alike, and the speed-up of 2 threads over 1 compares blocks minutes apart at
most), the count set before each block (llgrad.set_num_threads, which sets NumPy's
OpenBLAS too, and torch.set_num_threads); the process starts pinned to the largest count
(LLGRAD_NUM_THREADS, OMP/OPENBLAS/MKL_NUM_THREADS, XLA_FLAGS=--xla_cpu_multi_thread_eigen=
false intra_op_parallelism_threads=N, PJRT_NPROC), which is jax's only count there;
`--separate` runs a process per count instead. Times are medians over the blocks, and
`cpu/wall` is the process's CPU seconds per wall second during that system's blocks (a
1-thread system near 1.0; above the thread count means someone spins)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

BENCH = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = ("block", "cnn", "lstm")
TITLES = {
    "block": "pre-LN transformer block: batch 8, 64 tokens, width 128, 4 heads, causal "
             "softmax attention, GELU MLP 512; loss mean((y - t)^2)",
    "cnn": "small CNN: batch 32 of 3x32x32, conv3x3(16)+ReLU+maxpool2, conv3x3(32)+ReLU+"
           "maxpool2, linear(2048->10), cross-entropy",
    "lstm": "LSTM sequence model: batch 32, 32 steps, input 32, nn.LSTM hidden 128, "
            "linear(128->10) per step, cross-entropy",
}
SYSTEMS = ("llgrad compiled", "llgrad eager", "torch eager", "torch.compile", "jax.jit")


def _pin(threads, env):
    """Pin every library of a process with this environment to `threads` threads."""
    n = str(threads)
    for v in ("LLGRAD_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
              "MKL_NUM_THREADS", "PJRT_NPROC"):
        env[v] = n
    env["XLA_FLAGS"] = ("--xla_cpu_multi_thread_eigen=false "
                        f"intra_op_parallelism_threads={n}" if threads == 1 else
                        f"intra_op_parallelism_threads={n}")
    env.setdefault("LLGRAD_COMPILE", "sync")
    return env


# ---- the models, written once against torch's API (llgrad has the same names) ---------------
def _block(lib, width=128, heads=4, hidden=512):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.fc1, self.fc2 = nn.Linear(width, hidden), nn.Linear(hidden, width)

        def forward(self, x, mask):
            b, t, c = x.shape
            d = c // heads
            q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, heads, d).permute(2, 0, 3, 1, 4)
            s = (q @ k.transpose(-2, -1)) * (1.0 / d ** 0.5)
            a = F.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
            h = x + self.proj((a @ v).transpose(1, 2).reshape(b, t, c))
            return h + self.fc2(F.gelu(self.fc1(self.ln2(h))))
    return Block()


def _cnn(lib):
    nn, F = lib.nn, lib.nn.functional

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 16, 3, padding=1)
            self.c2 = nn.Conv2d(16, 32, 3, padding=1)
            self.fc = nn.Linear(32 * 8 * 8, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.c1(x)), 2)
            x = F.max_pool2d(F.relu(self.c2(x)), 2)
            return self.fc(x.reshape(x.shape[0], -1))
    return CNN()


def _lstm(lib):
    nn = lib.nn

    class Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(32, 128, batch_first=True)
            self.head = nn.Linear(128, 10)

        def forward(self, x):
            return self.head(self.lstm(x)[0]).reshape(-1, 10)
    return Seq()


def _data(key):
    import numpy as np
    rng = np.random.default_rng(0)
    if key == "block":
        x = rng.standard_normal((8, 64, 128)).astype(np.float32)
        t = rng.standard_normal((8, 64, 128)).astype(np.float32)
        mask = np.triu(np.ones((64, 64), dtype=bool), 1)
        return [x, mask, t]
    if key == "cnn":
        return [rng.standard_normal((32, 3, 32, 32)).astype(np.float32),
                rng.integers(0, 10, 32).astype(np.int64)]
    return [rng.standard_normal((32, 32, 32)).astype(np.float32),
            rng.integers(0, 10, 32 * 32).astype(np.int64)]


def _loss(key, lib):
    F = lib.nn.functional
    if key == "block":
        def block_loss(model, x, mask, t):
            return ((model(x, mask) - t) ** 2).mean()
        return block_loss

    def ce_loss(model, x, y):
        return F.cross_entropy(model(x), y)
    ce_loss.__name__ = f"{key}_loss"
    return ce_loss


_MAKE = {"block": _block, "cnn": _cnn, "lstm": _lstm}


class Runner:
    """step() computes the loss and every gradient once; fetch(result) -> (loss, {name:
    NumPy gradient})."""
    def __init__(self, system, step, fetch):
        self.system, self.step, self.fetch = system, step, fetch


def _torch_state(key):
    import torch
    torch.manual_seed(0)
    model = _MAKE[key](torch)
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def _build_torch(system, key, state, arrays):
    import torch
    model = _MAKE[key](torch)
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    names, params = zip(*model.named_parameters())
    args = [torch.from_numpy(a.copy()) for a in arrays]
    fn = _loss(key, torch)
    if system == "torch.compile":
        fn = torch.compile(fn, dynamic=False)

    def step():
        loss = fn(model, *args)
        return loss, torch.autograd.grad(loss, params)

    def fetch(res):
        return float(res[0].item()), {n: g.numpy() for n, g in zip(names, res[1])}
    return Runner(system, step, fetch)


def _build_llgrad(system, key, state, arrays):
    import llgrad
    model = _MAKE[key](llgrad)
    model.load_state_dict({k: llgrad.tensor(v.copy()) for k, v in state.items()})
    names, params = zip(*model.named_parameters())
    args = [llgrad.tensor(a) for a in arrays]
    fn = _loss(key, llgrad)
    if system == "llgrad compiled":
        fn = llgrad.compile(fn)

    def step():
        loss = fn(model, *args)
        return loss, llgrad.autograd.grad(loss, params)

    def fetch(res):
        return float(res[0].item()), {n: g.numpy() for n, g in zip(names, res[1])}
    r = Runner(system, step, fetch)
    r.compiled = fn if system == "llgrad compiled" else None
    return r


# ---- jax: the same models written functionally, parameters named as torch's ---------------
def _jax_loss(key):
    import jax
    import jax.numpy as jnp

    def linear(p, name, x):
        return x @ p[name + ".weight"].T + p[name + ".bias"]

    def layer_norm(p, name, x):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + 1e-5) * p[name + ".weight"] + p[name + ".bias"]

    def ce(logits, y):
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    if key == "block":
        def loss(p, x, mask, t):
            b, n, c = x.shape
            d = c // 4
            q, k, v = linear(p, "qkv", layer_norm(p, "ln1", x)).reshape(
                b, n, 3, 4, d).transpose(2, 0, 3, 1, 4)
            s = (q @ k.swapaxes(-2, -1)) * (1.0 / d ** 0.5)
            a = jax.nn.softmax(jnp.where(mask, -jnp.inf, s), axis=-1)
            h = x + linear(p, "proj", (a @ v).transpose(0, 2, 1, 3).reshape(b, n, c))
            y = h + linear(p, "fc2", jax.nn.gelu(linear(p, "fc1", layer_norm(p, "ln2", h)),
                                                 approximate=False))
            return ((y - t) ** 2).mean()
        return loss

    if key == "cnn":
        def conv(p, name, x):
            y = jax.lax.conv_general_dilated(x, p[name + ".weight"], (1, 1), ((1, 1), (1, 1)),
                                             dimension_numbers=("NCHW", "OIHW", "NCHW"))
            return y + p[name + ".bias"][None, :, None, None]

        def pool(x):
            return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2),
                                         "VALID")

        def loss(p, x, y):
            h = pool(jax.nn.relu(conv(p, "c1", x)))
            h = pool(jax.nn.relu(conv(p, "c2", h)))
            return ce(linear(p, "fc", h.reshape(h.shape[0], -1)), y)
        return loss

    def loss(p, x, y):
        hid = p["lstm.weight_hh_l0"].shape[1]
        gx = x @ p["lstm.weight_ih_l0"].T + p["lstm.bias_ih_l0"] + p["lstm.bias_hh_l0"]

        def cell(carry, g):
            h, c = carry
            g = g + h @ p["lstm.weight_hh_l0"].T
            i, f, gg, o = jnp.split(g, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(gg)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h
        z = jnp.zeros((x.shape[0], hid), x.dtype)
        _, hs = jax.lax.scan(cell, (z, z), gx.swapaxes(0, 1))
        return ce(linear(p, "head", hs.swapaxes(0, 1)).reshape(-1, 10), y)
    return loss


def _build_jax(key, state, arrays):
    import jax
    import jax.numpy as jnp
    import numpy as np
    p = {k: jnp.asarray(v) for k, v in state.items() if v.dtype.kind == "f"}
    f = jax.jit(jax.value_and_grad(_jax_loss(key)))
    args = [jnp.asarray(a.astype(np.int32) if a.dtype == np.int64 else a) for a in arrays]

    def step():
        return jax.block_until_ready(f(p, *args))

    def fetch(res):
        return float(res[0]), {n: np.asarray(g) for n, g in res[1].items()}
    return Runner("jax.jit", step, fetch)


def available(system):
    import importlib.util
    lib = {"torch eager": "torch", "torch.compile": "torch", "jax.jit": "jax"}.get(system,
                                                                                 "llgrad")
    return importlib.util.find_spec(lib) is not None


def build(system, key, state, arrays):
    if system.startswith("llgrad"):
        return _build_llgrad(system, key, state, arrays)
    if system == "jax.jit":
        return _build_jax(key, state, arrays)
    return _build_torch(system, key, state, arrays)


def _err(res, ref):
    """Largest relative error of the loss and of each gradient (to its largest entry)."""
    import numpy as np
    loss, grads = res
    rl, rg = ref
    e = abs(loss - rl) / max(abs(rl), 1e-30)
    for n, g in rg.items():
        e = max(e, float(np.max(np.abs(grads[n] - g))) / max(float(np.max(np.abs(g))), 1e-30))
    return e


# ---- the measurement, in this process ------------------------------------------------------
def _set_threads(t):
    import torch

    import llgrad
    torch.set_num_threads(t)
    llgrad.set_num_threads(t)           # (and NumPy's OpenBLAS)


def run_child(opts):
    """Every (system, thread count) of opts.threads_list in this process, blocks
    interleaved; jax's count is fixed when it starts (the process's XLA_FLAGS), so it is
    measured at that count only."""
    counts = [int(v) for v in opts.threads_list.split(",")]
    import torch
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    sys.path.insert(0, BENCH)
    import measure
    blocks, seconds = (3, 0.15) if opts.quick else (opts.blocks, opts.block_seconds)
    out = [{"threads": t, "workloads": {}} for t in counts]
    for key in opts.workloads.split(","):
        state, arrays = _torch_state(key), _data(key)
        runners, per_call, errs, skipped = [], {}, {}, {t: {} for t in counts}
        _set_threads(counts[0])
        ref = build("torch eager", key, state, arrays)
        ref = ref.fetch(ref.step())
        for system in SYSTEMS:
            if system not in opts.systems.split(","):
                continue
            if not available(system):
                for t in counts:
                    skipped[t][system] = "not installed"
                continue
            for t in counts:
                if system == "jax.jit" and t != counts[-1]:
                    skipped[t][system] = f"(pinned to {counts[-1]}: --separate)"
                    continue
                name = f"{system}@{t}"
                try:
                    _set_threads(t)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        r = build(system, key, state, arrays)
                        first, last, per = measure.warm_up(r, 4, 0.3)
                    errs[name] = _err(r.fetch(last), ref)
                except Exception as e:      # noqa: BLE001 (the table says which failed)
                    skipped[t][system] = f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"
                    continue
                r.system, r.threads = name, t
                per_call[name] = per
                runners.append(r)
        cpu = {r.system: [] for r in runners}
        times, errors = _interleaved_cpu(measure, runners, per_call, blocks, seconds, cpu)
        for name, tb in errors.items():
            s, t = name.rsplit("@", 1)
            skipped[int(t)][s] = tb.strip().splitlines()[-1][:100]
        for k, t in enumerate(counts):
            row = out[k]["workloads"][key] = {"_skipped": skipped[t]}
            for name, v in times.items():
                s, tt = name.rsplit("@", 1)
                if int(tt) == t and v:
                    row[s] = {"us": statistics.median(v), "spread": measure.summary(v)[1],
                              "cpu": statistics.median(cpu[name]), "err": errs[name]}
    print("RESULT " + json.dumps(out))


def _interleaved_cpu(measure, runners, per_call, blocks, seconds, cpu):
    """measure.interleaved, plus each block's process CPU seconds per wall second."""
    import gc
    import traceback
    numbers = {r.system: max(1, int(seconds / max(per_call[r.system], 1e-7))) for r in runners}
    times, errors = {r.system: [] for r in runners}, {}
    runners = list(runners)
    for b in range(blocks):
        k = b % len(runners) if runners else 0
        for r in runners[k:] + runners[:k]:
            n, step = numbers[r.system], r.step
            _set_threads(r.threads)
            gc.collect()
            try:
                c0, t0 = time.process_time(), time.perf_counter()
                for _ in range(n):
                    step()
                t, c = time.perf_counter() - t0, time.process_time() - c0
            except Exception:       # noqa: BLE001
                errors[r.system] = traceback.format_exc()
                runners.remove(r)
                continue
            times[r.system].append(t / n * 1e6)
            cpu[r.system].append(c / t)
    return times, errors


# ---- the profile of llgrad compiled -----------------------------------------------------------
def run_profile(opts):
    import llgrad
    llgrad.set_num_threads(opts.threads_one)
    key = opts.profile
    r = build("llgrad compiled", key, _torch_state(key), _data(key))
    for _ in range(5):
        r.step()
    with llgrad.profile(groups=not opts.whole) as p:
        for _ in range(opts.steps):
            r.step()
    print(p.table(row_limit=opts.rows) if opts.rows else p.table())


# ---- the parent: one process per thread count, then the tables --------------------------------
def _fmt(us):
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.0f} us"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", default="1,2")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--blocks", type=int, default=9)
    p.add_argument("--block-seconds", type=float, default=0.4)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--profile", choices=WORKLOADS, help="print llgrad.profile's table")
    p.add_argument("--whole", action="store_true", help="(profile) time kernels whole")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rows", type=int, default=0)
    p.add_argument("--separate", action="store_true",
                   help="a process per thread count (else one process, counts interleaved)")
    p.add_argument("--threads-list", help=argparse.SUPPRESS)
    opts = p.parse_args(argv)
    if opts.profile:
        t = int(opts.threads.split(",")[0])
        _pin(t, os.environ)
        opts.threads_one = t
        return run_profile(opts)
    if opts.threads_list is not None:
        return run_child(opts)
    counts = [int(v) for v in opts.threads.split(",")]
    results = []
    for group in ([[t] for t in counts] if opts.separate else [counts]):
        cmd = [sys.executable, os.path.abspath(__file__),
               "--threads-list", ",".join(map(str, group)),
               "--workloads", opts.workloads, "--systems", opts.systems,
               "--blocks", str(opts.blocks), "--block-seconds", str(opts.block_seconds)]
        if opts.quick:
            cmd.append("--quick")
        proc = subprocess.run(cmd, env=_pin(group[-1], dict(os.environ)), capture_output=True,
                              text=True)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            print(proc.stdout, proc.stderr, file=sys.stderr)
            raise SystemExit(f"the run of {group} threads failed")
        results += json.loads(line[len("RESULT "):])
    _print(results)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(results, f, indent=1)


def _print(results):
    print("# median per call (loss + all gradients); ratio = to the best of torch eager, "
          "torch.compile, jax.jit; err = max relative error against torch eager; "
          "cpu = CPU s per wall s")
    peers = ("torch eager", "torch.compile", "jax.jit")
    for res in results:
        t = res["threads"]
        print(f"\n## {t} thread{'s' if t > 1 else ''}")
        print("| workload | " + " | ".join(SYSTEMS) + " | llgrad compiled / best peer |")
        print("|---" * (len(SYSTEMS) + 2) + "|")
        for key, row in res["workloads"].items():
            best = min((row[s]["us"] for s in peers if s in row), default=None)
            cells = []
            for s in SYSTEMS:
                if s in row:
                    c = row[s]
                    cells.append(f"{_fmt(c['us'])} (cpu {c['cpu']:.2f}, err {c['err']:.0e}, "
                                 f"spread {c['spread'] * 100:.0f}%)")
                else:
                    cells.append(row["_skipped"].get(s, "-"))
            ratio = (f"{row['llgrad compiled']['us'] / best:.2f}x"
                     if best and "llgrad compiled" in row else "-")
            print(f"| {key} | " + " | ".join(cells) + f" | {ratio} |")
    if len(results) > 1:
        print("\n## speed-up of 2 threads over 1 (1-thread median / N-thread median)")
        base = results[0]["workloads"]
        for res in results[1:]:
            for key, row in res["workloads"].items():
                parts = [f"{s} {base[key][s]['us'] / row[s]['us']:.2f}x" for s in SYSTEMS
                         if s in row and s in base.get(key, {})]
                print(f"  {key}: " + ", ".join(parts))
    print()
    for key in results[0]["workloads"]:
        print(f"  {key}: {TITLES[key]}")


if __name__ == "__main__":
    main()
