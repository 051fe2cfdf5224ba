"""Sweep 17b (H), part 6: training-loop mechanics: train()/eval() toggles with dropout and
BatchNorm, no_grad validation and argmax accuracy, OneCycleLR, an EMA model updated with
_foreach_lerp_, a checkpoint (model, optimizer, scheduler, EMA, get_rng_state) saved mid-run
and resumed with set_rng_state into fresh objects giving the identical continuation, early
stopping on the validation loss. Run with PyTorch, with llgrad eagerly and compiled
(tutorial_harness.py)."""
import math  # noqa: F401

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def loop(torch, env):
    nn = torch.nn
    F = nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = nn.Linear(6, 12)
            self.drop = nn.Dropout(0.3)
            self.bn = nn.BatchNorm1d(12)
            self.l2 = nn.Linear(12, 3)

        def forward(self, x):
            return self.l2(self.drop(F.relu(self.bn(self.l1(x)))))

    def build():
        m = env.init(Net())
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                              weight_decay=1e-4)
        sch = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.2, total_steps=20)
        return m, opt, sch
    X = env.randn(40, 6)
    Y = env.randint(0, 3, (40,))
    Xv = env.randn(16, 6)
    Yv = env.randint(0, 3, (16,))

    def run(m, opt, sch, ema, start, stop, ckpt=None):
        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss
        step = env.step(step)
        out = []
        for it in range(start, stop):
            m.train()
            perm = torch.randperm(40)[:8]
            loss = step(X[perm], Y[perm])
            sch.step()
            with torch.no_grad():
                ev = [p for p in ema.parameters()]
                torch._foreach_lerp_(ev, list(m.parameters()), 0.1)
                for be, bm in zip(ema.buffers(), m.buffers()):
                    be.copy_(bm)
            m.eval()
            with torch.no_grad():
                vl = F.cross_entropy(m(Xv), Yv).item()
                acc = (m(Xv).argmax(1) == Yv).float().mean().item()
            out.append((loss.item(), vl, acc, sch.get_last_lr()[0]))
            if ckpt is not None and it == ckpt:
                torch.save({"model": m.state_dict(), "opt": opt.state_dict(),
                            "sched": sch.state_dict(), "ema": ema.state_dict(),
                            "rng": torch.get_rng_state(), "it": it}, env.path("ck.pt"))
        return out
    m, opt, sch = build()
    ema = env.init(Net())
    ema.load_state_dict(m.state_dict())
    torch.manual_seed(5)
    full = run(m, opt, sch, ema, 0, 10, ckpt=4)
    env.rec("full", full)
    env.rec("ema", ema.l1.weight)
    m2, opt2, sch2 = build()
    ema2 = env.init(Net())
    ck = torch.load(env.path("ck.pt"))
    m2.load_state_dict(ck["model"]); opt2.load_state_dict(ck["opt"])
    sch2.load_state_dict(ck["sched"]); ema2.load_state_dict(ck["ema"])
    torch.set_rng_state(ck["rng"])
    env.rec("rng dtype", ck["rng"].dtype)
    env.rec("rng shape", tuple(ck["rng"].shape))
    rest = run(m2, opt2, sch2, ema2, ck["it"] + 1, 10)
    # (bit for bit in eager runs; a compiled step's traced call runs eagerly, the others
    # native code, which may round the last bit differently: compared to torch's instead)
    env.rec("resume same", rest == full[5:] or env.compiled)
    env.rec("full tail", full[5:])
    env.rec("resume", rest)
    env.rec("ema same", torch.equal(ema2.l1.weight, ema.l1.weight) or env.compiled)
    env.rec("w same", torch.equal(m2.l2.weight, m.l2.weight) or env.compiled)
    env.rec("ema2", ema2.l1.weight)
    env.rec("w2", m2.l2.weight)
    # early stopping on a deterministic model (no dropout)
    m.drop.p = 0.0
    best, bad, stopped = float("inf"), 0, None
    # (l1.bias is cancelled by the BatchNorm after it: its gradient is rounding noise, which
    # Adam would scale up to steps of lr)
    opt3 = torch.optim.Adam([p for n, p in m.named_parameters() if n != "l1.bias"], lr=0.05)
    for ep in range(30):
        m.train()
        opt3.zero_grad()
        F.cross_entropy(m(X), Y).backward()
        opt3.step()
        m.eval()
        with torch.no_grad():
            vl = F.cross_entropy(m(Xv), Yv).item()
        if vl < best - 1e-4:
            best, bad = vl, 0
            bestw = {k: v.clone() for k, v in m.state_dict().items()}
        else:
            bad += 1
            if bad >= 3:
                stopped = ep
                break
    env.rec("stopped", stopped)
    m.load_state_dict(bestw)        # (the best epoch's weights back)
    with torch.no_grad():
        env.rec("best again", F.cross_entropy(m(Xv), Yv).item())
    env.rec("best", best)


def test_checkpoint_resume_ema_early_stopping():
    run_tutorial(loop)


def test_traced_run_kept_when_a_name_repeats_in_a_changed_walk():
    """The guard walk can name two items alike (the __code__ of two methods of one captured
    object); when the traced run adds an item the entry replays (a scheduler's
    optimizer._opt_called), the walk is no longer the same, and the k-th item of a name
    must be paired with the k-th after the run, not with the last one (a false change made
    the resumed run of `loop` trace twice)."""
    import importlib
    side_effects = importlib.import_module("llgrad.compile.side_effects")
    c1, c2 = compile("1", "a", "eval"), compile("2", "b", "eval")
    before = [("x", 1), ("m___code__", ("object", "code", c1)),
              ("m___code__", ("object", "code", c2))]
    after = before[:1] + [("opt__opt_called", True)] + before[1:]
    assert side_effects.python_changes(before, after, written=("opt__opt_called",)) is None
    assert side_effects.python_changes(before, after) == "opt__opt_called (made by the call)"
    changed = before[:2] + [("m___code__", ("object", "code", c1))] + after[1:2]
    assert side_effects.python_changes(before, changed).startswith("m___code__")
