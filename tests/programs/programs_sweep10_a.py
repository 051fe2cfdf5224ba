"""Tutorial programs on attention models, written as blog posts write them (seeded with
torch.manual_seed, modules built by their constructors; see tutorial_harness.py): a
character GPT with weight tying and a warmup + cosine LambdaLR, an nn.TransformerDecoder
with padding masks on both sides, causal linear (Performer-style) attention by cumsum, Swin
shifted-window attention (torch.roll, window partition, relative position bias), a LLaMA
block (RMSNorm, SwiGLU, scaled_dot_product_attention) with a KV-cache greedy decoder, a
Perceiver whose learned latents cross-attend to the inputs (kdim/vdim)."""
import math


def _comparable(model):
    """The parameters to compare with torch: an attention key projection's bias gets a
    zero gradient (softmax ignores a constant shift per query), which Adam turns from
    rounding noise into full steps, so that third of in_proj_bias is left out."""
    out = []
    for name, p in model.named_parameters():
        if name.endswith("in_proj_bias"):
            d = p.shape[0] // 3
            p = p.detach()[:d].tolist() + p.detach()[2 * d:].tolist()
        out.append(p)
    return out


def gpt_tied_warmup(torch, env):
    """A char-level GPT: token + learned position embeddings, nn.TransformerEncoderLayer
    (norm_first, GELU) under a causal mask, the output head's weight tied to the token
    embedding, AdamW with decay / no-decay parameter groups, LambdaLR linear warmup then
    cosine decay, clip_grad_norm_, greedy sampling under no_grad at the end."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    text = "hello world, hello tensors; hello graphs. "
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    V, T, D = len(chars), 8, 16

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V, D)
            self.pos = nn.Parameter(torch.zeros(1, T, D))
            layer = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, activation="gelu",
                                               batch_first=True, norm_first=True)
            self.blocks = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
            self.ln = nn.LayerNorm(D)
            self.head = nn.Linear(D, V, bias=False)
            self.head.weight = self.tok.weight
            self.register_buffer("mask", torch.triu(torch.full((T, T), float("-inf")), 1))

        def forward(self, idx):
            t = idx.shape[1]
            h = self.tok(idx) + self.pos[:, :t]
            h = self.blocks(h, mask=self.mask[:t, :t])
            return self.head(self.ln(h))

    model = GPT()
    env.rec("n params", sum(p.numel() for p in model.parameters()))
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "pos" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 or "pos" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=3e-3,
                            betas=(0.9, 0.95))
    warmup, total = 3, 10

    def lr_lambda(step):
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        return 0.5 * (1 + math.cos(math.pi * progress))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    starts = torch.randint(0, len(data) - T - 1, (total, 4))

    def train_step(xb, yb):
        model.train()
        logits = model(xb)
        loss = F.cross_entropy(logits.view(-1, V), yb.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss, norm

    step = env.step(train_step)
    hist = []
    for it in range(total):
        ix = starts[it]
        xb = torch.stack([data[i:i + T] for i in ix])
        yb = torch.stack([data[i + 1:i + T + 1] for i in ix])
        loss, norm = step(xb, yb)
        sched.step()
        hist.append((loss.item(), norm.item(), sched.get_last_lr()[0]))
    env.rec("hist", hist)
    env.rec("tied", model.head.weight is model.tok.weight)
    model.eval()
    idx = data[:1].view(1, 1)
    with torch.no_grad():
        for _ in range(6):
            logits = model(idx[:, -T:])
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            idx = torch.cat([idx, nxt], dim=1)
    env.rec("sample", "".join(chars[i] for i in idx[0].tolist()))
    env.rec("params", _comparable(model))


def transformer_decoder_padding(torch, env):
    """A tiny translation model: nn.TransformerEncoder over padded sources, an
    nn.TransformerDecoder with a causal tgt_mask from nn.Transformer's
    generate_square_subsequent_mask, tgt/memory key padding masks (bool), a cross entropy
    with ignore_index=PAD and label smoothing; token accuracy on non-pad positions."""
    nn = torch.nn
    torch.manual_seed(0)
    PAD, BOS, V, D = 0, 1, 9, 16
    src_lens = [5, 3, 4, 2]
    tgt_lens = [4, 5, 2, 3]
    src = torch.zeros(4, 5, dtype=torch.long)
    tgt = torch.zeros(4, 6, dtype=torch.long)
    for b, (ls, lt) in enumerate(zip(src_lens, tgt_lens)):
        src[b, :ls] = torch.randint(2, V, (ls,))
        tgt[b, 0] = BOS
        tgt[b, 1:lt + 1] = src[b, :ls].flip(0)[:lt] if lt <= ls else torch.randint(2, V, (lt,))

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D, padding_idx=PAD)
            self.pos = nn.Embedding(8, D)
            enc = nn.TransformerEncoderLayer(D, 4, 32, dropout=0.0, batch_first=True)
            dec = nn.TransformerDecoderLayer(D, 4, 32, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(enc, 1, enable_nested_tensor=False)
            self.decoder = nn.TransformerDecoder(dec, 1)
            self.out = nn.Linear(D, V)

        def embed(self, x):
            return self.emb(x) * math.sqrt(D) + self.pos(torch.arange(x.shape[1]))

        def forward(self, src, tgt_in):
            src_pad = src == PAD
            tgt_pad = tgt_in == PAD
            mask = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1]) < 0
            memory = self.encoder(self.embed(src), src_key_padding_mask=src_pad)
            h = self.decoder(self.embed(tgt_in), memory, tgt_mask=mask,
                             tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
            return self.out(h)

    model = Seq2Seq()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    crit = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1)

    def train_step(src, tgt):
        model.train()
        tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
        logits = model(src, tgt_in)
        loss = crit(logits.reshape(-1, V), tgt_out.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(src, tgt) for _ in range(5)])
    model.eval()
    with torch.no_grad():
        logits = model(src, tgt[:, :-1])
        keep = tgt[:, 1:] != PAD
        acc = (logits.argmax(-1)[keep] == tgt[:, 1:][keep]).float().mean()
    env.rec("acc", acc.item())
    env.rec("logits", logits)
    env.rec("params", _comparable(model))


def linear_attention_causal(torch, env):
    """Causal linear attention (Katharopoulos et al.): the feature map elu(x) + 1, the
    prefix sums of phi(k) v^T and phi(k) by cumsum over time (einsum), normalised by
    phi(q) . z; checked against the quadratic masked form; trained as a next-step
    regressor with RMSprop and a StepLR."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class LinearAttention(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.h, self.dk = heads, d // heads
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)

        def forward(self, x, quadratic=False):
            B, T, D = x.shape
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            q, k, v = (t.view(B, T, self.h, self.dk).transpose(1, 2) for t in (q, k, v))
            q, k = F.elu(q) + 1, F.elu(k) + 1
            if quadratic:
                a = (q @ k.transpose(-2, -1)).tril()
                out = (a @ v) / a.sum(-1, keepdim=True)
            else:
                kv = torch.einsum("bhtd,bhte->bhtde", k, v).cumsum(dim=2)
                z = k.cumsum(dim=2)
                num = torch.einsum("bhtd,bhtde->bhte", q, kv)
                den = torch.einsum("bhtd,bhtd->bht", q, z).unsqueeze(-1)
                out = num / (den + 1e-6)
            return self.proj(out.transpose(1, 2).reshape(B, T, D))

    model = nn.ModuleDict({"inp": nn.Linear(2, 8), "attn": LinearAttention(8, 2),
                           "out": nn.Linear(8, 2)})

    def forward(x, quadratic=False):
        h = model["inp"](x)
        h = h + model["attn"](h, quadratic)
        return model["out"](h)

    t = torch.linspace(0, 4 * math.pi, 13)
    seq = torch.stack([torch.sin(t), torch.cos(2 * t)], -1).unsqueeze(0).repeat(3, 1, 1)
    seq = seq + 0.05 * torch.randn(seq.shape)
    x, y = seq[:, :-1], seq[:, 1:]
    opt = torch.optim.RMSprop(model.parameters(), lr=5e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(forward(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    hist = []
    for _ in range(6):
        hist.append(step(x, y))
        sched.step()
    env.rec("hist", hist)
    with torch.no_grad():
        a, b = forward(x), forward(x, quadratic=True)
    env.rec("linear == quadratic", torch.allclose(a, b, atol=1e-4))
    env.rec("pred", a)
    env.rec("grads", [p.grad for p in model.parameters()])


def swin_shifted_windows(torch, env):
    """Swin-style window attention on a 4x4 feature map: window partition / reverse by
    view + permute, a cyclic shift by torch.roll with the shifted-window attention mask
    (masked_fill with -100), a learned relative position bias table indexed by a
    precomputed relative_position_index buffer; patch-level classification."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    ws, C, H = 2, 8, 2

    def window_partition(x, ws):
        B, Hh, W, Cc = x.shape
        x = x.view(B, Hh // ws, ws, W // ws, ws, Cc)
        return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, ws * ws, Cc)

    def window_reverse(w, ws, Hh, W):
        B = w.shape[0] // (Hh * W // ws // ws)
        x = w.view(B, Hh // ws, W // ws, ws, ws, -1)
        return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, Hh, W, -1)

    class WindowAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(C, 3 * C)
            self.proj = nn.Linear(C, C)
            self.table = nn.Parameter(torch.zeros((2 * ws - 1) ** 2, H))
            nn.init.trunc_normal_(self.table, std=0.02)
            coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws),
                                                indexing="ij")).flatten(1)
            rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()
            rel[:, :, 0] += ws - 1
            rel[:, :, 1] += ws - 1
            rel[:, :, 0] *= 2 * ws - 1
            self.register_buffer("index", rel.sum(-1))

        def forward(self, x, mask=None):
            Bw, N, _ = x.shape
            qkv = self.qkv(x).reshape(Bw, N, 3, H, C // H).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)
            attn = (q * (C // H) ** -0.5) @ k.transpose(-2, -1)
            bias = self.table[self.index.view(-1)].view(N, N, -1).permute(2, 0, 1)
            attn = attn + bias.unsqueeze(0)
            if mask is not None:
                nw = mask.shape[0]
                attn = attn.view(Bw // nw, nw, H, N, N) + mask.unsqueeze(1).unsqueeze(0)
                attn = attn.view(-1, H, N, N)
            attn = attn.softmax(-1)
            return self.proj((attn @ v).transpose(1, 2).reshape(Bw, N, C))

    def shift_mask(Hh, W, shift):
        img = torch.zeros(1, Hh, W, 1)
        cnt = 0
        for hs in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
            for wsl in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
                img[:, hs, wsl, :] = cnt
                cnt += 1
        mw = window_partition(img, ws).squeeze(-1)
        m = mw.unsqueeze(1) - mw.unsqueeze(2)
        return m.masked_fill(m != 0, -100.0).masked_fill(m == 0, 0.0)

    class SwinBlock(nn.Module):
        def __init__(self, shift):
            super().__init__()
            self.shift = shift
            self.norm1, self.norm2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.attn = WindowAttention()
            self.mlp = nn.Sequential(nn.Linear(C, 2 * C), nn.GELU(), nn.Linear(2 * C, C))
            self.register_buffer("mask", shift_mask(4, 4, shift) if shift else None)

        def forward(self, x):
            B, Hh, W, _ = x.shape
            h = self.norm1(x)
            if self.shift:
                h = torch.roll(h, shifts=(-self.shift, -self.shift), dims=(1, 2))
            h = window_reverse(self.attn(window_partition(h, ws), self.mask), ws, Hh, W)
            if self.shift:
                h = torch.roll(h, shifts=(self.shift, self.shift), dims=(1, 2))
            x = x + h
            return x + self.mlp(self.norm2(x))

    class Swin(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Conv2d(1, C, 2, stride=2)
            self.blocks = nn.Sequential(SwinBlock(0), SwinBlock(1))
            self.head = nn.Linear(C, 3)

        def forward(self, img):
            x = self.embed(img).permute(0, 2, 3, 1)
            return self.head(self.blocks(x).mean(dim=(1, 2)))

    model = Swin()
    imgs, labels = torch.randn(6, 1, 8, 8), torch.randint(0, 3, (6,))
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("mask", model.blocks[1].mask)
    env.rec("hist", [step(imgs, labels) for _ in range(5)])
    # (the key bias gets a zero gradient, which AdamW turns into noise-driven steps)
    env.rec("params", [torch.cat([p[:C], p[2 * C:]]) if n.endswith("qkv.bias") else p
                       for n, p in model.named_parameters()])


def llama_block_kv_cache(torch, env):
    """A LLaMA-style decoder: nn.RMSNorm, SwiGLU feed-forward (F.silu(w1 x) * w3 x), causal
    F.scaled_dot_product_attention; trained a few steps with AdamW + clip_grad_norm_; then
    greedy decoding with a KV cache (torch.cat of past keys/values) equals decoding by
    re-running the whole prefix."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    V, D, H = 11, 16, 2

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq, self.wk, self.wv = (nn.Linear(D, D, bias=False) for _ in range(3))
            self.wo = nn.Linear(D, D, bias=False)

        def forward(self, x, cache=None):
            B, T, _ = x.shape
            q, k, v = (w(x).view(B, T, H, D // H).transpose(1, 2)
                       for w in (self.wq, self.wk, self.wv))
            if cache is not None:
                if cache.get("k") is not None:
                    k = torch.cat([cache["k"], k], dim=2)
                    v = torch.cat([cache["v"], v], dim=2)
                cache["k"], cache["v"] = k, v
            out = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
            return self.wo(out.transpose(1, 2).reshape(B, T, D))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = nn.RMSNorm(D, eps=1e-5), nn.RMSNorm(D, eps=1e-5)
            self.attn = Attention()
            self.w1, self.w3 = nn.Linear(D, 32, bias=False), nn.Linear(D, 32, bias=False)
            self.w2 = nn.Linear(32, D, bias=False)

        def forward(self, x, cache=None):
            x = x + self.attn(self.n1(x), cache)
            h = self.n2(x)
            return x + self.w2(F.silu(self.w1(h)) * self.w3(h))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.pos = nn.Embedding(16, D)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.norm = nn.RMSNorm(D)
            self.out = nn.Linear(D, V, bias=False)

        def forward(self, idx, caches=None, start=0):
            x = self.emb(idx) + self.pos(torch.arange(start, start + idx.shape[1]))
            for i, blk in enumerate(self.blocks):
                x = blk(x, None if caches is None else caches[i])
            return self.out(self.norm(x))

    model = LM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    seqs = torch.randint(0, V, (4, 9))

    def train_step(seqs):
        opt.zero_grad()
        logits = model(seqs[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), seqs[:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(seqs) for _ in range(5)])
    model.eval()
    with torch.inference_mode():
        prompt = seqs[:2, :3]
        full = prompt
        for _ in range(4):
            nxt = model(full)[:, -1].argmax(-1, keepdim=True)
            full = torch.cat([full, nxt], 1)
        caches = [{}, {}]
        logits = model(prompt, caches)
        out, pos = prompt, prompt.shape[1]
        for _ in range(4):
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            out = torch.cat([out, nxt], 1)
            logits = model(nxt, caches, start=pos)
            pos += 1
    env.rec("full", full)
    env.rec("cached == full", torch.equal(out, full))
    env.rec("cache shape", tuple(caches[0]["k"].shape))
    env.rec("params", list(model.parameters()))


def perceiver_latents(torch, env):
    """A Perceiver: a learned latent array (expanded over the batch) cross-attends to a
    long input through nn.MultiheadAttention with kdim/vdim != embed_dim, then latent
    self-attention; mean-pooled latents classify; the cross-attention weights (averaged
    over heads) are recorded; SGD with momentum and a MultiStepLR."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    D, N_LAT, D_IN = 8, 4, 5

    class Perceiver(nn.Module):
        def __init__(self):
            super().__init__()
            self.latents = nn.Parameter(torch.randn(N_LAT, D) * 0.2)
            self.cross = nn.MultiheadAttention(D, 2, kdim=D_IN, vdim=D_IN, batch_first=True)
            self.self_attn = nn.MultiheadAttention(D, 2, batch_first=True)
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.ff = nn.Sequential(nn.Linear(D, 16), nn.GELU(), nn.Linear(16, D))
            self.head = nn.Linear(D, 2)

        def forward(self, x):
            lat = self.latents.unsqueeze(0).expand(x.shape[0], -1, -1)
            h, w = self.cross(lat, x, x)
            lat = self.ln1(lat + h)
            h, _ = self.self_attn(lat, lat, lat, need_weights=False)
            lat = self.ln2(lat + h)
            lat = lat + self.ff(lat)
            return self.head(lat.mean(1)), w

    model = Perceiver()
    x = torch.randn(6, 10, D_IN)
    y = (x[..., 0].mean(1) > 0).long()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 4], gamma=0.3)

    def train_step(x, y):
        model.train()
        opt.zero_grad()
        logits, w = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        return loss.item(), w.detach()

    step = env.step(train_step)
    hist = []
    for _ in range(6):
        loss, w = step(x, y)
        sched.step()
        hist.append((loss, opt.param_groups[0]["lr"]))
    env.rec("hist", hist)
    env.rec("attn weights", w)
    env.rec("params", _comparable(model))
