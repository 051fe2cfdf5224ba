"""Six more training steps for bench/untuned_models.py, written as tutorials write them and
run before llgrad was tuned on any of them (2026-12-03): a small ViT (patch convolution,
class token, nn.TransformerEncoder with norm_first and GELU; AdamW), a GPT (weight tying,
scaled_dot_product_attention(is_causal=True), tanh GELU, dropout, clip_grad_norm_; AdamW),
a U-Net (Conv-BN-ReLU(inplace), max-pool, ConvTranspose2d, skip concatenations,
BCEWithLogits), a GRU seq2seq with dot-product attention (bmm, softmax) and teacher forcing
in a Python loop of GRUCell steps, a tabular net (embeddings of categorical columns,
BatchNorm1d, dropout; SGD with Nesterov momentum) and a dense two-layer GCN on a normalised
adjacency with a boolean train mask. build(lib, name) -> (model, step) as there."""


def build(lib, name):
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(0)
    if name == "vit":
        class ViT(nn.Module):
            def __init__(s, d=64):
                super().__init__()
                s.patch = nn.Conv2d(3, d, 4, 4)
                s.cls = nn.Parameter(lib.zeros(1, 1, d)); s.pos = nn.Parameter(0.02 * lib.randn(1, 65, d))
                layer = nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=0.1, activation="gelu",
                                                   batch_first=True, norm_first=True)
                s.enc = nn.TransformerEncoder(layer, 2); s.norm = nn.LayerNorm(d); s.head = nn.Linear(d, 10)
            def forward(s, x):
                t = s.patch(x).flatten(2).transpose(1, 2)
                t = lib.cat([s.cls.expand(x.shape[0], -1, -1), t], dim=1) + s.pos
                return s.head(s.norm(s.enc(t))[:, 0])
        m = ViT(); opt = lib.optim.AdamW(m.parameters(), 1e-3)
        x, y = lib.randn(16, 3, 32, 32), lib.randint(0, 10, (16,))
        loss = lambda: F.cross_entropy(m(x), y)
    elif name == "gpt":
        V, T, D = 65, 64, 64
        class Blk(nn.Module):
            def __init__(s):
                super().__init__()
                s.ln1, s.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
                s.qkv, s.o = nn.Linear(D, 3 * D), nn.Linear(D, D)
                s.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(approximate="tanh"), nn.Linear(4 * D, D), nn.Dropout(0.1))
            def forward(s, x):
                B, T_, C = x.shape
                q, k, v = s.qkv(s.ln1(x)).split(C, dim=2)
                q, k, v = (t.view(B, T_, 4, C // 4).transpose(1, 2) for t in (q, k, v))
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                x = x + s.o(a.transpose(1, 2).contiguous().view(B, T_, C))
                return x + s.mlp(s.ln2(x))
        class GPT(nn.Module):
            def __init__(s):
                super().__init__()
                s.tok, s.pos = nn.Embedding(V, D), nn.Embedding(T, D)
                s.blocks = nn.Sequential(Blk(), Blk()); s.ln = nn.LayerNorm(D)
                s.head = nn.Linear(D, V, bias=False); s.head.weight = s.tok.weight
            def forward(s, idx):
                pos = lib.arange(idx.shape[1])
                return s.head(s.ln(s.blocks(s.tok(idx) + s.pos(pos))))
        m = GPT(); opt = lib.optim.AdamW(m.parameters(), 3e-4, weight_decay=0.1)
        x = lib.randint(0, V, (8, T)); y = lib.randint(0, V, (8, T))
        def loss():
            return F.cross_entropy(m(x).view(-1, V), y.view(-1))
    elif name == "unet":
        def cbr(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True))
        class UNet(nn.Module):
            def __init__(s):
                super().__init__()
                s.d1, s.d2, s.mid = cbr(3, 16), cbr(16, 32), cbr(32, 64)
                s.u2 = nn.ConvTranspose2d(64, 32, 2, 2); s.c2 = cbr(64, 32)
                s.u1 = nn.ConvTranspose2d(32, 16, 2, 2); s.c1 = cbr(32, 16)
                s.out = nn.Conv2d(16, 1, 1)
            def forward(s, x):
                a = s.d1(x); b = s.d2(F.max_pool2d(a, 2)); c = s.mid(F.max_pool2d(b, 2))
                b = s.c2(lib.cat([s.u2(c), b], 1)); a = s.c1(lib.cat([s.u1(b), a], 1))
                return s.out(a)
        m = UNet(); opt = lib.optim.Adam(m.parameters(), 1e-3)
        x = lib.randn(8, 3, 32, 32); y = (lib.rand(8, 1, 32, 32) > 0.5).float()
        loss = lambda: F.binary_cross_entropy_with_logits(m(x), y)
    elif name == "seq2seq":
        V, H = 40, 64
        class S2S(nn.Module):
            def __init__(s):
                super().__init__()
                s.emb = nn.Embedding(V, 32); s.enc = nn.GRU(32, H, batch_first=True)
                s.dec = nn.GRUCell(32 + H, H); s.out = nn.Linear(2 * H, V)
            def forward(s, src, tgt):
                enc, h = s.enc(s.emb(src)); h = h[0]
                logits = []
                ctx = lib.zeros_like(h)
                for t in range(tgt.shape[1]):
                    h = s.dec(lib.cat([s.emb(tgt[:, t]), ctx], 1), h)
                    w = F.softmax(lib.bmm(enc, h.unsqueeze(2)).squeeze(2), dim=1)
                    ctx = lib.bmm(w.unsqueeze(1), enc).squeeze(1)
                    logits.append(s.out(lib.cat([h, ctx], 1)))
                return lib.stack(logits, 1)
        m = S2S(); opt = lib.optim.Adam(m.parameters(), 1e-3)
        src = lib.randint(0, V, (16, 12)); tgt = lib.randint(0, V, (16, 10))
        loss = lambda: F.cross_entropy(m(src, tgt[:, :-1]).reshape(-1, V), tgt[:, 1:].reshape(-1))
    elif name == "tabular":
        class Tab(nn.Module):
            def __init__(s):
                super().__init__()
                s.embs = nn.ModuleList([nn.Embedding(n, d) for n, d in ((10, 4), (50, 8), (7, 3))])
                s.bn = nn.BatchNorm1d(6)
                s.mlp = nn.Sequential(nn.Linear(21, 128), nn.ReLU(), nn.Dropout(0.2), nn.BatchNorm1d(128),
                                      nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 1))
            def forward(s, cat, num):
                e = [emb(cat[:, i]) for i, emb in enumerate(s.embs)]
                return s.mlp(lib.cat(e + [s.bn(num)], 1)).squeeze(1)
        m = Tab(); opt = lib.optim.SGD(m.parameters(), 0.01, momentum=0.9, nesterov=True)
        cat = lib.stack([lib.randint(0, 10, (256,)), lib.randint(0, 50, (256,)), lib.randint(0, 7, (256,))], 1)
        num = lib.randn(256, 6); y = lib.randn(256)
        loss = lambda: F.mse_loss(m(cat, num), y)
    elif name == "gcn":
        N, Fi = 300, 32
        A = (lib.rand(N, N) < 0.03).float(); A = ((A + A.t()) > 0).float() + lib.eye(N)
        dinv = A.sum(1).pow(-0.5); An = dinv[:, None] * A * dinv[None, :]
        X = lib.randn(N, Fi); y = lib.randint(0, 5, (N,)); train = lib.rand(N) < 0.3
        class GCN(nn.Module):
            def __init__(s):
                super().__init__()
                s.l1, s.l2 = nn.Linear(Fi, 64), nn.Linear(64, 5); s.drop = nn.Dropout(0.5)
            def forward(s, a, x):
                return s.l2(a @ s.drop(F.relu(s.l1(a @ x))))
        m = GCN(); opt = lib.optim.Adam(m.parameters(), 0.01, weight_decay=5e-4)
        loss = lambda: F.cross_entropy(m(An, X)[train], y[train])
    else:
        raise KeyError(name)
    m.train()

    def step():
        opt.zero_grad()
        l = loss()
        l.backward()
        if name == "gpt":
            nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        return l
    return m, step
