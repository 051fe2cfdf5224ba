"""The training programs of bench/first_steps_programs.py, at tutorial sizes, written once
against torch's API (llgrad has the same names): PROGRAMS[name](lib) -> (step, batches),
step(*batch) one training step returning the detached loss, batches(i) the i-th call's
arguments (fresh tensors per call, as a data loader gives)."""
import math

import numpy as np


def _rng(i):
    return np.random.default_rng(1000 + i)


def _f32(lib, a):
    return lib.from_numpy(np.ascontiguousarray(a, dtype=np.float32)) \
        if hasattr(lib, "from_numpy") else lib.tensor(a, dtype=lib.float32)


def _i64(lib, a):
    return lib.from_numpy(np.ascontiguousarray(a, dtype=np.int64)) \
        if hasattr(lib, "from_numpy") else lib.tensor(a, dtype=lib.int64)


def _classify(lib, model, opt, shape, classes, batch):
    F = lib.nn.functional

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    def batches(i):
        r = _rng(i)
        return (_f32(lib, r.standard_normal((batch, *shape))),
                _i64(lib, r.integers(0, classes, batch)))
    return step, batches


def mlp(lib):
    nn = lib.nn
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                          nn.ReLU(), nn.Linear(128, 10))
    return _classify(lib, model, lib.optim.Adam(model.parameters(), lr=1e-3),
                     (1, 28, 28), 10, 64)


def cnn_bn(lib):
    nn = lib.nn
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    return _classify(lib, model, lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                     (1, 28, 28), 10, 64)


class _Basic:
    @staticmethod
    def make(lib, c_in, c_out, stride):
        nn = lib.nn

        class Basic(nn.Module):
            def __init__(self):
                super().__init__()
                self.c1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
                self.b1 = nn.BatchNorm2d(c_out)
                self.c2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
                self.b2 = nn.BatchNorm2d(c_out)
                self.short = nn.Sequential() if stride == 1 and c_in == c_out else \
                    nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False),
                                  nn.BatchNorm2d(c_out))

            def forward(self, x):
                F = lib.nn.functional
                h = F.relu(self.b1(self.c1(x)))
                return F.relu(self.b2(self.c2(h)) + self.short(x))
        return Basic()


def resnet(lib):
    nn = lib.nn
    model = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                          _Basic.make(lib, 16, 16, 1), _Basic.make(lib, 16, 32, 2),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    return _classify(lib, model, lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9,
                                               weight_decay=5e-4), (3, 32, 32), 10, 32)


def lstm(lib):
    nn = lib.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(1000, 64)
            self.rnn = nn.LSTM(64, 128, batch_first=True)
            self.out = nn.Linear(128, 4)

        def forward(self, x):
            _, (h, _) = self.rnn(self.emb(x))
            return self.out(h[-1])
    model = Net()
    step, _ = _classify(lib, model, lib.optim.Adam(model.parameters(), lr=1e-3), (), 4, 32)

    def batches(i):
        r = _rng(i)
        return _i64(lib, r.integers(0, 1000, (32, 32))), _i64(lib, r.integers(0, 4, 32))
    return step, batches


def _block(lib, d, heads, causal):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2) for t in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            x = x + self.proj(a.transpose(1, 2).reshape(B, T, C))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
    return Block()


def vit(lib):
    nn = lib.nn

    class ViT(nn.Module):
        def __init__(self, d=64):
            super().__init__()
            self.patch = nn.Conv2d(3, d, 4, 4)
            self.cls = nn.Parameter(lib.zeros(1, 1, d))
            self.pos = nn.Parameter(lib.randn(1, 65, d) * 0.02)
            self.blocks = nn.Sequential(*[_block(lib, d, 4, False) for _ in range(2)])
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, 10)

        def forward(self, x):
            p = self.patch(x).flatten(2).transpose(1, 2)
            x = lib.cat([self.cls.expand(p.shape[0], -1, -1), p], 1) + self.pos
            return self.head(self.ln(self.blocks(x))[:, 0])
    model = ViT()
    return _classify(lib, model, lib.optim.AdamW(model.parameters(), lr=1e-3),
                     (3, 32, 32), 10, 32)


def gpt2(lib):
    nn, F = lib.nn, lib.nn.functional

    class GPT(nn.Module):
        def __init__(self, vocab=65, d=64, ctx=32):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.Sequential(*[_block(lib, d, 4, True) for _ in range(2)])
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(lib.arange(idx.shape[1]))
            return self.head(self.ln(self.blocks(x)))
    model = GPT()
    opt = lib.optim.AdamW(model.parameters(), lr=3e-4)

    def step(x, y):
        opt.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss.detach()

    def batches(i):
        r = _rng(i)
        t = r.integers(0, 65, (16, 33))
        return _i64(lib, t[:, :-1]), _i64(lib, t[:, 1:])
    return step, batches


def gan(lib):
    nn, F = lib.nn, lib.nn.functional
    G = nn.Sequential(nn.Linear(32, 128), nn.LeakyReLU(0.2), nn.Linear(128, 784), nn.Tanh())
    D = nn.Sequential(nn.Linear(784, 128), nn.LeakyReLU(0.2), nn.Linear(128, 1))
    og = lib.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    od = lib.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))

    def step(real, z):
        ones, zeros = lib.ones(real.shape[0], 1), lib.zeros(real.shape[0], 1)
        od.zero_grad()
        fake = G(z)
        d_loss = F.binary_cross_entropy_with_logits(D(real), ones) + \
            F.binary_cross_entropy_with_logits(D(fake.detach()), zeros)
        d_loss.backward()
        od.step()
        og.zero_grad()
        g_loss = F.binary_cross_entropy_with_logits(D(fake), ones)
        g_loss.backward()
        og.step()
        return (d_loss + g_loss).detach()

    def batches(i):
        r = _rng(i)
        return _f32(lib, np.tanh(r.standard_normal((64, 784)))), \
            _f32(lib, r.standard_normal((64, 32)))
    return step, batches


def vae(lib):
    nn, F = lib.nn, lib.nn.functional

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(784, 256)
            self.mu, self.logvar = nn.Linear(256, 16), nn.Linear(256, 16)
            self.dec1, self.dec2 = nn.Linear(16, 256), nn.Linear(256, 784)

        def forward(self, x, eps):
            h = F.relu(self.enc(x))
            mu, logvar = self.mu(h), self.logvar(h)
            z = mu + eps * lib.exp(0.5 * logvar)
            return self.dec2(F.relu(self.dec1(z))), mu, logvar
    model = VAE()
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)

    def step(x, eps):
        opt.zero_grad()
        logits, mu, logvar = model(x, eps)
        rec = F.binary_cross_entropy_with_logits(logits, x, reduction="sum")
        kld = -0.5 * lib.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss = (rec + kld) / x.shape[0]
        loss.backward()
        opt.step()
        return loss.detach()

    def batches(i):
        r = _rng(i)
        return _f32(lib, r.random((64, 784))), _f32(lib, r.standard_normal((64, 16)))
    return step, batches


def seq2seq(lib):
    nn, F = lib.nn, lib.nn.functional

    class S2S(nn.Module):
        def __init__(self, vocab=100, d=32, h=64):
            super().__init__()
            self.emb_in, self.emb_out = nn.Embedding(vocab, d), nn.Embedding(vocab, d)
            self.enc = nn.GRU(d, h, batch_first=True)
            self.dec = nn.GRU(d, h, batch_first=True)
            self.out = nn.Linear(h, vocab)

        def forward(self, src, tgt_in):
            _, h = self.enc(self.emb_in(src))
            y, _ = self.dec(self.emb_out(tgt_in), h)
            return self.out(y)
    model = S2S()
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)

    def step(src, tgt):
        opt.zero_grad()
        logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 100), tgt[:, 1:].reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.detach()

    def batches(i):
        r = _rng(i)
        return _i64(lib, r.integers(0, 100, (32, 10))), _i64(lib, r.integers(0, 100, (32, 11)))
    return step, batches


def logreg_sched(lib):
    """A softmax regression with a cosine learning-rate schedule stepped inside the step."""
    nn, F = lib.nn, lib.nn.functional
    model = nn.Linear(784, 10)
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, 100)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss.detach()

    def batches(i):
        r = _rng(i)
        return _f32(lib, r.standard_normal((128, 784)) / math.sqrt(784)), \
            _i64(lib, r.integers(0, 10, 128))
    return step, batches


PROGRAMS = {"mlp": mlp, "cnn_bn": cnn_bn, "resnet": resnet, "lstm": lstm, "vit": vit,
            "gpt2": gpt2, "gan": gan, "vae": vae, "seq2seq": seq2seq,
            "logreg_sched": logreg_sched}
