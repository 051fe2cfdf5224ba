"""Tutorial programs from popular repositories' training scripts, written as they write them
(seeded with torch.manual_seed, modules built by their constructors; see
tutorial_harness.py): a nanoGPT-style loop around a compiled model (torch.compile(model),
a hand-written lr schedule written into the param groups, gradient accumulation,
estimate_loss, a checkpoint of the raw model), MAE random masking (argsort of noise,
gather, ids_restore), BERT's masked-LM collator (80/10/10 with bernoulli), DDIM sampling
with classifier-free guidance, top-k / top-p (nucleus) sampling from a GRU LM, an
attention U-Net (attention gates, ConvTranspose2d, skip concatenation)."""
import math


def nanogpt_compiled_model(torch, env):
    """nanoGPT's train.py shape: model = torch.compile(model) (env.step on the module), the
    raw model kept as model._orig_mod for checkpoints, get_lr(it) with linear warmup and
    cosine decay written into every param group before each iteration, gradient
    accumulation over micro-steps (loss / steps), clip_grad_norm_, optimizer.zero_grad(
    set_to_none=True), estimate_loss() under @torch.no_grad() switching eval() / train(),
    a checkpoint dict with model / optimizer state, iter_num and best_val_loss."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    V, T, D = 7, 6, 12
    data = torch.randint(0, V, (200,))
    train_data, val_data = data[:160], data[160:]

    class MLPLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, D)
            self.wpe = nn.Embedding(T, D)
            self.ln = nn.LayerNorm(D)
            self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
            self.lm_head = nn.Linear(D, V, bias=False)
            self.wte.weight = self.lm_head.weight

        def forward(self, idx, targets=None):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            x = x + self.mlp(self.ln(x))
            logits = self.lm_head(x)
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-1)
            return logits, loss

    def get_batch(split):
        d = train_data if split == "train" else val_data
        ix = torch.randint(len(d) - T, (4,))
        x = torch.stack([d[i:i + T] for i in ix])
        y = torch.stack([d[i + 1:i + 1 + T] for i in ix])
        return x, y

    raw = MLPLM()
    model = env.step(raw)
    optimizer = torch.optim.AdamW(raw.parameters(), lr=6e-4, betas=(0.9, 0.95),
                                  weight_decay=0.1)
    warmup, lr_decay_iters, max_lr, min_lr, accum = 2, 8, 6e-3, 6e-4, 2

    def get_lr(it):
        if it < warmup:
            return max_lr * (it + 1) / (warmup + 1)
        if it > lr_decay_iters:
            return min_lr
        ratio = (it - warmup) / (lr_decay_iters - warmup)
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (max_lr - min_lr)

    @torch.no_grad()
    def estimate_loss():
        out = {}
        model.eval()
        for split in ["train", "val"]:
            losses = torch.zeros(2)
            for k in range(2):
                X, Y = get_batch(split)
                _, loss = model(X, Y)
                losses[k] = loss.item()
            out[split] = losses.mean().item()
        model.train()
        return out

    best_val_loss, hist = 1e9, []
    X, Y = get_batch("train")
    for iter_num in range(8):
        lr = get_lr(iter_num)
        for group in optimizer.param_groups:
            group["lr"] = lr
        if iter_num % 4 == 0:
            losses = estimate_loss()
            hist.append(losses)
            if losses["val"] < best_val_loss:
                best_val_loss = losses["val"]
                checkpoint = {"model": raw.state_dict(), "optimizer": optimizer.state_dict(),
                              "iter_num": iter_num, "best_val_loss": best_val_loss}
                torch.save(checkpoint, env.path("ckpt.pt"))
        for micro_step in range(accum):
            _, loss = model(X, Y)
            loss = loss / accum
            X, Y = get_batch("train")
            loss.backward()
        torch.nn.utils.clip_grad_norm_(raw.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        hist.append((loss.item() * accum, lr))
    env.rec("hist", hist)
    ckpt = torch.load(env.path("ckpt.pt"))
    env.rec("ckpt", (ckpt["iter_num"], ckpt["best_val_loss"], sorted(ckpt["model"])))
    env.rec("params", list(raw.parameters()))


def mae_random_masking(torch, env):
    """MAE's random_masking: noise = torch.rand(N, L), ids_shuffle = argsort(noise),
    ids_restore = argsort(ids_shuffle), the kept patches gathered with index.unsqueeze(-1)
    .repeat(1, 1, D), a binary mask unshuffled with gather; the decoder appends mask
    tokens (a learned parameter expanded) and restores the order; the loss is the
    normalised-pixel MSE on masked patches only (patchify by reshape / einsum)."""
    nn = torch.nn
    torch.manual_seed(0)
    p, C, D = 2, 1, 8

    def patchify(imgs):
        N, _, H, W = imgs.shape
        h, w = H // p, W // p
        x = imgs.reshape(N, C, h, p, w, p)
        x = torch.einsum("nchpwq->nhwpqc", x)
        return x.reshape(N, h * w, p * p * C)

    class MAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(p * p * C, D)
            self.pos = nn.Parameter(torch.randn(1, 16, D) * 0.02)
            self.enc = nn.TransformerEncoderLayer(D, 2, 16, dropout=0.0, batch_first=True)
            self.dec_embed = nn.Linear(D, D)
            self.mask_token = nn.Parameter(torch.zeros(1, 1, D))
            self.dec = nn.Sequential(nn.LayerNorm(D), nn.Linear(D, p * p * C))

        def random_masking(self, x, ratio):
            N, L, Dd = x.shape
            keep = int(L * (1 - ratio))
            noise = torch.rand(N, L)
            ids_shuffle = torch.argsort(noise, dim=1)
            ids_restore = torch.argsort(ids_shuffle, dim=1)
            ids_keep = ids_shuffle[:, :keep]
            x_masked = torch.gather(x, 1, ids_keep.unsqueeze(-1).repeat(1, 1, Dd))
            mask = torch.ones(N, L)
            mask[:, :keep] = 0
            mask = torch.gather(mask, 1, ids_restore)
            return x_masked, mask, ids_restore

        def forward(self, imgs, ratio=0.75):
            target = patchify(imgs)
            x = self.embed(target) + self.pos
            x, mask, ids_restore = self.random_masking(x, ratio)
            x = self.dec_embed(self.enc(x))
            n_mask = ids_restore.shape[1] - x.shape[1]
            tokens = self.mask_token.repeat(x.shape[0], n_mask, 1)
            x = torch.cat([x, tokens], 1)
            x = torch.gather(x, 1, ids_restore.unsqueeze(-1).repeat(1, 1, x.shape[2]))
            pred = self.dec(x + self.pos)
            mean = target.mean(dim=-1, keepdim=True)
            var = target.var(dim=-1, keepdim=True)
            target = (target - mean) / (var + 1e-6) ** 0.5
            loss = ((pred - target) ** 2).mean(-1)
            return (loss * mask).sum() / mask.sum(), mask

    model = MAE()
    imgs = torch.randn(3, 1, 8, 8)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.05)

    def train_step(imgs):
        opt.zero_grad()
        loss, mask = model(imgs)
        loss.backward()
        opt.step()
        return loss.item(), mask

    step = env.step(train_step)
    hist = [step(imgs) for _ in range(4)]
    env.rec("losses", [h[0] for h in hist])
    env.rec("masks", [h[1] for h in hist])
    env.rec("params", [p for n, p in model.named_parameters() if "in_proj_bias" not in n])


def bert_mlm_collator(torch, env):
    """Hugging Face's DataCollatorForLanguageModeling: a probability matrix full of 0.15
    with special tokens and padding set to 0 (masked_fill_), masked_indices by
    torch.bernoulli, labels -100 elsewhere, 80% of the masked replaced by [MASK]
    (bernoulli(full(0.8)) & masked), 10% by random words (torch.randint), the rest kept; a
    small BERT-like encoder trained on the batches with ignore_index=-100."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    PAD, CLS, SEP, MASK, V, D = 0, 1, 2, 3, 20, 16
    lengths = [8, 6, 7, 5]
    ids = torch.full((4, 8), PAD)
    for b, n in enumerate(lengths):
        ids[b, 0], ids[b, n - 1] = CLS, SEP
        ids[b, 1:n - 1] = torch.randint(4, V, (n - 2,))

    def collate(inputs):
        inputs = inputs.clone()
        labels = inputs.clone()
        prob = torch.full(labels.shape, 0.15)
        special = (labels == PAD) | (labels == CLS) | (labels == SEP)
        prob.masked_fill_(special, value=0.0)
        masked = torch.bernoulli(prob).bool()
        labels[~masked] = -100
        replaced = torch.bernoulli(torch.full(labels.shape, 0.8)).bool() & masked
        inputs[replaced] = MASK
        rand = torch.bernoulli(torch.full(labels.shape, 0.5)).bool() & masked & ~replaced
        inputs[rand] = torch.randint(V, labels.shape, dtype=torch.long)[rand]
        return inputs, labels, inputs != PAD

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V, D, padding_idx=PAD)
            self.pos = nn.Embedding(8, D)
            self.ln = nn.LayerNorm(D)
            layer = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, activation="gelu",
                                               batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
            self.head = nn.Linear(D, V)

        def forward(self, ids, attention_mask):
            h = self.ln(self.tok(ids) + self.pos(torch.arange(ids.shape[1])))
            h = self.enc(h, src_key_padding_mask=~attention_mask)
            return self.head(h)

    model = Bert()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)

    def train_step(inputs, labels, attention_mask):
        opt.zero_grad()
        logits = model(inputs, attention_mask)
        loss = F.cross_entropy(logits.view(-1, V), labels.view(-1), ignore_index=-100)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    hist, batches = [], []
    for _ in range(5):
        inputs, labels, am = collate(ids)
        if (labels != -100).any():
            hist.append(step(inputs, labels, am))
        batches.append((inputs, labels))
    env.rec("batches", batches)
    env.rec("hist", hist)
    env.rec("params", [p for n, p in model.named_parameters() if "in_proj_bias" not in n])


def ddim_cfg_guidance(torch, env):
    """A conditional diffusion model on 2-D points: a cosine alpha-bar schedule, epsilon
    prediction with class conditioning dropped to a null class with probability 0.2
    (torch.rand < p, torch.where), training at random timesteps; DDIM sampling (eta = 0,
    a strided timestep subsequence) with classifier-free guidance
    eps = (1 + w) eps_cond - w eps_uncond."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    T_steps, n_cls = 20, 2
    s = 0.008
    t = torch.arange(T_steps + 1, dtype=torch.float64) / T_steps
    f = torch.cos((t + s) / (1 + s) * math.pi / 2) ** 2
    alpha_bar = (f / f[0]).clamp(min=1e-5).float()[1:]

    class Eps(nn.Module):
        def __init__(self):
            super().__init__()
            self.cls = nn.Embedding(n_cls + 1, 16)
            self.time = nn.Embedding(T_steps, 16)
            self.net = nn.Sequential(nn.Linear(2 + 16, 32), nn.SiLU(), nn.Linear(32, 2))

        def forward(self, x, t, c):
            return self.net(torch.cat([x, self.cls(c) + self.time(t)], -1))

    model = Eps()
    centres = torch.tensor([[2.0, 0.0], [-2.0, 0.0]])
    c0 = torch.randint(0, n_cls, (64,))
    x0 = centres[c0] + 0.3 * torch.randn(64, 2)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def train_step(x0, c):
        tt = torch.randint(0, T_steps, (x0.shape[0],))
        noise = torch.randn_like(x0)
        ab = alpha_bar[tt][:, None]
        xt = ab.sqrt() * x0 + (1 - ab).sqrt() * noise
        drop = torch.rand(c.shape[0]) < 0.2
        c = torch.where(drop, torch.full_like(c, n_cls), c)
        loss = F.mse_loss(model(xt, tt, c), noise)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(x0, c0) for _ in range(6)])

    @torch.no_grad()
    def sample(c, w=2.0, n_steps=5):
        x = torch.randn(c.shape[0], 2)
        ts = list(range(T_steps - 1, -1, -T_steps // n_steps))
        for i, ti in enumerate(ts):
            tt = torch.full((c.shape[0],), ti, dtype=torch.long)
            eps = (1 + w) * model(x, tt, c) - w * model(x, tt, torch.full_like(c, n_cls))
            ab = alpha_bar[ti]
            ab_prev = alpha_bar[ts[i + 1]] if i + 1 < len(ts) else torch.tensor(1.0)
            x0_pred = (x - (1 - ab).sqrt() * eps) / ab.sqrt()
            x = ab_prev.sqrt() * x0_pred + (1 - ab_prev).sqrt() * eps
        return x

    env.rec("samples", sample(torch.tensor([0, 1, 0, 1])))
    env.rec("params", list(model.parameters()))


def nucleus_sampling_generation(torch, env):
    """A GRU character LM trained a few compiled steps, then generation the Hugging Face
    way: logits / temperature, top-k filtering (values below topk's k-th set to -inf),
    top-p filtering (sort descending, cumsum of softmax, shift the mask right by one,
    scatter back to the vocabulary order), torch.multinomial on the softmax; a
    repetition penalty via gather / scatter_ on the logits."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    V, H = 9, 16

    class CharLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, H)
            self.gru = nn.GRU(H, H, batch_first=True)
            self.out = nn.Linear(H, V)

        def forward(self, x, h=None):
            o, h = self.gru(self.emb(x), h)
            return self.out(o), h

    model = CharLM()
    seq = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8] * 3)
    xb = torch.stack([seq[i:i + 8] for i in range(0, 16, 2)])
    yb = torch.stack([seq[i + 1:i + 9] for i in range(0, 16, 2)])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, y):
        opt.zero_grad()
        logits, _ = model(x)
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(xb, yb) for _ in range(6)])

    def filter_logits(logits, top_k=5, top_p=0.8):
        kth = torch.topk(logits, top_k)[0][..., -1, None]
        logits = logits.masked_fill(logits < kth, float("-inf"))
        sorted_logits, sorted_idx = torch.sort(logits, descending=True)
        cum = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
        remove = cum > top_p
        remove[..., 1:] = remove[..., :-1].clone()
        remove[..., 0] = False
        remove = remove.scatter(1, sorted_idx, remove)
        return logits.masked_fill(remove, float("-inf"))

    model.eval()
    out = torch.tensor([[0], [4]])
    h = None
    with torch.no_grad():
        x = out
        for _ in range(8):
            logits, h = model(x, h)
            logits = logits[:, -1] / 0.8
            prev = torch.gather(logits, 1, out)
            logits = logits.scatter(1, out, torch.where(prev < 0, prev * 1.2, prev / 1.2))
            probs = F.softmax(filter_logits(logits), dim=-1)
            x = torch.multinomial(probs, 1)
            out = torch.cat([out, x], 1)
    env.rec("generated", out)
    env.rec("last probs", probs)


def attention_unet_gates(torch, env):
    """An attention U-Net: encoder convs with max-pooling, a decoder upsampling by
    ConvTranspose2d(stride=2), attention gates (psi = sigmoid(conv(relu(W_g g + W_x x))))
    scaling the skip connection before torch.cat along channels; BCE-with-logits plus a
    soft Dice loss on a binary mask; Dice score at eval with a 0.5 threshold."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    def block(c_in, c_out):
        # (bias=False before BatchNorm: such a bias gets a zero gradient up to rounding,
        # which Adam would turn into full steps)
        return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
                             nn.BatchNorm2d(c_out), nn.ReLU(inplace=True))

    class AttentionGate(nn.Module):
        def __init__(self, c_g, c_x, c_mid):
            super().__init__()
            self.W_g = nn.Conv2d(c_g, c_mid, 1)
            self.W_x = nn.Conv2d(c_x, c_mid, 1, bias=False)
            self.psi = nn.Sequential(nn.Conv2d(c_mid, 1, 1), nn.Sigmoid())

        def forward(self, g, x):
            return x * self.psi(F.relu(self.W_g(g) + self.W_x(x)))

    class AttUNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.e1, self.e2 = block(1, 4), block(4, 8)
            self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
            self.att = AttentionGate(4, 4, 2)
            self.d1 = block(8, 4)
            self.out = nn.Conv2d(4, 1, 1)

        def forward(self, x):
            s1 = self.e1(x)
            b = self.e2(F.max_pool2d(s1, 2))
            u = self.up(b)
            return self.out(self.d1(torch.cat([self.att(u, s1), u], 1)))

    model = AttUNet()
    imgs = torch.randn(4, 1, 8, 8)
    masks = (imgs.abs() > 0.8).float()

    def dice_loss(logits, target, eps=1.0):
        p = torch.sigmoid(logits)
        inter = (p * target).sum((1, 2, 3))
        return 1 - ((2 * inter + eps) / (p.sum((1, 2, 3)) + target.sum((1, 2, 3)) + eps)).mean()

    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(x, m):
        model.train()
        opt.zero_grad()
        logits = model(x)
        loss = F.binary_cross_entropy_with_logits(logits, m) + dice_loss(logits, m)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(imgs, masks) for _ in range(5)])
    model.eval()
    with torch.no_grad():
        pred = (torch.sigmoid(model(imgs)) > 0.5).float()
        dice = (2 * (pred * masks).sum() / (pred.sum() + masks.sum() + 1e-8)).item()
    env.rec("dice", dice)
    env.rec("buffers", list(model.buffers()))
    env.rec("params", list(model.parameters()))
