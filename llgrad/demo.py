"""`python -m llgrad demo`: train a classifier on generated spirals with a compiled training
step, report loss/accuracy per epoch and eager vs compiled step time, and write the
step's dumps to a folder."""
import os
import statistics
import time

import numpy as np

import llgrad
import llgrad.nn as nn
from llgrad.datasets import spirals, split


def make_model(seed=0):
    llgrad.manual_seed(seed)
    return nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                         nn.Linear(64, 3))


def train_step(model, opt, loss_fn, xb, yb):
    opt.zero_grad()
    loss = loss_fn(model(xb), yb)
    loss.backward()
    opt.step()
    return loss.detach()


def accuracy(model, x, y):
    with llgrad.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def time_steps(step, model, opt, loss_fn, x, y, n=30):
    for _ in range(3):                  # (the compiled step: its traces)
        step(model, opt, loss_fn, x, y)
    if hasattr(step, "wait"):           # its native code, built in the background
        step.wait()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        step(model, opt, loss_fn, x, y)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def run(epochs=10, batch=128, lr=0.01, dump_dir="llgrad_demo_dumps", seed=0):
    # the demo's matrices are tiny: one BLAS thread beats several (which spin and wait on
    # each other, badly so on a busy 2-core machine) for eager and compiled steps alike
    from .codegen.native.blas import set_num_threads
    set_num_threads(1)
    (xtr, ytr), (xte, yte) = split(*spirals(n_per_class=600, seed=seed))
    xtr_t, ytr_t = llgrad.from_numpy(xtr), llgrad.from_numpy(ytr)
    xte_t, yte_t = llgrad.from_numpy(xte), llgrad.from_numpy(yte)
    loss_fn = nn.CrossEntropyLoss()
    compiled_step = llgrad.compile(train_step)

    print(f"llgrad demo: 3-class spirals, {len(ytr)} train / {len(yte)} test points, "
          f"MLP 2-64-64-3 (tanh), Adam lr={lr}, batch {batch}")
    # eager and compiled step time, side by side, on identical copies
    xb, yb = xtr_t[:batch], ytr_t[:batch]
    m_e, m_c = make_model(seed), make_model(seed)
    t_eager = time_steps(train_step, m_e, llgrad.optim.Adam(m_e.parameters(), lr=lr), loss_fn,
                         xb, yb)
    t_comp = time_steps(compiled_step, m_c, llgrad.optim.Adam(m_c.parameters(), lr=lr),
                        loss_fn, xb, yb)
    backend = compiled_step.entries[-1].backend.name
    print(f"step time (median): eager {t_eager:,.0f} us   compiled ({backend} backend) "
          f"{t_comp:,.0f} us   ratio {t_eager / t_comp:.2f}x")

    model = make_model(seed)
    opt = llgrad.optim.Adam(model.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    n_batches = len(ytr) // batch
    t0 = time.perf_counter()
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(ytr))
        losses = []
        for b in range(n_batches):
            idx = llgrad.from_numpy(order[b * batch:(b + 1) * batch])
            losses.append(compiled_step(model, opt, loss_fn, xtr_t[idx], ytr_t[idx]).item())
        print(f"epoch {epoch:2d}  loss {np.mean(losses):.4f}  "
              f"train acc {accuracy(model, xtr_t, ytr_t):.3f}  "
              f"test acc {accuracy(model, xte_t, yte_t):.3f}")
    test_acc = accuracy(model, xte_t, yte_t)
    print(f"trained in {time.perf_counter() - t0:.1f} s; traces of the step: "
          f"{compiled_step.n_traces}; final test accuracy {test_acc:.3f}")

    os.makedirs(dump_dir, exist_ok=True)
    path = os.path.join(dump_dir, "train_step.txt")
    with open(path, "w") as f:
        f.write(compiled_step.dump(model, opt, loss_fn, xb, yb) + "\n")
    print(f"dumps of the compiled step (guards, forward IR, saved values): {path}")
    return test_acc
