"""Programs of common kinds: a nanoGPT-style model (causal self-attention through
scaled_dot_product_attention(is_causal=True), weight tying, configure_optimizers' decay and
no-decay groups, top-k sampling); a CLIP-style contrastive model (two encoders, normalised
embeddings, a learned logit scale, symmetric cross-entropy); PyTorch's parametrizations
tutorial (register_parametrization, right_inverse, parametrize.cached(),
remove_parametrizations). Programs `f(torch, env)`, see tutorial_harness.py."""
import importlib
import math


def nano_gpt(torch, env):
    nn, F = torch.nn, torch.nn.functional
    vocab_size, block_size, n_embd, n_head, n_layer = 16, 8, 16, 2, 2

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.n_head, self.n_embd = n_head, n_embd

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0,
                                               is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * n_embd, n_embd)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(n_embd), CausalSelfAttention()
            self.ln_2, self.mlp = nn.LayerNorm(n_embd), MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(vocab_size, n_embd), wpe=nn.Embedding(block_size, n_embd),
                h=nn.ModuleList([Block() for _ in range(n_layer)]), ln_f=nn.LayerNorm(n_embd)))
            self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight    # weight tying
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long)
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            if targets is not None:
                logits = self.lm_head(x)
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                       ignore_index=-1)
            else:
                logits = self.lm_head(x[:, [-1], :])
                loss = None
            return logits, loss

        def configure_optimizers(self, weight_decay, learning_rate, betas):
            param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
            decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
            optim_groups = [{"params": decay_params, "weight_decay": weight_decay},
                            {"params": nodecay_params, "weight_decay": 0.0}]
            return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)

        @torch.no_grad()
        def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
            for _ in range(max_new_tokens):
                idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
                logits, _ = self(idx_cond)
                logits = logits[:, -1, :] / temperature
                if top_k is not None:
                    v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                    logits[logits < v[:, [-1]]] = -float("Inf")
                probs = F.softmax(logits, dim=-1)
                idx_next = torch.multinomial(probs, num_samples=1)
                idx = torch.cat((idx, idx_next), dim=1)
            return idx

    model = env.init(GPT())
    env.rec("parameters", sum(p.numel() for p in model.parameters()))
    optimizer = model.configure_optimizers(0.1, 3e-3, (0.9, 0.95))
    data = torch.tensor([(3 * i + i // 5) % vocab_size for i in range(200)])

    def get_batch(k):
        ix = env.randint(0, len(data) - block_size, (4,))
        x = torch.stack([data[i:i + block_size] for i in ix])
        y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix])
        return x, y

    raw_model = model
    model = env.step(model)         # (nanoGPT's `model = torch.compile(model)`)
    warmup_iters, max_iters = 2, 6
    for it in range(max_iters):
        lr = 3e-3 * (it + 1) / warmup_iters if it < warmup_iters else \
            3e-4 + 0.5 * (1.0 + math.cos(math.pi * (it - warmup_iters) / max_iters)) * 2.7e-3
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        X, Y = get_batch(it)
        logits, loss = model(X, Y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        env.rec(f"iter {it}", loss.item())
    model = raw_model
    model.eval()
    with torch.no_grad():
        X, Y = get_batch(0)
        env.rec("eval loss", model(X, Y)[1])
    env.rec("generated", model.generate(X[:2, :3], 5, temperature=0.8, top_k=4), cross=False)
    env.rec("tied", model.transformer.wte.weight is model.lm_head.weight)


def clip_contrastive(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class Encoder(nn.Module):
        def __init__(self, d_in, d_emb):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(d_in, 32), nn.GELU(), nn.Linear(32, d_emb))

        def forward(self, x):
            return self.net(x)

    class CLIP(nn.Module):
        def __init__(self):
            super().__init__()
            self.image_encoder, self.text_encoder = Encoder(12, 8), Encoder(6, 8)
            self.logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))

        def forward(self, image, text):
            image_features = F.normalize(self.image_encoder(image), dim=-1)
            text_features = F.normalize(self.text_encoder(text), dim=-1)
            logit_scale = self.logit_scale.exp()
            logits_per_image = logit_scale * image_features @ text_features.t()
            return logits_per_image, logits_per_image.t()

    model = env.init(CLIP())
    optimizer = optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.2)
    latent = env.randn(32, 4)
    images = latent @ env.randn(4, 12) + 0.1 * env.randn(32, 12)
    texts = latent @ env.randn(4, 6) + 0.1 * env.randn(32, 6)

    def train_step(image, text):
        optimizer.zero_grad()
        logits_per_image, logits_per_text = model(image, text)
        ground_truth = torch.arange(len(image), dtype=torch.long)
        total_loss = (F.cross_entropy(logits_per_image, ground_truth)
                      + F.cross_entropy(logits_per_text, ground_truth)) / 2
        total_loss.backward()
        optimizer.step()
        with torch.no_grad():       # (CLIP clamps the temperature at 100)
            model.logit_scale.clamp_(0, math.log(100))
        return total_loss.item()

    train_step = env.step(train_step)
    for epoch in range(3):
        for start in range(0, 32, 16):
            env.rec(f"loss {epoch} {start}", train_step(images[start:start + 16],
                                                        texts[start:start + 16]))
    model.eval()
    with torch.no_grad():
        logits, _ = model(images, texts)
        top1 = (logits.argmax(dim=1) == torch.arange(32)).float().mean()
        top5 = (logits.topk(5, dim=1).indices == torch.arange(32)[:, None]).any(1).float().mean()
    env.rec("retrieval", (top1, top5, model.logit_scale))


def parametrizations(torch, env):
    nn, optim = torch.nn, torch.optim
    parametrize = importlib.import_module(torch.__name__ + ".nn.utils.parametrize")

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()

    class NoisyScale(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.register_buffer("scale", torch.tensor(scale))

        def forward(self, X):
            return X * self.scale

        def right_inverse(self, X):
            return X / self.scale

    layer = env.init(nn.Linear(4, 4))
    parametrize.register_parametrization(layer, "weight", Symmetric())
    parametrize.register_parametrization(layer, "weight", NoisyScale(0.5))
    env.rec("structure", (parametrize.is_parametrized(layer), repr(layer.parametrizations),
                          [n for n, _ in layer.named_parameters()]))
    A = layer.weight
    env.rec("symmetric", (A, torch.dist(A, A.T).item()))
    X = env.randn(4, 4)
    layer.weight = (X + X.T) / 2 * 0.5              # through right_inverse
    env.rec("assigned", (layer.weight, layer.parametrizations.weight.original))

    optimizer = optim.SGD(layer.parameters(), lr=0.1)
    x, y = env.randn(16, 4), env.randn(16, 4)

    def train_step(x, y):
        optimizer.zero_grad()
        with parametrize.cached():
            loss = ((layer(x) - y) ** 2).mean() + 0.01 * layer.weight.pow(2).sum()
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for i in range(4):
        env.rec(f"loss {i}", train_step(x, y))
    env.rec("still symmetric", torch.allclose(layer.weight, layer.weight.T))
    parametrize.remove_parametrizations(layer, "weight", leave_parametrized=True)
    env.rec("removed", (parametrize.is_parametrized(layer), layer.weight,
                        [n for n, _ in layer.named_parameters()]))
