"""Sweep 6 of llgrad.optim's API against torch.optim: the optimiser's hooks (step pre / post,
global, state_dict and load_state_dict pre / post, a pre hook's new arguments, a bad
result), named parameters in state_dict, the argument checks of the optimisers and
schedulers, zero_grad(set_to_none=False), load_state_dict of a mismatched state."""

import re
import warnings
from importlib import import_module

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

CASES = []


def t(name, f):
    CASES.append((name, f))


def P(lib, n=3):
    return lib.nn.Parameter(lib.ones(n))


def named(lib):
    a, b = P(lib), P(lib, 2)
    o = lib.optim.Adam([("a", a), ("b", b)], lr=0.1)
    a.grad = lib.ones(3)
    b.grad = lib.ones(2)
    o.step()
    return o.state_dict()


t("named", named)


def named_groups(lib):
    a, b = P(lib), P(lib, 2)
    o = lib.optim.SGD(
        [{"params": [("a", a)]}, {"params": [("b", b)], "lr": 0.5}], lr=0.1, momentum=0.9
    )
    return o.state_dict()


t("named groups", named_groups)
t("dup", lambda lib: lib.optim.SGD([P(lib)] * 2, lr=0.1))


def overlap(lib):
    p = P(lib)
    return lib.optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)


t("overlap", overlap)
t("empty", lambda lib: lib.optim.SGD([], lr=0.1))
t("neg lr", lambda lib: lib.optim.Adam([P(lib)], lr=-1))
t("bad beta", lambda lib: lib.optim.Adam([P(lib)], betas=(1.0, 0.9)))
t("bad eps", lambda lib: lib.optim.Adam([P(lib)], eps=-1))
t("bad wd", lambda lib: lib.optim.AdamW([P(lib)], weight_decay=-1))
t("sgd neg mom", lambda lib: lib.optim.SGD([P(lib)], lr=0.1, momentum=-1))
t("sgd nesterov", lambda lib: lib.optim.SGD([P(lib)], lr=0.1, nesterov=True))
t("rmsprop alpha", lambda lib: lib.optim.RMSprop([P(lib)], alpha=-1))
t("adagrad lr_decay", lambda lib: lib.optim.Adagrad([P(lib)], lr_decay=-1))
t("rprop etas", lambda lib: lib.optim.Rprop([P(lib)], etas=(1.5, 1.2)))
t("nontensor param", lambda lib: lib.optim.SGD([1.0], lr=0.1))
t("nonleaf param", lambda lib: lib.optim.SGD([P(lib) * 2], lr=0.1))
t("param group no params", lambda lib: lib.optim.SGD([{"lr": 0.1}], lr=0.1))
t("repr", lambda lib: repr(lib.optim.AdamW([P(lib)], lr=0.1)))


def hooks(lib):
    p = P(lib)
    o = lib.optim.SGD([p], lr=0.1)
    log = []
    h1 = o.register_step_pre_hook(lambda opt, a, k: log.append("pre"))
    h2 = o.register_step_post_hook(lambda opt, a, k: log.append("post"))
    p.grad = lib.ones(3)
    o.step()
    h1.remove()
    o.step()
    h2.remove()
    o.step()
    return log


t("hooks", hooks)


def sd_hooks(lib):
    p = P(lib)
    o = lib.optim.SGD([p], lr=0.1, momentum=0.9)
    log = []
    o.register_state_dict_pre_hook(lambda opt: log.append("sd_pre"))
    o.register_state_dict_post_hook(
        lambda opt, sd: (log.append("sd_post"), sd.__setitem__("extra", 1))[1]
    )
    o.register_load_state_dict_pre_hook(lambda opt, sd: log.append("ld_pre"))
    o.register_load_state_dict_post_hook(lambda opt: log.append("ld_post"))
    sd = o.state_dict()
    o.load_state_dict(sd)
    return log, sorted(sd)


t("sd hooks", sd_hooks)


def zero_grad_keep(lib):
    p = P(lib)
    o = lib.optim.SGD([p], lr=0.1)
    p.grad = lib.ones(3) * 2
    o.zero_grad(set_to_none=False)
    return p.grad


t("zero_grad keep", zero_grad_keep)


def load_mismatch(lib):
    o = lib.optim.SGD([P(lib), P(lib)], lr=0.1)
    o2 = lib.optim.SGD([P(lib)], lr=0.1)
    o2.load_state_dict(o.state_dict())


t("load mismatch", load_mismatch)


def load_mismatch_size(lib):
    o = lib.optim.SGD([P(lib)], lr=0.1)
    o2 = lib.optim.SGD([P(lib), P(lib)], lr=0.1)
    o.load_state_dict(o2.state_dict())


t("load mismatch size", load_mismatch_size)


def lr_tensor_sched(lib):
    p = P(lib)
    o = lib.optim.SGD([p], lr=lib.tensor(0.1))
    s = lib.optim.lr_scheduler.StepLR(o, 1, 0.5)
    p.grad = lib.ones(3)
    o.step()
    s.step()
    return s.get_last_lr(), o.param_groups[0]["lr"]


t("lr tensor sched", lr_tensor_sched)


def plateau_sd(lib):
    p = P(lib)
    o = lib.optim.SGD([p], lr=0.1)
    s = lib.optim.lr_scheduler.ReduceLROnPlateau(o)
    s.step(1.0)
    return sorted(s.state_dict())


t("plateau sd", plateau_sd)


def sched_bad(lib):
    o = lib.optim.SGD([P(lib)], lr=0.1)
    return lib.optim.lr_scheduler.StepLR(o, 1, last_epoch=3)


t("sched resume no initial", sched_bad)
t(
    "chained plateau",
    lambda lib: lib.optim.lr_scheduler.ChainedScheduler(
        [lib.optim.lr_scheduler.ReduceLROnPlateau(lib.optim.SGD([P(lib)], lr=0.1))]
    ),
)
t(
    "seq milestones",
    lambda lib: (
        lambda o: lib.optim.lr_scheduler.SequentialLR(
            o, [lib.optim.lr_scheduler.StepLR(o, 1)], milestones=[2]
        )
    )(lib.optim.SGD([P(lib)], lr=0.1)),
)
t(
    "onecycle over",
    lambda lib: (
        lambda o: [
            (o.step(), s.step())
            for s in [lib.optim.lr_scheduler.OneCycleLR(o, 0.1, total_steps=2)]
            for _ in range(3)
        ]
    )(lib.optim.SGD([P(lib)], lr=0.1)),
)
t(
    "cyclic no momentum",
    lambda lib: lib.optim.lr_scheduler.CyclicLR(lib.optim.Adagrad([P(lib)], lr=0.1), 0.01, 0.1),
)
t(
    "lambda bad len",
    lambda lib: lib.optim.lr_scheduler.LambdaLR(
        lib.optim.SGD([P(lib)], lr=0.1), [lambda e: 1, lambda e: 2]
    ),
)
t(
    "linear bad factor",
    lambda lib: lib.optim.lr_scheduler.LinearLR(lib.optim.SGD([P(lib)], lr=0.1), start_factor=0),
)
t(
    "constant bad factor",
    lambda lib: lib.optim.lr_scheduler.ConstantLR(lib.optim.SGD([P(lib)], lr=0.1), factor=2),
)
t(
    "cosine warm T0",
    lambda lib: lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(
        lib.optim.SGD([P(lib)], lr=0.1), 0
    ),
)
t(
    "plateau mode",
    lambda lib: lib.optim.lr_scheduler.ReduceLROnPlateau(lib.optim.SGD([P(lib)], lr=0.1), mode="x"),
)
t(
    "plateau factor",
    lambda lib: lib.optim.lr_scheduler.ReduceLROnPlateau(
        lib.optim.SGD([P(lib)], lr=0.1), factor=1.0
    ),
)


def global_hooks(lib):
    mod = import_module(lib.__name__ + ".optim.optimizer")
    p = P(lib)
    o = lib.optim.Adam([p], lr=0.1)
    log = []
    h = mod.register_optimizer_step_pre_hook(
        lambda opt, a, k: log.append(("gpre", len(a), sorted(k)))
    )
    h2 = mod.register_optimizer_step_post_hook(lambda opt, a, k: log.append("gpost"))
    h3 = o.register_step_pre_hook(lambda opt, a, k: (a, {"closure": None}))
    p.grad = lib.ones(3)
    o.step()
    h.remove()
    h2.remove()
    h3.remove()
    o.step()
    return log, p


t("global hooks", global_hooks)


def bad_pre(lib):
    p = P(lib)
    o = lib.optim.SGD([p], lr=0.1)
    o.register_step_pre_hook(lambda opt, a, k: 3)
    p.grad = lib.ones(3)
    o.step()


t("bad pre", bad_pre)


def sd_replace(lib):
    p = P(lib)
    o = lib.optim.SGD([p], lr=0.1, momentum=0.9)
    o.register_state_dict_post_hook(
        lambda opt, sd: {"state": {}, "param_groups": sd["param_groups"], "x": 1}
    )
    o.register_load_state_dict_pre_hook(lambda opt, sd: (sd.pop("x"), sd)[1])
    sd = o.state_dict()
    o.load_state_dict(sd)
    return sorted(sd), sorted(o.state_dict())


t("sd replace", sd_replace)


def lbfgs_hook(lib):
    p = P(lib)
    o = lib.optim.LBFGS([p], max_iter=1)
    log = []
    o.register_step_post_hook(lambda opt, a, k: log.append(len(a)))

    def closure():
        o.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    o.step(closure)
    return log


t("lbfgs hook", lbfgs_hook)


def _r(x):
    if hasattr(x, "detach"):
        return (
            str(x.dtype).split(".")[-1],
            tuple(x.shape),
            np.round(x.detach().numpy().astype(float), 5).tolist(),
        )
    if isinstance(x, (list, tuple)):
        return type(x).__name__, [_r(y) for y in x]
    if isinstance(x, dict):
        return {k: _r(v) for k, v in x.items()}
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    return type(x).__name__, repr(x).replace("torch", "LIB").replace("llgrad", "LIB")


def _run(lib, f):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            out = _r(f(lib))
        except Exception as e:  # noqa: BLE001 (compared with torch's)
            out = (
                type(e).__name__,
                re.sub(r" at 0x[0-9a-f]+", "", str(e).split("\n")[0])
                .replace("torch", "LIB")
                .replace("llgrad", "LIB"),
            )
    return out, [(x.category.__name__, str(x.message)) for x in w]


@pytest.mark.parametrize("name, f", CASES, ids=[c[0] for c in CASES])
def test_optim_api_against_torch(name, f):
    assert _run(llgrad, f) == _run(torch, f)
