"""Programs (s77, Q), part 2: a TransformerEncoder trained with a padding mask then run in
eval mode (the nested-tensor fast path: padded positions zero) and with is_causal; a
MultiheadAttention with a bool causal mask and is_causal without weights; a Jacobian and
Hessian regularizer (vmap(jacrev), hessian, jvp over functional_call); weight_norm
parametrizations, one removed mid-run with leave_parametrized; CosineAnnealingWarmRestarts
stepped by fractional epochs beside ReduceLROnPlateau(mode="max", abs threshold, cooldown);
deterministic nn.init variants (dirac_, eye_, calculate_gain) and checks of the random ones;
GRU/LSTM over pack_sequence with h0, left padding and unpad_sequence; Embedding(max_norm)
renormalizing in forward beside EmbeddingBag with per_sample_weights; a tanh-squashed Normal
policy with MultivariateNormal KL and LowRankMultivariateNormal; samplers with generators."""
import numpy as np


def encoder_eval_fastpath(torch, env):
    nn, F = torch.nn, torch.nn.functional
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    enc = env.init(nn.TransformerEncoder(layer, 2, enable_nested_tensor=True))
    head = env.init(nn.Linear(8, 1))
    opt = torch.optim.Adam(list(enc.parameters()) + list(head.parameters()), lr=1e-2)

    def train_step(x, pad, y):
        h = enc(x, src_key_padding_mask=pad)
        keep = (~pad).float()[..., None]
        out = head((h * keep).sum(1) / keep.sum(1)).squeeze(1)
        loss = F.mse_loss(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    x = env.randn(3, 5, 8)
    pad = env.tensor(np.array([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0], [0, 0, 1, 1, 1]], dtype=bool))
    y = env.randn(3)
    for t in range(3):
        env.rec(f"loss {t}", step(x, pad, y))
    enc.eval()
    with torch.no_grad():
        env.rec("eval", enc(x, src_key_padding_mask=pad))     # (nested fast path: pads -> 0)
        env.rec("eval causal", enc(x, mask=nn.Transformer.generate_square_subsequent_mask(5),
                                   is_causal=True))


def mha_bool_causal(torch, env):
    nn, F = torch.nn, torch.nn.functional
    mha = env.init(nn.MultiheadAttention(8, 4, dropout=0.0))
    opt = torch.optim.SGD(mha.parameters(), lr=0.1)
    L = 5
    causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)

    def train_step(x, kpm, tgt):
        out, w = mha(x, x, x, attn_mask=causal, key_padding_mask=kpm, need_weights=True)
        out2, none = mha(x, x, x, attn_mask=causal, is_causal=True, need_weights=False)
        loss = F.mse_loss(out, tgt) + F.mse_loss(out2, tgt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), w.detach(), none is None
    step = env.step(train_step)
    x = env.randn(L, 2, 8)
    kpm = env.tensor(np.array([[0, 0, 0, 0, 1], [0, 0, 0, 0, 0]], dtype=bool))
    tgt = env.randn(L, 2, 8)
    for t in range(3):
        env.rec(f"step {t}", step(x, kpm, tgt))


def jacobian_reg(torch, env):
    nn, F = torch.nn, torch.nn.functional
    fn = torch.func
    m = env.init(nn.Sequential(nn.Linear(3, 6), nn.Softplus(), nn.Linear(6, 2)))
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)

    def train_step(x, y):
        params = dict(m.named_parameters())
        f = lambda inp: fn.functional_call(m, params, (inp,))
        J = fn.vmap(fn.jacrev(f))(x)                      # (n, 2, 3)
        H = fn.hessian(lambda inp: f(inp).sum())(x[0])      # (3, 3)
        _, jv = fn.jvp(f, (x[0],), (torch.ones(3),))
        loss = F.mse_loss(m(x), y) + 0.01 * J.pow(2).sum((1, 2)).mean() + 0.001 * H.pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), J.detach()[0], jv.detach()
    step = env.step(train_step)
    x = env.randn(5, 3)
    y = torch.stack([x.sum(1), x[:, 0] * x[:, 1]], 1)
    for t in range(3):
        env.rec(f"step {t}", step(x, y))
    env.rec("p", dict(m.named_parameters()))


def weight_norm_remove(torch, env):
    nn, F = torch.nn, torch.nn.functional
    P, parametrize = nn.utils.parametrizations, nn.utils.parametrize
    m = env.init(nn.Sequential(nn.Linear(4, 6), nn.ELU(), nn.Linear(6, 3)))
    P.weight_norm(m[0])
    P.weight_norm(m[2], dim=None)
    env.rec("names", [n for n, _ in m.named_parameters()])

    def train(opt):
        def train_step(x, y):
            loss = F.cross_entropy(m(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss.detach()
        return env.step(train_step)
    x, y = env.randn(6, 4), env.randint(0, 3, (6,))
    step = train(torch.optim.SGD(m.parameters(), lr=0.2))
    for t in range(3):
        env.rec(f"a {t}", step(x, y))
    parametrize.remove_parametrizations(m[0], "weight", leave_parametrized=True)
    env.rec("names2", [n for n, _ in m.named_parameters()])
    env.rec("w0", m[0].weight)
    step = train(torch.optim.SGD(m.parameters(), lr=0.2))
    for t in range(3):
        env.rec(f"b {t}", step(x, y))
    env.rec("sd", dict(m.state_dict()))


def plateau_restarts(torch, env):
    nn, F = torch.nn, torch.nn.functional
    S = torch.optim.lr_scheduler
    m = env.init(nn.Linear(3, 1))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    cos = S.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2, eta_min=0.001)
    opt2_m = env.init(nn.Linear(3, 1))
    opt2 = torch.optim.Adam(opt2_m.parameters(), lr=0.05)
    plat = S.ReduceLROnPlateau(opt2, mode="max", factor=0.5, patience=1, threshold=0.1,
                               threshold_mode="abs", cooldown=1, min_lr=[0.01])

    def train_step(x, y):
        l1 = F.mse_loss(m(x).squeeze(1), y)
        l2 = F.l1_loss(opt2_m(x).squeeze(1), y)
        opt.zero_grad()
        opt2.zero_grad()
        (l1 + l2).backward()
        opt.step()
        opt2.step()
        return l1.detach(), l2.detach()
    step = env.step(train_step)
    x = env.randn(8, 3)
    y = x @ env.tensor(np.array([1.0, -1.0, 0.5], dtype=np.float32))
    iters = 3
    for epoch in range(4):
        for i in range(iters):
            l1, l2 = step(x, y)
            cos.step(epoch + i / iters)
            env.rec(f"{epoch} {i}", (l1, l2, opt.param_groups[0]["lr"]))
        plat.step(1.0)          # (a flat metric: the lr halves after patience, cooldown)
        env.rec(f"plat {epoch}", opt2.param_groups[0]["lr"])
    env.rec("last", (cos.get_last_lr(), plat.get_last_lr(), plat.num_bad_epochs))


def init_variants(torch, env):
    nn, init = torch.nn, torch.nn.init
    conv = nn.Conv2d(3, 3, 3, padding=1)
    init.dirac_(conv.weight)
    init.zeros_(conv.bias)
    lin = nn.Linear(4, 4)
    init.eye_(lin.weight)
    init.constant_(lin.bias, 0.25)
    env.rec("gains", [init.calculate_gain(n, p) for n, p in
                      [("leaky_relu", 0.2), ("tanh", None), ("selu", None), ("relu", None),
                       ("conv2d", None), ("sigmoid", None)]])
    env.rec("fan", init._calculate_fan_in_and_fan_out(conv.weight))

    def uniform_bounds(mod):
        if isinstance(mod, nn.Linear):
            w = torch.empty(5, 7)
            init.kaiming_uniform_(w, a=0.1, mode="fan_out", nonlinearity="leaky_relu")
            env.rec("kaiming bound ok", bool(w.abs().max() <= (6 / (1.01 * 5)) ** 0.5))
            init.orthogonal_(w, gain=2.0)
            env.rec("orth", torch.allclose(w @ w.T, 4 * torch.eye(5), atol=1e-4))
            init.trunc_normal_(w, std=0.5, a=-0.3, b=0.3)
            env.rec("trunc", bool(w.abs().max() <= 0.3))
            init.sparse_(w, sparsity=0.4)
            env.rec("sparse", (w == 0).sum(0).tolist())
    nn.Sequential(conv, lin).apply(uniform_bounds)
    x = env.randn(2, 3, 4, 4)
    opt = torch.optim.SGD(list(conv.parameters()) + list(lin.parameters()), lr=0.1)

    def train_step(x):
        loss = (lin(conv(x).mean((2, 3)).repeat(1, 2)[:, :4]) - 1).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    for t in range(3):
        env.rec(f"loss {t}", step(x))
    env.rec("w", (conv.weight, lin.weight))


def packed_h0_left(torch, env):
    nn, F = torch.nn, torch.nn.functional
    rnn = nn.utils.rnn
    gru = env.init(nn.GRU(3, 4, num_layers=2))
    lstm = env.init(nn.LSTM(3, 4, batch_first=True))
    opt = torch.optim.Adam(list(gru.parameters()) + list(lstm.parameters()), lr=1e-2)

    def train_step(seqs, lengths, h0, c0):
        packed = rnn.pack_sequence(seqs, enforce_sorted=False)
        out, hn = gru(packed, h0)
        outs = rnn.unpack_sequence(out)
        left = rnn.pad_sequence(seqs, batch_first=True, padding_side="left", padding_value=0.5)
        o2, (h2, c2) = lstm(left, (h0[:1], c0))
        un = rnn.unpad_sequence(o2, lengths, batch_first=True)
        loss = sum(o.pow(2).mean() for o in outs) + hn.abs().mean() + h2.mean() \
            + sum(u.sum() for u in un) * 0.01
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), hn.detach(), [o.shape[0] for o in outs]
    step = env.step(train_step)
    lengths = [2, 5, 3]
    seqs = [env.randn(n, 3) for n in lengths]
    h0, c0 = env.randn(2, 3, 4), env.randn(1, 3, 4)
    for t in range(3):
        env.rec(f"step {t}", step(seqs, torch.tensor(lengths), h0, c0))


def embedding_max_norm(torch, env):
    nn, F = torch.nn, torch.nn.functional
    emb = env.init(nn.Embedding(10, 4, max_norm=1.0, norm_type=2.0))
    bag = env.init(nn.EmbeddingBag(10, 4, mode="sum", padding_idx=0))
    head = env.init(nn.Linear(8, 2))
    with torch.no_grad():
        emb.weight.mul_(3.0)
    params = list(emb.parameters()) + list(bag.parameters()) + list(head.parameters())
    opt = torch.optim.SGD(params, lr=0.5)

    def train_step(ids, flat, offsets, psw, y):
        a = emb(ids).mean(1)
        b = bag(flat, offsets, per_sample_weights=psw)
        loss = F.cross_entropy(head(torch.cat([a, b], 1)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    ids = env.randint(0, 6, (3, 4))
    flat = env.randint(0, 10, (7,))
    offsets = torch.tensor([0, 2, 5])
    psw = env.rand(7)
    y = env.randint(0, 2, (3,))
    for t in range(3):
        env.rec(f"loss {t}", step(ids, flat, offsets, psw, y))
        env.rec(f"emb {t}", emb.weight)
    env.rec("bag", bag.weight)


def sac_tanh_mvn(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    pol = env.init(nn.Linear(3, 4))
    L = env.init(nn.Linear(3, 3))
    opt = torch.optim.Adam(list(pol.parameters()) + list(L.parameters()), lr=1e-2)

    def train_step(s, a):
        mu, log_std = pol(s).chunk(2, -1)
        base = D.Normal(mu, log_std.clamp(-5, 2).exp())
        dist = D.TransformedDistribution(base, [D.transforms.TanhTransform(cache_size=1)])
        lp = dist.log_prob(a).sum(-1)
        act = dist.rsample()
        tril = torch.tril(L.weight) + 2 * torch.eye(3)
        mvn = D.MultivariateNormal(L.bias, scale_tril=tril)
        ref = D.MultivariateNormal(torch.zeros(3), covariance_matrix=torch.eye(3) * 2)
        kl = D.kl_divergence(mvn, ref)
        lowrank = D.LowRankMultivariateNormal(L.bias, L.weight[:, :1], torch.ones(3))
        loss = -lp.mean() + kl + 0.1 * act.pow(2).mean() - 0.01 * lowrank.log_prob(s).mean() \
            + 0.1 * lowrank.entropy()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return lp.detach(), kl.detach(), act.detach()
    step = env.step(train_step)
    s = env.randn(6, 3)
    a = env.rand(6, 2) * 1.8 - 0.9
    for t in range(3):
        lp, kl, act = step(s, a)
        env.rec(f"{t}", (lp, kl))
        env.rec(f"act {t}", act, cross=False)


def samplers_generators(torch, env):
    nn, F = torch.nn, torch.nn.functional
    data = torch.utils.data
    ds = data.TensorDataset(env.randn(20, 3), env.randint(0, 2, (20,)))
    g = torch.Generator().manual_seed(7)
    train, val = data.random_split(ds, [0.75, 0.25], generator=g)
    env.rec("split", (len(train), len(val)))
    w = torch.where(torch.stack([train[i][1] for i in range(len(train))]) == 1, 3.0, 1.0)
    wrs = data.WeightedRandomSampler(w, num_samples=12, replacement=True,
                                     generator=torch.Generator().manual_seed(1))
    loader = data.DataLoader(train, batch_size=4, sampler=wrs, drop_last=True)
    vloader = data.DataLoader(val, batch_sampler=data.BatchSampler(
        data.SubsetRandomSampler(range(len(val)), generator=torch.Generator().manual_seed(2)),
        batch_size=2, drop_last=False))
    m = env.init(nn.Linear(3, 2))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)

    def train_step(x, y):
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    for epoch in range(2):
        for i, (x, y) in enumerate(loader):
            env.rec(f"loss {epoch} {i}", step(x, y), cross=False)
        with torch.no_grad():
            v = [F.cross_entropy(m(x), y, reduction="sum") for x, y in vloader]
        env.rec(f"val {epoch}", len(v))


PROGRAMS = {f.__name__: f for f in (
    encoder_eval_fastpath, mha_bool_causal, jacobian_reg, weight_norm_remove, plateau_restarts,
    init_variants, packed_h0_left, embedding_max_norm, sac_tanh_mvn, samplers_generators)}
