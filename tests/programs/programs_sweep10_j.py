"""Tutorial programs on model plumbing, written as blog posts write them (seeded with
torch.manual_seed, modules built by their constructors; see tutorial_harness.py): a full
nn.Transformer with greedy decoding, DP-SGD with per-sample gradients from torch.func
(vmap of grad over functional_call), custom parametrizations with right_inverse and
parametrize.cached(), state_dict surgery (a 'module.' prefix, strict=False, a model soup),
an initialisation zoo applied with model.apply, a VAE with a low-rank multivariate normal
posterior and a mixture prior."""
import collections
import warnings


def transformer_full_greedy(torch, env):
    """nn.Transformer(d_model=16, nhead=2, 1 encoder and 1 decoder layer, batch_first) on
    a reversal task with src_key_padding_mask / memory_key_padding_mask (bool) and the
    causal tgt_mask from generate_square_subsequent_mask; Adam with a Noam-style LambdaLR;
    greedy decoding with the encoder run once (model.encoder / model.decoder)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    V, D, PAD, BOS = 8, 16, 0, 1
    src = torch.randint(2, V, (4, 5))
    src[1, 3:] = PAD
    src[3, 4:] = PAD
    tgt = torch.cat([torch.full((4, 1), BOS), src.flip(1)], 1)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.pos = nn.Parameter(torch.randn(1, 8, D) * 0.02)
            self.tf = nn.Transformer(D, 2, 1, 1, 32, dropout=0.0, batch_first=True)
            self.out = nn.Linear(D, V)

        def embed(self, x):
            return self.emb(x) + self.pos[:, :x.shape[1]]

        def forward(self, src, tgt_in):
            pad = src == PAD
            mask = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1],
                                                                  dtype=torch.float32)
            h = self.tf(self.embed(src), self.embed(tgt_in), tgt_mask=mask,
                        src_key_padding_mask=pad, memory_key_padding_mask=pad)
            return self.out(h)

    model = Model()
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: D ** -0.5 * min((s + 1) ** -0.5, (s + 1) * 4 ** -1.5))

    def train_step(src, tgt):
        model.train()
        logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), tgt[:, 1:].reshape(-1),
                               ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        hist.append(step(src, tgt))
        sched.step()
    env.rec("hist", hist)
    model.eval()
    with torch.no_grad(), warnings.catch_warnings():
        # (eval's fast path packs the padded batch as a nested tensor, which warns)
        warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")
        pad = src == PAD
        memory = model.tf.encoder(model.embed(src), src_key_padding_mask=pad)
        ys = torch.full((4, 1), BOS)
        for _ in range(5):
            mask = nn.Transformer.generate_square_subsequent_mask(ys.shape[1])
            h = model.tf.decoder(model.embed(ys), memory, tgt_mask=mask,
                                 memory_key_padding_mask=pad)
            ys = torch.cat([ys, model.out(h[:, -1]).argmax(-1, keepdim=True)], 1)
    env.rec("decoded", ys)
    env.rec("memory", memory)


def dp_sgd_vmap(torch, env):
    """DP-SGD (Abadi et al.) with torch.func: per-sample gradients by
    vmap(grad(loss_of_params), in_dims=(None, 0, 0)) over functional_call, each sample's
    gradient clipped to norm C (the norm over all parameters), summed, Gaussian noise
    (torch.randn_like * sigma * C) added, averaged, written to p.grad and applied by SGD."""
    nn, F = torch.nn, torch.nn.functional
    from_func = torch.func
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    x = torch.randn(10, 4)
    y = (x[:, 0] * x[:, 1] > 0).long()
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    C, sigma = 1.0, 0.5

    def loss_of(params, xi, yi):
        out = from_func.functional_call(model, params, (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    per_sample = from_func.vmap(from_func.grad(loss_of), in_dims=(None, 0, 0))

    def train_step(x, y):
        params = {k: v.detach() for k, v in model.named_parameters()}
        grads = per_sample(params, x, y)
        norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()], 1).norm(dim=1)
        factor = (C / (norms + 1e-6)).clamp(max=1.0)
        for name, p in model.named_parameters():
            g = grads[name]
            clipped = (g * factor.view(-1, *([1] * (g.dim() - 1)))).sum(0)
            noisy = clipped + torch.randn_like(clipped) * sigma * C
            p.grad = noisy / x.shape[0]
        opt.step()
        with torch.no_grad():
            return F.cross_entropy(model(x), y).item(), norms

    step = env.step(train_step)
    hist = [step(x, y) for _ in range(4)]
    env.rec("hist", [h[0] for h in hist])
    env.rec("norms", hist[0][1])
    env.rec("params", list(model.parameters()))


def parametrize_custom(torch, env):
    """torch.nn.utils.parametrize with user parametrizations: a symmetric weight
    (triu + triu(1).T) and a positive bias (softplus with a right_inverse so assigning
    module.bias = value stores its inverse), registered on a Linear; original weights
    under parametrizations.<name>.original; the forward under parametrize.cached();
    remove_parametrizations(leave_parametrized=True) at the end."""
    nn, F = torch.nn, torch.nn.functional
    P = nn.utils.parametrize
    torch.manual_seed(0)

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

    class Positive(nn.Module):
        def forward(self, X):
            return F.softplus(X)

        def right_inverse(self, Y):
            return torch.log(torch.expm1(Y))

    layer = nn.Linear(4, 4)
    P.register_parametrization(layer, "weight", Symmetric())
    P.register_parametrization(layer, "bias", Positive())
    layer.bias = torch.full((4,), 0.5)
    env.rec("bias original", layer.parametrizations.bias.original)
    env.rec("names", sorted(n for n, _ in layer.named_parameters()))
    head = nn.Linear(4, 1)
    opt = torch.optim.Adam(list(layer.parameters()) + list(head.parameters()), lr=0.02)
    x = torch.randn(16, 4)
    y = x.pow(2).sum(1, keepdim=True)

    def train_step(x, y):
        opt.zero_grad()
        with P.cached():
            h = torch.relu(layer(x)) + layer(x).sigmoid()
        loss = F.mse_loss(head(h), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(5)])
    w = layer.weight
    env.rec("symmetric", torch.equal(w, w.T))
    env.rec("positive", bool((layer.bias > 0).all()))
    P.remove_parametrizations(layer, "weight", leave_parametrized=True)
    P.remove_parametrizations(layer, "bias", leave_parametrized=True)
    env.rec("state keys", sorted(layer.state_dict()))
    env.rec("final", [layer.weight, layer.bias, head.weight, head.bias])


def state_dict_surgery_soup(torch, env):
    """Checkpoint plumbing: a state_dict saved from a DataParallel-style wrapper (keys with a
    'module.' prefix) is loaded after stripping the prefix with an OrderedDict; a
    non-persistent buffer stays out of state_dict; load_state_dict(strict=False) on a model
    with a new head reports missing / unexpected keys; three fine-tuned copies are
    averaged into a 'model soup' (torch.stack(...).mean(0) per key) via torch.save /
    torch.load round trips."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self, n_out=2):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(3, 6), nn.ReLU())
            self.head = nn.Linear(6, n_out)
            self.register_buffer("cache", torch.zeros(6), persistent=False)
            self.register_buffer("seen", torch.zeros((), dtype=torch.long))

        def forward(self, x):
            h = self.body(x)
            self.cache = h.detach().mean(0)
            return self.head(h)

    class Wrapper(nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

        def forward(self, x):
            return self.module(x)

    wrapped = Wrapper(Net())
    env.rec("wrapped keys", list(wrapped.state_dict()))
    torch.save(wrapped.state_dict(), env.path("wrapped.pt"))
    state = torch.load(env.path("wrapped.pt"))
    clean = collections.OrderedDict((k[len("module."):], v) for k, v in state.items())
    base = Net()
    env.rec("load", str(base.load_state_dict(clean)))
    x = torch.randn(12, 3)
    y = (x.sum(1) > 0).long()
    soups = []
    for i, lr in enumerate([0.05, 0.1, 0.2]):
        m = Net()
        m.load_state_dict(base.state_dict())
        opt = torch.optim.SGD(m.parameters(), lr=lr)

        def train_step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            m.seen += x.shape[0]
            return loss.item()

        step = env.step(train_step)
        env.rec(f"hist {i}", [step(x, y) for _ in range(3)])
        torch.save(m.state_dict(), env.path(f"ft{i}.pt"))
        soups.append(torch.load(env.path(f"ft{i}.pt"), weights_only=True))
    soup = {k: torch.stack([s[k].float() for s in soups]).mean(0).to(soups[0][k].dtype)
            for k in soups[0]}
    new = Net(n_out=3)
    del soup["head.weight"], soup["head.bias"]
    soup["extra.weight"] = torch.zeros(1)
    result = new.load_state_dict(soup, strict=False)
    env.rec("incompatible", (sorted(result.missing_keys), sorted(result.unexpected_keys)))
    env.rec("soup", [new.body[0].weight, new.seen])
    with torch.no_grad():
        env.rec("cache", (new(x).shape, new.cache))


def init_zoo_apply(torch, env):
    """An initialisation function applied with model.apply: kaiming_normal_(mode="fan_out",
    nonlinearity="relu") for convs, dirac_ for a residual 3x3 conv, orthogonal_(gain) for a
    GRU's hidden weights, xavier_uniform_ for linears with calculate_gain("tanh"),
    trunc_normal_ for an embedding, constant_ / ones_ / zeros_ for norms and biases; the
    initial weights (torch's generator) and a short training run are compared."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3, padding=1)
            self.res = nn.Conv2d(4, 4, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(4)
            self.emb = nn.Embedding(5, 4)
            self.gru = nn.GRU(4, 6, batch_first=True)
            self.fc = nn.Linear(6 + 4, 2)

        def forward(self, img, tok):
            h = F.relu(self.bn(self.res(F.relu(self.conv(img))) + self.conv(img)))
            seq = self.emb(tok) + h.mean((2, 3)).unsqueeze(1)
            out, _ = self.gru(seq)
            return self.fc(torch.cat([out[:, -1], h.mean((2, 3))], 1))

    def init_weights(m):
        if isinstance(m, nn.Conv2d):
            if m.bias is None:
                nn.init.dirac_(m.weight)
            else:
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.constant_(m.bias, 0.1)
        elif isinstance(m, nn.Embedding):
            nn.init.trunc_normal_(m.weight, std=0.5, a=-1.0, b=1.0)
        elif isinstance(m, nn.GRU):
            for name, p in m.named_parameters():
                if "weight_hh" in name:
                    nn.init.orthogonal_(p, gain=nn.init.calculate_gain("tanh"))
                elif "weight_ih" in name:
                    nn.init.xavier_normal_(p)
                else:
                    nn.init.zeros_(p)
        elif isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight, gain=nn.init.calculate_gain("tanh"))
            nn.init.uniform_(m.bias, -0.1, 0.1)

    model = Net()
    model.apply(init_weights)
    env.rec("init", list(model.parameters()))
    img, tok = torch.randn(4, 1, 5, 5), torch.randint(0, 5, (4, 3))
    y = torch.tensor([0, 1, 1, 0])
    opt = torch.optim.NAdam(model.parameters(), lr=5e-3)

    def train_step(img, tok, y):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(img, tok), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(img, tok, y) for _ in range(4)])
    env.rec("params", list(model.parameters()))


def lowrank_vae_mixture_prior(torch, env):
    """A VAE whose posterior is a LowRankMultivariateNormal (loc, cov_factor, cov_diag from
    the encoder) and whose prior is a MixtureSameFamily of Independent Normals; the ELBO
    estimated with rsample (the KL by Monte Carlo, log_prob of both), a Bernoulli
    likelihood with logits; Independent / event shapes and the posterior entropy
    logged."""
    nn = torch.nn
    D = torch.distributions
    torch.manual_seed(0)
    Z, X = 2, 6

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(X, 16), nn.Tanh())
            self.loc = nn.Linear(16, Z)
            self.factor = nn.Linear(16, Z)
            self.diag = nn.Linear(16, Z)
            self.dec = nn.Sequential(nn.Linear(Z, 16), nn.Tanh(), nn.Linear(16, X))
            self.mix_logits = nn.Parameter(torch.zeros(3))
            self.mix_means = nn.Parameter(torch.randn(3, Z))

        def prior(self):
            comps = D.Independent(D.Normal(self.mix_means, torch.ones(3, Z)), 1)
            return D.MixtureSameFamily(D.Categorical(logits=self.mix_logits), comps)

        def forward(self, x):
            h = self.enc(x)
            q = D.LowRankMultivariateNormal(self.loc(h), self.factor(h).unsqueeze(-1),
                                            nn.functional.softplus(self.diag(h)) + 1e-3)
            z = q.rsample()
            px = D.Independent(D.Bernoulli(logits=self.dec(z)), 1)
            elbo = px.log_prob(x) + self.prior().log_prob(z) - q.log_prob(z)
            return elbo, q

    model = VAE()
    x = (torch.rand(12, X) < torch.linspace(0.1, 0.9, X)).float()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x):
        opt.zero_grad()
        elbo, q = model(x)
        loss = -elbo.mean()
        loss.backward()
        opt.step()
        return loss.item(), q.entropy().detach()

    step = env.step(train_step)
    hist = [step(x) for _ in range(5)]
    env.rec("losses", [h[0] for h in hist])
    env.rec("entropy", hist[-1][1])
    _, q = model(x)
    env.rec("shapes", (tuple(q.batch_shape), tuple(q.event_shape),
                       tuple(model.prior().batch_shape), tuple(model.prior().event_shape)))
    env.rec("params", list(model.parameters()))
