"""A whole training step (zero_grad, forward, cross-entropy, backward, Adam step) of an MLP
held in a Module, on 1 thread: llgrad eager, llgrad.compile of the step, torch eager,
torch.compile of the model (backward and step eager, the usual way), and jax.jit of the
same step written by hand (value_and_grad and Adam's update, as one jitted function).

    python bench/train_step.py [--quick]

Every system starts from the same weights and data; its losses over four fresh steps are
compared with torch eager's (or llgrad eager's, without torch): the parameters themselves
are not, since Adam turns rounding differences in near-zero gradients into steps of ~lr.
A step returns its loss as a Python float (so jax's asynchronous dispatch is waited for).
Median microseconds per step over interleaved blocks (measure.py)."""
import os
import sys

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"
os.environ["XLA_FLAGS"] = " ".join(filter(None, [
    os.environ.get("XLA_FLAGS"), "--xla_cpu_multi_thread_eigen=false",
    "intra_op_parallelism_threads=1"]))
os.environ["PJRT_NPROC"] = "1"

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import statistics  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure  # noqa: E402

CONFIGS = {   # name: (layer sizes, activation, batch)
    "demo MLP 2-64-64-3 tanh, batch 128": ((2, 64, 64, 3), "tanh", 128),
    "MLP 784-512-256-10 relu, batch 256": ((784, 512, 256, 10), "relu", 256),
}
LR = 1e-3


def data(sizes, batch, seed=0):
    rng = np.random.default_rng(seed)
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        bound = 1 / np.sqrt(n_in)
        params += [rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32),
                   rng.uniform(-bound, bound, n_out).astype(np.float32)]
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch).astype(np.int64)
    return params, x, y


def _module_step(lib, params, x, y, act, compile_step=None, compile_model=None):
    """(step, parameters) for llgrad or torch: nn.Sequential + Adam + CrossEntropyLoss."""
    nn = lib.nn
    layers = []
    for k in range(0, len(params), 2):
        lin = nn.Linear(params[k].shape[1], params[k].shape[0])
        with lib.no_grad():
            lin.weight.copy_(lib.tensor(params[k]))
            lin.bias.copy_(lib.tensor(params[k + 1]))
        layers += [lin, nn.Tanh() if act == "tanh" else nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    opt = lib.optim.Adam(model.parameters(), lr=LR)
    loss_fn = nn.CrossEntropyLoss()
    xt, yt = lib.tensor(x), lib.tensor(y)
    forward = compile_model(model) if compile_model else model
    run = compile_step(_step) if compile_step else _step
    return (lambda: run(forward, opt, loss_fn, xt, yt).item()), \
        (lambda: [p.detach().numpy().copy() for p in model.parameters()])


def _step(model, opt, loss_fn, x, y):
    # (a module-level function: a closure holding the model would make its tensors
    # captured inputs, read by llgrad's full guard walk on every call)
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def build(system, params, x, y, act):
    if system.startswith("llgrad"):
        import llgrad
        llgrad.set_num_threads(1)
        return _module_step(llgrad, params, x, y, act,
                            compile_step=llgrad.compile if "compile" in system else None)
    if system.startswith("torch"):
        import torch
        torch.set_num_threads(1)
        return _module_step(torch, params, x, y, act,
                            compile_model=torch.compile if "compile" in system else None)
    return _jax_step(params, x, y, act)


def _jax_step(params, x, y, act):
    import jax
    import jax.numpy as jnp

    def loss(ps, x, y):
        h = x
        for k in range(0, len(ps), 2):
            h = h @ ps[k].T + ps[k + 1]
            if k + 2 < len(ps):
                h = jnp.tanh(h) if act == "tanh" else jax.nn.relu(h)
        logp = jax.nn.log_softmax(h, axis=1)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    b1, b2, eps = 0.9, 0.999, 1e-8

    @jax.jit
    def update(ps, m, v, t, x, y):          # PyTorch's Adam, written out
        value, grads = jax.value_and_grad(loss)(ps, x, y)
        t = t + 1
        m = [b1 * mk + (1 - b1) * g for mk, g in zip(m, grads)]
        v = [b2 * vk + (1 - b2) * g * g for vk, g in zip(v, grads)]
        c1, c2 = 1 - b1 ** t, jnp.sqrt(1 - b2 ** t)
        ps = [p - (LR / c1) * mk / (jnp.sqrt(vk) / c2 + eps) for p, mk, vk in zip(ps, m, v)]
        return ps, m, v, t, value

    state = [[jnp.asarray(p) for p in params], [jnp.zeros_like(jnp.asarray(p)) for p in params],
             [jnp.zeros_like(jnp.asarray(p)) for p in params], jnp.float32(0.0)]
    xj, yj = jnp.asarray(x), jnp.asarray(y)

    def step():
        *state[:4], value = update(*state, xj, yj)
        return float(value)
    return step, lambda: [np.asarray(p) for p in state[0]]


class _Runner:
    def __init__(self, system, step):
        self.system, self.step = system, step


SYSTEMS = ["llgrad eager", "llgrad compile(step)", "torch eager", "torch.compile(model)",
           "jax.jit(step)"]
LIBRARY = {"llgrad": "llgrad", "torch": "torch", "jax": "jax"}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    opts = p.parse_args(argv)
    blocks, seconds = (5, 0.05) if opts.quick else (15, 0.1)
    systems = [s for s in SYSTEMS
               if importlib.util.find_spec(LIBRARY[s.split(" ")[0].split(".")[0]])]
    print(f"# training step (zero_grad, forward, cross-entropy, backward, Adam lr={LR}), "
          f"1 thread, median us per step over {blocks} interleaved blocks; check: the losses "
          "of 4 fresh steps vs torch eager's (llgrad eager's without torch), max relative "
          "error")
    for title, (sizes, act, batch) in CONFIGS.items():
        params, x, y = data(sizes, batch)
        losses = {}
        for s in systems:          # four fresh steps from the same start: the check
            step, _ = build(s, params, x, y, act)
            losses[s] = np.array([step() for _ in range(4)])
        ref = losses.get("torch eager", losses["llgrad eager"])
        runners, per_call = [], {}
        for s in systems:
            step, _ = build(s, params, x, y, act)
            runner = _Runner(s, step)
            per_call[s] = measure.warm_up(runner, 5, 0.2)[2]   # (the first calls compile)
            runners.append(runner)
        times, errors = measure.interleaved(runners, per_call, blocks, seconds)
        print(f"\n{title}")
        best = min(statistics.median(times[s]) for s in systems
                   if s.startswith(("torch", "jax")) and times.get(s)) \
            if any(s.startswith(("torch", "jax")) and times.get(s) for s in systems) else None
        for s in systems:
            if s in errors:
                print(f"  {s:22s}  error: {errors[s].strip().splitlines()[-1]}")
                continue
            med = statistics.median(times[s])
            err = float(np.max(np.abs(losses[s] - ref) / np.abs(ref)))
            ratio = f"{med / best:5.2f}x best peer" if best else ""
            print(f"  {s:22s} {med:10.1f} us  {ratio}  losses err {err:.1e} "
                  f"{'OK' if err <= 1e-4 else 'MISMATCH'}")


if __name__ == "__main__":
    main()
