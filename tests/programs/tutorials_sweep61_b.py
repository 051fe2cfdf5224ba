"""Sweep 61 (H1), second file: neural arithmetic logic units, ChebNet node classification
with PyG's accuracy `int(correct.sum()) / int(mask.sum())` returned (two returned numbers:
one output, tracer/returned.py), and a Conformer encoder trained with CTC (dropout in the
step from the seeded generator). Programs `f(torch, env)`, see tutorial_harness.py."""
import math

def nalu_arithmetic(torch, env):
    """Neural arithmetic logic units (Trask et al., as the popular re-implementations write
    them): NAC weights W = tanh(W_hat) * sigmoid(M_hat) built in forward, the NALU's
    multiplicative path exp(W log(|x| + eps)) and a learned sigmoid gate between the two
    paths; learning y = a + b and y = a * b of two sums of input slices; RMSprop; the
    interpolation and extrapolation errors (inputs 5x larger) under no_grad."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(33)

    class NeuralAccumulatorCell(nn.Module):
        def __init__(self, in_dim, out_dim):
            super().__init__()
            self.W_hat = nn.Parameter(torch.Tensor(out_dim, in_dim))
            self.M_hat = nn.Parameter(torch.Tensor(out_dim, in_dim))
            nn.init.kaiming_uniform_(self.W_hat, a=math.sqrt(5))
            nn.init.kaiming_uniform_(self.M_hat, a=math.sqrt(5))

        def forward(self, input):
            W = torch.tanh(self.W_hat) * torch.sigmoid(self.M_hat)
            return F.linear(input, W, None)

    class NeuralArithmeticLogicUnitCell(nn.Module):
        def __init__(self, in_dim, out_dim):
            super().__init__()
            self.eps = 1e-10
            self.G = nn.Parameter(torch.Tensor(out_dim, in_dim))
            self.nac = NeuralAccumulatorCell(in_dim, out_dim)
            nn.init.kaiming_uniform_(self.G, a=math.sqrt(5))

        def forward(self, input):
            a = self.nac(input)
            g = torch.sigmoid(F.linear(input, self.G, None))
            add_sub = g * a
            log_input = torch.log(torch.abs(input) + self.eps)
            m = torch.exp(self.nac(log_input))
            mul_div = (1 - g) * m
            return add_sub + mul_div

    class NALU(nn.Module):
        def __init__(self, num_layers, in_dim, hidden_dim, out_dim):
            super().__init__()
            layers = [NeuralArithmeticLogicUnitCell(hidden_dim if i > 0 else in_dim,
                                                    hidden_dim if i < num_layers - 1 else out_dim)
                      for i in range(num_layers)]
            self.model = nn.Sequential(*layers)

        def forward(self, x):
            return self.model(x)

    def make_data(n, scale, op):
        x = (env.rand(n, 6) + 0.1) * scale
        a, b = x[:, :3].sum(1, keepdim=True), x[:, 2:5].sum(1, keepdim=True)
        return x, (a + b) if op == "add" else (a * b)

    for op in ("add", "mul"):
        net = env.init(NALU(2, 6, 2, 1))
        optim = torch.optim.RMSprop(net.parameters(), lr=1e-3)
        X, Y = make_data(32, 1.0, op)

        def train_step(x, y):
            out = net(x)
            loss = F.mse_loss(out, y)
            mea = torch.mean(torch.abs(y - out))
            optim.zero_grad()
            loss.backward()
            optim.step()
            return loss.item(), mea.item()

        step = env.step(train_step)
        for it in range(5):
            s = (it * 8) % 32
            env.rec(f"{op} {it}", step(X[s:s + 8], Y[s:s + 8]))
        with torch.no_grad():
            Xi, Yi = make_data(16, 1.0, op)
            Xe, Ye = make_data(16, 5.0, op)
            env.rec(f"{op} interp", F.mse_loss(net(Xi), Yi))
            env.rec(f"{op} extrap", F.mse_loss(net(Xe), Ye))
        env.rec(f"{op} params", dict(net.state_dict()))


def chebnet_node_classification(torch, env):
    """ChebNet (Defferrard et al.; PyG's ChebConv written out for a dense graph): the scaled
    Laplacian L~ = 2 L / lambda_max - I of the symmetric normalised Laplacian (lambda_max
    from torch.linalg.eigvalsh), the Chebyshev recursion T_k = 2 L~ T_{k-1} - T_{k-2} with
    one Linear per order; two layers with dropout; a semi-supervised node split by boolean
    masks (train/val/test); Adam with weight decay on the first layer only (param groups);
    early stopping keeping the best state_dict by validation accuracy."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(37)
    n, feat, hidden, classes, K = 30, 6, 16, 3, 3

    # a stochastic block model: 3 communities
    y = torch.arange(n) % classes
    p = torch.where(y[:, None] == y[None, :], torch.tensor(0.35), torch.tensor(0.04))
    upper = (env.rand(n, n) < p).float().triu(1)
    A = upper + upper.t()
    X = F.one_hot(y, classes).float() @ env.randn(classes, feat) * 0.6 + env.randn(n, feat)
    deg = A.sum(1)
    d_inv_sqrt = deg.pow(-0.5).masked_fill(deg == 0, 0.0)
    L = torch.eye(n) - d_inv_sqrt[:, None] * A * d_inv_sqrt[None, :]
    lambda_max = torch.linalg.eigvalsh(L).max()
    L_tilde = 2.0 * L / lambda_max - torch.eye(n)
    train_mask = torch.zeros(n, dtype=torch.bool)
    train_mask[:9] = True
    val_mask = torch.zeros(n, dtype=torch.bool)
    val_mask[9:18] = True
    test_mask = ~(train_mask | val_mask)

    class ChebConv(nn.Module):
        def __init__(self, cin, cout, K):
            super().__init__()
            self.lins = nn.ModuleList([nn.Linear(cin, cout, bias=False) for _ in range(K)])
            self.bias = nn.Parameter(torch.zeros(cout))

        def forward(self, x, L_tilde):
            Tx_0 = x
            out = self.lins[0](Tx_0)
            if len(self.lins) > 1:
                Tx_1 = L_tilde @ x
                out = out + self.lins[1](Tx_1)
            for lin in self.lins[2:]:
                Tx_2 = 2.0 * (L_tilde @ Tx_1) - Tx_0
                out = out + lin(Tx_2)
                Tx_0, Tx_1 = Tx_1, Tx_2
            return out + self.bias

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = ChebConv(feat, hidden, K)
            self.conv2 = ChebConv(hidden, classes, K)

        def forward(self, x, L_tilde):
            x = F.dropout(x, p=0.5, training=self.training)
            x = F.relu(self.conv1(x, L_tilde))
            x = F.dropout(x, p=0.5, training=self.training)
            return F.log_softmax(self.conv2(x, L_tilde), dim=1)

    model = env.init(Net())
    optimizer = torch.optim.Adam([dict(params=model.conv1.parameters(), weight_decay=5e-4),
                                  dict(params=model.conv2.parameters(), weight_decay=0)],
                                 lr=0.01)

    def train():
        model.train()
        optimizer.zero_grad()
        out = model(X, L_tilde)
        loss = F.nll_loss(out[train_mask], y[train_mask])
        loss.backward()
        optimizer.step()
        return float(loss)

    def test():
        model.eval()
        with torch.no_grad():
            pred = model(X, L_tilde).argmax(dim=-1)
        return [int((pred[m] == y[m]).sum()) / int(m.sum())
                for m in (train_mask, val_mask, test_mask)]

    train, test = env.step(train), env.step(test)
    best_val, best_state = -1.0, None
    for epoch in range(5):
        loss = train()
        accs = test()
        env.rec(f"epoch {epoch}", (loss, accs))
        if accs[1] > best_val:
            best_val = accs[1]
            best_state = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(best_state)
    env.rec("best", (best_val, test()))
    env.rec("params", dict(model.state_dict()))


def conformer_ctc(torch, env):
    """A Conformer encoder (Gulati et al.; torchaudio.models.Conformer written out) trained
    with CTC: a Conv2d subsampling front end, macaron half-step feed-forward modules
    (LayerNorm, SiLU, dropout), MultiheadAttention with a key_padding_mask from the
    lengths, the convolution module (pointwise Conv1d, GLU, depthwise Conv1d, BatchNorm1d,
    SiLU, pointwise), a final LayerNorm; F.ctc_loss on log_softmax over (T, N, C) with
    input and target lengths; AdamW with a Noam-like LambdaLR; greedy CTC decoding."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(35)
    n_mels, d, heads, n_tok, N, T_in = 8, 16, 2, 6, 4, 20

    class FeedForward(nn.Module):
        def __init__(self, d, mult=2, p=0.1):
            super().__init__()
            self.seq = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d * mult), nn.SiLU(),
                                     nn.Dropout(p), nn.Linear(d * mult, d), nn.Dropout(p))

        def forward(self, x):
            return self.seq(x)

    class ConvModule(nn.Module):
        def __init__(self, d, kernel=5, p=0.1):
            super().__init__()
            self.ln = nn.LayerNorm(d)
            self.pw1 = nn.Conv1d(d, 2 * d, 1)
            self.dw = nn.Conv1d(d, d, kernel, padding=(kernel - 1) // 2, groups=d, bias=False)
            self.bn = nn.BatchNorm1d(d)
            self.pw2 = nn.Conv1d(d, d, 1)
            self.drop = nn.Dropout(p)

        def forward(self, x):                       # (N, T, d)
            x = self.ln(x).transpose(1, 2)
            x = F.glu(self.pw1(x), dim=1)
            x = F.silu(self.bn(self.dw(x)))
            return self.drop(self.pw2(x)).transpose(1, 2)

    class ConformerLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ffn1, self.ffn2 = FeedForward(d), FeedForward(d)
            self.attn_ln = nn.LayerNorm(d)
            # (no in-projection bias: the key bias's gradient is zero up to rounding, and
            # Adam turns rounding noise into full steps)
            self.attn = nn.MultiheadAttention(d, heads, dropout=0.1, bias=False,
                                              batch_first=True)
            self.attn_drop = nn.Dropout(0.1)
            self.conv = ConvModule(d)
            self.final_ln = nn.LayerNorm(d)

        def forward(self, x, pad_mask):
            x = x + 0.5 * self.ffn1(x)
            h = self.attn_ln(x)
            h, _ = self.attn(h, h, h, key_padding_mask=pad_mask, need_weights=False)
            x = x + self.attn_drop(h)
            x = x + self.conv(x)
            x = x + 0.5 * self.ffn2(x)
            return self.final_ln(x)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.subsample = nn.Sequential(nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.ReLU())
            self.proj = nn.Linear(4 * (n_mels // 2), d)
            self.layers = nn.ModuleList([ConformerLayer() for _ in range(2)])
            self.head = nn.Linear(d, n_tok + 1)

        def forward(self, feats, lengths):          # feats (N, T, n_mels)
            x = self.subsample(feats.unsqueeze(1))  # (N, 4, T/2, n_mels/2)
            b, c, t, f = x.shape
            x = self.proj(x.permute(0, 2, 1, 3).reshape(b, t, c * f))
            out_lengths = (lengths + 1) // 2
            pad_mask = torch.arange(t)[None, :] >= out_lengths[:, None]
            for layer in self.layers:
                x = layer(x, pad_mask)
            return self.head(x), out_lengths

    lengths = torch.tensor([20, 18, 15, 12])
    feats = env.randn(N, T_in, n_mels)
    feats = feats * (torch.arange(T_in)[None, :, None] < lengths[:, None, None])
    target_lengths = torch.tensor([4, 3, 3, 2])
    targets = env.randint(1, n_tok + 1, (N, 4))

    model = env.init(Encoder())
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.98), weight_decay=1e-3)
    warmup = 3
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, (warmup / (s + 1)) ** 0.5))

    def train_step(feats, lengths, targets, target_lengths):
        model.train()
        logits, out_lengths = model(feats, lengths)
        log_probs = logits.log_softmax(-1).transpose(0, 1)      # (T, N, C)
        loss = F.ctc_loss(log_probs, targets, out_lengths, target_lengths, blank=0,
                          zero_infinity=True)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        return loss.item()

    def greedy_decode(feats, lengths):
        model.eval()
        with torch.no_grad():
            logits, out_lengths = model(feats, lengths)
            best = logits.argmax(-1)
        return best, out_lengths

    step = env.step(train_step)
    for it in range(5):
        env.rec(f"loss {it}", step(feats, lengths, targets, target_lengths))
        sched.step()
    best, out_lengths = greedy_decode(feats, lengths)
    hyps = []
    for b in range(N):
        seq = best[b, :out_lengths[b]].tolist()
        hyps.append([t for i, t in enumerate(seq) if t != 0 and (i == 0 or t != seq[i - 1])])
    env.rec("hyps", hyps)
    env.rec("params", dict(model.state_dict()))
