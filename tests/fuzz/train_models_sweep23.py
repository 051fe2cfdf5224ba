"""The model zoo of the second training-program fuzzer (tests/fuzz/train_programs_sweep23.py):
source lines over `nn` (torch.nn or llgrad.nn) of a class Model with a trunk (attention:
MultiheadAttention with masks and weights, Transformer encoder/decoder layers; strided,
dilated, grouped, reflect/circular Conv1d/Conv2d with ConvTranspose, Group/InstanceNorm,
PReLU/Hardswish/Mish, Upsample/interpolate, PixelShuffle, odd adaptive pooling; or an
EmbeddingBag), then vector blocks (ModuleList/ModuleDict loops, Identity, a weight shared by
two layers, checkpoint, weight_norm/spectral_norm/orthogonal, a custom autograd.Function,
buffers written in forward) and a Linear head to k outputs. As in sweep 22, nothing is drawn
whose gradient is rounding noise only (a norm over two values, a bias a norm removes)."""

ACTS = ["nn.ReLU()", "nn.GELU()", "nn.Tanh()", "nn.PReLU()", "nn.Hardswish()", "nn.Mish()",
        "nn.SiLU()", "nn.LeakyReLU(0.1)"]

# A custom autograd.Function (save_for_backward and a ctx attribute), defined by the program.
FUNCTION = '''
class ScaledTanh(lib.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.scale = 0.5
        y = lib.tanh(x * w)
        ctx.save_for_backward(x, w, y)
        return y * ctx.scale

    @staticmethod
    def backward(ctx, g):
        x, w, y = ctx.saved_tensors
        d = g * ctx.scale * (1 - y * y)
        return d * w, (d * x).sum(0)

'''


class Trunk:
    """A model under construction: __init__ lines, forward lines, the running width."""

    def __init__(self):
        self.init, self.fwd, self.n = [], [], 0

    def add(self, expr, call=None):
        """self.b<n> = expr; h = call (default: self.b<n>(h))."""
        name = f"self.b{self.n}"
        self.n += 1
        self.init.append(f"        {name} = {expr}")
        self.fwd.append(f"        h = {(call or '{m}(h)').format(m=name)}")
        return name


def _act(r, c=None):
    a = r.choice(ACTS)
    return f"nn.PReLU({c})" if a == "nn.PReLU()" and c and r.random() < 0.5 else a


def _attention(r, m, feats):
    """Sequences (B, T, E): floats or tokens; attention layers; pooled to (B, E)."""
    tokens = r.random() < 0.5
    e, t, heads = r.choice([4, 8]), r.choice([3, 5]), r.choice([1, 2])
    if tokens:
        v = r.choice([7, 10])
        opts = r.choice(["", ", padding_idx=0", ", max_norm=1.0", ", padding_idx=0, max_norm=1.5"])
        feats.add("embedding" + "".join("_" + o.split("=")[0].strip() for o in
                                        opts.split(",")[1:]))
        m.add(f"nn.Embedding({v}, {e}{opts})")
        inp, shape = f"int{v}", (t,)
    else:
        m.add(f"nn.Linear(3, {e})")
        inp, shape = "float", (t, 3)
    for _ in range(r.randint(1, 2)):
        kind = r.choice(["mha", "mha", "enc", "dec"])
        bf = r.random() < 0.5
        q = "h" if bf else "h.transpose(0, 1)"
        back = (lambda s: s) if bf else (lambda s: f"{s}.transpose(0, 1)")
        mask = r.choice(["", "causal", "float", "kpm", "kpm+causal"])
        if kind == "enc" and mask == "float":   # (torch's eval fast path of the encoder
            mask = "causal"                     #  layer misreads a float src_mask: by 1.0)
        lines = []
        if "causal" in mask:
            lines.append(f"        am = lib.triu(lib.ones({t}, {t}, dtype=lib.bool), diagonal=1)")
        elif mask == "float":
            lines.append(f"        am = -0.3 * (lib.arange({t}.0).view(1, {t}) - lib.arange("
                         f"{t}.0).view({t}, 1)).abs()")
        if "kpm" in mask:       # (the last position is padding in every sequence)
            lines.append(f"        kpm = (lib.arange({t}) >= {t - 1}).expand(h.shape[0], {t})")
        feats.add(kind + ("_bf" if bf else "_tf") + (f"_{mask}" if mask else ""))
        if kind == "mha":
            args = (", attn_mask=am" if "causal" in mask or mask == "float" else "") + \
                (", key_padding_mask=kpm" if "kpm" in mask else "")
            need = r.choice(["none", "avg", "heads", "false"])
            feats.add("need_weights_" + need)
            extra = r.choice(["", "", ", add_bias_kv=True", ", add_zero_attn=True", ", bias=False",
                              ", kdim=3, vdim=3", ", add_bias_kv=True, add_zero_attn=True"])
            feats.update("mha" + x.split("=")[0].strip() for x in extra.split(",")[1:])
            kv = f"{q}[..., :3] * 1.5" if "kdim" in extra else q
            m.init.append(f"        self.b{m.n} = nn.MultiheadAttention({e}, {heads}, "
                          f"batch_first={bf}{extra})")
            name, m.n = f"self.b{m.n}", m.n + 1
            m.fwd += lines
            if need == "false":
                m.fwd.append(f"        a, _ = {name}({q}, {kv}, {kv}{args}, need_weights=False)")
                m.fwd.append(f"        h = h + {back('a')}")
            else:
                avg = "" if need == "none" else \
                    f", average_attn_weights={need == 'avg'}"
                m.fwd.append(f"        a, w = {name}({q}, {kv}, {kv}{args}{avg})")
                first = "w[:, :, 0:1]" if need != "heads" else "w[:, 0, :, 0:1]"
                m.fwd.append(f"        h = h + {back('a')} + 0.5 * {first}")
        else:
            cls = "TransformerEncoderLayer" if kind == "enc" else "TransformerDecoderLayer"
            act = r.choice(["'relu'", "'gelu'", "F.gelu"])
            nf = r.random() < 0.5
            feats.add(f"{kind}_norm_first" if nf else f"{kind}_post_norm")
            layer = (f"nn.{cls}({e}, {heads}, dim_feedforward={2 * e}, dropout=0.0, "
                     f"activation={act}, batch_first={bf}, norm_first={nf})")
            if kind == "enc" and r.random() < 0.4:      # (a stack: nested tensors in eval)
                nested = r.random() < 0.5
                feats.add(f"encoder_stack_nested{int(nested)}")
                layer = (f"nn.TransformerEncoder({layer}, 2, norm=nn.LayerNorm({e}), "
                         f"enable_nested_tensor={nested})")
            m.init.append(f"        self.b{m.n} = {layer}")
            name, m.n = f"self.b{m.n}", m.n + 1
            m.fwd += lines
            if kind == "enc":
                key = "mask" if "Encoder(" in layer else "src_mask"
                args = (f", {key}=am" if "causal" in mask or mask == "float" else "") + \
                    (", src_key_padding_mask=kpm" if "kpm" in mask else "")
                m.fwd.append(f"        h = {back(f'{name}({q}{args})')}")
            else:
                args = (", tgt_mask=am" if "causal" in mask or mask == "float" else "") + \
                    (", tgt_is_causal=True" if "causal" in mask and r.random() < 0.5 else "") + \
                    (", memory_key_padding_mask=kpm" if "kpm" in mask else "")
                m.fwd.append(f"        h = {back(f'{name}({q}, {q}.detach() * 0.5 + 0.1{args})')}")
    m.fwd.append(r.choice(["        h = h.mean(1)", "        h = h[:, 0]",
                           "        h = h.amax(1)"]))
    return inp, shape, e


def _out(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _conv(r, m, feats, dim):
    """(B, C, L) or (B, C, S, S) through convolutions, norms, resampling; flattened."""
    c, size = r.choice([2, 4]), (r.choice([9, 12]) if dim == 1 else r.choice([6, 7]))
    inp, shape = "float", (c,) + (size,) * dim
    nd = f"{dim}d"
    for i in range(r.randint(2, 3)):
        kind = "conv" if i == 0 else r.choice(["conv", "conv", "convt", "norm", "resample",
                                                "act"])
        if kind == "conv":
            c2 = r.choice([4, 6])
            s, d = r.choice([1, 1, 2]), r.choice([1, 1, 2])
            p = r.choice([0, 1, d])
            mode = r.choice(["zeros", "reflect", "circular", "replicate"])
            if mode != "zeros" and p == 0:
                p = 1
            if mode != "zeros" and p >= size:
                mode = "zeros"
            g = 2 if c % 2 == 0 and c2 % 2 == 0 and r.random() < 0.4 else 1
            if _out(size, 3, s, p, d) < 2:
                s, d, p = 1, 1, 1
            feats.add(f"conv{nd}" + (f"_{mode}" if mode != "zeros" else "") +
                      ("_groups" if g > 1 else "") + ("_stride" if s > 1 else "") +
                      ("_dilation" if d > 1 else ""))
            if r.random() < 0.25:       # ('same': an even kernel pads one more on the right)
                kk = r.choice([2, 3, 4])
                mode = mode if size > 2 * d * kk else "zeros"
                feats.add(f"conv{nd}_same_k{kk}")
                m.add(f"nn.Conv{nd}({c}, {c2}, {kk}, padding='same', dilation={d}, groups={g}, "
                      f"padding_mode='{mode}')")
            else:
                m.add(f"nn.Conv{nd}({c}, {c2}, 3, stride={s}, padding={p}, dilation={d}, "
                      f"groups={g}, padding_mode='{mode}')")
                size = _out(size, 3, s, p, d)
            c = c2
            m.add(_act(r, c))
        elif kind == "convt" and size <= 7:
            c2, op, d = r.choice([2, 4]), r.choice([0, 1]), r.choice([1, 1, 2])
            g = 2 if c % 2 == 0 and r.random() < 0.3 else 1
            feats.add(f"convtranspose{nd}" + ("_output_padding" if op else "") +
                      ("_dilation" if d > 1 else "") + ("_groups" if g > 1 else ""))
            m.add(f"nn.ConvTranspose{nd}({c}, {c2}, 3, stride=2, padding=1, output_padding={op}, "
                  f"dilation={d}, groups={g})")
            size, c = (size - 1) * 2 - 2 + d * 2 + op + 1, c2
            m.add(_act(r))
        elif kind == "norm" and size ** dim >= 4:
            if r.random() < 0.5 and c % 2 == 0:
                feats.add("groupnorm")
                m.add(f"nn.GroupNorm(2, {c}, affine={r.random() < 0.7})")
            else:
                feats.add("instancenorm")
                stats = r.choice(["", ", track_running_stats=True"])
                m.add(f"nn.InstanceNorm{nd}({c}, affine={r.random() < 0.7}{stats})")
            m.add(_act(r, c))   # (a channel's mean after a norm is 0: pooled to 1, nothing)
        elif kind == "resample":
            how = r.choice(["up_nearest", "up_lin", "interp", "pixelshuffle", "interp_mode"]
                           if dim == 2 else ["up_nearest", "up_lin", "interp"])
            if how == "interp_mode":
                mode, ac = r.choice([("bicubic", "True"), ("bicubic", "False"), ("area", None),
                                     ("nearest-exact", None), ("nearest", None)])
                scale = r.choice([1.5, 2.0 if size <= 7 else 0.5, 0.6])
                feats.add(f"interpolate_{mode}_ac{ac}_scale{scale}")
                m.fwd.append(f"        h = F.interpolate(h, scale_factor={scale}, mode='{mode}'"
                             + (f", align_corners={ac})" if ac else ")"))
                size = int(size * scale)
            if how == "pixelshuffle" and c % 4 == 0:
                feats.add("pixelshuffle")
                m.add("nn.PixelShuffle(2)")
                c, size = c // 4, size * 2
            elif how == "up_lin" and size <= 7:
                ac = r.random() < 0.5
                feats.add(f"upsample_{'bi' if dim == 2 else ''}linear_ac{int(ac)}")
                mode = "bilinear" if dim == 2 else "linear"
                m.add(f"nn.Upsample(scale_factor=2, mode='{mode}', align_corners={ac})")
                size *= 2
            elif how == "interp":
                ac = r.random() < 0.5
                mode = "bilinear" if dim == 2 else "linear"
                new = size + (r.choice([-2, 3]) if size >= 4 else 3)
                feats.add(f"interpolate_size_ac{int(ac)}")
                m.fwd.append(f"        h = F.interpolate(h, size={new}, mode='{mode}', "
                             f"align_corners={ac})")
                size = new
            elif size <= 7:
                feats.add("upsample_nearest")
                m.add("nn.Upsample(scale_factor=2, mode='nearest')")
                size *= 2
        else:
            m.add(_act(r, c))
    odd = r.choice([1, 3] if size >= 3 else [1])
    feats.add(f"adaptiveavgpool{odd}")
    m.add(f"nn.AdaptiveAvgPool{nd}({odd})")
    m.fwd.append("        h = h.flatten(1)")
    return inp, shape, c * odd ** dim


def _bag(r, m, feats):
    """Token bags: flat tokens with offsets (fixed bags of 3, or ragged) through EmbeddingBag."""
    v, e = r.choice([8, 11]), r.choice([4, 6])
    mode = r.choice(["sum", "mean", "max"])
    opts = r.choice(["", ", padding_idx=0"] + ([", per_sample_weights"] if mode == "sum" else []))
    feats.add(f"embeddingbag_{mode}" + opts.replace(", ", "_"))
    # offsets: bags of 3; ragged (2, 4, 2, ...); or the second bag empty
    offs = r.choice(["lib.arange(0, h.numel(), 3)", "lib.arange(0, h.numel(), 3) - "
                     "lib.arange(h.shape[0]) % 2", "lib.arange(0, h.numel(), 3).index_fill(0, "
                     "lib.tensor([1]), 0)"])
    feats.add("bag_offsets" + str(offs.count("(")))
    last = r.random() < 0.25
    if last:
        feats.add("include_last_offset")
        offs = f"lib.cat([{offs}, lib.tensor([h.numel()])])"
        opts += ", include_last_offset=True"
    if "per_sample" in opts:
        m.add(f"nn.EmbeddingBag({v}, {e}, mode='sum'{opts.replace(', per_sample_weights', '')})",
              "{m}(h.flatten(), " + offs + ", per_sample_weights=h.flatten().float() / 10 + 0.5)")
    else:
        m.add(f"nn.EmbeddingBag({v}, {e}, mode='{mode}'{opts})",
              "{m}(h.flatten(), " + offs + ")")
    return f"int{v}", (3,), e


def _vec(r, m, c, feats, fn):
    """Vector blocks on (B, c); the width after them."""
    for _ in range(r.randint(1, 2)):
        kind = r.choice(["list", "dict", "shared", "ckpt", "wnorm", "snorm", "orth", "func",
                         "buffers", "identity"])
        feats.add(kind)
        if kind == "list":
            m.init.append(f"        self.layers = nn.ModuleList([nn.Linear({c}, {c}) for _ in "
                          f"range(2)])")
            m.init.append(f"        self.acts = nn.ModuleList([{_act(r)}, nn.Identity()])")
            m.fwd += ["        for lin, act in zip(self.layers, self.acts):",
                      "            h = h + act(lin(h))"]
        elif kind == "dict":
            m.init.append(f"        self.named = nn.ModuleDict({{'a': nn.Linear({c}, {c}), "
                          f"'b': {_act(r)}}})")
            m.fwd += ["        for key in ['a', 'b']:", "            h = self.named[key](h)"]
        elif kind == "shared":      # (one Parameter in two layers: its grads add)
            m.init += [f"        self.s1 = nn.Linear({c}, {c})",
                       f"        self.s2 = nn.Linear({c}, {c}, bias=False)",
                       "        self.s2.weight = self.s1.weight"]
            m.fwd.append("        h = self.s2(lib.tanh(self.s1(h)))")
        elif kind == "ckpt":
            drop = ", nn.Dropout(0.2)" if r.random() < 0.4 else ""
            act = _act(r)
            fresh = drop and r.random() < 0.5   # (backward redraws: runs eagerly)
            if fresh:
                feats.add("ckpt_fresh_rng")
            bias = ""
            if r.random() < 0.2:        # (backward updates its running stats again: eagerly)
                feats.add("ckpt_writes_buffers")
                # (no bias before it: see sweep 22; eps 0.01: pooled conv features vary by
                #  ~1e-2 over a batch, which a BatchNorm with a tiny eps divides by)
                act, bias = f"nn.BatchNorm1d({c}, eps=0.01), {act}", ", bias=False"
            m.add(f"nn.Sequential(nn.Linear({c}, {c}{bias}), {act}{drop})",
                  "h + checkpoint({m}, h, use_reentrant=False" +
                  (", preserve_rng_state=False)" if fresh else ")"))
        elif kind in ("wnorm", "snorm", "orth"):
            c2 = c if kind == "orth" and r.random() < 0.5 else r.choice([5, 6])
            wrap = {"wnorm": "weight_norm", "snorm": "spectral_norm", "orth": "orthogonal"}[kind]
            opts = r.choice({"orth": ["", ", use_trivialization=False"] + (
                [", orthogonal_map='cayley'", ", orthogonal_map='householder'"] if c2 == c else []),
                "wnorm": ["", ", dim=1", ", dim=None"],
                "snorm": ["", ", n_power_iterations=3", ", eps=1e-3"]}[kind])
            feats.add(kind + opts.replace(", ", "_").replace("'", ""))
            m.add(f"nn.utils.parametrizations.{wrap}(nn.Linear({c}, {c2}), 'weight'{opts})")
            m.add(_act(r))
            c = c2
        elif kind == "func":
            fn.append(True)
            m.init.append(f"        self.fw = nn.Parameter(lib.linspace(0.5, 1.5, {c}))")
            m.fwd.append("        h = ScaledTanh.apply(h, self.fw)")
        elif kind == "buffers":     # (a counter and a running mean, written in forward)
            m.init += ["        self.register_buffer('calls', lib.zeros((), dtype=lib.long))",
                       f"        self.register_buffer('avg', lib.zeros({c}))"]
            m.fwd += ["        self.calls += 1", "        if self.training:",
                      "            with lib.no_grad():",
                      "                self.avg.mul_(0.9).add_(h.mean(0), alpha=0.1)",
                      "        h = h - 0.5 * self.avg"]
        else:
            m.add("nn.Identity()")
    return c


def model_lines(r, feats, k):
    """(lines defining `model`, input kind, input shape without the batch)."""
    kind = r.choice(["attn", "attn", "conv1", "conv2", "conv2", "bag"])
    feats.add(kind)
    m, fn = Trunk(), []
    if kind == "attn":
        inp, shape, c = _attention(r, m, feats)
    elif kind == "bag":
        inp, shape, c = _bag(r, m, feats)
    else:
        inp, shape, c = _conv(r, m, feats, 1 if kind == "conv1" else 2)
    if kind == "bag" or r.random() < 0.7:
        c = _vec(r, m, c, feats, fn)
    m.init.append(f"        self.head = nn.Linear({c}, {k})")
    m.fwd.append("        return self.head(h)")
    lines = (FUNCTION.splitlines() if fn else []) + [
        "class Model(nn.Module):", "    def __init__(self):", "        super().__init__()"]
    lines += m.init + ["", "    def forward(self, h):"] + m.fwd + ["", "", "model = Model()"]
    return lines, inp, shape
