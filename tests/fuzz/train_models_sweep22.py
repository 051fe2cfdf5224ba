"""The model zoo of the training-program fuzzer (tests/fuzz/train_programs_sweep22.py): a
model's definition as source lines over `nn` (torch.nn or llgrad.nn): MLP blocks (Linear,
BatchNorm1d, LayerNorm, GroupNorm, Dropout, residual adds), Conv1d/Conv2d blocks (norms,
pooling, residual adds), and sequence models (Embedding or Linear, then LSTM/GRU/attention,
weight tying). Norms and poolings are drawn so that no gradient is rounding noise alone (a
norm over two values, a bias a BatchNorm removes): torch and llgrad would then differ by
the order of a sum, not by a bug."""


ACTS = ["nn.ReLU()", "nn.GELU()", "nn.GELU(approximate='tanh')", "nn.SiLU()", "nn.Tanh()",
        "nn.LeakyReLU(0.1)", "nn.ELU()", "nn.Softplus()", "nn.Softplus(beta=2.0)",
        "nn.ReLU(inplace=True)", "nn.LeakyReLU(0.1, inplace=True)", "nn.SiLU(inplace=True)",
        "nn.ELU(inplace=True)"]


def _act(r):
    return r.choice(ACTS)


def _drop(r, feats, act):
    """A Dropout after act: in place only after an activation that saves its input, not its
    output, for backward (torch refuses the others)."""
    if r.random() < 0.3:
        feats.add("dropout")
        inplace = "inplace" not in act and act.split("(")[0] in (
            "nn.GELU", "nn.SiLU", "nn.Softplus", "nn.LeakyReLU") and r.random() < 0.5
        return f"nn.Dropout({r.choice([0.1, 0.25, 0.5])}{', inplace=True' if inplace else ''})"
    return "nn.Dropout(0.0)" if r.random() < 0.2 else None


def _seq(*parts):
    return "nn.Sequential(" + ", ".join(p for p in parts if p) + ")"


def _vec_blocks(r, c, feats):
    """Blocks over (B, c) features: [(expr, residual)], the width after them."""
    blocks = []
    for _ in range(r.randint(1, 3)):
        kind = r.choice(["linear", "bn", "ln", "gn", "res", "fdrop"])
        c2 = r.choice([6, 8, 12])
        if kind == "linear":
            act = _act(r)
            blocks.append((_seq(f"nn.Linear({c}, {c2})", act, _drop(r, feats, act)), False))
        elif kind == "bn":      # (no bias before a norm that removes it: Adam would amplify
            #                      its rounding-noise gradient into lr-sized steps)
            feats.add("batchnorm")
            opts = r.choice(["", ", momentum=None", ", affine=False", ", momentum=0.3",
                             ", track_running_stats=False"])
            blocks.append((_seq(f"nn.Linear({c}, {c2}, bias=False)",
                                f"nn.BatchNorm1d({c2}{opts})", _act(r)), False))
        elif kind == "ln":
            opts = r.choice(["", "", ", elementwise_affine=False", ", bias=False", ", eps=1e-3"])
            blocks.append((_seq(f"nn.Linear({c}, {c2})", f"nn.LayerNorm({c2}{opts})", _act(r)),
                           False))
        elif kind == "fdrop":       # (a forward line of the model's own; class style only)
            feats.add("dropout")
            blocks.append((f"@F.dropout(h, {r.choice([0.2, 0.5])}, self.training)", False))
            c2 = c
        elif kind == "gn":      # (groups of 4 or more: see the module's docstring)
            c2 = r.choice([8, 12])
            blocks.append((_seq(f"nn.Linear({c}, {c2})", f"nn.GroupNorm(2, {c2})", _act(r)),
                           False))
        else:
            feats.add("residual")
            act = _act(r)
            blocks.append((_seq(f"nn.Linear({c}, {c})", act, _drop(r, feats, act)), True))
            c2 = c
        c = c2
    return blocks, c


def _conv_blocks(r, dim, cin, size, feats):
    """Conv blocks over (B, cin, size[, size]); [(expr, residual)], channels, size."""
    blocks, c = [], cin
    for i in range(r.randint(1, 2)):
        c2 = r.choice([4, 6])
        norm = r.choice(["bn", "gn", None])
        if norm == "gn" and size ** dim < 4:    # (a group of 2 values normalises to +-1:
            norm = "bn"                         #  its gradients are rounding noise)
        opts = r.choice(["padding=1", "padding=1", "padding=2, dilation=2"]
                        + (["padding=1, padding_mode='reflect'"] if size > 1 else [])
                        + (["padding=1, groups=2"] if c % 2 == 0 else []))
        conv = f"nn.Conv{dim}d({c}, {c2}, 3, {opts}{', bias=False' if norm else ''})"
        normx = {"bn": f"nn.BatchNorm{dim}d({c2})", "gn": f"nn.GroupNorm(2, {c2})"}.get(norm)
        if norm == "bn":
            feats.add("batchnorm")
        blocks.append((_seq(conv, normx, _act(r)), False))
        c = c2
        if r.random() < 0.4:
            feats.add("residual")
            blocks.append((_seq(f"nn.Conv{dim}d({c}, {c}, 3, padding=1)", _act(r)), True))
        pool = r.choice(["max", "avg", "amax", "aavg", "avg3", "max3", None])
        if pool in ("max", "avg") and size >= 4:
            blocks.append((f"nn.{pool.capitalize()}Pool{dim}d(2)", False))
            size //= 2
        elif pool in ("avg3", "max3") and size >= 4:    # (overlapping windows, padding)
            blocks.append((("nn.AvgPool{}d(3, stride=2, padding=1, count_include_pad=False)"
                            if pool == "avg3" else "nn.MaxPool{}d(3, stride=2, padding=1)")
                           .format(dim), False))
            size = (size - 1) // 2 + 1
        elif pool in ("amax", "aavg"):
            size = r.choice([1, 2])
            name = "Max" if pool == "amax" else "Avg"
            blocks.append((f"nn.Adaptive{name}Pool{dim}d({size})", False))
    return blocks, c, size


def model_lines(r, feats):
    """(lines of the model's definition, input kind, input shape without batch, classes)."""
    kind = r.choice(["vec", "vec", "conv1", "conv2", "seq", "seq"])
    feats.add(kind)
    style = "class" if kind == "seq" or r.random() < 0.6 else "sequential"
    k = r.choice([3, 4, 5])
    if kind == "vec":
        d = r.choice([5, 7, 8])
        blocks, c = _vec_blocks(r, d, feats)
        inp, shape = "float", (d,)
    elif kind in ("conv1", "conv2"):
        dim = 1 if kind == "conv1" else 2
        cin, size = r.choice([2, 3]), (r.choice([8, 10]) if dim == 1 else r.choice([4, 6]))
        inp, shape = "float", (cin,) + (size,) * dim
        blocks, c, size = _conv_blocks(r, dim, cin, size, feats)
        blocks.append(("nn.Flatten()", False))
        c = c * size ** dim
    else:
        return _seq_model(r, feats, k)
    if r.random() < 0.25:
        feats.add("frozen")
    if style == "sequential" and not any(res or e[0] == "@" for e, res in blocks):
        lines = ["model = nn.Sequential(" + ", ".join(e for e, _ in blocks) +
                 f", nn.Linear({c}, {k}))"]
        return lines, inp, shape, k, "model[0]", "model[-1]"
    lines = ["class Model(nn.Module):", "    def __init__(self):", "        super().__init__()"]
    fwd = ["    def forward(self, x):", "        h = x"]
    if blocks[0][0][0] == "@":
        blocks.insert(0, ("nn.Identity()", False))
    for i, (e, res) in enumerate(blocks):
        if e[0] == "@":
            fwd.append(f"        h = {e[1:]}")
            continue
        lines.append(f"        self.b{i} = {e}")
        fwd.append(f"        h = h + self.b{i}(h)" if res else f"        h = self.b{i}(h)")
    lines.append(f"        self.head = nn.Linear({c}, {k})")
    fwd.append("        return self.head(h)")
    return lines + [""] + fwd + ["", "", "model = Model()"], inp, shape, k, "model.b0", \
        "model.head"


def _seq_model(r, feats, k):
    """Embedding or float sequences (B, T[, E]) through LSTM/GRU/attention, pooled over T."""
    tokens = r.random() < 0.6
    e, t = r.choice([4, 6, 8]), r.choice([3, 5])
    lines = ["class Model(nn.Module):", "    def __init__(self):", "        super().__init__()"]
    fwd = ["    def forward(self, x):"]
    if tokens:
        v = r.choice([7, 10])
        opts = r.choice(["", "", ", padding_idx=0", ", max_norm=1.0", ", scale_grad_by_freq=True"])
        feats.add("embedding" + opts.split("=")[0].replace(", ", "_"))
        lines.append(f"        self.b0 = nn.Embedding({v}, {e}{opts})")
        fwd.append("        h = self.b0(x)")
        inp, shape = f"int{v}", (t,)
    else:
        lines.append(f"        self.b0 = nn.Linear({e}, {e})")
        fwd.append("        h = self.b0(x)")
        inp, shape = "float", (t, e)
    layer = r.choice(["LSTM", "GRU", "MHA"])
    bf = r.random() < 0.5
    feats.add(layer.lower())
    if layer == "MHA":
        heads = r.choice([1, 2])
        p = r.choice([0.0, 0.0, 0.2])
        if p:
            feats.add("dropout")
        lines.append(f"        self.b1 = nn.MultiheadAttention({e}, {heads}, dropout={p}, "
                     f"batch_first={bf})")
        q = "h" if bf else "h.transpose(0, 1)"
        mask = r.choice(["", "", ", need_weights=False", ", attn_mask=MASK",
                         ", attn_mask=MASK, need_weights=False"])
        if "MASK" in mask:
            feats.add("attn_mask")
            lines.insert(0, f"MASK = lib.triu(lib.ones({t}, {t}, dtype=lib.bool), diagonal=1)")
        fwd.append(f"        a, _ = self.b1({q}, {q}, {q}{mask})")
        fwd.append("        h = h + " + ("a" if bf else "a.transpose(0, 1)"))
        width = e
    else:
        hid, nl, bi = r.choice([4, 6]), r.choice([1, 2]), r.random() < 0.3
        drop = ", dropout=0.2" if nl == 2 and r.random() < 0.3 else ""
        if drop:
            feats.add("dropout")
        proj = ", proj_size=3" if layer == "LSTM" and r.random() < 0.3 else ""
        if proj:
            feats.add("proj_size")
        lines.append(f"        self.b1 = nn.{layer}({e}, {hid}, num_layers={nl}, "
                     f"batch_first={bf}, bidirectional={bi}{drop}{proj})")
        q = "h" if bf else "h.transpose(0, 1)"
        fwd.append(f"        o, _ = self.b1({q})")
        fwd.append("        h = " + ("o" if bf else "o.transpose(0, 1)"))
        width = (3 if proj else hid) * (2 if bi else 1)
    fwd.append("        h = h.mean(1)" if r.random() < 0.5 else "        h = h[:, -1]")
    if r.random() < 0.4:
        lines.append(f"        self.b2 = nn.Sequential(nn.LayerNorm({width}), {_act(r)})")
        fwd.append("        h = self.b2(h)")
    if tokens and r.random() < 0.5:
        feats.add("tied")
        if width != e:
            lines.append(f"        self.proj = nn.Linear({width}, {e})")
            fwd.append("        h = self.proj(h)")
        lines.append(f"        self.head = nn.Linear({e}, {v})")
        lines.append("        self.head.weight = self.b0.weight")
        k = v
    else:
        lines.append(f"        self.head = nn.Linear({width}, {k})")
    fwd.append("        return self.head(h)")
    if r.random() < 0.25 and "tied" not in feats:
        feats.add("frozen")
    return lines + [""] + fwd + ["", "", "model = Model()"], inp, shape, k, "model.b0", \
        "model.head"
