"""Programs heavy in in-place writes and masks inside the compiled step: the Annotated
Transformer (clones by deepcopy, masked_fill(mask == 0, -1e9), subsequent_mask from triu,
label smoothing into KLDivLoss(reduction="sum") built with scatter_ / index_fill_, the Noam
rate, greedy decoding); a DLRM-style recommender (EmbeddingBag with offsets and
per_sample_weights, pairwise interactions through bmm and triu_indices); an LSTM written by
hand into a preallocated output buffer (outputs[:, t] = h, chunk of the gates); segmentation
losses (focal loss with gather and per-class alpha, soft Dice, BCE with pos_weight);
the automatic mixed precision recipe as run on a CPU (autocast and GradScaler disabled,
unscale_ before clipping, the scaler's state_dict); a model
exported with torch.jit.trace / torch.jit.script and run. Programs `f(torch, env)`, see
tutorial_harness.py."""
import copy
import io
import itertools
import math
import warnings


def annotated_transformer(torch, env, nonzero=True):
    """nonzero=False: the padding rows of the smoothed targets cleared by masked_fill_
    instead of index_fill_ at torch.nonzero's rows (a data-dependent shape: the trace
    guards its count)."""
    nn = torch.nn
    V, d_model, h, d_ff, N, pad = 11, 16, 4, 32, 2, 0

    def clones(module, n):
        return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])

    def subsequent_mask(size):
        attn_shape = (1, size, size)
        mask = torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8)
        return mask == 0

    def attention(query, key, value, mask=None, dropout=None):
        d_k = query.size(-1)
        scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        p_attn = scores.softmax(dim=-1)
        if dropout is not None:
            p_attn = dropout(p_attn)
        return torch.matmul(p_attn, value), p_attn

    class MultiHeadedAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.d_k = d_model // h
            self.linears = clones(nn.Linear(d_model, d_model), 4)
            self.dropout = nn.Dropout(p=0.0)

        def forward(self, query, key, value, mask=None):
            if mask is not None:
                mask = mask.unsqueeze(1)
            nbatches = query.size(0)
            query, key, value = [lin(x).view(nbatches, -1, h, self.d_k).transpose(1, 2)
                                 for lin, x in zip(self.linears, (query, key, value))]
            x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout)
            x = x.transpose(1, 2).contiguous().view(nbatches, -1, h * self.d_k)
            del query, key, value
            return self.linears[-1](x)

    class SublayerConnection(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(d_model)

        def forward(self, x, sublayer):
            return x + sublayer(self.norm(x))

    class EncoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn = MultiHeadedAttention()
            self.feed_forward = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(),
                                              nn.Linear(d_ff, d_model))
            self.sublayer = clones(SublayerConnection(), 2)

        def forward(self, x, mask):
            x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, mask))
            return self.sublayer[1](x, self.feed_forward)

    class DecoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn, self.src_attn = MultiHeadedAttention(), MultiHeadedAttention()
            self.feed_forward = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(),
                                              nn.Linear(d_ff, d_model))
            self.sublayer = clones(SublayerConnection(), 3)

        def forward(self, x, memory, src_mask, tgt_mask):
            m = memory
            x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, tgt_mask))
            x = self.sublayer[1](x, lambda x: self.src_attn(x, m, m, src_mask))
            return self.sublayer[2](x, self.feed_forward)

    class EncoderDecoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = clones(EncoderLayer(), N)
            self.decoder = clones(DecoderLayer(), N)
            self.enc_norm, self.dec_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.src_embed = nn.Embedding(V, d_model)
            self.tgt_embed = nn.Embedding(V, d_model)
            self.generator = nn.Linear(d_model, V)

        def encode(self, src, src_mask):
            x = self.src_embed(src) * math.sqrt(d_model)
            for layer in self.encoder:
                x = layer(x, src_mask)
            return self.enc_norm(x)

        def decode(self, memory, src_mask, tgt, tgt_mask):
            x = self.tgt_embed(tgt) * math.sqrt(d_model)
            for layer in self.decoder:
                x = layer(x, memory, src_mask, tgt_mask)
            return self.dec_norm(x)

        def forward(self, src, tgt, src_mask, tgt_mask):
            return self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask)

    class LabelSmoothing(nn.Module):
        def __init__(self, size, padding_idx, smoothing=0.0):
            super().__init__()
            self.criterion = nn.KLDivLoss(reduction="sum")
            self.padding_idx = padding_idx
            self.confidence = 1.0 - smoothing
            self.smoothing = smoothing
            self.size = size
            self.true_dist = None

        def forward(self, x, target):
            assert x.size(1) == self.size
            true_dist = x.data.clone()
            true_dist.fill_(self.smoothing / (self.size - 2))
            true_dist.scatter_(1, target.data.unsqueeze(1), self.confidence)
            true_dist[:, self.padding_idx] = 0
            if nonzero:
                mask = torch.nonzero(target.data == self.padding_idx)
                if mask.dim() > 0:
                    true_dist.index_fill_(0, mask.squeeze(), 0.0)
            else:
                true_dist.masked_fill_((target.data == self.padding_idx).unsqueeze(1), 0.0)
            self.true_dist = true_dist
            return self.criterion(x, true_dist.clone().detach())

    def rate(step, model_size, factor, warmup):
        if step == 0:
            step = 1
        return factor * (model_size ** (-0.5) * min(step ** (-0.5), step * warmup ** (-1.5)))

    model = env.init(EncoderDecoder())
    criterion = LabelSmoothing(size=V, padding_idx=pad, smoothing=0.1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.5, betas=(0.9, 0.98), eps=1e-9)
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lr_lambda=lambda step: rate(step, d_model, factor=1.0, warmup=4))

    src = env.randint(1, V, (4, 7))
    src[0, 5:] = pad
    src[2, 6:] = pad
    tgt_full = torch.cat([torch.ones(4, 1, dtype=torch.long), src[:, :-1]], 1)
    tgt, tgt_y = tgt_full[:, :-1], tgt_full[:, 1:]
    src_mask = (src != pad).unsqueeze(-2)
    tgt_mask = (tgt != pad).unsqueeze(-2) & subsequent_mask(tgt.size(-1)).type_as(src_mask.data)
    ntokens = (tgt_y != pad).data.sum()

    def train_step(src, tgt, src_mask, tgt_mask, tgt_y, ntokens):
        out = model(src, tgt, src_mask, tgt_mask)
        x = model.generator(out).log_softmax(dim=-1)
        sloss = criterion(x.contiguous().view(-1, x.size(-1)),
                          tgt_y.contiguous().view(-1)) / ntokens
        sloss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return sloss.data * ntokens

    train_step = env.step(train_step)
    for i in range(3):
        loss = train_step(src, tgt, src_mask, tgt_mask, tgt_y, ntokens)
        lr_scheduler.step()
        env.rec(f"step {i}", (loss, optimizer.param_groups[0]["lr"]))
    env.rec("true_dist", criterion.true_dist)

    model.eval()
    with torch.no_grad():
        memory = model.encode(src[:1], src_mask[:1])
        ys = torch.zeros(1, 1).fill_(1).type_as(src.data)
        for i in range(5):
            out = model.decode(memory, src_mask[:1], ys,
                               subsequent_mask(ys.size(1)).type_as(src.data))
            prob = model.generator(out[:, -1]).log_softmax(dim=-1)
            _, next_word = torch.max(prob, dim=1)
            next_word = next_word.data[0]
            ys = torch.cat([ys, torch.zeros(1, 1).type_as(src.data).fill_(next_word)], dim=1)
        env.rec("greedy", ys)
        env.rec("attn", model.decoder[-1].src_attn.attn)


def dlrm(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_dense, emb_dim, sizes = 4, 6, [10, 7, 5]

    class DLRM(nn.Module):
        def __init__(self):
            super().__init__()
            self.bot = nn.Sequential(nn.Linear(n_dense, 12), nn.ReLU(), nn.Linear(12, emb_dim),
                                     nn.ReLU())
            self.embs = nn.ModuleList([nn.EmbeddingBag(n, emb_dim, mode="sum") for n in sizes])
            n_f = len(sizes) + 1
            self.li, self.lj = torch.triu_indices(n_f, n_f, offset=1)
            self.top = nn.Sequential(nn.Linear(emb_dim + n_f * (n_f - 1) // 2, 8), nn.ReLU(),
                                     nn.Linear(8, 1))

        def forward(self, dense, indices, offsets, weights):
            x = self.bot(dense)
            ly = [emb(indices[k], offsets[k], per_sample_weights=weights[k])
                  for k, emb in enumerate(self.embs)]
            T = torch.cat([x] + ly, dim=1).view(x.size(0), -1, emb_dim)
            Z = torch.bmm(T, torch.transpose(T, 1, 2))
            Zflat = Z[:, self.li, self.lj]
            return self.top(torch.cat([x, Zflat], dim=1)).squeeze(1)

    model = env.init(DLRM())
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.05)
    B = 5
    dense = env.randn(B, n_dense)
    indices, offsets, weights = [], [], []
    for n in sizes:
        counts = [1 + env.choice(3) for _ in range(B)]
        indices.append(env.randint(0, n, (sum(counts),)))
        offsets.append(torch.tensor([0] + list(itertools.accumulate(counts))[:-1]))
        weights.append(env.rand(sum(counts)))
    clicks = (env.rand(B) > 0.5).float()

    def step(dense, indices, offsets, weights, clicks):
        optimizer.zero_grad()
        logits = model(dense, indices, offsets, weights)
        loss = F.binary_cross_entropy_with_logits(logits, clicks)
        loss.backward()
        optimizer.step()
        return loss.item(), torch.sigmoid(logits).detach()

    step = env.step(step)
    for i in range(3):
        env.rec(f"step {i}", step(dense, indices, offsets, weights, clicks))
    env.rec("emb", model.embs[0].weight)
    bag = nn.EmbeddingBag.from_pretrained(model.embs[1].weight.detach(), mode="max")
    env.rec("max bag", bag(torch.tensor([[0, 1], [2, 3]])))
    mean_bag = nn.EmbeddingBag(5, 3, mode="mean", padding_idx=0)
    env.init(mean_bag)
    env.rec("mean bag", mean_bag(torch.tensor([0, 1, 2, 0, 4]), torch.tensor([0, 2, 4])))


def prealloc_lstm(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class HandLSTM(nn.Module):
        def __init__(self, input_size, hidden_size):
            super().__init__()
            self.hidden_size = hidden_size
            self.W = nn.Parameter(torch.empty(input_size, hidden_size * 4))
            self.U = nn.Parameter(torch.empty(hidden_size, hidden_size * 4))
            self.bias = nn.Parameter(torch.empty(hidden_size * 4))
            stdv = 1.0 / math.sqrt(self.hidden_size)
            for weight in self.parameters():
                weight.data.uniform_(-stdv, stdv)

        def forward(self, x, init_states=None):
            bs, seq_sz, _ = x.size()
            hs = self.hidden_size
            outputs = torch.empty(bs, seq_sz, hs)
            if init_states is None:
                h_t, c_t = torch.zeros(bs, hs), torch.zeros(bs, hs)
            else:
                h_t, c_t = init_states
            for t in range(seq_sz):
                x_t = x[:, t, :]
                gates = x_t @ self.W + h_t @ self.U + self.bias
                i_t, f_t, g_t, o_t = gates.chunk(4, dim=1)
                i_t, f_t = torch.sigmoid(i_t), torch.sigmoid(f_t)
                g_t, o_t = torch.tanh(g_t), torch.sigmoid(o_t)
                c_t = f_t * c_t + i_t * g_t
                h_t = o_t * torch.tanh(c_t)
                outputs[:, t] = h_t
            return outputs, (h_t, c_t)

    model = env.init(HandLSTM(3, 6))
    head = env.init(nn.Linear(6, 1))
    optimizer = torch.optim.RMSprop(list(model.parameters()) + list(head.parameters()),
                                    lr=1e-2, centered=True)
    x = env.randn(4, 5, 3)
    y = torch.cumsum(x[..., :1], dim=1)

    def step(x, y):
        optimizer.zero_grad()
        out, (h, c) = model(x)
        loss = F.mse_loss(head(out), y)
        loss.backward()
        optimizer.step()
        return loss.item(), out.grad_fn is not None

    step = env.step(step)
    env.rec("losses", [step(x, y) for _ in range(3)])
    env.rec("params", list(model.parameters()))
    # the same recurrence by nn.LSTM's weights: the gate order i, f, g, o
    lstm = nn.LSTM(3, 6, batch_first=True)
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(model.W.t())
        lstm.weight_hh_l0.copy_(model.U.t())
        lstm.bias_ih_l0.copy_(model.bias)
        lstm.bias_hh_l0.zero_()
        ref, _ = lstm(x)
        mine, _ = model(x)
    env.rec("as nn.LSTM", ((ref - mine).abs().max() < 1e-5, mine))


def segmentation_losses(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_cls = 3

    class FocalLoss(nn.Module):
        def __init__(self, alpha, gamma=2.0):
            super().__init__()
            self.register_buffer("alpha", alpha)
            self.gamma = gamma

        def forward(self, logits, target):
            logp = F.log_softmax(logits, dim=1)
            logpt = logp.gather(1, target.unsqueeze(1)).squeeze(1)
            pt = logpt.exp()
            at = self.alpha.gather(0, target.view(-1)).view_as(target)
            return (-at * (1 - pt) ** self.gamma * logpt).mean()

    def dice_loss(logits, target, eps=1.0):
        probs = logits.softmax(dim=1)
        onehot = F.one_hot(target, n_cls).permute(0, 3, 1, 2).float()
        dims = (0, 2, 3)
        inter = torch.sum(probs * onehot, dims)
        card = torch.sum(probs + onehot, dims)
        return 1 - ((2 * inter + eps) / (card + eps)).mean()

    model = env.init(nn.Sequential(nn.Conv2d(2, 8, 3, padding=1), nn.BatchNorm2d(8),
                                   nn.ReLU(), nn.Conv2d(8, n_cls, 1)))
    edge = env.init(nn.Conv2d(2, 1, 3, padding=1))
    focal = FocalLoss(torch.tensor([0.25, 0.5, 0.25]))
    bce = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([3.0]))
    optimizer = torch.optim.Adam(list(model.parameters()) + list(edge.parameters()), lr=1e-2)
    x, target = env.randn(2, 2, 6, 6), env.randint(0, n_cls, (2, 6, 6))
    edges = (target[:, None, 1:, :] != target[:, None, :-1, :]).float()
    edges = F.pad(edges, (0, 0, 0, 1))

    def step(x, target, edges):
        optimizer.zero_grad()
        logits = model(x)
        lf, ld = focal(logits, target), dice_loss(logits, target)
        le = bce(edge(x), edges)
        loss = lf + ld + 0.5 * le
        loss.backward()
        optimizer.step()
        miou = []
        pred = logits.argmax(1)
        for c in range(n_cls):
            inter = ((pred == c) & (target == c)).sum().item()
            union = ((pred == c) | (target == c)).sum().item()
            miou.append(inter / union if union else float("nan"))
        return lf.item(), ld.item(), le.item(), miou

    step = env.step(step)
    for i in range(3):
        env.rec(f"step {i}", step(x, target, edges))
    env.rec("focal buffer", (focal.alpha, list(dict(focal.named_buffers()))))


def amp_recipe(torch, env):
    """The AMP recipe as scripts written for GPUs run it on a CPU: use_amp=False, autocast
    and GradScaler disabled (CPU autocast itself is not emulated by llgrad: it raises)."""
    nn = torch.nn
    use_amp, device = False, "cpu"

    model = env.init(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
    x, y = env.randn(6, 8), env.randint(0, 4, (6,))

    def step(x, y):
        with torch.autocast(device_type=device, dtype=torch.float16, enabled=use_amp):
            output = model(x)
            loss = loss_fn(output, y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.1)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        return output.dtype, loss.item(), norm

    step = env.step(step)
    for i in range(3):
        env.rec(f"step {i}", step(x, y))
    checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                  "scaler": scaler.state_dict()}
    env.rec("scaler", (checkpoint["scaler"], scaler.is_enabled(), scaler.get_scale(),
                       torch.is_autocast_enabled()))
    env.rec("weights", list(model.parameters()))


def jit_export(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3)
            self.fc = nn.Linear(4 * 4 * 4, 3)

        def forward(self, x):
            x = F.relu(self.conv(x))
            x = F.max_pool2d(x, 1)
            return self.fc(torch.flatten(x, 1))

    model = env.init(Net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = env.randn(3, 1, 6, 6), env.randint(0, 3, (3,))

    def step(x, y):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    step = env.step(step)
    env.rec("train", [step(x, y) for _ in range(2)])
    model.eval()
    with warnings.catch_warnings(record=True) as caught:     # (both deprecate TorchScript)
        warnings.simplefilter("always")
        traced = torch.jit.trace(model, x)
        scripted = torch.jit.script(model)
    # (how many times PyTorch warns hangs on its cache of compiled module types)
    env.rec("warnings", sorted({(w.category.__name__, str(w.message)) for w in caught}))
    with torch.no_grad():
        env.rec("traced", (traced(x), scripted(x), model(x)))
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    fresh = Net()
    fresh.load_state_dict(torch.load(buffer))
    fresh.eval()
    with torch.no_grad():
        env.rec("reloaded", fresh(x))
