"""Sweep 58 (H2): tutorial and blog-post programs at toy sizes, as users write them: a DANN
with a gradient-reversal autograd.Function and an unfrozen parameter group added mid-run;
length-bucketed batches from a custom Sampler and BatchSampler with a padding collate_fn
into a packed bidirectional GRU, with LambdaLR warmup, gradient accumulation and clipping;
a hand-written SAM optimizer (an Optimizer subclass wrapping SGD, two forward/backward
passes per step, BatchNorm momentum zeroed for the second); an nn.Transformer copy task
with every mask, AdamW decay / no-decay groups and label smoothing with ignore_index.
Synthetic data. Programs `f(torch, env)`, see tutorial_harness.py."""
import math


def dann_gradient_reversal(torch, env):
    nn = torch.nn

    class GradReverse(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, alpha):
            ctx.alpha = alpha
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad_output):
            output = grad_output.neg() * ctx.alpha
            return output, None

    class DANN(nn.Module):
        def __init__(self):
            super().__init__()
            self.feature = nn.Sequential(nn.Linear(8, 16), nn.CELU(alpha=0.5),
                                         nn.Linear(16, 12), nn.Hardtanh(-2.0, 2.0))
            self.class_classifier = nn.Sequential(nn.Linear(12, 10), nn.Tanhshrink(),
                                                  nn.Linear(10, 3))
            self.domain_classifier = nn.Sequential(nn.Linear(12, 10),
                                                   nn.Threshold(0.1, 0.0),
                                                   nn.Linear(10, 2), nn.LogSoftmax(dim=1))

        def forward(self, x, alpha):
            feature = self.feature(x)
            reverse_feature = GradReverse.apply(feature, alpha)
            return self.class_classifier(feature), self.domain_classifier(reverse_feature)

    model = env.init(DANN())
    for p in model.domain_classifier.parameters():
        p.requires_grad = False
    optimizer = torch.optim.SGD([{"params": model.feature.parameters()},
                                 {"params": model.class_classifier.parameters()}],
                                lr=0.05, momentum=0.9)
    loss_class = nn.CrossEntropyLoss()
    loss_domain = nn.NLLLoss()

    def train_step(xs, ys, xt, alpha):
        model.zero_grad()
        class_output, domain_output = model(xs, alpha)
        err_s_label = loss_class(class_output, ys)
        err_s_domain = loss_domain(domain_output,
                                   torch.zeros(xs.size(0), dtype=torch.long))
        _, domain_output_t = model(xt, alpha)
        err_t_domain = loss_domain(domain_output_t, torch.ones(xt.size(0)).long())
        err = err_s_label + err_s_domain + err_t_domain
        err.backward()
        optimizer.step()
        return err_s_label.item(), err_s_domain.item(), err_t_domain.item()

    step = env.step(train_step)
    xs, ys, xt = env.randn(6, 8), env.randint(0, 3, (6,)), env.randn(6, 8) + 0.5
    n_steps = 6
    for i in range(n_steps):
        if i == 2:      # (warm start over: the domain head joins the optimiser)
            for p in model.domain_classifier.parameters():
                p.requires_grad = True
            optimizer.add_param_group({"params": model.domain_classifier.parameters(),
                                       "lr": 0.02})
        p = float(i) / n_steps
        alpha = 2. / (1. + math.exp(-10 * p)) - 1
        env.rec(f"step {i}", step(xs, ys, xt, alpha))
    env.rec("params", dict(model.state_dict()))
    env.rec("momentum", [optimizer.state[p]["momentum_buffer"] for p in model.parameters()])


def bucketed_packed_gru(torch, env):
    nn = torch.nn
    # (the tutorial's `from torch.nn.utils.rnn import ...`, from the library under test)
    pack_padded_sequence = torch.nn.utils.rnn.pack_padded_sequence
    pad_packed_sequence = torch.nn.utils.rnn.pad_packed_sequence
    pad_sequence = torch.nn.utils.rnn.pad_sequence
    data = torch.utils.data
    BatchSampler, DataLoader, Dataset, Sampler = (data.BatchSampler, data.DataLoader,
                                                  data.Dataset, data.Sampler)

    PAD = 0
    lengths = [3, 7, 5, 2, 6, 4, 7, 3, 5, 6, 2, 4]
    seqs = [env.randint(1, 20, (n,)) for n in lengths]
    labels = env.randint(0, 2, (len(lengths),))

    class SeqDataset(Dataset):
        def __init__(self, seqs, labels):
            self.seqs, self.labels = seqs, labels

        def __len__(self):
            return len(self.seqs)

        def __getitem__(self, idx):
            return self.seqs[idx], self.labels[idx]

    class BucketSampler(Sampler):
        """indices sorted by length within buckets of 6, so batches pad little"""
        def __init__(self, lengths, bucket=6):
            self.lengths, self.bucket = lengths, bucket

        def __iter__(self):
            idx = list(range(len(self.lengths)))
            for s in range(0, len(idx), self.bucket):
                chunk = sorted(idx[s:s + self.bucket], key=lambda i: -self.lengths[i])
                yield from chunk

        def __len__(self):
            return len(self.lengths)

    def collate_fn(batch):
        xs, ys = zip(*batch)
        lens = torch.tensor([len(x) for x in xs])
        return pad_sequence(xs, batch_first=True, padding_value=PAD), lens, torch.stack(ys)

    ds = SeqDataset(seqs, labels)
    sampler = BatchSampler(BucketSampler(lengths), batch_size=4, drop_last=False)
    loader = DataLoader(ds, batch_sampler=sampler, collate_fn=collate_fn)

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 8, padding_idx=PAD)
            self.rnn = nn.GRU(8, 6, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(12, 2)

        def forward(self, x, lens):
            packed = pack_padded_sequence(self.emb(x), lens, batch_first=True,
                                          enforce_sorted=False)
            out, h = self.rnn(packed)
            out, out_lens = pad_packed_sequence(out, batch_first=True, padding_value=0.0)
            mask = (torch.arange(out.size(1))[None, :] < out_lens[:, None]).unsqueeze(-1)
            pooled = (out * mask).sum(1) / out_lens[:, None].float()
            return self.fc(pooled + torch.cat([h[0], h[1]], dim=1))

    model = env.init(Classifier())
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    warmup = 3
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup))
    accum = 2
    criterion = nn.CrossEntropyLoss()

    def micro_step(x, lens, y):
        loss = criterion(model(x, lens), y) / accum
        loss.backward()
        return loss.detach()

    def opt_step():
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
        optimizer.step()
        optimizer.zero_grad()
        return norm

    micro, update = env.step(micro_step), env.step(opt_step)
    i = 0
    for epoch in range(2):
        for x, lens, y in loader:
            env.rec(f"batch {i}", (x, lens, y))
            env.rec(f"loss {i}", micro(x, lens, y))
            if (i + 1) % accum == 0:
                env.rec(f"norm {i}", update())
                scheduler.step()
                env.rec(f"lr {i}", scheduler.get_last_lr())
            i += 1
    env.rec("params", dict(model.state_dict()))


def sam_optimizer(torch, env):
    nn = torch.nn

    class SAM(torch.optim.Optimizer):
        def __init__(self, params, base_optimizer, rho=0.05, adaptive=False, **kwargs):
            assert rho >= 0.0, f"Invalid rho, should be non-negative: {rho}"
            defaults = dict(rho=rho, adaptive=adaptive, **kwargs)
            super(SAM, self).__init__(params, defaults)
            self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
            self.param_groups = self.base_optimizer.param_groups
            self.defaults.update(self.base_optimizer.defaults)

        @torch.no_grad()
        def first_step(self, zero_grad=False):
            grad_norm = self._grad_norm()
            for group in self.param_groups:
                scale = group["rho"] / (grad_norm + 1e-12)
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    self.state[p]["old_p"] = p.data.clone()
                    e_w = (torch.pow(p, 2) if group["adaptive"] else 1.0) * p.grad * scale.to(p)
                    p.add_(e_w)
            if zero_grad:
                self.zero_grad()

        @torch.no_grad()
        def second_step(self, zero_grad=False):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.data = self.state[p]["old_p"]
            self.base_optimizer.step()
            if zero_grad:
                self.zero_grad()

        def _grad_norm(self):
            norm = torch.norm(
                torch.stack([((torch.abs(p) if group["adaptive"] else 1.0) * p.grad).norm(p=2)
                             for group in self.param_groups for p in group["params"]
                             if p.grad is not None]),
                p=2)
            return norm

    def disable_running_stats(model):
        def _disable(module):
            if isinstance(module, nn.BatchNorm1d):
                module.backup_momentum = module.momentum
                module.momentum = 0
        model.apply(_disable)

    def enable_running_stats(model):
        def _enable(module):
            if isinstance(module, nn.BatchNorm1d) and hasattr(module, "backup_momentum"):
                module.momentum = module.backup_momentum
        model.apply(_enable)

    model = env.init(nn.Sequential(nn.Linear(5, 12), nn.BatchNorm1d(12), nn.ReLU(),
                                   nn.Linear(12, 3)))
    optimizer = SAM(model.parameters(), torch.optim.SGD, rho=0.1, adaptive=True,
                    lr=0.1, momentum=0.9)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

    def train_step(inputs, targets):
        enable_running_stats(model)
        predictions = model(inputs)
        loss = criterion(predictions, targets)
        loss.mean().backward()
        optimizer.first_step(zero_grad=True)
        disable_running_stats(model)
        criterion(model(inputs), targets).mean().backward()
        optimizer.second_step(zero_grad=True)
        return loss.detach()

    step = env.step(train_step)
    x, y = env.randn(8, 5), env.randint(0, 3, (8,))
    for i in range(4):
        env.rec(f"loss {i}", step(x, y))
    env.rec("state", dict(model.state_dict()))
    env.rec("bn momentum", model[1].momentum)


def transformer_copy_task(torch, env):
    nn = torch.nn
    PAD, BOS, V, D = 0, 1, 12, 16

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.src_emb = nn.Embedding(V, D, padding_idx=PAD)
            self.tgt_emb = nn.Embedding(V, D, padding_idx=PAD)
            self.pos = nn.Parameter(torch.zeros(1, 8, D))
            self.transformer = nn.Transformer(d_model=D, nhead=2, num_encoder_layers=1,
                                              num_decoder_layers=1, dim_feedforward=24,
                                              dropout=0.0, batch_first=True)
            self.generator = nn.Linear(D, V)

        def forward(self, src, tgt):
            tgt_mask = nn.Transformer.generate_square_subsequent_mask(tgt.size(1))
            src_pad, tgt_pad = src == PAD, tgt == PAD
            out = self.transformer(self.src_emb(src) + self.pos[:, :src.size(1)],
                                   self.tgt_emb(tgt) + self.pos[:, :tgt.size(1)],
                                   tgt_mask=tgt_mask, src_key_padding_mask=src_pad,
                                   tgt_key_padding_mask=tgt_pad,
                                   memory_key_padding_mask=src_pad)
            return self.generator(out)

    model = env.init(Seq2Seq())
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if param.ndim < 2 or "norm" in name or "emb" in name or name == "pos":
            no_decay.append(param)
        else:
            decay.append(param)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=5e-3, betas=(0.9, 0.98), eps=1e-9)
    criterion = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1)

    def train_step(src, tgt):
        tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
        logits = model(src, tgt_in)
        optimizer.zero_grad()
        loss = criterion(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
        loss.backward()
        optimizer.step()
        return loss.item()

    step = env.step(train_step)
    src = env.randint(2, V, (4, 6))
    src[1, 4:] = PAD
    src[3, 3:] = PAD
    tgt = torch.cat([torch.full((4, 1), BOS, dtype=torch.long), src], dim=1)
    for i in range(4):
        env.rec(f"loss {i}", step(src, tgt))
    # (attention is blind to the key bias, a constant per query's logits: its gradient is
    # rounding noise that Adam scales to full steps, so it is left out of the comparison)
    state = dict(model.state_dict())
    for name in [k for k in state if k.endswith("in_proj_bias")]:
        state[name] = torch.cat([state[name][:D], state[name][2 * D:]])
    env.rec("params", state)

    model.eval()
    with torch.no_grad():
        ys = torch.full((4, 1), BOS, dtype=torch.long)
        for _ in range(5):
            next_word = model(src, ys)[:, -1].argmax(dim=-1)
            ys = torch.cat([ys, next_word.unsqueeze(1)], dim=1)
    env.rec("greedy", ys)
