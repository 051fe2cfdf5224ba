"""Session 74 (q), long training loops (continued from test_adversary_s74_q.py): a
checkpoint loaded back into objects whose step is already compiled, a WGAN-GP loop (two
compiled steps, a gradient penalty through create_graph), an EMA in an optimiser's step
post-hook, a tensor lr under warm restarts, train()/eval() toggled inside the step,
buffers and in-place constraints written in the step, a dropout p changed per epoch,
a parameter's .data rebound mid-run, OneCycleLR on accumulated micro-batches, a head
unfrozen into a new param group under six schedulers, ReduceLROnPlateau stepped inside the
step (runs eagerly, warned); torch == llgrad eager == llgrad compiled: the loss at
every step, the end state."""
import io

import pytest

pytest.importorskip("torch")
from stateful_harness_s70_a11 import randn  # noqa: E402
from test_adversary_s74_q import batches, data, init, mlp, opt_state, three_way  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]     # (15-30 steps a case: the slow set)


def plain_step(lib, model, opt, sched=None, loss_fn="mse_loss"):
    def step(a, b):
        opt.zero_grad()
        loss = getattr(lib.nn.functional, loss_fn)(model(a), b)
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        return loss
    return step


# ---- a checkpoint loaded back into compiled objects (the same ones, and fresh ones that
# ran two compiled steps of their own first): the loaded optimiser state retraces ------------

def load_into_compiled(lib, comp):
    x, y = data(14, 24, 5)
    bs = batches(lib, x, y, 7)            # 3 of 7 + one of 3

    def build():
        model = mlp(lib)
        opt = lib.optim.Adam(model.parameters(), lr=0.05, amsgrad=True)
        sched = lib.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
        return model, opt, sched, comp(plain_step(lib, model, opt, sched))

    def load(buf, model, opt, sched):
        buf.seek(0)
        ck = lib.load(buf)
        model.load_state_dict(ck["m"])
        opt.load_state_dict(ck["o"])
        sched.load_state_dict(ck["s"])

    model, opt, sched, step_c = build()
    out = [step_c(*bs[n % 4]) for n in range(6)]
    buf = io.BytesIO()
    lib.save({"m": model.state_dict(), "o": opt.state_dict(), "s": sched.state_dict()}, buf)
    out += [step_c(*bs[n % 4]) for n in range(6, 10)]
    load(buf, model, opt, sched)
    out += [step_c(*bs[n % 4]) for n in range(6, 12)]
    m2, o2, s2, c2 = build()
    out += [c2(*bs[n]) for n in range(2)]
    load(buf, m2, o2, s2)
    out += [c2(*bs[n % 4]) for n in range(6, 12)]
    return [out, list(model.parameters()), opt_state(opt), list(m2.parameters()),
            opt_state(o2)]


def test_checkpoint_loaded_into_compiled_objects():
    # (each load retraces the step's variants: the eighth trace is refused, eager from there)
    three_way(load_into_compiled, warns="recompile limit")


# ---- WGAN-GP: a critic step with a gradient penalty (create_graph) every step, the
# generator every second step, two compiled functions sharing the modules ------------------

def wgan_gp(lib, comp):
    nn = lib.nn
    G = init(lib, nn.Sequential(nn.Linear(3, 6), nn.LeakyReLU(0.2), nn.Linear(6, 4)))
    D = init(lib, nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1)), seed=30)
    og = lib.optim.Adam(G.parameters(), lr=0.02, betas=(0.5, 0.9))
    od = lib.optim.Adam(D.parameters(), lr=0.02, betas=(0.5, 0.9))
    real, noise = randn(5, 22, 4) * 0.5 + 1, randn(6, 22, 3)

    def d_step(r, z):
        od.zero_grad()
        fake = G(z).detach()
        eps = lib.full((r.shape[0], 1), 0.3)
        mix = (eps * r + (1 - eps) * fake).requires_grad_(True)
        g, = lib.autograd.grad(D(mix).sum(), mix, create_graph=True)
        gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
        loss = D(fake).mean() - D(r).mean() + 10 * gp
        loss.backward()
        od.step()
        return loss, gp

    def g_step(z):
        og.zero_grad()
        loss = -D(G(z)).mean()
        loss.backward()
        og.step()
        return loss

    dc, gc = comp(d_step), comp(g_step)
    out, n = [], 0
    for epoch in range(3):
        for s in range(0, 22, 5):                # 4 of 5 + one of 2
            r, z = lib.tensor(real[s:s + 5]), lib.tensor(noise[s:s + 5])
            out.append(dc(r, z))
            if n % 2 == 1:
                out.append(gc(z))
            n += 1
    return [out, list(G.parameters()), list(D.parameters()), opt_state(og), opt_state(od)]


def test_wgan_gp_two_compiled_steps():
    three_way(wgan_gp)


# ---- an EMA in the optimiser's step post-hook; model.zero_grad() ---------------------------

def hook_ema(lib, comp):
    model = mlp(lib)
    opt = lib.optim.AdamW(model.parameters(), lr=0.03)
    shadow = [p.detach().clone() for p in model.parameters()]
    count = [0]

    def post(o, args, kwargs):
        count[0] += 1
        with lib.no_grad():
            for s, p in zip(shadow, model.parameters()):
                s.lerp_(p, 0.3)
    opt.register_step_post_hook(post)
    x, y = data(5, 20, 5)

    def step(a, b):
        model.zero_grad()
        loss = lib.nn.functional.mse_loss(model(a), b)
        loss.backward()
        opt.step()
        return loss

    step_c = comp(step)
    out = [step_c(a, b) for epoch in range(4) for a, b in batches(lib, x, y, 6)]
    return [out, list(model.parameters()), shadow, count[0], opt_state(opt)]


def test_ema_in_step_post_hook():
    three_way(hook_ema)


# ---- a tensor lr under warm restarts stepped in the step -----------------------------------

def tensor_lr(lib, comp):
    model = mlp(lib)
    opt = lib.optim.Adam(model.parameters(), lr=lib.tensor(0.05))
    sched = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3)
    x, y = data(5, 20, 5)
    step_c = comp(plain_step(lib, model, opt, sched))
    out = []
    for epoch in range(4):
        for a, b in batches(lib, x, y, 6):       # 3 of 6 + one of 2
            out += [step_c(a, b), opt.param_groups[0]["lr"]]
    return [out, list(model.parameters()), opt_state(opt)]


def test_tensor_lr_warm_restarts():
    three_way(tensor_lr)


# ---- train() / eval() inside the step: BatchNorm and dropout, a validation pass after the
# update -----------------------------------------------------------------------------------

def toggled_inside(lib, comp):
    nn = lib.nn
    model = init(lib, nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(6), nn.Dropout(0.2),
                                    nn.Tanh(), nn.Linear(6, 2)))
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.8)
    x, y = data(11, 23, 5)
    vx, vy = (lib.tensor(v) for v in data(12, 6, 5))
    lib.manual_seed(0)

    def step(a, b):
        model.train()
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(a), b)
        loss.backward()
        opt.step()
        model.eval()
        with lib.no_grad():
            v = nn.functional.mse_loss(model(vx), vy)
        return loss, v

    step_c = comp(step)
    out = [step_c(a, b) for epoch in range(3) for a, b in batches(lib, x, y, 6)]
    bn = model[1]
    return [out, list(model.parameters()), bn.running_mean, bn.running_var,
            bn.num_batches_tracked, lib.rand(3)]


def test_train_eval_toggled_inside_step():
    three_way(toggled_inside)


# ---- buffers and in-place constraints written in the step ----------------------------------

def buffers_written(lib, comp):
    nn = lib.nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(5, 2)
            self.register_buffer("steps", lib.zeros((), dtype=lib.int64))
            self.register_buffer("avg_loss", lib.zeros(()))

        def forward(self, a):
            return self.lin(a)

    m = init(lib, M())
    opt = lib.optim.Adam(m.parameters(), lr=0.05)
    x, y = data(5, 20, 5)

    def step(a, b):
        opt.zero_grad()
        loss = nn.functional.mse_loss(m(a), b)
        loss.backward()
        opt.step()
        with lib.no_grad():
            m.steps += 1
            m.avg_loss.mul_(0.9).add_(loss.detach() * 0.1)
            m.lin.weight.clamp_(-0.3, 0.3)
            m.lin.weight.renorm_(2, 0, 0.5)
        return loss, m.steps.clone()

    step_c = comp(step)
    out = [step_c(a, b) for epoch in range(4) for a, b in batches(lib, x, y, 6)]
    return [out, list(m.parameters()), m.steps, m.avg_loss, opt_state(opt)]


def test_buffers_and_constraints_in_step():
    three_way(buffers_written)


# ---- dropout's p changed per epoch (reseeded); a parameter's .data rebound mid-run and the
# momentum state cleared ------------------------------------------------------------------

def dropout_p(lib, comp):
    nn = lib.nn
    model = init(lib, nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Dropout(0.1),
                                    nn.Linear(8, 2)))
    opt = lib.optim.Adam(model.parameters(), lr=0.01)
    x, y = data(11, 23, 5)
    step_c = comp(plain_step(lib, model, opt))
    out = []
    for epoch in range(4):
        lib.manual_seed(epoch)
        model[2].p = 0.1 * (epoch + 1)
        out += [step_c(a, b) for a, b in batches(lib, x, y, 6)]     # 3 of 6 + one of 5
    return [out, list(model.parameters())]


def test_dropout_p_changed_per_epoch():
    three_way(dropout_p)


def data_rebound(lib, comp):
    model = mlp(lib)
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = data(5, 20, 5)
    bs = batches(lib, x, y, 6)
    step_c = comp(plain_step(lib, model, opt))
    out = []
    for n in range(14):
        if n == 5:
            model[2].weight.data = lib.tensor(randn(77, 2, 7) * 0.1)
        if n == 8:
            with lib.no_grad():
                model[0].bias.zero_()
            opt.state.clear()
        out.append(step_c(*bs[n % 4]))
    return [out, list(model.parameters()), opt_state(opt)]


def test_data_rebound_and_state_cleared_mid_run():
    three_way(data_rebound)


# ---- OneCycleLR (cycling Adam's beta1) stepped only on the optimiser steps of accumulated
# micro-batches, an inf-norm clip before each --------------------------------------------

def one_cycle_accumulated(lib, comp, k=2):
    model = mlp(lib)
    opt = lib.optim.Adam(model.parameters(), lr=0.01)
    sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=12,
                                              anneal_strategy="linear")
    x, y = data(3, 23, 5)

    def micro(a, b):
        loss = lib.nn.functional.mse_loss(model(a), b) / k
        loss.backward()
        return loss

    def update():
        lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0, norm_type=float("inf"))
        opt.step()
        opt.zero_grad()
        sched.step()
        return opt.param_groups[0]["betas"][0]

    micro_c, update_c = comp(micro), comp(update)
    out = []
    for epoch in range(3):
        bs = batches(lib, x, y, 3)               # 7 of 3 + one of 2
        for i, (a, b) in enumerate(bs):
            out.append(micro_c(a, b))
            if (i + 1) % k == 0 or i + 1 == len(bs):
                out.append(update_c())
    return [out, list(model.parameters()), opt_state(opt)]


def test_one_cycle_on_accumulated_steps():
    three_way(one_cycle_accumulated)


# ---- a frozen head unfrozen into a new param group at epoch 2, under six schedulers -------

def unfreeze_into_group(sname):
    def prog(lib, comp):
        nn = lib.nn
        body, head = init(lib, nn.Linear(5, 6)), init(lib, nn.Linear(6, 2), seed=9)
        head.requires_grad_(False)
        opt = lib.optim.Adam(body.parameters(), lr=0.05)
        S = lib.optim.lr_scheduler
        sched = {"step": lambda: S.StepLR(opt, 2, 0.5),
                 "cos": lambda: S.CosineAnnealingLR(opt, 6),
                 "exp": lambda: S.ExponentialLR(opt, 0.8),
                 "multi": lambda: S.MultiplicativeLR(opt, lambda e: 0.9),
                 "lambda": lambda: S.LambdaLR(opt, lambda e: 1 / (1 + e)),
                 "cyclic": lambda: S.CyclicLR(opt, 0.01, 0.1, step_size_up=3,
                                              cycle_momentum=False)}[sname]()
        x, y = data(3, 20, 5)
        model = nn.Sequential(body, nn.Tanh(), head)
        step_c = comp(plain_step(lib, model, opt))
        out = []
        for epoch in range(5):
            if epoch == 2:
                head.requires_grad_(True)
                opt.add_param_group({"params": head.parameters(), "lr": 0.02})
            for a, b in batches(lib, x, y, 6):   # 3 of 6 + one of 2
                out.append(step_c(a, b))
                try:        # (the schedulers zipping base_lrs strictly raise ValueError)
                    sched.step()
                except ValueError as e:
                    out.append(type(e).__name__)
                out += [[g["lr"] for g in opt.param_groups], list(sched.get_last_lr())]
        return [out, list(body.parameters()), list(head.parameters()), opt_state(opt)]
    prog.__name__ = sname
    return prog


@pytest.mark.slow       # (a sweep)
@pytest.mark.parametrize("sname", ["step", "cos", "exp", "multi", "lambda", "cyclic"])
def test_unfrozen_into_new_group_under_schedulers(sname):
    three_way(unfreeze_into_group(sname))


# ---- ReduceLROnPlateau stepped inside the step on the training loss: float(loss) differs
# each call, so the step runs eagerly (warned), with eager's values -----------------------

def plateau_inside(lib, comp):
    model = mlp(lib)
    opt = lib.optim.SGD(model.parameters(), lr=0.2)
    sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1,
                                                     threshold=0.01)
    x, y = data(5, 20, 5)

    def step(a, b):
        opt.zero_grad()
        loss = lib.nn.functional.mse_loss(model(a), b)
        loss.backward()
        opt.step()
        sched.step(loss.detach())
        return loss, opt.param_groups[0]["lr"]

    step_c = comp(step)
    out = [step_c(a, b) for epoch in range(5) for a, b in batches(lib, x, y, 6)]
    return [out, list(model.parameters()), opt_state(opt)]


def test_plateau_inside_step_runs_eagerly():
    three_way(plateau_inside, warns="running eagerly")
