"""Sweep 24 (H2, D2): Raschka's "Build a Large Language Model (From Scratch)" at toy size,
nearly verbatim: GPTModel (a causal mask buffer with masked_fill_ by mask_bool, LayerNorm
and GELU written by hand, shortcut connections), calc_loss_batch over flatten(0, 1), AdamW,
generate with temperature and top-k by torch.where(-inf) + multinomial, classification
fine-tuning of the last block and a new head on the last token's logits, and instruction
fine-tuning's collate (padding, targets past the first end token set to ignore_index=-100).
Synthetic data. Programs `f(torch, env)`, see tutorial_harness.py."""


def llm_from_scratch_gpt(torch, env):
    nn = torch.nn

    class MultiHeadAttention(nn.Module):
        def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
            super().__init__()
            assert (d_out % num_heads == 0), "d_out must be divisible by num_heads"
            self.d_out = d_out
            self.num_heads = num_heads
            self.head_dim = d_out // num_heads
            self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
            self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
            self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
            self.out_proj = nn.Linear(d_out, d_out)
            self.dropout = nn.Dropout(dropout)
            self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length),
                                                    diagonal=1))

        def forward(self, x):
            b, num_tokens, d_in = x.shape
            keys = self.W_key(x)
            queries = self.W_query(x)
            values = self.W_value(x)
            keys = keys.view(b, num_tokens, self.num_heads, self.head_dim)
            values = values.view(b, num_tokens, self.num_heads, self.head_dim)
            queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)
            keys = keys.transpose(1, 2)
            queries = queries.transpose(1, 2)
            values = values.transpose(1, 2)
            attn_scores = queries @ keys.transpose(2, 3)
            mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
            attn_scores.masked_fill_(mask_bool, -torch.inf)
            attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
            attn_weights = self.dropout(attn_weights)
            context_vec = (attn_weights @ values).transpose(1, 2)
            context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
            context_vec = self.out_proj(context_vec)
            return context_vec

    class LayerNorm(nn.Module):
        def __init__(self, emb_dim):
            super().__init__()
            self.eps = 1e-5
            self.scale = nn.Parameter(torch.ones(emb_dim))
            self.shift = nn.Parameter(torch.zeros(emb_dim))

        def forward(self, x):
            mean = x.mean(dim=-1, keepdim=True)
            var = x.var(dim=-1, keepdim=True, unbiased=False)
            norm_x = (x - mean) / torch.sqrt(var + self.eps)
            return self.scale * norm_x + self.shift

    class GELU(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, x):
            return 0.5 * x * (1 + torch.tanh(torch.sqrt(torch.tensor(2.0 / torch.pi)) *
                                             (x + 0.044715 * torch.pow(x, 3))))

    class FeedForward(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.layers = nn.Sequential(nn.Linear(cfg["emb_dim"], 4 * cfg["emb_dim"]), GELU(),
                                        nn.Linear(4 * cfg["emb_dim"], cfg["emb_dim"]))

        def forward(self, x):
            return self.layers(x)

    class TransformerBlock(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.att = MultiHeadAttention(
                d_in=cfg["emb_dim"], d_out=cfg["emb_dim"], context_length=cfg["context_length"],
                num_heads=cfg["n_heads"], dropout=cfg["drop_rate"], qkv_bias=cfg["qkv_bias"])
            self.ff = FeedForward(cfg)
            self.norm1 = LayerNorm(cfg["emb_dim"])
            self.norm2 = LayerNorm(cfg["emb_dim"])
            self.drop_shortcut = nn.Dropout(cfg["drop_rate"])

        def forward(self, x):
            shortcut = x
            x = self.norm1(x)
            x = self.att(x)
            x = self.drop_shortcut(x)
            x = x + shortcut
            shortcut = x
            x = self.norm2(x)
            x = self.ff(x)
            x = self.drop_shortcut(x)
            x = x + shortcut
            return x

    class GPTModel(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
            self.pos_emb = nn.Embedding(cfg["context_length"], cfg["emb_dim"])
            self.drop_emb = nn.Dropout(cfg["drop_rate"])
            self.trf_blocks = nn.Sequential(
                *[TransformerBlock(cfg) for _ in range(cfg["n_layers"])])
            self.final_norm = LayerNorm(cfg["emb_dim"])
            self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)

        def forward(self, in_idx):
            batch_size, seq_len = in_idx.shape
            tok_embeds = self.tok_emb(in_idx)
            pos_embeds = self.pos_emb(torch.arange(seq_len, device=in_idx.device))
            x = tok_embeds + pos_embeds
            x = self.drop_emb(x)
            x = self.trf_blocks(x)
            x = self.final_norm(x)
            logits = self.out_head(x)
            return logits

    GPT_CONFIG = {"vocab_size": 40, "context_length": 8, "emb_dim": 16, "n_heads": 2,
                  "n_layers": 2, "drop_rate": 0.1, "qkv_bias": False}
    torch.manual_seed(123)
    model = GPTModel(GPT_CONFIG)
    env.rec("init", dict(model.state_dict()))
    total_params = sum(p.numel() for p in model.parameters())
    env.rec("total_params", total_params)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.0004, weight_decay=0.1)

    def calc_loss_batch(input_batch, target_batch, model, device):
        logits = model(input_batch)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), target_batch.flatten())
        return loss

    def train_step(input_batch, target_batch):
        optimizer.zero_grad()
        loss = calc_loss_batch(input_batch, target_batch, model, "cpu")
        loss.backward()
        optimizer.step()
        return loss

    train_step = env.step(train_step)
    text = env.randint(0, 40, (40,))
    batches = [(text[i:i + 8].reshape(1, 8).repeat(2, 1), text[i + 1:i + 9].reshape(1, 8)
                .repeat(2, 1)) for i in range(0, 30, 10)]
    model.train()
    for epoch in range(2):
        for i, (x, y) in enumerate(batches):
            env.rec(f"epoch {epoch} batch {i}", train_step(x, y))
    env.rec("trained", dict(model.state_dict()))

    def generate(model, idx, max_new_tokens, context_size, temperature=0.0, top_k=None,
                 eos_id=None):
        for _ in range(max_new_tokens):
            idx_cond = idx[:, -context_size:]
            with torch.no_grad():
                logits = model(idx_cond)
            logits = logits[:, -1, :]
            if top_k is not None:
                top_logits, _ = torch.topk(logits, top_k)
                min_val = top_logits[:, -1]
                logits = torch.where(logits < min_val, torch.tensor(float("-inf")).to(
                    logits.device), logits)
            if temperature > 0.0:
                logits = logits / temperature
                probs = torch.softmax(logits, dim=-1)
                idx_next = torch.multinomial(probs, num_samples=1)
            else:
                idx_next = torch.argmax(logits, dim=-1, keepdim=True)
            if idx_next == eos_id:
                break
            idx = torch.cat((idx, idx_next), dim=1)
        return idx

    model.eval()
    torch.manual_seed(123)
    env.rec("generated", generate(model, text[:4].unsqueeze(0), 10,
                                  GPT_CONFIG["context_length"], temperature=1.4, top_k=25))
    env.rec("greedy", generate(model, text[:4].unsqueeze(0), 6,
                               GPT_CONFIG["context_length"]))

    # the book's later chapters train with drop_rate 0
    torch.manual_seed(123)
    GPT_CONFIG["drop_rate"] = 0.0
    model = env.init(GPTModel(GPT_CONFIG))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.0004, weight_decay=0.1)
    for epoch in range(2):
        for i, (x, y) in enumerate(batches):
            env.rec(f"no dropout {epoch} {i}", train_step(x, y))
    env.rec("no dropout params", dict(model.state_dict()))
    model.eval()
    env.rec("no dropout greedy", generate(model, text[:4].unsqueeze(0), 6,
                                          GPT_CONFIG["context_length"]))

    # chapter 6: classification fine-tuning (everything frozen but the last block, the
    # final norm and a new 2-class head; the last token's logits)
    for param in model.parameters():
        param.requires_grad = False
    model.out_head = torch.nn.Linear(in_features=GPT_CONFIG["emb_dim"], out_features=2)
    for param in model.trf_blocks[-1].parameters():
        param.requires_grad = True
    for param in model.final_norm.parameters():
        param.requires_grad = True
    env.rec("new head", dict(model.out_head.state_dict()))
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.1)

    def calc_loss_batch_cls(input_batch, target_batch, model, device):
        logits = model(input_batch)[:, -1, :]
        loss = torch.nn.functional.cross_entropy(logits, target_batch)
        return loss

    def cls_step(input_batch, target_batch):
        optimizer.zero_grad()
        loss = calc_loss_batch_cls(input_batch, target_batch, model, "cpu")
        loss.backward()
        optimizer.step()
        return loss

    cls_step = env.step(cls_step)
    model.train()
    labels = torch.tensor([0, 1])
    for i, (x, _) in enumerate(batches):
        env.rec(f"classify {i}", cls_step(x, labels))
    env.rec("fine-tuned", dict(model.state_dict()))

    # chapter 7: instruction fine-tuning's collate (padding, targets past the first end
    # token set to ignore_index) and the loss that ignores them
    def custom_collate_fn(batch, pad_token_id=39, ignore_index=-100, allowed_max_length=None,
                          device="cpu"):
        batch_max_length = max(len(item) + 1 for item in batch)
        inputs_lst, targets_lst = [], []
        for item in batch:
            new_item = item.copy()
            new_item += [pad_token_id]
            padded = (new_item + [pad_token_id] * (batch_max_length - len(new_item)))
            inputs = torch.tensor(padded[:-1])
            targets = torch.tensor(padded[1:])
            mask = targets == pad_token_id
            indices = torch.nonzero(mask).squeeze()
            if indices.numel() > 1:
                targets[indices[1:]] = ignore_index
            if allowed_max_length is not None:
                inputs = inputs[:allowed_max_length]
                targets = targets[:allowed_max_length]
            inputs_lst.append(inputs)
            targets_lst.append(targets)
        inputs_tensor = torch.stack(inputs_lst).to(device)
        targets_tensor = torch.stack(targets_lst).to(device)
        return inputs_tensor, targets_tensor

    for param in model.parameters():
        param.requires_grad = True
    model.out_head = torch.nn.Linear(GPT_CONFIG["emb_dim"], GPT_CONFIG["vocab_size"],
                                     bias=False)
    env.init(model.out_head)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.1)
    items = [[int(t) for t in text[i:i + n]] for i, n in ((0, 5), (7, 3), (12, 6))]
    inputs, targets = custom_collate_fn(items, allowed_max_length=8)
    env.rec("collated", (inputs, targets))
    for i in range(3):
        env.rec(f"instruct {i}", train_step(inputs, targets))
    env.rec("instructed", dict(model.state_dict()))
