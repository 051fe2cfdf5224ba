"""Random whole training programs, second axis (tests/fuzz/test_train_fuzz_sweep23.py): from
one seed, the source of a training program against `lib` (torch or llgrad), run by
tests/fuzz/train_differential_sweep23.py. What sweep 22's generator does not draw: the
models of train_models_sweep23.py; the losses margin_ranking, cosine_embedding,
triplet_margin, hinge_embedding, multilabel_soft_margin, poisson_nll, gaussian_nll, ctc,
cross_entropy on probabilities, and a weighted sum of two; targets passed as a tuple;
autocast('cpu', bfloat16) around the forward; GradScaler(enabled=False); add_param_group
between calls; a torch.save/torch.load round trip of model and optimiser through BytesIO
(maybe into a new optimiser); model.apply(init_fn) between calls; random flips and crops
in the step; an eval pass under no_grad in the step; a dict or tuple returned; the
optimiser flags foreach, fused, maximize, capturable=False, differentiable=False. Seeds below
QUICK run 3 steps (the tests' fast tier), the others 5-7."""
import random

from train_models_sweep23 import model_lines
from train_programs_sweep22 import OPTIMS, Program

HELPERS = '''\
import importlib
import io

importlib.import_module(lib.__name__ + ".utils.checkpoint")
checkpoint = lib.utils.checkpoint.checkpoint


def signs(shape, seed):
    return lib.tensor(np.where(np.random.default_rng(seed).random(shape) < 0.5, -1.0, 1.0)
                      .astype(np.float32))


def counts(shape, seed):
    return lib.tensor(np.random.default_rng(seed).poisson(1.5, shape).astype(np.float32))


def ctc_targets(n, seed):
    """(n, 3): two labels in 1..2, then the target length (1 or 2)."""
    g = np.random.default_rng(seed)
    return lib.tensor(np.concatenate([g.integers(1, 3, (n, 2)), g.integers(1, 3, (n, 1))], 1))

'''

ALL_K = {2, 3, 4, 5, 12}     # (12: ctc's 4 steps of 3 classes; drawn for ctc only)
# kind: (the loss of `{o}` against targets {t0}, {t1} (indices into y), targets, allowed k)
LOSSES = {
    "ce_probs": ("F.cross_entropy({o}, {t0}{ls}{cw})", ["probs((n, K), S)"], {3, 4, 5}),
    "ce": ("F.cross_entropy({o}, {t0})", ["ints(K, (n,), S)"], {3, 4, 5}),
    "mse": ("F.mse_loss({o}, {t0})", ["data((n, K), S)"], ALL_K),
    "margin_ranking": ("F.margin_ranking_loss({o}[:, 0], {o}[:, 1], {t0}, margin=0.1)",
                       ["signs((n,), S)"], ALL_K),
    "cosine_embedding": ("F.cosine_embedding_loss({o}, {t0}, {t1}, margin=0.2)",
                         ["data((n, K), S)", "signs((n,), S)"], ALL_K),
    "triplet_margin": ("F.triplet_margin_loss({o}, {t0}, {t1}, margin=1.0{swap})",
                       ["data((n, K), S)", "data((n, K), S)"], ALL_K),
    "hinge_embedding": ("F.hinge_embedding_loss({o}, {t0}, margin=1.0)", ["signs((n, K), S)"],
                        ALL_K),
    "multilabel_soft_margin": ("F.multilabel_soft_margin_loss({o}, {t0})",
                               ["bits((n, K), S)"], ALL_K),
    "poisson_nll": ("F.poisson_nll_loss({o}, {t0}{full})", ["counts((n, K), S)"], ALL_K),
    "gaussian_nll": ("F.gaussian_nll_loss({o}[:, :-1], {t0}, F.softplus({o}[:, -1:]) + 0.1)",
                     ["data((n, K - 1), S)"], {3, 4, 5}),
    "ctc": ("F.ctc_loss({o}.view(-1, 4, 3).log_softmax(2).transpose(0, 1), {t0}[:, :2], "
            "lib.full(({o}.shape[0],), 4, dtype=lib.long), {t0}[:, 2]{ctc})",
            ["ctc_targets(n, S)"], {12}),
}


def _loss(r, feats):
    """(k, the loss of `out` against the tuple `y`, the targets' makers)."""
    kind = r.choice(sorted(LOSSES))
    k = r.choice(sorted(LOSSES[kind][2] - {12}) or [12])
    kinds = [kind]
    if r.random() < 0.3:        # (a weighted sum of two losses on the one output)
        kinds.append(r.choice([c for c in sorted(LOSSES) if k in LOSSES[c][2] and c != kind]))
    exprs, targets = [], []
    for c in kinds:
        feats.add(c)
        expr, makers, _ = LOSSES[c]
        expr = expr.format(o="{o}", t0=f"y[{len(targets)}]", t1=f"y[{len(targets) + 1}]",
                           ls=r.choice(["", ", label_smoothing=0.1"]),
                           swap=r.choice(["", ", swap=True", ", p=1.0"]),
                           full=r.choice(["", ", full=True", ", log_input=True, eps=1e-6"]),
                           cw=r.choice(["", "", ", weight=lib.linspace(0.5, 1.5, K)"]),
                           ctc=r.choice(["", ", reduction='sum'", ", zero_infinity=True",
                                         ", blank=2"]))
        if ", blank=2" in expr:     # (labels 0..1 then: a target must not hold the blank)
            expr = expr.replace("[:, :2]", "[:, :2] - 1")
        exprs.append(expr.replace("K)", f"{k})"))
        targets += [m.replace("K", str(k)) for m in makers]
    if len(exprs) == 2:
        feats.add("two_losses")
        loss = f"{exprs[0]} + {r.choice([0.3, 0.5, 2.0])} * {exprs[1]}"
    else:
        loss = exprs[0]
    return k, loss, targets


def _optimiser(r, feats, name, params):
    lr, options = OPTIMS[name]
    kw = [x for x in [r.choice(options)] if x]
    if name in ("Adam", "AdamW", "SGD", "Adagrad") and r.random() < 0.3:
        kw.append("fused=True")
    elif r.random() < 0.4:
        kw.append(r.choice(["foreach=True", "foreach=False"]))
    for flag in ("maximize=True", "capturable=False", "differentiable=False"):
        if r.random() < (0.15 if flag == "maximize=True" else 0.1) and not (
                name in ("SGD", "Adagrad") and flag == "capturable=False"):
            kw.append(flag)
    if name != "SGD":       # (see train_programs_sweep22: rounding-noise gradients)
        kw.append("eps=1e-3")
    feats.update(x.split("=")[0] + ("" if "=True" in x or "=1e-3" in x else "=" + x.split("=")[1])
                 for x in kw if "fused" in x or "foreach" in x or "maximize" in x
                 or "capturable" in x or "differentiable" in x)
    lr_arg = lr
    if name in ("Adam", "AdamW", "SGD") and r.random() < 0.15 and "foreach=True" not in kw:
        feats.add("lr_tensor")
        lr_arg = f"lib.tensor({lr})"    # (torch refuses one with foreach=True)
    return f"lib.optim.{name}({params}, lr={lr_arg}" + "".join(", " + x for x in kw) + ")", lr


def _augment(r, feats, kind, shape):
    """Lines drawing a flip and a crop inside the step; the data's shape before the crop."""
    lines, dims = [], {"conv1": [2], "conv2": [2, 3], "attn": [1], "bag": [1]}[kind]
    if r.random() < 0.25:
        shape = list(shape)
        how = r.choice(["index", "int"])    # (int: the offset read as a Python number)
        feats.add("crop_" + how)
        for d in dims:
            shape[d - 1] += 2
            lines.append("    o = lib.randint(0, 3, (1,))")
            lines.append(f"    x = x.index_select({d}, o + lib.arange({shape[d - 1] - 2}))"
                         if how == "index" else
                         f"    x = x.narrow({d}, int(o), {shape[d - 1] - 2})")
    if r.random() < 0.25:
        f = r.choice(["where", "mask", "branch"])     # (branch: on a drawn Python bool)
        if f == "branch":
            feats.add("flip_branch")
            return lines + ["    if bool(lib.rand(()) < 0.5):",
                            f"        x = x.flip({dims[-1]})"], tuple(shape)
        feats.add("flip_" + f)
        view = "(-1" + ", 1" * len(shape) + ")"
        lines.append("    f = lib.rand(x.shape[0]) < 0.5")
        lines.append(f"    x = lib.where(f.view{view}, x.flip({dims[-1]}), x)" if f == "where"
                     else f"    x = x.clone()\n    x[f] = x[f].flip({dims[-1]})")
    return lines, tuple(shape)


# Between two calls, what a compiled step must see fresh: (lines at 8 spaces)
TAMPER = {
    "data_swap": ["        model.head.weight.data = model.head.weight.data * 0.5"],
    "data_inplace": ["        model.head.weight.data.mul_(0.5)"],
    "hyper_attrs": ["        for m in model.modules():",
                    "            if isinstance(m, (nn.LeakyReLU, nn.GroupNorm, nn.Embedding, "
                    "nn.InstanceNorm1d, nn.InstanceNorm2d, nn.LayerNorm)):",
                    "                for a, v in (('negative_slope', 0.3), ('eps', 1e-2), "
                    "('max_norm', 0.7), ('momentum', 0.5)):",
                    "                    if getattr(m, a, None) is not None:",
                    "                        setattr(m, a, v)"],
    "opt_group": ["        g = opt.param_groups[0]",
                  "        for a, v in (('betas', (0.5, 0.9)), ('momentum', 0.3), "
                  "('weight_decay', 0.02), ('amsgrad', True), ('nesterov', True), "
                  "('alpha', 0.8), ('lr_decay', 0.1)):",
                  "            if a in g and not (a in ('nesterov', 'momentum') and "
                  "g['momentum'] <= 0):",
                  "                g[a] = v"],
    "opt_state": ["        for st in opt.state.values():", "            for v in st.values():",
                  "                if lib.is_tensor(v) and v.is_floating_point() and v.ndim:",
                  "                    v.mul_(0.5)"],
    "forward_hook": ["        model.head.register_forward_hook(lambda m, a, o: o * 0.5)"],
    "pre_hook": ["        model.head.register_forward_pre_hook(lambda m, a: (a[0] + 0.1,))"],
    "freeze_head": ["        model.head.weight.requires_grad_(False)"],
    "replace_head": ["        with lib.no_grad():",
                     "            model.head.bias = nn.Parameter(model.head.bias * 0 + 0.2)"],
    "remove_param": ["        for m in model.modules():",
                     "            if nn.utils.parametrize.is_parametrized(m):",
                     "                nn.utils.parametrize.remove_parametrizations(m, 'weight')",
                     "                break"],
    "dropout_p": ["        for m in model.modules():",
                  "            if isinstance(m, nn.Dropout):", "                m.p = 0.0"],
    "eval_mode": ["        model.eval()"],
}


QUICK = 48


def generate(seed):
    """The program of seed (deterministic)."""
    r, feats = random.Random(seed), set()
    name = r.choice(sorted(OPTIMS))
    feats.add(name)
    k, loss, targets = _loss(r, feats)
    lines, inp, shape = model_lines(r, feats, k)
    kind = next(f for f in ("attn", "conv1", "conv2", "bag") if f in feats)
    n_steps, batch = r.randint(5, 7), r.choice([4, 6])
    if seed < QUICK:        # (the fast tier of the tests: 3 steps, events at calls 1-2)
        n_steps = 3
    out = [HELPERS, f"lib.manual_seed({seed})"] + lines
    later = r.random() < 0.2
    params = "[p for n, p in model.named_parameters() if not n.startswith('head.')]" \
        if later else "model.parameters()"
    make_opt, lr = _optimiser(r, feats, name, params)
    out.append(f"opt = {make_opt}")
    scaler = r.random() < 0.15
    if scaler:
        feats.add("grad_scaler_disabled")
        out.append("scaler = lib.amp.GradScaler('cpu', enabled=False)")
    aug, data_shape = _augment(r, feats, kind, shape)
    xin = f"ints({inp[3:]}, " if inp.startswith("int") else "data("
    out.append(f"X = [{xin}({batch},) + {data_shape}, {seed} * 100 + i) for i in range({n_steps})]")
    made = "".join(t.replace("(n", f"({batch}").replace("S", f"{seed} * 100 + {50 + 10 * j} + i")
                   + ", " for j, t in enumerate(targets))
    out.append(f"Y = [({made}) for i in range({n_steps})]")
    out += ["", "", "def init_fn(m):",
            "    if isinstance(m, nn.Linear) and not nn.utils.parametrize.is_parametrized(m):",
            "        nn.init.normal_(m.weight, std=0.3)",
            "        if m.bias is not None:", "            nn.init.zeros_(m.bias)"]
    out += ["", "", "def step(x, y):"] + aug + ["    opt.zero_grad()"]
    autocast = r.random() < 0.15
    if autocast:
        feats.add("autocast_bf16")
        out += ["    with lib.autocast('cpu', dtype=lib.bfloat16):", "        out = model(x)",
                "    out = out.float()"]
    else:
        out.append("    out = model(x)")
    out.append(f"    loss = {loss.format(o='out')}")
    signed = "-loss" if "maximize" in feats else "loss"
    if scaler:
        out += [f"    scaler.scale({signed}).backward()", "    scaler.unscale_(opt)"]
    else:
        out.append(f"    ({signed}).backward()")
    if r.random() < 0.3:
        feats.add("clip")
        out.append("    gnorm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)")
    out += ["    scaler.step(opt)", "    scaler.update()"] if scaler else ["    opt.step()"]
    ret = {"loss": "loss.detach()"}
    if "clip" in feats and r.random() < 0.5:
        ret["norm"] = "gnorm"
    if r.random() < 0.2:
        feats.add("eval_in_step")
        out += ["    was = model.training", "    model.eval()", "    with lib.no_grad():",
                "        ret_check = model(x[:2]).square().mean()", "    model.train(was)"]
        ret["check"] = "ret_check"
    form = r.choice(["tensor", "dict", "tuple"]) if len(ret) > 1 else r.choice(["tensor", "dict"])
    if form == "tensor" and len(ret) > 1:
        form = "tuple"
    feats.add("return_" + form)
    out.append("    return " + {"tensor": ret["loss"],
                                "tuple": "(" + ", ".join(ret.values()) + ")",
                                "dict": "{" + ", ".join(f"'{a}': {b}" for a, b in ret.items()) +
                                "}"}[form])
    out += ["", "", "step = COMPILE(step)", "losses, lrs, extras = [], [], []",
            f"for i in range({n_steps}):"]
    if later:
        feats.add("add_param_group")
        out += ["    if i == 2:", f"        opt.add_param_group({{'params': list(model.head."
                f"parameters()), 'lr': {lr / 2}}})"]
    if r.random() < 0.25:
        j = r.randint(1, n_steps - 1)
        fresh = r.random() < 0.4
        feats.add("save_load" + ("_new_opt" if fresh else ""))
        out += [f"    if i == {j}:", "        buf = io.BytesIO()",
                "        lib.save({'model': model.state_dict(), 'opt': opt.state_dict()}, buf)",
                "        with lib.no_grad():", "            for p in model.parameters():",
                "                p.add_(1.0)", "        buf.seek(0)",
                "        saved = lib.load(buf)",
                "        model.load_state_dict(saved['model'])"]
        if fresh:
            out.append(f"        opt = {make_opt}")
            if later:
                out.append(f"        if i >= 2:\n            opt.add_param_group({{'params': "
                           f"list(model.head.parameters()), 'lr': {lr / 2}}})")
        out.append("        opt.load_state_dict(saved['opt'])")
    if r.random() < 0.2:
        feats.add("apply_init")
        out += [f"    if i == {r.randint(1, n_steps - 1)}:", "        model.apply(init_fn)"]
    if r.random() < 0.35:
        what = r.choice(sorted(TAMPER))
        feats.add("tamper_" + what)
        out += [f"    if i == {r.randint(1, n_steps - 1)}:"] + TAMPER[what]
    out += ["    res = step(X[i], Y[i])",
            "    if isinstance(res, dict):",
            "        value, rest = res['loss'], [res[key] for key in sorted(res) if key != 'loss']",
            "    elif isinstance(res, tuple):", "        value, rest = res[0], res[1:]",
            "    else:", "        value, rest = res, []",
            "    extras.append([float(e) for e in rest])", "    losses.append(float(value))",
            "    lrs.append([g['lr'] for g in opt.param_groups])"]
    return Program(seed, "\n".join(out) + "\n", feats, n_steps)
