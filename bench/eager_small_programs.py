"""Eager llgrad beside eager PyTorch on whole programs of many ops on tiny tensors, where the
per-op cost (dispatch, autograd nodes, the engine) is all there is: MAML's second-order step
(untuned_models_sixteenth.py's: autograd.grad(create_graph=True) per task, the meta-gradient,
Adam), an LSTMCell loop (batch 4, 20 steps, hidden 32, a linear head, MSE, SGD), the demo
MLP's step (2-64-64-3 tanh, batch 16, CrossEntropyLoss, Adam), an elementwise chain on 64
elements with its backward, and indexing / views (slices, select, t(), view, index by a
tensor, their backward).

    python bench/eager_small_programs.py [name,...] [--blocks 7] [--seconds 0.4]

Both systems start from the same weights and data; each program's gradients (or, for the
MAML step, its loss over three steps) are checked against torch's before timing. Prints the
median process-CPU milliseconds per call over interleaved blocks (the systems' order rotating
from block to block), llgrad / torch, every system on one thread. On a machine shared with
other work, compare the ratios of one run, not absolute times across runs.
"""
import argparse
import os
import statistics
import sys
import time

if __name__ == "__main__":      # (every system on one thread; imported by its test, the
    for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",  # process's
                  "LLGRAD_NUM_THREADS"):                                  # settings stay)
        os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import llgrad  # noqa: E402
import torch  # noqa: E402


def _copy_params(lib, module, arrays):
    with lib.no_grad():
        for p, a in zip(module.parameters(), arrays):
            p.copy_(lib.tensor(a))


def _params_of(module_fn):
    """Weights for both systems: torch's default init of module_fn(torch), as arrays."""
    torch.manual_seed(0)
    return [p.detach().numpy().copy() for p in module_fn(torch).parameters()]


def maml(lib):
    import untuned_models_sixteenth
    _, step = untuned_models_sixteenth.build(lib, "maml")
    return step, None


def lstm(lib, batch=4, steps=20, inp=8, hidden=32):
    nn = lib.nn

    def make(lib):
        return lib.nn.ModuleList([lib.nn.LSTMCell(inp, hidden), lib.nn.Linear(hidden, 1)])
    model = make(lib)
    _copy_params(lib, model, _params_of(make))
    cell, head = model
    rng = np.random.default_rng(1)
    xs = lib.tensor(rng.standard_normal((steps, batch, inp)).astype(np.float32))
    ys = lib.tensor(rng.standard_normal((steps, batch, 1)).astype(np.float32))
    opt = lib.optim.SGD(model.parameters(), lr=1e-2)
    loss_fn = nn.MSELoss()

    def step():
        opt.zero_grad()
        h = lib.zeros(batch, hidden)
        c = lib.zeros(batch, hidden)
        loss = 0
        for t in range(steps):
            h, c = cell(xs[t], (h, c))
            loss = loss + loss_fn(head(h), ys[t])
        loss.backward()
        grads = [p.grad for p in model.parameters()]
        opt.step()
        return loss, grads
    return step, "grads"


def mlp(lib, batch=16):
    def make(lib):
        nn = lib.nn
        return nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                             nn.Linear(64, 3))
    model = make(lib)
    _copy_params(lib, model, _params_of(make))
    rng = np.random.default_rng(2)
    x = lib.tensor(rng.standard_normal((batch, 2)).astype(np.float32))
    y = lib.tensor(rng.integers(0, 3, batch).astype(np.int64))
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = lib.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        grads = [p.grad for p in model.parameters()]
        opt.step()
        return loss, grads
    return step, "grads"


def chain(lib, n=64):
    rng = np.random.default_rng(3)
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    x = lib.tensor(a, requires_grad=True)
    w = lib.tensor(b, requires_grad=True)
    z = lib.tensor(c)

    def step():
        x.grad = w.grad = None
        h = (x * w + z).tanh()
        h = h * h.sigmoid() - 0.5 * x
        h = (h.exp() + 1).log() / (w.abs() + 1)
        loss = (h * h).mean() + h.max()
        loss.backward()
        return loss, [x.grad, w.grad]
    return step, "grads"


def views(lib, n=16):
    rng = np.random.default_rng(4)
    x = lib.tensor(rng.standard_normal((n, n)).astype(np.float32), requires_grad=True)
    idx = lib.tensor(np.array([3, 1, 4, 1, 5], dtype=np.int64))

    def step():
        x.grad = None
        a = x[2:10, 1:5].sum() + x[3].mul(2).sum() + x.t()[1:3].exp().sum()
        b = x.view(-1)[::3].tanh().sum() + x[idx].pow(2).sum() + x[:, idx].abs().sum()
        c = x.unsqueeze(0).expand(2, n, n).select(0, 1).diagonal().sum()
        loss = a + b + c
        loss.backward()
        return loss, [x.grad]
    return step, "grads"


PROGRAMS = {"maml": maml, "lstm": lstm, "mlp": mlp, "chain": chain, "views": views}


def _as_arrays(out):
    loss, grads = out
    return [loss.detach().numpy()] + [g.detach().numpy() for g in grads]


def check(name, steps):
    """llgrad's first call against torch's: gradients to float32 rounding (the MAML step,
    whose tasks are drawn from each library's own generator, is only run)."""
    ours, theirs = steps["llgrad"], steps["torch"]
    if name == "maml":
        for _ in range(3):
            loss = ours[0]()
            if not np.isfinite(loss.detach().item()):
                raise AssertionError("maml: llgrad's loss is not finite")
            theirs[0]()
        return "ran (tasks drawn from each library's generator)"
    a, b = _as_arrays(ours[0]()), _as_arrays(theirs[0]())
    worst = 0.0
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=2e-4, atol=2e-5, err_msg=name)
        worst = max(worst, float(np.max(np.abs(x - y), initial=0.0)))
    return f"gradients match torch (max abs diff {worst:.1e})"


def time_interleaved(fns, blocks, seconds):
    """{system: median process-CPU ms per call}, blocks of about `seconds` each, the
    systems' order rotating from block to block."""
    per_call = {}
    for k, f in fns.items():
        f()
        t0 = time.process_time()
        f()
        per_call[k] = max(time.process_time() - t0, 1e-6)
    numbers = {k: max(1, int(seconds / per_call[k])) for k in fns}
    times = {k: [] for k in fns}
    order = list(fns)
    for b in range(blocks):
        k0 = b % len(order)
        for k in order[k0:] + order[:k0]:
            f, n = fns[k], numbers[k]
            t0 = time.process_time()
            for _ in range(n):
                f()
            times[k].append((time.process_time() - t0) / n * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="?", default=",".join(PROGRAMS))
    p.add_argument("--blocks", type=int, default=7)
    p.add_argument("--seconds", type=float, default=0.4)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    names = args.names.split(",")
    unknown = set(names) - set(PROGRAMS)
    if unknown:
        sys.exit(f"unknown programs {sorted(unknown)}; known: {', '.join(PROGRAMS)}")
    print(f"# eager small-tensor programs, median process-CPU ms per call, {args.blocks} "
          f"interleaved blocks of ~{args.seconds}s, 1 thread; llgrad {llgrad.__file__}, "
          f"torch {torch.__version__}, numpy {np.__version__}")
    print(f"{'program':8s} {'llgrad':>9s} {'torch':>9s} {'ratio':>6s}  check")
    for name in names:
        steps = {lib.__name__: PROGRAMS[name](lib) for lib in (llgrad, torch)}
        note = check(name, steps)
        med = time_interleaved({k: v[0] for k, v in steps.items()}, args.blocks, args.seconds)
        a, b = med["llgrad"], med["torch"]
        print(f"{name:8s} {a:9.3f} {b:9.3f} {a / b:6.2f}  {note}", flush=True)


if __name__ == "__main__":
    main()
