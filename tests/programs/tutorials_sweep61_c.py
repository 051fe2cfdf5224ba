"""Sweep 61 (H1), third file: an x-vector speaker embedding with statistics pooling and the
additive-margin softmax, a Neural Turing Machine on the copy task (its module keeps the
last write's graph alive after the step's backward: a strict xfail of the compiled run),
and AdaHessian's optimizer as its repository writes it (Rademacher vectors from
randint_like, Hessian-vector products of create_graph gradients, `math.sqrt` of the bias
correction of a per-parameter step count, traced: compile/math_stand_ins.py). Programs
`f(torch, env)`, see tutorial_harness.py."""
import math

def xvector_amsoftmax(torch, env):
    """An x-vector speaker embedding (Snyder et al.; the speechbrain/kaldi recipes): TDNN
    layers as dilated Conv1d + ReLU + BatchNorm1d, statistics pooling (mean and std over
    the frames that the lengths keep, via a mask), an embedding layer; the additive-margin
    softmax (CosFace / AM-Softmax: normalised weights and embeddings, cos - m at the target
    by one_hot, scale s); SGD with Nesterov momentum; cosine scoring of trials under
    no_grad and an EER-style threshold sweep."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(36)
    n_spk, feat, T, emb_dim = 4, 6, 24, 8

    class TDNN(nn.Module):
        def __init__(self, cin, cout, context, dilation):
            super().__init__()
            self.conv = nn.Conv1d(cin, cout, context, dilation=dilation)
            self.bn = nn.BatchNorm1d(cout)

        def forward(self, x):
            return self.bn(F.relu(self.conv(x)))

    class XVector(nn.Module):
        def __init__(self):
            super().__init__()
            self.frame = nn.Sequential(TDNN(feat, 16, 5, 1), TDNN(16, 16, 3, 2),
                                       TDNN(16, 16, 3, 3), TDNN(16, 24, 1, 1))
            self.segment = nn.Linear(48, emb_dim)
            self.receptive = 1 + 4 + 4 + 6

        def forward(self, x, lengths):              # x (N, T, feat)
            h = self.frame(x.transpose(1, 2))       # (N, C, T')
            valid = (lengths - self.receptive + 1).clamp(min=1)
            mask = (torch.arange(h.size(2))[None, :] < valid[:, None]).unsqueeze(1).float()
            n = mask.sum(dim=2)
            mean = (h * mask).sum(dim=2) / n
            var = (((h - mean.unsqueeze(2)) * mask) ** 2).sum(dim=2) / n
            stats = torch.cat([mean, var.clamp(min=1e-6).sqrt()], dim=1)
            return self.segment(stats)

    class AMSoftmax(nn.Module):
        def __init__(self, in_feats, n_classes, m=0.2, s=10.0):
            super().__init__()
            self.m, self.s = m, s
            self.W = nn.Parameter(torch.randn(in_feats, n_classes))
            nn.init.xavier_normal_(self.W, gain=1)

        def forward(self, x, label):
            x_norm = F.normalize(x, dim=1)
            w_norm = F.normalize(self.W, dim=0)
            costh = torch.mm(x_norm, w_norm)
            delt_costh = F.one_hot(label, costh.size(1)).float() * self.m
            costh_m = self.s * (costh - delt_costh)
            return F.cross_entropy(costh_m, label), costh

    # each speaker: a mean vector plus a slow drift over time
    spk_mean = env.randn(n_spk, feat) * 1.5
    def utterances(n):
        spk = env.randint(0, n_spk, (n,))
        drift = torch.linspace(-1, 1, T)[None, :, None] * env.randn(n, 1, feat) * 0.3
        x = spk_mean[spk][:, None, :] + drift + env.randn(n, T, feat)
        lengths = env.randint(18, T + 1, (n,))
        x = x * (torch.arange(T)[None, :, None] < lengths[:, None, None])
        return x, lengths, spk

    model, criterion = env.init(XVector()), env.init(AMSoftmax(emb_dim, n_spk))
    opt = torch.optim.SGD(list(model.parameters()) + list(criterion.parameters()), lr=0.05,
                          momentum=0.9, nesterov=True, weight_decay=5e-4)

    def train_step(x, lengths, spk):
        model.train()
        loss, costh = criterion(model(x, lengths), spk)
        opt.zero_grad()
        loss.backward()
        opt.step()
        acc = (costh.argmax(1) == spk).float().mean()
        return loss.item(), acc.item()

    step = env.step(train_step)
    for it in range(5):
        env.rec(f"step {it}", step(*utterances(12)))

    model.eval()
    x, lengths, spk = utterances(10)
    with torch.no_grad():
        emb = F.normalize(model(x, lengths), dim=1)
        scores = emb @ emb.t()
        iu = torch.triu_indices(10, 10, offset=1)
        trial_scores = scores[iu[0], iu[1]]
        target = spk[iu[0]] == spk[iu[1]]
        thresholds = torch.linspace(-1, 1, 21)
        accept = trial_scores[None, :] >= thresholds[:, None]
        far = (accept & ~target).sum(1).float() / (~target).sum().clamp(min=1)
        frr = (~accept & target).sum(1).float() / target.sum().clamp(min=1)
        i = (far - frr).abs().argmin()
    env.rec("scores", scores)
    env.rec("eer", ((far[i] + frr[i]) / 2).item())
    env.rec("params", (dict(model.state_dict()), dict(criterion.state_dict())))


def ntm_copy_task(torch, env):
    """A Neural Turing Machine on the copy task (Graves et al.; the pytorch-ntm
    re-implementations): an LSTMCell controller, a memory matrix reset per sequence as a
    buffer, a read head and a write head with content addressing (F.cosine_similarity of a
    key with every row, beta-sharpened softmax), interpolation with the previous weights, a
    3-tap circular shift (the weights padded with their own ends and F.conv1d'd with the
    shift distribution per batch row via groups), sharpening w ** gamma / sum; erase and
    add writes; the sequence fed in, a delimiter, then read out; BCE with logits; RMSprop
    with momentum and clip_grad_value_; the cost in bits per sequence."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(38)
    W, Nm, M, ctrl, seq_len, batch = 4, 8, 6, 20, 3, 4

    class Memory(nn.Module):
        def __init__(self, N, M):
            super().__init__()
            self.N, self.M = N, M
            self.register_buffer("mem_bias", torch.Tensor(N, M))
            stdev = 1 / math.sqrt(N + M)
            nn.init.uniform_(self.mem_bias, -stdev, stdev)

        def reset(self, batch_size):
            self.memory = self.mem_bias.clone().repeat(batch_size, 1, 1)

        def read(self, w):
            return torch.matmul(w.unsqueeze(1), self.memory).squeeze(1)

        def write(self, w, e, a):
            erase = torch.matmul(w.unsqueeze(-1), e.unsqueeze(1))
            add = torch.matmul(w.unsqueeze(-1), a.unsqueeze(1))
            self.memory = self.memory * (1 - erase) + add

        def address(self, k, beta, g, s, gamma, w_prev):
            wc = F.softmax(beta * F.cosine_similarity(self.memory + 1e-16,
                                                      k.unsqueeze(1) + 1e-16, dim=-1), dim=1)
            wg = g * wc + (1 - g) * w_prev
            b = wg.size(0)
            padded = torch.cat([wg[:, -1:], wg, wg[:, :1]], dim=1)     # circular
            ws = F.conv1d(padded.unsqueeze(0), s.flip(1).unsqueeze(1), groups=b).squeeze(0)
            w = ws ** gamma
            return w / (torch.sum(w, dim=1, keepdim=True) + 1e-16)

    class Head(nn.Module):
        def __init__(self, memory, write):
            super().__init__()
            self.memory, self.is_write = memory, write
            sizes = [M, 1, 1, 3, 1] + ([M, M] if write else [])
            self.sizes = sizes
            self.fc = nn.Linear(ctrl, sum(sizes))

        def forward(self, h, w_prev):
            o = self.fc(h)
            parts = torch.split(o, self.sizes, dim=1)
            k, beta, g, s, gamma = parts[:5]
            w = self.memory.address(k, F.softplus(beta), torch.sigmoid(g), F.softmax(s, dim=1),
                                    1 + F.softplus(gamma), w_prev)
            if self.is_write:
                self.memory.write(w, torch.sigmoid(parts[5]), parts[6])
                return None, w
            return self.memory.read(w), w

    class NTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.memory = Memory(Nm, M)
            self.controller = nn.LSTMCell(W + 1 + M, ctrl)
            self.read_head = Head(self.memory, write=False)
            self.write_head = Head(self.memory, write=True)
            self.fc = nn.Linear(ctrl + M, W)

        def init_sequence(self, b):
            self.memory.reset(b)
            self.state = (torch.zeros(b, ctrl), torch.zeros(b, ctrl))
            self.read = torch.zeros(b, M)
            self.w_read = torch.zeros(b, Nm)
            self.w_write = torch.zeros(b, Nm)

        def forward(self, x):
            h, c = self.controller(torch.cat([x, self.read], dim=1), self.state)
            self.state = (h, c)
            self.read, self.w_read = self.read_head(h, self.w_read)
            _, self.w_write = self.write_head(h, self.w_write)
            return self.fc(torch.cat([h, self.read], dim=1)), self.w_read

    def copy_batch():
        seq = (env.rand(seq_len, batch, W) < 0.5).float()
        inp = torch.zeros(seq_len + 1, batch, W + 1)
        inp[:seq_len, :, :W] = seq
        inp[seq_len, :, W] = 1.0            # delimiter
        return inp, seq

    net = env.init(NTM())
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.RMSprop(net.parameters(), momentum=0.9, alpha=0.95, lr=1e-3)

    def train_batch(inp, target):
        optimizer.zero_grad()
        net.init_sequence(batch)
        for i in range(inp.size(0)):
            net(inp[i])
        outs = []
        for i in range(target.size(0)):
            y, _ = net(torch.zeros(batch, W + 1))
            outs.append(y)
        y_out = torch.stack(outs)
        loss = criterion(y_out, target)
        loss.backward()
        nn.utils.clip_grad_value_(net.parameters(), 10)
        optimizer.step()
        y_bin = (torch.sigmoid(y_out) > 0.5).float()
        cost = torch.sum(torch.abs(y_bin - target))
        return loss.item(), cost.item() / batch, net.w_read.detach()

    step = env.step(train_batch)
    for it in range(4):
        env.rec(f"batch {it}", step(*copy_batch()))
    env.rec("params", dict(net.state_dict()))


def adahessian_hutchinson(torch, env):
    """AdaHessian (Yao et al.) with amirgholami/adahessian's optimizer class: Rademacher
    vectors from torch.randint_like(p, high=2) with the zeros set to -1 (the default
    generator), Hessian-vector products by torch.autograd.grad of the create_graph
    gradients, |Hv| averaged over each conv kernel's positions, Adam-style moments of it,
    `math.sqrt(bias_correction2)` of a per-parameter step count, and a `p.data = ...` update;
    a small conv net on synthetic images, cross entropy."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(39)

    class Adahessian(torch.optim.Optimizer):
        """amirgholami/adahessian's optimizer (its get_trace, block averaging, step)."""
        def __init__(self, params, lr=0.15, betas=(0.9, 0.999), eps=1e-4, weight_decay=0,
                     hessian_power=1):
            defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                            hessian_power=hessian_power)
            super().__init__(params, defaults)

        def get_trace(self, params, grads):
            v = [torch.randint_like(p, high=2) for p in params]
            for v_i in v:
                v_i[v_i == 0] = -1
            hvs = torch.autograd.grad(grads, params, grad_outputs=v, only_inputs=True,
                                      retain_graph=True)
            hutchinson_trace = []
            for hv in hvs:
                param_size = hv.size()
                if len(param_size) <= 2:        # for 0/1/2D tensor
                    tmp_output = torch.abs(hv)
                    hutchinson_trace.append(tmp_output)
                elif len(param_size) == 4:      # Conv kernel
                    tmp_output = torch.abs(torch.sum(torch.abs(hv), dim=[2, 3],
                                                     keepdim=True)) / hv[0, 1].numel()
                    hutchinson_trace.append(tmp_output)
            return hutchinson_trace

        def step(self, gradsH, closure=None):
            params, groups = [], []
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        params.append(p)
                        groups.append(group)
            hut_traces = self.get_trace(params, gradsH)
            for (p, group, grad, hut_trace) in zip(params, groups, gradsH, hut_traces):
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p.data)
                    state["exp_hessian_diag_sq"] = torch.zeros_like(p.data)
                exp_avg, exp_hessian_diag_sq = state["exp_avg"], state["exp_hessian_diag_sq"]
                beta1, beta2 = group["betas"]
                state["step"] += 1
                exp_avg.mul_(beta1).add_(grad.detach(), alpha=1 - beta1)
                exp_hessian_diag_sq.mul_(beta2).addcmul_(hut_trace, hut_trace, value=1 - beta2)
                bias_correction1 = 1 - beta1 ** state["step"]
                bias_correction2 = 1 - beta2 ** state["step"]
                k = group["hessian_power"]
                denom = ((exp_hessian_diag_sq.sqrt() ** k) /
                         math.sqrt(bias_correction2) ** k).add_(group["eps"])
                step_size = group["lr"] / bias_correction1
                p.data = p.data - step_size * (exp_avg / denom + group["weight_decay"] * p.data)
            return hut_traces

    model = env.init(nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.Tanh(), nn.AvgPool2d(2),
                                   nn.Flatten(), nn.Linear(4 * 4 * 4, 3)))
    optimizer = Adahessian(model.parameters(), lr=0.02, eps=0.1, weight_decay=1e-4)
    x = env.randn(24, 2, 8, 8)
    y = env.randint(0, 3, (24,))
    x = x + y.float()[:, None, None, None] * 0.5

    def train_step(xb, yb):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward(create_graph=True)
        _, gradsH = get_params_grad(model)
        hut = optimizer.step(gradsH)
        return loss.item(), [h.mean() for h in hut]

    def get_params_grad(model):
        params, grads = [], []
        for param in model.parameters():
            if not param.requires_grad:
                continue
            params.append(param)
            grads.append(0. if param.grad is None else param.grad + 0.)
        return params, grads

    step = env.step(train_step)
    for epoch in range(2):
        for b in range(0, 24, 8):
            env.rec(f"e{epoch} b{b}", step(x[b:b + 8], y[b:b + 8]))
    env.rec("params", dict(model.state_dict()))
