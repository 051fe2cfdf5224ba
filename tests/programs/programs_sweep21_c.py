"""Sequence programs the other files leave out: a Hyena-style long convolution (an implicit
filter from a positional MLP with an exponential window, applied through torch.fft.rfft /
irfft at length 2L); Performer's FAVOR+ attention (orthogonal random features from
torch.linalg.qr, redrawn under no_grad every few calls by a counter the module keeps);
PatchTST with RevIN (the instance statistics stored on the module in forward and used to
denormalise; patches by Tensor.unfold); SASRec (item embeddings with padding_idx, a
timeline mask, a causal mask, BCE on positive and sampled negative items).
Programs `f(torch, env)`, see tutorial_harness.py."""
import math


def hyena_fft_conv(torch, env):
    nn, F = torch.nn, torch.nn.functional
    d, L, order = 6, 16, 2

    def fftconv(u, k, D):
        seqlen = u.shape[-1]
        fft_size = 2 * seqlen
        k_f = torch.fft.rfft(k, n=fft_size) / fft_size
        u_f = torch.fft.rfft(u.to(dtype=k.dtype), n=fft_size)
        y = torch.fft.irfft(u_f * k_f, n=fft_size, norm="forward")[..., :seqlen]
        return y + u * D.unsqueeze(-1)

    class HyenaFilter(nn.Module):
        def __init__(self):
            super().__init__()
            t = torch.linspace(0, 1, L)[None, :, None]
            self.register_buffer("t", t)
            self.implicit = nn.Sequential(nn.Linear(1, 8), nn.SiLU(), nn.Linear(8, d))
            self.register_buffer("deltas", torch.linspace(math.log(1e-2) / 1.5,
                                                         math.log(1e-2) / 0.3, d)[None, None])
            self.bias = nn.Parameter(torch.zeros(d))

        def forward(self):
            h = self.implicit(self.t)                       # (1, L, d)
            decay = torch.exp(-self.t * self.deltas.abs())
            return (h * decay).transpose(1, 2)[0]             # (d, L)

    class HyenaOperator(nn.Module):
        def __init__(self):
            super().__init__()
            self.in_proj = nn.Linear(d, (order + 1) * d)
            self.short_filter = nn.Conv1d((order + 1) * d, (order + 1) * d, 3, padding=2,
                                          groups=(order + 1) * d)
            self.filters = nn.ModuleList([HyenaFilter() for _ in range(order)])
            self.out_proj = nn.Linear(d, d)

        def forward(self, u):
            l = u.size(-2)
            u = self.in_proj(u).transpose(1, 2)
            uc = self.short_filter(u)[..., :l]
            *x, v = uc.split(d, dim=1)
            for o, x_i in enumerate(reversed(x)):
                v = v * x_i
                v = fftconv(v, self.filters[o](), self.filters[o].bias)
            return self.out_proj((v * x[0]).transpose(1, 2))

    model = env.init(nn.Sequential(HyenaOperator(), nn.LayerNorm(d), nn.Linear(d, 3)))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)

    def train_step(x, y):
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, 3), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    x, y = env.randn(2, L, d), env.randint(0, 3, (2, L))
    for it in range(4):
        env.rec(f"it{it}", step(x, y))
    env.rec("model", model.state_dict())


def performer_favor(torch, env):
    nn, F = torch.nn, torch.nn.functional
    d, heads, nb_features, redraw = 8, 2, 6, 3
    dh = d // heads

    def orthogonal_matrix_chunk(cols):
        q, r = torch.linalg.qr(env.randn(cols, cols), mode="reduced")
        return q.t()

    def gaussian_orthogonal_random_matrix(nb_rows, nb_columns):
        nb_full_blocks = nb_rows // nb_columns
        blocks = [orthogonal_matrix_chunk(nb_columns) for _ in range(nb_full_blocks)]
        remaining = nb_rows - nb_full_blocks * nb_columns
        if remaining > 0:
            blocks.append(orthogonal_matrix_chunk(nb_columns)[:remaining])
        final = torch.cat(blocks)
        multiplier = env.randn(nb_rows, nb_columns).norm(dim=1)
        return torch.diag(multiplier) @ final

    def softmax_kernel(data, projection_matrix, is_query, eps=1e-4):
        data_normalizer = data.shape[-1] ** -0.25
        ratio = projection_matrix.shape[0] ** -0.5
        data_dash = torch.einsum("...id,jd->...ij", data_normalizer * data, projection_matrix)
        diag_data = (data ** 2).sum(-1) / 2.0 * data_normalizer ** 2
        diag_data = diag_data.unsqueeze(-1)
        if is_query:
            stab = torch.amax(data_dash, dim=-1, keepdim=True).detach()
        else:
            stab = torch.amax(data_dash, dim=(-1, -2), keepdim=True).detach()
        return ratio * (torch.exp(data_dash - diag_data - stab) + eps)

    class FastAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("projection_matrix", gaussian_orthogonal_random_matrix(nb_features, dh))
            self.calls = 0

        @torch.no_grad()
        def redraw_projection_matrix(self):
            self.projection_matrix.copy_(gaussian_orthogonal_random_matrix(nb_features, dh))

        def forward(self, q, k, v):
            q = softmax_kernel(q, self.projection_matrix, True)
            k = softmax_kernel(k, self.projection_matrix, False)
            k_cumsum = k.sum(dim=-2)
            D_inv = 1.0 / torch.einsum("...nd,...d->...n", q, k_cumsum.type_as(q))
            context = torch.einsum("...nd,...ne->...de", k, v)
            return torch.einsum("...de,...nd,...n->...ne", context, q, D_inv)

    class Performer(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d, bias=False)
            self.attn = FastAttention()
            self.out = nn.Linear(d, d)
            self.head = nn.Linear(d, 2)

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.qkv(x).view(b, n, 3, heads, dh).permute(2, 0, 3, 1, 4)
            o = self.attn(q, k, v).transpose(1, 2).reshape(b, n, d)
            return self.head(self.out(o).mean(1))

    model = env.init(Performer())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    x, y = env.randn(4, 5, d), env.randint(0, 2, (4,))
    for it in range(6):
        if model.attn.calls % redraw == 0 and it > 0:
            model.attn.redraw_projection_matrix()
        env.rec(f"it{it}", step(x, y))
        model.attn.calls += 1
    env.rec("proj", model.attn.projection_matrix)


def patchtst_revin(torch, env):
    nn, F = torch.nn, torch.nn.functional
    seq_len, pred_len, n_vars, patch_len, stride, d = 16, 4, 2, 4, 4, 8
    n_patches = (seq_len - patch_len) // stride + 1

    class RevIN(nn.Module):
        def __init__(self, num_features, eps=1e-5, affine=True):
            super().__init__()
            self.eps, self.affine = eps, affine
            self.affine_weight = nn.Parameter(torch.ones(num_features))
            self.affine_bias = nn.Parameter(torch.zeros(num_features))

        def forward(self, x, mode):
            if mode == "norm":
                self.mean = torch.mean(x, dim=1, keepdim=True).detach()
                self.stdev = torch.sqrt(torch.var(x, dim=1, keepdim=True, unbiased=False)
                                        + self.eps).detach()
                x = (x - self.mean) / self.stdev
                return x * self.affine_weight + self.affine_bias
            x = (x - self.affine_bias) / (self.affine_weight + self.eps * self.eps)
            return x * self.stdev + self.mean

    class PatchTST(nn.Module):
        def __init__(self):
            super().__init__()
            self.revin = RevIN(n_vars)
            self.W_P = nn.Linear(patch_len, d)
            self.W_pos = nn.Parameter(torch.zeros(n_patches, d))
            layer = nn.TransformerEncoderLayer(d, 2, 16, dropout=0.0, batch_first=True,
                                               norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
            self.head = nn.Sequential(nn.Flatten(start_dim=-2), nn.Linear(n_patches * d, pred_len))

        def forward(self, x):                       # x: (B, L, C)
            x = self.revin(x, "norm").permute(0, 2, 1)
            x = x.unfold(dimension=-1, size=patch_len, step=stride)       # (B, C, N, P)
            B, C = x.shape[:2]
            u = self.W_P(x).reshape(B * C, n_patches, d) + self.W_pos
            z = self.encoder(u).reshape(B, C, n_patches, d)
            y = self.head(z).permute(0, 2, 1)
            return self.revin(y, "denorm")

    model = env.init(PatchTST())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=6, pct_start=0.3)

    def train_step(x, y):
        model.train()
        out = model(x)
        loss = F.mse_loss(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        return loss

    step = env.step(train_step)
    t = torch.arange(seq_len + pred_len).float()
    series = torch.stack([torch.sin(t / 3), torch.cos(t / 5) * 2 + 3], -1)
    x = series[:seq_len].expand(3, -1, -1) + env.randn(3, seq_len, n_vars, scale=0.1)
    y = series[seq_len:].expand(3, -1, -1).contiguous()
    for it in range(5):
        env.rec(f"it{it}", step(x, y))
    env.rec("revin stats", (model.revin.mean, model.revin.stdev))
    model.eval()
    with torch.no_grad():
        env.rec("forecast", model(x[:1]))


def sasrec(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_items, maxlen, d = 12, 5, 8

    class SASRec(nn.Module):
        def __init__(self):
            super().__init__()
            self.item_emb = nn.Embedding(n_items + 1, d, padding_idx=0)
            self.pos_emb = nn.Embedding(maxlen, d)
            self.emb_dropout = nn.Dropout(p=0.0)
            self.attention_layernorm = nn.LayerNorm(d, eps=1e-8)
            self.attention_layer = nn.MultiheadAttention(d, 2, dropout=0.0)
            self.forward_layernorm = nn.LayerNorm(d, eps=1e-8)
            self.conv1 = nn.Conv1d(d, d, kernel_size=1)
            self.conv2 = nn.Conv1d(d, d, kernel_size=1)
            self.last_layernorm = nn.LayerNorm(d, eps=1e-8)

        def log2feats(self, log_seqs):
            seqs = self.item_emb(log_seqs) * self.item_emb.embedding_dim ** 0.5
            positions = torch.arange(log_seqs.shape[1]).unsqueeze(0).expand_as(log_seqs)
            seqs = self.emb_dropout(seqs + self.pos_emb(positions))
            timeline_mask = log_seqs == 0
            seqs = seqs * ~timeline_mask.unsqueeze(-1)
            tl = seqs.shape[1]
            attention_mask = ~torch.tril(torch.ones((tl, tl), dtype=torch.bool))
            seqs = torch.transpose(seqs, 0, 1)
            Q = self.attention_layernorm(seqs)
            mha_outputs, _ = self.attention_layer(Q, seqs, seqs, attn_mask=attention_mask)
            seqs = torch.transpose(Q + mha_outputs, 0, 1)
            seqs = self.forward_layernorm(seqs)
            ff = self.conv2(F.relu(self.conv1(seqs.transpose(-1, -2)))).transpose(-1, -2)
            seqs = (seqs + ff) * ~timeline_mask.unsqueeze(-1)
            return self.last_layernorm(seqs)

        def forward(self, log_seqs, pos_seqs, neg_seqs):
            log_feats = self.log2feats(log_seqs)
            pos_logits = (log_feats * self.item_emb(pos_seqs)).sum(dim=-1)
            neg_logits = (log_feats * self.item_emb(neg_seqs)).sum(dim=-1)
            return pos_logits, neg_logits

        def predict(self, log_seqs, item_indices):
            final_feat = self.log2feats(log_seqs)[:, -1, :]
            return self.item_emb(item_indices).matmul(final_feat.unsqueeze(-1)).squeeze(-1)

    model = env.init(SASRec())
    bce = nn.BCEWithLogitsLoss()
    adam = torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.9, 0.98))
    l2_emb = 1e-4

    def train_step(seq, pos, neg):
        pos_logits, neg_logits = model(seq, pos, neg)
        pos_labels, neg_labels = torch.ones(pos_logits.shape), torch.zeros(neg_logits.shape)
        adam.zero_grad()
        indices = torch.where(pos != 0)
        loss = bce(pos_logits[indices], pos_labels[indices])
        loss += bce(neg_logits[indices], neg_labels[indices])
        for param in model.item_emb.parameters():
            loss += l2_emb * torch.norm(param)
        loss.backward()
        adam.step()
        return loss.item()

    step = env.step(train_step)
    seq = env.randint(1, n_items + 1, (4, maxlen))
    seq[0, :2] = 0
    seq[1, :1] = 0
    pos = torch.cat([seq[:, 1:], env.randint(1, n_items + 1, (4, 1))], 1)
    neg = env.randint(1, n_items + 1, (4, maxlen))
    for it in range(5):
        env.rec(f"it{it}", step(seq, pos, neg))
    model.eval()
    with torch.no_grad():
        env.rec("scores", model.predict(seq, torch.arange(1, n_items + 1).expand(4, -1)))
    env.rec("padding row", model.item_emb.weight[0])
