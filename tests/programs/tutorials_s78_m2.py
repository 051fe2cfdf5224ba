"""Stop 78 (M), part 2: d2l.ai chapter 11 (train_ch11 with the hand-written sgd_momentum,
adagrad and adam updating `states` in place and counting hyperparams['t']), Karpathy's
minGPT (CausalSelfAttention's tril buffer, configure_optimizers splitting decay / no_decay
by module type, AdamW betas (0.9, 0.95), clip_grad_norm_, greedy generate) and makemore
part 3 (a hand-written BatchNorm with bnmean_running / bnstd_running updated under no_grad,
Kaiming gains by hand, update-to-data ratios). Toy sizes, synthetic data.
Programs `f(torch, env)`, see tutorial_harness.py."""
import math


def d2l_ch11_optimizers(torch, env):
    nn = torch.nn

    def linreg(X, w, b):
        return torch.matmul(X, w) + b

    def squared_loss(y_hat, y):
        return (y_hat - y.reshape(y_hat.shape)) ** 2 / 2

    features = env.randn(60, 5)
    labels = (features @ env.randn(5) + 0.3 + 0.05 * env.randn(60))
    data = [(features[i:i + 10], labels[i:i + 10]) for i in range(0, 60, 10)]

    def init_momentum_states(feature_dim):
        v_w = torch.zeros((feature_dim, 1))
        v_b = torch.zeros(1)
        return (v_w, v_b)

    def sgd_momentum(params, states, hyperparams):
        for p, v in zip(params, states):
            with torch.no_grad():
                v[:] = hyperparams['momentum'] * v + p.grad
                p[:] -= hyperparams['lr'] * v
            p.grad.data.zero_()

    def init_adagrad_states(feature_dim):
        s_w = torch.zeros((feature_dim, 1))
        s_b = torch.zeros(1)
        return (s_w, s_b)

    def adagrad(params, states, hyperparams):
        eps = 1e-6
        for p, s in zip(params, states):
            with torch.no_grad():
                s[:] += torch.square(p.grad)
                p[:] -= hyperparams['lr'] * p.grad / torch.sqrt(s + eps)
            p.grad.data.zero_()

    def init_adam_states(feature_dim):
        v_w, v_b = torch.zeros((feature_dim, 1)), torch.zeros(1)
        s_w, s_b = torch.zeros((feature_dim, 1)), torch.zeros(1)
        return ((v_w, s_w), (v_b, s_b))

    def adam(params, states, hyperparams):
        beta1, beta2, eps = 0.9, 0.999, 1e-6
        for p, (v, s) in zip(params, states):
            with torch.no_grad():
                v[:] = beta1 * v + (1 - beta1) * p.grad
                s[:] = beta2 * s + (1 - beta2) * torch.square(p.grad)
                v_bias_corr = v / (1 - beta1 ** hyperparams['t'])
                s_bias_corr = s / (1 - beta2 ** hyperparams['t'])
                p[:] -= hyperparams['lr'] * v_bias_corr / (torch.sqrt(s_bias_corr) + eps)
            p.grad.data.zero_()
        hyperparams['t'] += 1

    def train_ch11(trainer_fn, states, hyperparams, data_iter, feature_dim, num_epochs=2):
        w = torch.normal(mean=0.0, std=0.01, size=(feature_dim, 1), requires_grad=True)
        b = torch.zeros((1), requires_grad=True)
        with torch.no_grad():
            w.copy_(env.randn(feature_dim, 1, scale=0.01))
        net, loss = (lambda X: linreg(X, w, b)), squared_loss

        def step(X, y):
            l = loss(net(X), y).mean()
            l.backward()
            trainer_fn([w, b], states, hyperparams)
            return l

        step = env.step(step)
        animator = []
        n = 0
        for _ in range(num_epochs):
            for X, y in data_iter:
                l = step(X, y)
                n += X.shape[0]
                if n % 20 == 0:
                    animator.append(float(loss(net(features), labels).mean()))
        env.rec(f"{trainer_fn.__name__} loss", f"loss: {animator[-1]:.3f}")
        return animator, w, b

    for trainer, init, hp in ((sgd_momentum, init_momentum_states, {'lr': 0.02, 'momentum': 0.5}),
                              (adagrad, init_adagrad_states, {'lr': 0.1}),
                              (adam, init_adam_states, {'lr': 0.01, 't': 1})):
        animator, w, b = train_ch11(trainer, init(5), hp, data, 5)
        env.rec(f"{trainer.__name__} curve", animator)
        env.rec(f"{trainer.__name__} w", w)
        env.rec(f"{trainer.__name__} b", b)
        env.rec(f"{trainer.__name__} hp", dict(hp))

    def train_concise_ch11(trainer_fn, hyperparams, data_iter, num_epochs=2):
        net = nn.Sequential(nn.Linear(5, 1))

        def init_weights(module):
            if type(module) == nn.Linear:
                torch.nn.init.normal_(module.weight, std=0.01)
        net.apply(init_weights)
        env.init(net)
        optimizer = trainer_fn(net.parameters(), **hyperparams)
        loss = nn.MSELoss(reduction='none')

        def step(X, y):
            optimizer.zero_grad()
            out = net(X)
            y = y.reshape(out.shape)
            l = loss(out, y)
            l.mean().backward()
            optimizer.step()
            return l.mean()

        step = env.step(step)
        out = []
        for _ in range(num_epochs):
            for X, y in data_iter:
                out.append(step(X, y).item() / 2)
        return out, net

    for trainer, hp in ((torch.optim.SGD, {'lr': 0.01, 'momentum': 0.9}),
                        (torch.optim.RMSprop, {'lr': 0.01, 'alpha': 0.9}),
                        (torch.optim.Adadelta, {'rho': 0.9})):
        out, net = train_concise_ch11(trainer, hp, data)
        env.rec(f"concise {trainer.__name__}", out)
        env.rec(f"concise {trainer.__name__} state", dict(net.state_dict()))


def mingpt_small(torch, env):
    nn = torch.nn
    F = torch.nn.functional

    class NewGELU(nn.Module):
        def forward(self, x):
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi)
                                               * (x + 0.044715 * torch.pow(x, 3.0))))

    class CausalSelfAttention(nn.Module):
        def __init__(self, config):
            super().__init__()
            assert config.n_embd % config.n_head == 0
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd)
            self.attn_dropout = nn.Dropout(config.attn_pdrop)
            self.resid_dropout = nn.Dropout(config.resid_pdrop)
            self.register_buffer("bias", torch.tril(torch.ones(config.block_size,
                                                               config.block_size))
                                 .view(1, 1, config.block_size, config.block_size))
            self.n_head = config.n_head
            self.n_embd = config.n_embd

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            y = self.resid_dropout(self.c_proj(y))
            return y

    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.ln_1 = nn.LayerNorm(config.n_embd)
            self.attn = CausalSelfAttention(config)
            self.ln_2 = nn.LayerNorm(config.n_embd)
            self.mlp = nn.ModuleDict(dict(
                c_fc=nn.Linear(config.n_embd, 4 * config.n_embd),
                c_proj=nn.Linear(4 * config.n_embd, config.n_embd),
                act=NewGELU(),
                dropout=nn.Dropout(config.resid_pdrop),
            ))
            m = self.mlp
            self.mlpf = lambda x: m.dropout(m.c_proj(m.act(m.c_fc(x))))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            x = x + self.mlpf(self.ln_2(x))
            return x

    class CfgNode:
        def __init__(self, **kwargs):
            self.__dict__.update(kwargs)

    class GPT(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.block_size = config.block_size
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.embd_pdrop),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=nn.LayerNorm(config.n_embd),
            ))
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith('c_proj.weight'):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))
            n_params = sum(p.numel() for p in self.transformer.parameters())
            self.n_params = n_params

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            elif isinstance(module, nn.LayerNorm):
                torch.nn.init.zeros_(module.bias)
                torch.nn.init.ones_(module.weight)

        def configure_optimizers(self, train_config):
            decay = set()
            no_decay = set()
            whitelist_weight_modules = (torch.nn.Linear, )
            blacklist_weight_modules = (torch.nn.LayerNorm, torch.nn.Embedding)
            for mn, m in self.named_modules():
                for pn, p in m.named_parameters():
                    fpn = '%s.%s' % (mn, pn) if mn else pn
                    if pn.endswith('bias'):
                        no_decay.add(fpn)
                    elif pn.endswith('weight') and isinstance(m, whitelist_weight_modules):
                        decay.add(fpn)
                    elif pn.endswith('weight') and isinstance(m, blacklist_weight_modules):
                        no_decay.add(fpn)
            param_dict = {pn: p for pn, p in self.named_parameters()}
            inter_params = decay & no_decay
            union_params = decay | no_decay
            assert len(inter_params) == 0
            assert len(param_dict.keys() - union_params) == 0
            optim_groups = [
                {"params": [param_dict[pn] for pn in sorted(list(decay))],
                 "weight_decay": train_config.weight_decay},
                {"params": [param_dict[pn] for pn in sorted(list(no_decay))],
                 "weight_decay": 0.0},
            ]
            optimizer = torch.optim.AdamW(optim_groups, lr=train_config.learning_rate,
                                          betas=train_config.betas)
            return optimizer, sorted(decay), sorted(no_decay)

        def forward(self, idx, targets=None):
            b, t = idx.size()
            assert t <= self.block_size
            pos = torch.arange(0, t, dtype=torch.long).unsqueeze(0)
            tok_emb = self.transformer.wte(idx)
            pos_emb = self.transformer.wpe(pos)
            x = self.transformer.drop(tok_emb + pos_emb)
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            logits = self.lm_head(x)
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                       ignore_index=-1)
            return logits, loss

        @torch.no_grad()
        def generate(self, idx, max_new_tokens, temperature=1.0, do_sample=False, top_k=None):
            for _ in range(max_new_tokens):
                idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]
                logits, _ = self(idx_cond)
                logits = logits[:, -1, :] / temperature
                if top_k is not None:
                    v, _ = torch.topk(logits, top_k)
                    logits[logits < v[:, [-1]]] = -float('Inf')
                probs = F.softmax(logits, dim=-1)
                if do_sample:
                    idx_next = torch.multinomial(probs, num_samples=1)
                else:
                    _, idx_next = torch.topk(probs, k=1, dim=-1)
                idx = torch.cat((idx, idx_next), dim=1)
            return idx

    config = CfgNode(vocab_size=3, block_size=11, n_layer=2, n_head=2, n_embd=16,
                     embd_pdrop=0.0, resid_pdrop=0.0, attn_pdrop=0.0)
    model = env.init(GPT(config))
    env.rec("n_params", "number of parameters: %.2fM" % (model.n_params / 1e6,))
    train_config = CfgNode(learning_rate=5e-3, betas=(0.9, 0.95), weight_decay=0.1,
                           grad_norm_clip=1.0)
    optimizer, decay, no_decay = model.configure_optimizers(train_config)
    env.rec("decay", decay)
    env.rec("no_decay", no_decay)

    # the sort task of minGPT's demo: inputs 6 digits, targets the sorted digits
    inp = env.randint(0, 3, (8, 6))
    sol = torch.sort(inp)[0]
    cat = torch.cat((inp, sol), dim=1)
    x = cat[:, :-1].clone()
    y = cat[:, 1:].clone()
    y[:, :6 - 1] = -1

    def run_step(x, y):
        logits, loss = model(x, y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), train_config.grad_norm_clip)
        optimizer.step()
        return loss

    run_step = env.step(run_step)
    model.train()
    for iter_num in range(6):
        loss = run_step(x, y)
        if iter_num % 2 == 0:
            env.rec(f"iter {iter_num}", f"iter_dt 0.00ms; iter {iter_num}: "
                                        f"train loss {loss.item():.5f}")
    model.eval()
    cat = model.generate(inp[:3], 6, do_sample=False)
    env.rec("generated", cat[:, 6:])
    env.rec("state", dict(model.state_dict()))
