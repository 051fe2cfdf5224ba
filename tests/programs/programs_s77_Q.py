"""Programs (s77, Q) that lean on the library's breadth in combination: an encoder-decoder
nn.Transformer (norm_first, gelu, sequence-first) with causal and padding masks; a
MultiheadAttention with kdim/vdim, add_bias_kv, add_zero_attn and per-head float masks; a
bidirectional LSTM with proj_size over unsorted packed sequences; a mixture density network
(MixtureSameFamily of Independent Normals) with a KL to a prior; orthogonal maps (cayley,
householder) with spectral_norm on a conv under parametrize.cached; torch.func ensembles
(stack_module_state + vmap over functional_call) with per-sample grads; EMA with BatchNorm
buffers (use_buffers=True) and SWALR linear annealing; SequentialLR of LambdaLR and
CyclicLR with momentum cycling; a nested dict Dataset over ConcatDataset/Subset with a custom
BatchSampler."""
import numpy as np



def seq2seq_transformer(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, D, S, T, B = 11, 16, 6, 5, 3
    emb = env.init(nn.Embedding(V, D, padding_idx=0))
    tr = env.init(nn.Transformer(d_model=D, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                 dim_feedforward=24, dropout=0.0, activation="gelu",
                                 norm_first=True))
    head = env.init(nn.Linear(D, V))
    params = list(emb.parameters()) + list(tr.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=3e-3, weight_decay=0.01)
    causal = nn.Transformer.generate_square_subsequent_mask(T)

    def train_step(src, tgt_in, tgt_out, src_pad, tgt_pad):
        out = tr(emb(src).transpose(0, 1), emb(tgt_in).transpose(0, 1), tgt_mask=causal,
                 src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                 memory_key_padding_mask=src_pad, tgt_is_causal=True)
        logits = head(out).transpose(0, 1)
        loss = F.cross_entropy(logits.reshape(-1, V), tgt_out.reshape(-1), ignore_index=0)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    src = env.randint(1, V, (B, S))
    src[0, 4:] = 0
    src[2, 5:] = 0
    tgt = env.randint(1, V, (B, T + 1))
    tgt[1, 4:] = 0
    for t in range(4):
        env.rec(f"loss {t}", step(src, tgt[:, :-1], tgt[:, 1:], src == 0, tgt[:, :-1] == 0))
    if env.compiled:
        assert step.n_traces == 1, step.n_traces
    env.rec("head", dict(head.named_parameters()))


def mha_kdim_vdim(torch, env):
    nn, F = torch.nn, torch.nn.functional
    E, H, L, S, B = 8, 2, 4, 5, 3
    mha = env.init(nn.MultiheadAttention(E, H, kdim=6, vdim=7, add_bias_kv=True,
                                         add_zero_attn=True, batch_first=True))
    opt = torch.optim.SGD(mha.parameters(), lr=0.1, momentum=0.9, nesterov=True)

    def train_step(q, k, v, mask, kpm, target):
        out, w = mha(q, k, v, attn_mask=mask, key_padding_mask=kpm, need_weights=True,
                     average_attn_weights=False)
        loss = F.mse_loss(out, target) + 0.1 * w.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), w.detach()
    step = env.step(train_step)
    q, k, v = env.randn(B, L, E), env.randn(B, S, 6), env.randn(B, S, 7)
    # (a float mask per head, (B*H, L, S): attention pads it for the bias_kv and zero_attn
    # columns)
    mask = env.randn(B * H, L, S, scale=0.5)
    kpm = env.tensor(np.array([[0, 0, 0, 0, 1], [0, 0, 0, 1, 1], [0, 0, 0, 0, 0]], dtype=bool))
    target = env.randn(B, L, E)
    for t in range(3):
        env.rec(f"step {t}", step(q, k, v, mask, kpm, target))
    env.rec("params", dict(mha.named_parameters()))


def packed_bilstm_proj(torch, env):
    nn, F = torch.nn, torch.nn.functional
    rnn = torch.nn.utils.rnn
    pack_padded_sequence, pad_packed_sequence = rnn.pack_padded_sequence, rnn.pad_packed_sequence
    pad_sequence = rnn.pad_sequence
    lstm = env.init(nn.LSTM(3, 6, num_layers=2, bidirectional=True, proj_size=4,
                            batch_first=True))
    head = env.init(nn.Linear(8, 2))
    opt = torch.optim.Adam(list(lstm.parameters()) + list(head.parameters()), lr=1e-2)

    def train_step(seqs, lengths, y):
        x = pad_sequence(seqs, batch_first=True)
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, (h, c) = lstm(packed)
        padded, lens = pad_packed_sequence(out, batch_first=True, total_length=7)
        mask = (torch.arange(7)[None, :] < lens[:, None]).float()
        pooled = (padded * mask[..., None]).sum(1) / lens[:, None].float()
        loss = F.cross_entropy(head(pooled), y) + 0.01 * h.pow(2).mean() + 0.01 * c.abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), padded.shape, lens
    step = env.step(train_step)
    lengths = [3, 6, 2, 5]
    seqs = [env.randn(n, 3) for n in lengths]
    y = env.randint(0, 2, (4,))
    for t in range(3):
        env.rec(f"step {t}", step(seqs, torch.tensor(lengths), y))
    env.rec("params", dict(lstm.named_parameters()))


def mixture_density(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    K, Y = 3, 2

    class MDN(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(2, 16), nn.Tanh())
            self.pi = nn.Linear(16, K)
            self.mu = nn.Linear(16, K * Y)
            self.log_sigma = nn.Linear(16, K * Y)

        def forward(self, x):
            h = self.body(x)
            mix = D.Categorical(logits=self.pi(h))
            comp = D.Independent(D.Normal(self.mu(h).view(-1, K, Y),
                                          self.log_sigma(h).view(-1, K, Y).clamp(-3, 3).exp()), 1)
            return D.MixtureSameFamily(mix, comp), comp

    m = env.init(MDN())
    opt = torch.optim.RMSprop(m.parameters(), lr=3e-3, alpha=0.9, centered=True)
    prior = D.Independent(D.Normal(torch.zeros(K, Y), torch.ones(K, Y)), 1)

    def train_step(x, y):
        gmm, comp = m(x)
        nll = -gmm.log_prob(y).mean()
        kl = D.kl_divergence(comp, prior).mean()
        ent = gmm.mixture_distribution.entropy().mean()
        loss = nll + 0.01 * kl - 0.01 * ent
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), nll.detach(), gmm.mean.detach()
    step = env.step(train_step)
    x = env.randn(10, 2)
    y = torch.stack([x[:, 0] * 2, x[:, 1].sin()], 1) + env.randn(10, 2, scale=0.1)
    for t in range(4):
        env.rec(f"step {t}", step(x, y))
    env.rec("params", dict(m.named_parameters()))


def orthogonal_maps(torch, env):
    nn, F = torch.nn, torch.nn.functional
    P = nn.utils.parametrizations
    parametrize = torch.nn.utils.parametrize

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 3, 3, padding=1)
            self.a = nn.Linear(12, 6)
            self.b = nn.Linear(6, 6)
            self.c = nn.Linear(6, 2)

        def forward(self, x):
            h = F.relu(self.conv(x))
            h = F.adaptive_avg_pool2d(h, 2).flatten(1)
            return self.c(torch.tanh(self.b(torch.tanh(self.a(h)))))

    m = Net()
    env.init(m)
    P.orthogonal(m.a, orthogonal_map="householder")
    P.orthogonal(m.b, orthogonal_map="cayley")
    P.spectral_norm(m.conv, n_power_iterations=2)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)

    def train_step(x, y):
        with parametrize.cached():
            loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    x, y = env.randn(4, 2, 4, 4), env.randint(0, 2, (4,))
    for t in range(3):
        env.rec(f"loss {t}", step(x, y))
    w = m.b.weight
    env.rec("b orthogonal", w @ w.T, cross=True)
    env.rec("a", m.a.weight)


def func_ensemble(torch, env):
    nn, F = torch.nn, torch.nn.functional
    fn = torch.func
    functional_call, grad, stack_module_state, vmap = (
        fn.functional_call, fn.grad, fn.stack_module_state, fn.vmap)
    models = [env.init(nn.Sequential(nn.Linear(3, 5), nn.GELU(), nn.Linear(5, 1)))
              for _ in range(3)]
    params, buffers = stack_module_state(models)
    params = {k: v.detach().requires_grad_() for k, v in params.items()}
    base = models[0]
    opt = torch.optim.Adam(list(params.values()), lr=1e-2)

    def one(p, b, x):
        return functional_call(base, (p, b), (x,))

    def per_sample_loss(p, b, x, y):
        return F.mse_loss(functional_call(base, (p, b), (x[None],)).squeeze(), y)

    def train_step(x, y):
        preds = vmap(one, in_dims=(0, 0, None))(params, buffers, x)     # (3, n, 1)
        loss = F.mse_loss(preds.squeeze(-1), y.expand(3, -1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        p0 = {k: v[0].detach() for k, v in params.items()}
        g = vmap(grad(per_sample_loss), in_dims=(None, None, 0, 0))(p0, {}, x, y)
        return loss.detach(), {k: v.norm(dim=tuple(range(1, v.dim()))) for k, v in g.items()}
    step = env.step(train_step)
    x = env.randn(6, 3)
    y = x.sum(1)
    for t in range(3):
        env.rec(f"step {t}", step(x, y))
    env.rec("params", {k: v for k, v in params.items()})


def ema_bn_swalr(torch, env):
    nn, F = torch.nn, torch.nn.functional
    swa_utils = torch.optim.swa_utils
    SWALR, AveragedModel = swa_utils.SWALR, swa_utils.AveragedModel
    get_ema_multi_avg_fn, update_bn = swa_utils.get_ema_multi_avg_fn, swa_utils.update_bn
    m = env.init(nn.Sequential(nn.Linear(3, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1)))
    ema = AveragedModel(m, multi_avg_fn=get_ema_multi_avg_fn(0.9), use_buffers=True)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    swa = SWALR(opt, swa_lr=0.01, anneal_epochs=3, anneal_strategy="linear")

    def train_step(x, y):
        loss = F.mse_loss(m(x).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ema.update_parameters(m)
        return loss.detach()
    step = env.step(train_step)
    xs = [env.randn(8, 3) for _ in range(3)]
    for epoch in range(4):
        for i, x in enumerate(xs):
            env.rec(f"loss {epoch} {i}", step(x, x[:, 0] * x[:, 1]))
        swa.step()
        env.rec(f"lr {epoch}", opt.param_groups[0]["lr"])
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.cat(xs)),
                                         batch_size=8)
    update_bn(loader, ema)
    ema.eval()
    with torch.no_grad():
        env.rec("ema out", ema(xs[0]))
    env.rec("ema state", dict(ema.state_dict()))


def sequential_cyclic(torch, env):
    nn, F = torch.nn, torch.nn.functional
    S = torch.optim.lr_scheduler
    m = env.init(nn.Sequential(nn.Linear(4, 6), nn.SiLU(), nn.Linear(6, 1)))
    decay, no_decay = [], []
    for name, p in m.named_parameters():
        (no_decay if name.endswith("bias") else decay).append(p)
    opt = torch.optim.SGD([{"params": decay, "weight_decay": 1e-3},
                           {"params": no_decay, "weight_decay": 0.0}], lr=0.05, momentum=0.9)
    warm = S.LambdaLR(opt, lambda e: (e + 1) / 3)
    cyc = S.CyclicLR(opt, base_lr=0.01, max_lr=0.08, step_size_up=2, mode="triangular2",
                     cycle_momentum=True, base_momentum=0.8, max_momentum=0.95)
    sched = S.SequentialLR(opt, [warm, cyc], milestones=[3])

    def train_step(x, y):
        loss = F.smooth_l1_loss(m(x).squeeze(1), y, beta=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    x = env.randn(8, 4)
    y = x[:, 0] - 2 * x[:, 3]
    for t in range(9):
        env.rec(f"loss {t}", step(x, y))
        sched.step()
        env.rec(f"lr {t}", [(g["lr"], g["momentum"]) for g in opt.param_groups])
    if env.compiled:
        assert step.n_traces == 1, step.n_traces
    env.rec("params", dict(m.named_parameters()))


def dict_dataset_batch_sampler(torch, env):
    nn, F = torch.nn, torch.nn.functional
    data = torch.utils.data

    class Toy(data.Dataset):
        def __init__(self, x, y, tag):
            self.x, self.y, self.tag = x, y, tag

        def __len__(self):
            return len(self.x)

        def __getitem__(self, i):
            return {"inp": {"x": self.x[i], "n": i}, "y": self.y[i], "tag": self.tag}

    class EvenOddBatches(data.Sampler):
        def __init__(self, n, bs):
            self.n, self.bs = n, bs

        def __iter__(self):
            order = list(range(0, self.n, 2)) + list(range(1, self.n, 2))
            return iter(data.BatchSampler(order, self.bs, drop_last=True))

        def __len__(self):
            return self.n // self.bs

    a = Toy(env.randn(10, 3), env.randint(0, 3, (10,)), "a")
    b = Toy(env.randn(6, 3), env.randint(0, 3, (6,)), "b")
    ds = data.ConcatDataset([a, data.Subset(b, [0, 2, 3, 5])])

    def collate(items):
        batch = data.default_collate(items)
        batch["w"] = torch.tensor([1.0 if t == "a" else 2.0 for t in batch["tag"]])
        return batch
    loader = data.DataLoader(ds, batch_sampler=EvenOddBatches(len(ds), 4), collate_fn=collate)
    m = env.init(nn.Linear(3, 3))
    opt = torch.optim.Adagrad(m.parameters(), lr=0.1, lr_decay=0.01)

    def train_step(x, y, w):
        loss = (F.cross_entropy(m(x), y, reduction="none", label_smoothing=0.1) * w).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    step = env.step(train_step)
    for epoch in range(2):
        for i, batch in enumerate(loader):
            env.rec(f"idx {epoch} {i}", batch["inp"]["n"])
            env.rec(f"loss {epoch} {i}", step(batch["inp"]["x"], batch["y"], batch["w"]))
    env.rec("params", dict(m.named_parameters()))


PROGRAMS = {f.__name__: f for f in (
    seq2seq_transformer, mha_kdim_vdim, packed_bilstm_proj, mixture_density, orthogonal_maps,
    func_ensemble, ema_bn_swalr, sequential_cyclic, dict_dataset_batch_sampler)}
