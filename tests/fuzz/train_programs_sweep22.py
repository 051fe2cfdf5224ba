"""Random whole training programs (tests/fuzz/test_train_fuzz_sweep22.py): from one integer
seed, the Python source of a small training program written against a module placeholder
`lib`, so that the same text runs with `lib = torch` and `lib = llgrad`: a model from the zoo
of train_models_sweep22.py (maybe re-initialised by an nn.init function), a loss, an
optimiser (one or two param groups, or a no-decay group) and maybe a scheduler stepped inside
or outside the step, and extras: gradient clipping (its norm maybe returned), accumulation
over two micro-batches or over two calls, zero_grad(set_to_none=False) or after the step,
train()/eval() flips, a ragged last batch, `.item()` returned, an EMA of the parameters by
hand or by swa_utils.AveragedModel, requires_grad, lr or weight decay changed between calls,
gradient hooks, .grad scaled in place, an L2 penalty, input noise drawn in the step, an
evaluation forward in the step. The step function `step` is wrapped in COMPILE (identity,
or llgrad.compile). tests/fuzz/train_differential_sweep22.py runs and compares
(`python tests/fuzz/train_differential_sweep22.py SEED --script` prints a standalone script).

Programs avoid gradients that are rounding noise only (exactly 0 in exact arithmetic: see
train_models_sweep22.py), and adaptive optimisers get eps=1e-3: with the default 1e-8 such a
gradient's noise becomes a step of the full lr, and torch and llgrad differ by the order of
a sum, not by a bug."""
import random

from train_models_sweep22 import model_lines


class Program:
    """source: the program's text (after the runner's prelude); features: what it drew."""

    def __init__(self, seed, source, features, n_steps):
        self.seed, self.source, self.features, self.n_steps = seed, source, features, n_steps


def _floats(r, n):
    return "[" + ", ".join(f"{r.uniform(0.5, 2.0):.2f}" for _ in range(n)) + "]"


def _loss(r, feats, k):
    """(setup lines, the loss of `out` against `y` as an expression, the target's kind)."""
    kind = r.choice(["ce", "ce", "nll", "mse", "l1", "smooth_l1", "huber", "bce", "kl"])
    feats.add(kind)
    if kind == "ce":
        args, setup, target = [], [], "cls"
        if r.random() < 0.4:
            args.append(f"label_smoothing={r.choice([0.05, 0.1, 0.2])}")
        if r.random() < 0.3:
            setup.append(f"CW = lib.tensor({_floats(r, k)})")
            args.append("weight=CW")
        if r.random() < 0.3:
            args.append("ignore_index=-100")
            target = "cls_ignore"
        elif r.random() < 0.2:      # (class probabilities as the target)
            target = "probs"
        return setup, "F.cross_entropy({o}, {y}" + "".join(", " + a for a in args) + ")", target
    if kind == "nll":
        return [], "F.nll_loss(F.log_softmax({o}, dim=1), {y})", "cls"
    if kind == "bce":
        if r.random() < 0.5:
            return [f"PW = lib.tensor({_floats(r, k)})"], \
                "F.binary_cross_entropy_with_logits({o}, {y}, pos_weight=PW)", "bits"
        return [], "F.binary_cross_entropy_with_logits({o}, {y})", "bits"
    if kind == "kl":
        return [], "F.kl_div(F.log_softmax({o}, dim=1), {y}, reduction='batchmean')", "probs"
    extra = {"mse": "", "l1": "", "smooth_l1": ", beta=0.5", "huber": ", delta=0.7"}[kind]
    extra += r.choice(["", "", ", reduction='sum'"])
    return [], f"F.{kind}_loss({{o}}, {{y}}{extra})", "float"


OPTIMS = {  # name: (lr, [optional keyword arguments])
    "SGD": (0.02, ["momentum=0.9", "momentum=0.9, nesterov=True", "weight_decay=1e-3",
                   "momentum=0.5, dampening=0.1", ""]),
    "Adam": (0.01, ["", "amsgrad=True", "weight_decay=1e-3", "betas=(0.8, 0.99)"]),
    "AdamW": (0.01, ["", "amsgrad=True", "weight_decay=0.05"]),
    "RMSprop": (0.005, ["", "momentum=0.5", "centered=True", "alpha=0.9, weight_decay=1e-3"]),
    "Adagrad": (0.05, ["", "lr_decay=0.01", "weight_decay=1e-3"]),
    "Adamax": (0.02, ["", "weight_decay=1e-3"]),
    "NAdam": (0.01, ["", "weight_decay=1e-3", "decoupled_weight_decay=True, weight_decay=0.01"]),
    "RAdam": (0.01, ["", "weight_decay=1e-3", "decoupled_weight_decay=True, weight_decay=0.01"]),
}


def _optimiser(r, feats, name, first, n_first):
    """Lines making `opt` (and maybe `sched`); the scheduler's placement (None, 'in', 'out')
    and whether it steps with the loss."""
    lr, options = OPTIMS[name]
    opt_kw = r.choice(options)
    for flag in ("maximize=True", "foreach=False"):
        if r.random() < 0.1:
            feats.add(flag)
            opt_kw = ", ".join(x for x in (opt_kw, flag) if x)
    if name != "SGD":
        # Many gradients are exactly 0 in exact arithmetic and rounding noise in float32 (the
        # key bias of attention, anything a BatchNorm's batch mean removes, a mean of L1
        # signs): an adaptive optimiser with a tiny eps makes that noise a step of lr.
        opt_kw = ", ".join(x for x in (opt_kw, "eps=1e-3") if x)
    group_kind = r.random()
    if group_kind < 0.15:     # (the usual no-decay group: biases and norm weights)
        feats.add("no_decay")
        params = ("[{'params': [p for p in model.parameters() if p.ndim > 1], 'weight_decay': "
                  "0.01}, {'params': [p for p in model.parameters() if p.ndim <= 1], "
                  "'weight_decay': 0.0}]")
    elif group_kind < 0.45:
        feats.add("groups")
        params = (f"[{{'params': {first}.parameters(), 'lr': {lr / 2}}}, {{'params': [p for n, p "
                  f"in model.named_parameters() if not n.startswith('{n_first}.')]}}]")
    else:
        params = "model.parameters()"
    lines = [f"opt = lib.optim.{name}({params}, lr={lr}" + (f", {opt_kw})" if opt_kw else ")")]
    sched = r.choice([None, None, "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
                      "OneCycleLR", "LambdaLR", "ReduceLROnPlateau"])
    if sched is None:
        return lines, None, False
    feats.add(sched)
    cycle = name != "Adagrad" and "momentum" in opt_kw or name in ("Adam", "AdamW", "Adamax",
                                                                  "NAdam", "RAdam")
    args = {"StepLR": "step_size=2, gamma=0.5", "MultiStepLR": "milestones=[2, 4], gamma=0.3",
            "ExponentialLR": "gamma=0.8", "CosineAnnealingLR": "T_max=4, eta_min=1e-4",
            "OneCycleLR": f"max_lr={lr * 2}, total_steps=12, cycle_momentum={cycle}",
            "LambdaLR": "lr_lambda=lambda e: 1.0 / (1 + e)",
            "ReduceLROnPlateau": "factor=0.5, patience=0, threshold=0.5"}[sched]
    lines.append(f"sched = lib.optim.lr_scheduler.{sched}(opt, {args})")
    place = "out" if sched == "ReduceLROnPlateau" or r.random() < 0.5 else "in"
    return lines, place, sched == "ReduceLROnPlateau"


def generate(seed):
    """The program of seed (deterministic)."""
    r, feats = random.Random(seed), set()
    name = r.choice(sorted(OPTIMS))
    feats.add(name)
    lines, inp, shape, k, first, head = model_lines(r, feats)
    n_first = first.replace("model.", "").replace("model[0]", "0")
    setup, loss, target = _loss(r, feats, k)
    n_steps, batch = r.randint(5, 8), r.choice([4, 6])
    accum = r.random() < 0.25
    if accum:       # (micro-batches of 4 at least: BatchNorm over 2 samples gives +-1 and
        batch = 10  #  gradients of rounding noise, over 3 nearly so)
    sizes = [batch] * n_steps
    if r.random() < 0.3:
        feats.add("ragged")
        sizes[-1] = batch - 2 if accum else batch - 1
    out = [f"lib.manual_seed({seed})"] + lines
    init = r.choice([None, None, "xavier_uniform_(m.weight)", "xavier_normal_(m.weight, gain=0.5)",
                     "kaiming_uniform_(m.weight, nonlinearity='relu')",
                     "kaiming_normal_(m.weight, mode='fan_out')", "orthogonal_(m.weight)",
                     "trunc_normal_(m.weight, std=0.2)", "normal_(m.weight, std=0.2)"])
    if init:        # (llgrad draws torch's numbers: the initialisations must agree)
        feats.add("init_" + init.split("_(")[0])
        out += ["for m in model.modules():",
                "    if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d)):",
                f"        nn.init.{init}"]
    if r.random() < 0.1:
        feats.add("grad_hooks")
        out += ["for p in model.parameters():", "    p.register_hook(lambda g: g.clamp(-0.2, 0.2))"]
    if "frozen" in feats:
        out.append(f"for p in {first}.parameters():")
        out.append("    p.requires_grad_(False)")
    out += setup
    opt_lines, place, plateau = _optimiser(r, feats, name, first, n_first)
    out += opt_lines
    ema = r.random() < 0.2
    if ema:
        feats.add("ema")
        out.append("ema = [p.detach().clone() for p in model.parameters()]")
    swa = r.random() < 0.1
    if swa:
        feats.add("swa")
        out.append("swa = lib.optim.swa_utils.AveragedModel(model, multi_avg_fn=lib.optim."
                   "swa_utils.get_ema_multi_avg_fn(0.9))")
    xin = f"ints({inp[3:]}, " if inp.startswith("int") else "data("
    yin = {"cls": f"ints({k}, ", "cls_ignore": f"ints({k}, ", "float": "data(",
           "bits": "bits(", "probs": "probs("}[target]
    yshape = "(n,)" if target.startswith("cls") else f"(n, {k})"
    out.append(f"SIZES = {sizes}")
    out.append(f"X = [{xin}(n,) + {tuple(shape)}, {seed} * 100 + i) for i, n in enumerate(SIZES)]")
    out.append(f"Y = [{yin}{yshape}, {seed} * 100 + 50 + i) for i, n in enumerate(SIZES)]")
    if target == "cls_ignore":
        out.append("for y in Y:")
        out.append("    y[-1] = -100")
    # (a param group setting the step writes from a counter it keeps, as a schedule of
    # weight decay would: drawn from a generator of its own, so the other programs of the
    # seeds stay as they were)
    wd_in_step = random.Random(seed * 7 + 1).random() < 0.15
    if wd_in_step:
        feats.add("wd_in_step")
        out += ["", "", "class Counter:", "    n = 0", "", "", "counter = Counter()"]
    # (gradients accumulated over two calls: the optimiser steps at odd i only)
    calls = r.random() < 0.1 and place != "in"
    out += ["", "", "def step(x, y, i):" if calls else "def step(x, y):"]
    if calls:
        feats.add("accumulate_calls")
    if r.random() < 0.1:    # (a draw inside the step: llgrad draws torch's numbers)
        feats.add("input_noise")
        out.append("    x = x + 0.1 * lib.randn_like(x)" if inp == "float" else
                   "    x = lib.where(lib.rand(x.shape) < 0.2, 0, x)")
    keep = r.random() < 0.3
    if keep:
        feats.add("set_to_none=False")
    zero = "    opt.zero_grad(set_to_none=False)" if keep else r.choice(
        ["    opt.zero_grad()", "    opt.zero_grad()", "    model.zero_grad()"])
    zero_last = r.random() < 0.2 or calls     # (zero_grad after the step: .grad leaves
    if not zero_last:                            # the call zeroed)
        out.append(zero)
    if r.random() < 0.1:        # (an L2 penalty in the loss: a sum over the parameters)
        feats.add("l2_in_loss")
        loss = loss + " + 1e-3 * sum(p.square().sum() for p in model.parameters())"
    # (maximize=True ascends: on the negated loss, so that training still converges)
    backward = "(-loss).backward()" if "maximize=True" in feats else "loss.backward()"
    if accum:
        feats.add("accumulate")
        out += ["    total = 0", "    for xb, yb in zip(x.chunk(2), y.chunk(2)):",
                f"        loss = {loss.format(o='model(xb)', y='yb')} / 2",
                f"        {backward}", "        total = total + loss.detach()"]
    else:
        out += ["    out = model(x)", f"    loss = {loss.format(o='out', y='y')}",
                f"    {backward}",
                "    total = " + r.choice(["loss", "loss.detach()"])]
    if r.random() < 0.1:    # (.grad written in place inside the step)
        feats.add("grad_inplace")
        out += ["    for p in model.parameters():", "        if p.grad is not None:",
                "            p.grad.mul_(0.5)"]
    clip = r.choice([None, None, "norm", "value"])
    if clip:
        feats.add("clip_" + clip)
        norm = r.choice(["", "", ", norm_type=1.0", ", norm_type=float('inf')"])
        out.append(f"    gnorm = nn.utils.clip_grad_norm_(model.parameters(), 0.5{norm})"
                   if clip == "norm" else "    nn.utils.clip_grad_value_(model.parameters(), 0.05)")
    if calls:
        out += ["    if i % 2 == 1:", "        opt.step()", "    " + zero]
    else:
        out.append("    opt.step()")
        if zero_last:
            feats.add("zero_last")
            out.append(zero)
    if place == "in":
        feats.add("sched_in")
        out.append("    sched.step()")
    if wd_in_step:      # (read by the next call's opt.step(): a value guard per setting)
        out += ["    counter.n += 1",
                "    opt.param_groups[0]['weight_decay'] = 1e-3 * (counter.n % 3)"]
    if swa:
        out.append("    swa.update_parameters(model)")
    if ema:
        out += ["    with lib.no_grad():", "        for e, p in zip(ema, model.parameters()):",
                "            e.mul_(0.9).add_(p, alpha=0.1)"]
    item = r.random() < 0.3
    if item:
        feats.add("item")
    ret = "total.item()" if item else "total"
    if clip == "norm" and r.random() < 0.5:     # (the norm clip_grad_norm_ measured, too)
        feats.add("return_norm")
        ret = f"{ret}, gnorm"
    if r.random() < 0.1:        # (an evaluation forward inside the step)
        feats.add("eval_in_step")
        out += ["    was = model.training", "    model.eval()", "    with lib.no_grad():",
                "        check = model(x[:2]).square().mean()", "    model.train(was)"]
        ret = f"{ret}, check"
    out.append(f"    return {ret}")
    out += ["", "", "step = COMPILE(step)", "losses, lrs, extras = [], [], []",
            f"for i in range({n_steps}):"]
    if r.random() < 0.2:
        feats.add("toggle")
        out.append(r.choice([f"    {head}.bias.requires_grad_(i % 2 == 0)",
                             f"    {first}.requires_grad_(i % 3 != 2)"]))
    flips = r.random() < 0.25
    if flips:
        feats.add("flips")
        out.append("    model.train(i % 3 != 1)")
    if r.random() < 0.1:        # (by hand, between calls)
        feats.add("lr_by_hand")
        out += ["    for g in opt.param_groups:", "        g['lr'] = g['lr'] * 0.9"]
    if r.random() < 0.08:
        feats.add("wd_by_hand")
        out.append("    opt.param_groups[0]['weight_decay'] = 0.01 * (i % 2)")
    out += ["    res = step(X[i], Y[i], i)" if calls else "    res = step(X[i], Y[i])",
            "    value = res[0] if isinstance(res, tuple) else res",
            "    extras.append([float(e) for e in res[1:]] if isinstance(res, tuple) else [])",
            "    losses.append(float(value))",
            "    lrs.append([g['lr'] for g in opt.param_groups])"]
    if place == "out":
        out.append("    sched.step(float(value))" if plateau else "    sched.step()")
    return Program(seed, "\n".join(out) + "\n", feats, n_steps)
