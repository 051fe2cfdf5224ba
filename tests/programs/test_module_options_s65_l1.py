"""Sweep 65 (l1), nn modules' constructor options in whole training steps, run with PyTorch,
with llgrad eagerly and with llgrad compiling the step (tutorial_harness.py):

- Embedding with padding_idx, max_norm (the weight renormalised in place by the forward)
  and scale_grad_by_freq beside an EmbeddingBag (sum, padding_idx, per_sample_weights);
- a 2-layer bidirectional LSTM with proj_size and batch_first over pack_padded_sequence
  (enforce_sorted=False) from given h0/c0, pad_packed_sequence(total_length=...), a GRU
  after it, clip_grad_value_;
- MultiheadAttention with kdim/vdim, add_bias_kv, add_zero_attn and a bool key_padding_mask,
  then one with a float key_padding_mask and per-head weights;
- a norm_first TransformerEncoder of layers with a callable activation (enable_nested_tensor
  off) and a gelu, bias-free TransformerDecoderLayer with a causal tgt_mask, label smoothing,
  clip_grad_norm_;
- register_parametrization of two chained parametrizations with right_inverse, weight
  assignment through them, weight_norm, remove_parametrizations(leave_parametrized=True);
- affine_grid/grid_sample (reflection), a circular-padded Conv2d, interpolate (bicubic
  align_corners, bilinear antialias, nearest-exact, area), reflect/replicate/circular pads,
  unfold/fold;
- every loss module with its options (weights, ignore_index with label smoothing,
  pos_weight, beta, delta, full, log_input, margin, p, swap, log_target, batchmean)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def embed_maxnorm(torch, env):
    nn, F = torch.nn, torch.nn.functional
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 6, padding_idx=0, max_norm=1.5, scale_grad_by_freq=True)
            self.bag = nn.EmbeddingBag(20, 6, mode='sum', padding_idx=1)
            self.out = nn.Linear(12, 3)
        def forward(self, tok, flat, offs, psw):
            a = self.emb(tok).mean(1)
            b = self.bag(flat, offs, per_sample_weights=psw)
            return self.out(torch.cat([a, b], 1))
    m = env.init(M())
    with torch.no_grad():
        m.emb.weight.mul_(2.0)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    def step(tok, flat, offs, psw, y):
        loss = F.cross_entropy(m(tok, flat, offs, psw), y)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    s = env.step(step)
    for it in range(4):
        tok = env.randint(0, 20, (5, 4)); flat = env.randint(0, 20, (12,))
        offs = torch.tensor([0, 3, 3, 7, 10]); psw = env.rand(12)
        env.rec(f"step {it}", s(tok, flat, offs, psw, env.randint(0, 3, (5,))))
        env.rec(f"w {it}", m.emb.weight.detach().clone())
    env.rec("params", dict(m.state_dict()))


def lstm_packed(torch, env):
    nn, F = torch.nn, torch.nn.functional
    rnn_utils = nn.utils.rnn
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(3, 5, num_layers=2, bidirectional=True, batch_first=True,
                                proj_size=2)
            self.gru = nn.GRU(4, 4, batch_first=False)
            self.head = nn.Linear(4 + 4, 2)
        def forward(self, x, lens, h0, c0):
            p = rnn_utils.pack_padded_sequence(x, lens, batch_first=True, enforce_sorted=False)
            out, (h, c) = self.lstm(p, (h0, c0))
            o, ol = rnn_utils.pad_packed_sequence(out, batch_first=True, total_length=7)
            g, hg = self.gru(o.transpose(0, 1))
            return self.head(torch.cat([h[-2:].transpose(0, 1).reshape(-1, 4), hg[0]], 1)), ol
    m = env.init(M())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    def step(x, lens, h0, c0, y):
        logits, ol = m(x, lens, h0, c0)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad(); loss.backward()
        nn.utils.clip_grad_value_(m.parameters(), 0.05)
        opt.step()
        return loss.detach(), ol
    s = env.step(step)
    for it in range(3):
        lens = torch.tensor([5, 2, 7, 3])
        env.rec(f"step {it}", s(env.randn(4, 7, 3), lens, env.randn(4, 4, 2), env.randn(4, 4, 5),
                                env.randint(0, 2, (4,))))
    env.rec("params", dict(m.state_dict()))


def mha_options(torch, env):
    nn, F = torch.nn, torch.nn.functional
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.MultiheadAttention(8, 2, kdim=4, vdim=6, add_bias_kv=True,
                                           add_zero_attn=True, batch_first=True)
            self.b = nn.MultiheadAttention(8, 4, dropout=0.0)
        def forward(self, q, k, v, kpm_bool, kpm_float):
            o, w = self.a(q, k, v, key_padding_mask=kpm_bool)
            t = o.transpose(0, 1)
            o2, w2 = self.b(t, t, t, key_padding_mask=kpm_float, average_attn_weights=False)
            return o2, w, w2
    m = env.init(M())
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    def step(q, k, v, kb, kf):
        o, w, w2 = m(q, k, v, kb, kf)
        loss = (o ** 2).mean() + w.pow(2).sum() * 0.1
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach(), w2.detach()
    s = env.step(step)
    kb = torch.tensor([[False, False, True, False, True], [False, True, False, False, False]])
    kf = torch.tensor([[0., -1e4, 0.], [0., 0., -2.]])
    for it in range(3):
        env.rec(f"step {it}", s(env.randn(2, 3, 8), env.randn(2, 5, 4), env.randn(2, 5, 6), kb, kf))
    env.rec("params", dict(m.state_dict()))


def transformer_flags(torch, env):
    nn, F = torch.nn, torch.nn.functional
    def act(x):
        return F.leaky_relu(x, 0.1)
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=act,
                                               norm_first=True, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 2,
                                             norm=nn.LayerNorm(8), enable_nested_tensor=False)
            self.dec = nn.TransformerDecoderLayer(8, 2, 12, dropout=0.0, activation='gelu',
                                                  batch_first=True, bias=False)
            self.out = nn.Linear(8, 5)
        def forward(self, src, tgt, kpm):
            mem = self.enc(src, src_key_padding_mask=kpm)
            mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
            return self.out(self.dec(tgt, mem, tgt_mask=mask, tgt_is_causal=True,
                                     memory_key_padding_mask=kpm))
    m = env.init(M())
    opt = torch.optim.SGD(m.parameters(), lr=0.1, weight_decay=1e-2)
    def step(src, tgt, kpm, y):
        loss = F.cross_entropy(m(src, tgt, kpm).reshape(-1, 5), y.reshape(-1), label_smoothing=0.1)
        opt.zero_grad(); loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        return loss.detach()
    s = env.step(step)
    kpm = torch.tensor([[False] * 5, [False, False, False, True, True]])
    for it in range(3):
        env.rec(f"step {it}", s(env.randn(2, 5, 8), env.randn(2, 4, 8), kpm,
                                env.randint(0, 5, (2, 4))))
    env.rec("params", dict(m.state_dict()))


def parametrized(torch, env):
    nn, F = torch.nn, torch.nn.functional
    P = nn.utils.parametrize
    class Sym(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)
        def right_inverse(self, A):
            return A.triu()
    class Scale(nn.Module):
        def forward(self, X):
            return X * 2
        def right_inverse(self, A):
            return A / 2
    m = env.init(nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2)))
    P.register_parametrization(m[0], "weight", Sym())
    P.register_parametrization(m[0], "weight", Scale())
    nn.utils.parametrizations.weight_norm(m[2])
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    def step(x, y):
        loss = F.mse_loss(m(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    s = env.step(step)
    for it in range(3):
        env.rec(f"step {it}", s(env.randn(8, 4), env.randn(8, 2)))
    env.rec("w", m[0].weight.detach().clone())
    env.rec("orig", m[0].parametrizations.weight.original.detach().clone())
    with torch.no_grad():
        m[0].weight = torch.eye(4)
    env.rec("assigned", m[0].parametrizations.weight.original.detach().clone())
    P.remove_parametrizations(m[0], "weight", leave_parametrized=True)
    env.rec("removed", (m[0].weight.detach().clone(), sorted(n for n, _ in m.named_parameters())))
    env.rec("params", dict(m.state_dict()))


def spatial_ops(torch, env):
    nn, F = torch.nn, torch.nn.functional
    conv = env.init(nn.Conv2d(2, 3, 3, padding=1, padding_mode='circular'))
    theta0 = env.init(nn.Linear(1, 6))
    opt = torch.optim.Adam(list(conv.parameters()) + list(theta0.parameters()), lr=1e-2)
    def step(x):
        th = theta0(torch.ones(x.shape[0], 1)).view(-1, 2, 3) * 0.1 + \
            torch.tensor([[1., 0, 0], [0, 1, 0]])
        grid = F.affine_grid(th, list(x.shape), align_corners=False)
        y = F.grid_sample(x, grid, mode='bilinear', padding_mode='reflection', align_corners=False)
        y = conv(y)
        y1 = F.interpolate(y, scale_factor=1.5, mode='bicubic', align_corners=True)
        y2 = F.interpolate(y, size=(4, 5), mode='bilinear', antialias=True)
        y3 = F.interpolate(y, scale_factor=2, mode='nearest-exact')
        y4 = F.interpolate(y, size=(7, 3), mode='area')
        p = sum(F.pad(y, (1, 2, 2, 1), mode=mode) for mode in ('reflect', 'replicate', 'circular'))
        u = F.unfold(p, kernel_size=3, dilation=1, padding=1, stride=2)
        f = F.fold(u, output_size=p.shape[-2:], kernel_size=3, padding=1, stride=2)
        loss = y1.pow(2).mean() + y2.abs().mean() + y3.mean() + y4.std() + f.pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    s = env.step(step)
    for it in range(3):
        env.rec(f"step {it}", s(env.randn(2, 2, 6, 7)))
    env.rec("params", dict(conv.state_dict()))


def losses_options(torch, env):
    nn, F = torch.nn, torch.nn.functional
    m = env.init(nn.Linear(6, 5))
    w = torch.tensor([0.5, 1.0, 2.0, 1.5, 0.7])
    crits = [nn.CrossEntropyLoss(weight=w, ignore_index=2, label_smoothing=0.15),
             nn.BCEWithLogitsLoss(pos_weight=torch.tensor([1., 2., 3., .5, 1.]), weight=w),
             nn.HuberLoss(delta=0.4), nn.SmoothL1Loss(beta=0.3, reduction='sum'),
             nn.GaussianNLLLoss(full=True, eps=1e-3), nn.PoissonNLLLoss(log_input=False, full=True),
             nn.MultiMarginLoss(p=2, margin=0.5, weight=w), nn.MultiLabelSoftMarginLoss(weight=w),
             nn.KLDivLoss(reduction='batchmean', log_target=True),
             nn.NLLLoss(weight=w, ignore_index=0, reduction='sum'),
             nn.MarginRankingLoss(margin=0.2),
             nn.CosineEmbeddingLoss(margin=0.1), nn.TripletMarginLoss(margin=0.5, p=1, swap=True),
             nn.SoftMarginLoss(), nn.HingeEmbeddingLoss(margin=0.5), nn.MultiLabelMarginLoss()]
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    def step(x, y, yb, t, var, sign, mlm):
        z = m(x)
        ls = [crits[0](z, y), crits[1](z, yb), crits[2](z, t), crits[3](z, t), crits[4](z, t, var),
              crits[5](z.exp(), t.abs()), crits[6](z, y), crits[7](z, yb),
              crits[8](F.log_softmax(z, 1), F.log_softmax(t, 1)), crits[9](F.log_softmax(z, 1), y),
              crits[10](z[:, 0], z[:, 1], sign), crits[11](z, t, sign), crits[12](z, t, t.flip(0)),
              crits[13](z, t.sign()), crits[14](z, t.sign()),
              crits[15](z, mlm)]
        loss = sum(ls)
        opt.zero_grad(); loss.backward(); opt.step()
        return torch.stack([l.detach() for l in ls])
    s = env.step(step)
    mlm = torch.tensor([[0, 3, -1, 0, 0], [1, -1, 0, 0, 0], [2, 1, 0, 3, -1], [4, -1, 1, 1, 1]] * 2)
    for it in range(3):
        y = env.randint(0, 5, (8,))
        env.rec(f"step {it}", s(env.randn(8, 6), y, (env.rand(8, 5) > 0.5).float(), env.randn(8, 5),
                                env.rand(8, 1) + 0.1,
                                torch.tensor([1., -1, 1, 1, -1, -1, 1, -1]), mlm))
    env.rec("params", dict(m.state_dict()))


PROGRAMS = {p.__name__: p for p in (embed_maxnorm, lstm_packed, mha_options, transformer_flags,
                                    parametrized, spatial_ops, losses_options)}

# (the default run keeps the quickest; the others are marked slow)
FAST = ('parametrized',)


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
