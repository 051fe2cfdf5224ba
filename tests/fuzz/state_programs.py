"""Random scenarios for the state fuzzer (tests/fuzz/test_state_fuzz.py): a small world
(tensors, an nn.Sequential model, an optimiser and lr scheduler, a plain object, globals,
NumPy arrays under from_numpy, hook counters), one to three functions over it (forward-only,
branches, in-place writes, integer indexing, model forwards, training steps in three orders)
and 4-12 events (calls with named, fresh, aliasing or out-of-range inputs; state changes eager
code sees). All of it is Python source drawn from one integer seed (`generate(seed)`): a
scenario prints as the program that runs, `Scenario.script()` as a standalone script of plain
llgrad code (PRELUDE holds its helpers); tests/fuzz/state_differential.py runs and compares."""
import random

from state_events import ACTS, KINDS, LRS, SCALES, Events

PRELUDE = '''\
import random

import numpy as np
import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F
from llgrad.optim.lr_scheduler import CosineAnnealingLR, StepLR


def T(shape, seed, rg=False):
    """A float32 tensor of values uniform in [-1, 1), drawn from seed."""
    a = np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)
    return llgrad.tensor(a, requires_grad=rg)


def N(shape, seed):
    """A float32 NumPy array of values uniform in [-1, 1), drawn from seed."""
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def backward_all(out):
    """Backward of every returned tensor that requires grad (cotangents 1, 2, 3, 1, ...:
    not all ones, so that the gradient of a softmax is not zero, that is rounding noise)."""
    outs = out if isinstance(out, (tuple, list)) else [out]
    outs = [o for o in outs if isinstance(o, llgrad.Tensor) and o.requires_grad]
    if outs:
        llgrad.autograd.backward(outs, [(llgrad.arange(o.numel(), dtype=o.dtype) % 3 + 1)
                                        .reshape(o.shape) for o in outs])


HOOKS = {"count": 0, "scale": 0}


def hook_count(g):
    HOOKS["count"] += 1


def hook_scale(g):
    HOOKS["scale"] += 1
    return g * 2


class Cfg:
    """A plain Python object whose attributes the functions read."""
'''


class Func:
    """lines: the definition (in a factory when it closes over k; setter rebinds k)."""
    def __init__(self, name, kind, params, lines, setter=None):
        self.name, self.kind, self.params, self.lines, self.setter = \
            name, kind, params, lines, setter


class Scenario:
    """world (source lines after PRELUDE), funcs (the functions to compile), events."""

    def __init__(self, seed, world, funcs, events):
        self.seed, self.world, self.funcs, self.events = seed, world, funcs, events

    def world_source(self):
        lines = list(self.world)
        for f in self.funcs:
            lines += ["", ""] + f.lines
        return "\n".join(lines) + "\n"

    def source(self):
        return PRELUDE + "\n\n" + self.world_source()

    def with_events(self, events):
        """The same world with other events; functions no event names are left out."""
        text = "".join(e.text for e in events)
        used = [f for f in self.funcs if f.name in text]
        return Scenario(self.seed, self.world, used, list(events))

    def with_world(self, world):
        return Scenario(self.seed, world, self.funcs, self.events)

    def describe(self, mark=None):
        """The world and the numbered events (event `mark` flagged), without the PRELUDE."""
        out = [f"# world (after state_programs.PRELUDE: T, N, backward_all, HOOKS, "
               f"hook_count, hook_scale, Cfg); compiled: {', '.join(f.name for f in self.funcs)}",
               self.world_source().rstrip(), "", "# events"]
        for k, e in enumerate(self.events):
            out += [f"# event {k}: {e.label}{'   <<<<<< MISMATCH' if k == mark else ''}", *e.lines]
        return "\n".join(out)

    def script(self, backend=None):
        """A standalone script: eager when backend is None, else the functions compiled."""
        lines = [self.source().rstrip(), ""]
        if backend:
            lines += [f"{f.name} = llgrad.compile({f.name}, backend={backend!r})"
                      for f in self.funcs]
        for k, e in enumerate(self.events):     # (an event that raises: the next one runs)
            lines += ["", f"# event {k}: {e.label}", "try:", *["    " + ln for ln in e.lines],
                      "except Exception as e:", f"    print('event {k} raised', repr(e))"]
        return "\n".join(lines) + "\n"


class Gen(Events):
    """Draws the world and the functions (the events: state_events.Events)."""

    def __init__(self, seed):
        self.r = random.Random(seed)
        self.seed = seed
        r = self.r
        self.B, self.D, self.C, self.H, self.V = \
            r.choice((2, 3, 4)), r.choice((2, 3)), r.choice((2, 3)), r.choice((3, 4)), 5
        self.world = [f"llgrad.manual_seed({seed})", f"np.random.seed({seed})",
                      f"random.seed({seed})"]
        self.feat, self.rg, self.hooks, self.funcs = set(), {}, [], []
        self.n_handles = 0

    # -- drawing --
    def pick(self, seq):
        return self.r.choice(list(seq))

    def chance(self, p):
        return self.r.random() < p

    def s(self):
        return self.r.randrange(1000)

    def ints(self, n, hi):
        return f"llgrad.tensor({[self.r.randrange(hi) for _ in range(n)]})"

    # -- the world --
    def build(self):
        w, f, D, C = self.world, self.feat, self.D, self.C
        w += ["cfg = Cfg()", f"cfg.scale = {self.pick(SCALES)}",
              f"cfg.flag = {self.pick((True, False))}", f"cfg.n = {self.r.randint(0, 2)}",
              "cfg.calls = 0", f"alpha = {self.pick(SCALES)}"]
        if self.chance(0.5):
            f.add("G")
            w.append(f"G = T(({D},), {self.s()})")
            self.rg["G"] = False
        if self.chance(0.35):
            f.add("cfg.w")
            self.rg["cfg.w"] = self.chance(0.5)
            w.append(f"cfg.w = T(({D},), {self.s()}, rg={self.rg['cfg.w']})")
        if self.chance(0.45):
            f.add("arr")
            w.append(f"arr = N(({D},), {self.s()})")
            if self.chance(0.6):
                f.add("nb")
                w.append("nb = llgrad.from_numpy(arr)")
        if self.chance(0.3):
            f.add("LOG")
            w.append("LOG = []")
        if self.chance(0.65):
            f.add("model")
            layers = []
            if self.chance(0.2):
                f.add("tok")
                layers.append(f"nn.Embedding({self.V}, {D})")
            # batch norm over 2-4 rows (two of them equal, or just two) makes the gradient
            # of what lies before it rounding noise, which optimisers would accumulate
            # and Adam amplify to whole steps: so it comes first, on the inputs
            if "tok" not in f and self.chance(0.25):
                layers.append(f"nn.BatchNorm1d({D})")
            layers.append(f"nn.Linear({D}, {self.H})")
            self.act = len(layers)
            layers.append(self.pick(ACTS))
            if self.chance(0.25):
                layers.append("nn.Dropout(0.25)")
            layers.append(f"nn.Linear({self.H}, {C})")
            self.model_expr = f"nn.Sequential({', '.join(layers)})"
            w.append(f"model = {self.model_expr}")
            self.rg["model[0].weight"] = True
        elif self.chance(0.6):
            f.add("W")
            w.append(f"W = T(({D}, {C}), {self.s()}, rg=True)")
            self.rg["W"] = True
        if "model" in f and self.chance(0.8) or "W" in f and self.chance(0.7):
            f.add("opt")
            ps = "model.parameters()" if "model" in f else "[W]"
            lr = self.pick(LRS)
            self.opt_expr = "llgrad.optim." + self.pick((
                "SGD({}, lr=%s)" % lr, "SGD({}, lr=%s, momentum=0.9)" % lr,
                "SGD({}, lr=%s, momentum=0.9, weight_decay=0.01)" % lr,
                "Adam({}, lr=0.01)", "AdamW({}, lr=0.01)",
                "SGD({}, lr=llgrad.tensor(%s))" % lr, "Adam({}, lr=llgrad.tensor(0.01))"))
            f.update(["tlr"] if "tensor" in self.opt_expr else [])
            w.append("opt = " + self.opt_expr.format(ps))
            if self.chance(0.35):
                f.add("sched")
                w.append("sched = " + self.pick(("StepLR(opt, step_size=2, gamma=0.5)",
                                                 "CosineAnnealingLR(opt, T_max=4)")))
        if ("model" in f or "W" in f) and self.chance(0.3):
            f.add(self.pick(("ce", "mse")))
            w.append("loss_fn = " + ("nn.CrossEntropyLoss()" if "ce" in f else "nn.MSELoss()"))
        kinds = [k for k in KINDS if k not in ("model", "step") or (k == "model" and "model" in f)
                 or (k == "step" and ("opt" in f or "W" in f))]
        weights = {"fwd": 2, "branch": 2, "inplace": 2, "index": 1, "model": 1.5, "step": 3}
        n = self.pick((1, 1, 2, 2, 3))
        for i in range(n):
            kind = self.r.choices(kinds, [weights[k] for k in kinds])[0]
            self.funcs.append(self.func(kind, f"f{i}" if kind != "step" else f"step{i}"))
        if "model" in f and self.chance(0.25):     # llgrad.compile(model): module-like
            self.funcs.append(Func("cnet", "module", ["tok" if "tok" in f else "x"],
                                   ["cnet = model"]))
        params = {p for fn in self.funcs for p in fn.params}
        if "model" in params:       # another instance: guarded by what it holds, not identity
            f.add("model2")
            w.append(f"model2 = {self.model_expr}")
            if "opt" in params:
                w.append("opt2 = " + self.opt_expr.format("model2.parameters()"))
        self.inputs(params)

    def inputs(self, kinds):
        """The named inputs of the argument kinds the functions take."""
        B, D = self.B, self.D
        if "x" in kinds:
            self.rg.update(x0=self.chance(0.6), x1=False)
        self.rg.update({k + "0": k == "w" for k in "wv" if k in kinds})
        made = {"x": [f"x0 = T(({B}, {D}), {self.s()}, rg={self.rg.get('x0')})",
                      f"x1 = T(({B}, {D}), {self.s()})"],
                "w": [f"w0 = T(({D},), {self.s()}, rg=True)"],
                "v": [f"v0 = T(({B}, {D}), {self.s()})"],
                "idx": [f"idx0 = {self.ints(self.r.randint(1, 3), B)}"],
                "y": [f"y0 = {self.ints(B, self.C)}"],
                "t": [f"t0 = T(({B}, {self.C}), {self.s()})"],
                "tok": [f"tok0 = {self.ints(B, self.V)}"]}
        for k, lines in made.items():
            self.world += lines if k in kinds else []

    # -- functions --
    def S(self, ctx):
        """A number the function reads: an attribute, a global, its closure variable k."""
        return "k" if ctx.get("closure") and self.chance(0.6) else \
            self.pick(("cfg.scale", "alpha", "0.5"))

    def ct_options(self, ctx):
        return [c for c in ("G", "cfg.w", "nb") if c in self.feat] + \
            (["llgrad.from_numpy(arr)", "llgrad.tensor(arr)", "llgrad.tensor(arr * 2)"]
             if "arr" in self.feat else []) + \
            (["w"] if "w" in ctx.get("params", ()) else [])

    def CT(self, ctx):
        """A (D,) tensor the function reads: an argument or a captured one."""
        return self.pick(self.ct_options(ctx))

    def func(self, kind, name):
        ctx = {"closure": kind in ("fwd", "branch", "inplace", "index") and self.chance(0.25)}
        params, body = getattr(self, "f_" + kind)(ctx)
        if self.chance(0.15 if kind != "step" else 0.1):
            side = ["cfg.calls += 1"] + (["LOG.append(len(LOG))"] if "LOG" in self.feat else []) + \
                ([f"G.add_({self.S(ctx)})"] if "G" in self.feat else []) + \
                (["nb.mul_(0.5)"] if "nb" in self.feat else [])
            at = len(body) - 1 if body[-1].startswith("return") else len(body)
            body.insert(self.pick((0, at)) if kind != "step" else at, self.pick(side))
        text = "\n".join(body)
        closure = ctx["closure"] and "k" in text
        sig = f"def {name}({', '.join(params)}):"
        if not closure:
            return Func(name, kind, params, [sig] + ["    " + ln for ln in body])
        return Func(name, kind, params, [
            f"def make_{name}():", f"    k = {self.pick(SCALES)}", "", "    " + sig,
            *["        " + ln for ln in body], "", "    def set_k(value):",
            "        nonlocal k", "        k = value", "", f"    return {name}, set_k", "", "",
            f"{name}, set_{name} = make_{name}()"], setter=f"set_{name}")

    def f_fwd(self, ctx):
        ctx["params"] = ["x", "w"] if self.chance(0.6) or not self.ct_options({}) else ["x"]
        un = self.pick(("tanh()", "sigmoid()", "relu()", "exp()", "pow(2)"))
        body = [f"h = (x * {self.CT(ctx)}).{un}"]
        if self.chance(0.5):
            body.append(f"h = h + x * {self.S(ctx)}")
        if self.chance(0.2):        # Python-level effects eager code has: a draw from
            body += self.pick((       # NumPy's or Python's generator, a tensor kept, a hook
                ["h = h * np.random.uniform()"], ["h = h + random.random()"],
                ["cfg.last = h"], ["h.retain_grad()", "cfg.last = h"],
                ["h.register_hook(hook_count)"]) + ((["h = h * float(arr.sum())"],)
                                                    if "arr" in self.feat else ()))
        body.append("return " + self.pick((
            "h.sum()", "h.mean(0)", "h", "(h.sum(), h.detach())", "h.sum().item()",
            f"h.sum() * {self.S(ctx)}", "(h.sum(1), None)")))
        return ctx["params"], body

    def f_branch(self, ctx):
        ctx["params"] = ["x", "w"] if self.chance(0.6) or not self.ct_options({}) else ["x"]
        a = self.CT(ctx)
        conds = ["cfg.flag", "alpha > 0.5", "x.sum().item() > 0", f"(x * {a}).sum() > 0",
                 f"(x * {a}).sum() > 0", "cfg.n > 1", "x.detach().numpy().sum() > 0",
                 "x.tolist()[0][0] > 0"] + (["model.training"] if "model" in self.feat else []) + \
            (["arr.sum() > 0"] if "arr" in self.feat else [])
        body = [f"if {self.pick(conds)}:", f"    h = (x * {a}).tanh()", "else:",
                f"    h = (x - {a}).sigmoid() * {self.S(ctx)}"]
        if self.chance(0.2):        # an effect in one branch only
            body.insert(self.pick((2, 4)), self.pick(
                ["    cfg.calls += 1"] + (["    LOG.append(1)"] * 2 if "LOG" in self.feat else [])))
        if self.chance(0.3):
            body += ["for _ in range(cfg.n):", "    h = h * 0.5 + x"]
        body.append("return " + self.pick(("h.sum()", "h.sum(0)", "h.sum().item()", "h")))
        return ctx["params"], body

    def f_inplace(self, ctx):
        ctx["params"] = ["v", "x"]
        opts = [f"v.mul_({self.S(ctx)})", f"v.add_(x.detach() * {self.S(ctx)})",
                "v.copy_(x.detach().tanh())", "v.clamp_(-0.5, 0.5)", f"v[0].fill_({self.S(ctx)})"]
        if self.ct_options({}):
            opts.append(f"v.add_({self.CT({})}.detach())")
        body = [self.pick(opts)]
        if self.chance(0.3):
            body += ["if v.sum().item() > 0:", "    return (v * x).sum()"]
        body.append(self.pick(("return (v * x).sum()", "return v.sum()", "return v",
                               "return None", f"return (x * {self.S(ctx)}).sum()")))
        return ctx["params"], body

    def f_index(self, ctx):
        ctx["params"] = ["x", "idx"]
        opts = [f"return (x[idx] * {self.S(ctx)}).sum()",
                "return x.index_select(0, idx).tanh().sum(0)",
                "return F.embedding(idx, x).sum(1)", "return (x[cfg.n] + x[idx].sum(0)).sum()"]
        if self.ct_options({}):
            opts.append(f"return (x[idx] * {self.CT({})}).sum()")
        return ctx["params"], [self.pick(opts)]

    def f_model(self, ctx):
        inp = "tok" if "tok" in self.feat else "x"
        params = (["model"] if self.chance(0.2) else []) + [inp]
        rets = [f"model({inp}).tanh().sum()", f"model({inp})", f"model({inp}).softmax(1)"]
        if self.chance(0.3):
            params.append("y")
            rets = [f"F.cross_entropy(model({inp}), y)"]
        return params, ["return " + self.pick(rets)]

    def f_step(self, ctx):
        if "opt" not in self.feat:
            return self.f_manual_step(ctx)
        inp = "tok" if "tok" in self.feat else "x"
        tgt = "y" if "ce" in self.feat else "t" if "mse" in self.feat else self.pick("yt")
        objs = ["model", "opt"] if "model" in self.feat and self.chance(0.2) else []
        order = self.r.choices(("zbs", "bsz", "bs"), (2, 1, 1))[0]
        body = ["opt.zero_grad()"] if order == "zbs" else []
        body.append(f"out = model({inp})" if "model" in self.feat else f"out = {inp} @ W")
        if tgt == "y":
            loss = self.pick(["F.cross_entropy(out, y)"]
                             + (["loss_fn(out, y)"] if "ce" in self.feat else []))
        else:
            loss = self.pick(["F.mse_loss(out, t)", "((out - t) ** 2).mean()"]
                             + (["loss_fn(out, t)"] if "mse" in self.feat else []))
        body.append(f"loss = {loss}")
        if self.chance(0.15):
            body.append("loss = loss * cfg.scale")
        body += ["loss.backward()", "opt.step()"]
        if "sched" in self.feat and self.chance(0.1):
            body.append("sched.step()")
        if order == "bsz":
            body.append("opt.zero_grad()")
        ret = self.r.choices(("loss.detach()", "loss", "loss.item()", None), (7, 4, 5, 4))[0]
        if ret:
            body.append(f"return {ret}")
        return objs + [inp, tgt], body

    def f_manual_step(self, ctx):
        """SGD by hand on the global leaf W: reads .grad, then clears or zeroes it."""
        tgt = self.pick("yt")
        loss = "F.cross_entropy(x @ W, y)" if tgt == "y" else "F.mse_loss(x @ W, t)"
        body = [f"loss = {loss}", "loss.backward()", "with llgrad.no_grad():",
                f"    W.sub_({self.pick(('0.1', 'cfg.scale * 0.1', 'alpha * 0.1'))} * W.grad)",
                self.pick(("W.grad = None", "W.grad.zero_()", "pass"))]
        body.append("return " + self.pick(("loss.detach()", "loss.item()", "None")))
        return ["x", tgt], body


def generate(seed):
    g = Gen(seed)
    g.build()
    return Scenario(seed, g.world, g.funcs, g.events())
