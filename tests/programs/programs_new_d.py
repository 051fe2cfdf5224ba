"""Programs of common kinds: an attention seq2seq built on nn.MultiheadAttention with
teacher forcing and greedy decoding; a pointer network that learns to sort; a spatial
transformer network (affine_grid, grid_sample); a DDPM (noise schedule gathered by
timestep, sinusoidal embeddings, ancestral sampling); a CTC sequence recogniser
(nn.CTCLoss, greedy CTC decoding). Programs `f(torch, env)`, see tutorial_harness.py."""
import math


def mha_seq2seq(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    SOS, EOS, V, E, H = 0, 1, 10, 16, 16      # copy task: reverse a sequence of tokens 2..9

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, E)
            self.rnn = nn.GRU(E, H, batch_first=True)

        def forward(self, src):
            outputs, hidden = self.rnn(self.embedding(src))
            return outputs, hidden

    class AttnDecoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, E)
            self.attention = nn.MultiheadAttention(H, num_heads=2, batch_first=True)
            self.rnn = nn.GRU(E + H, H, batch_first=True)
            self.out = nn.Linear(2 * H, V)

        def forward(self, tokens, hidden, encoder_outputs):
            embedded = self.embedding(tokens)                             # (B, T, E)
            query = hidden.permute(1, 0, 2)                               # (B, 1, H)
            context, weights = self.attention(query, encoder_outputs, encoder_outputs)
            output, hidden = self.rnn(torch.cat((embedded, context), dim=2), hidden)
            return self.out(torch.cat((output, context), dim=2)), hidden, weights

    encoder, decoder = env.init(Encoder()), env.init(AttnDecoder())
    params = list(encoder.parameters()) + list(decoder.parameters())
    optimizer = optim.Adam(params, lr=1e-2)
    criterion = nn.NLLLoss()
    src = env.randint(2, V, (12, 5))
    tgt = torch.cat([src.flip(1), torch.full((12, 1), EOS, dtype=torch.long)], dim=1)

    def train_step(src, tgt):
        optimizer.zero_grad()
        encoder_outputs, hidden = encoder(src)
        decoder_input = torch.full((src.size(0), 1), SOS, dtype=torch.long)
        loss = 0
        for t in range(tgt.size(1)):
            logits, hidden, _ = decoder(decoder_input, hidden, encoder_outputs)
            loss = loss + criterion(F.log_softmax(logits.squeeze(1), dim=-1), tgt[:, t])
            decoder_input = tgt[:, t].unsqueeze(1)        # teacher forcing
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        return loss.item() / tgt.size(1)

    train_step = env.step(train_step)
    for epoch in range(4):
        env.rec(f"loss {epoch}", train_step(src[:6], tgt[:6]))
        env.rec(f"loss {epoch} b", train_step(src[6:], tgt[6:]))

    encoder.eval()
    decoder.eval()
    with torch.no_grad():
        encoder_outputs, hidden = encoder(src[:4])
        decoder_input = torch.full((4, 1), SOS, dtype=torch.long)
        decoded, attentions = [], []
        for _ in range(tgt.size(1)):
            logits, hidden, weights = decoder(decoder_input, hidden, encoder_outputs)
            _, topi = logits.topk(1)
            decoder_input = topi.squeeze(-1).detach()
            decoded.append(decoder_input)
            attentions.append(weights)
    env.rec("decoded", torch.cat(decoded, dim=1))
    env.rec("attentions", torch.cat(attentions, dim=1))


def pointer_sort(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    N, H = 5, 16

    class PointerNet(nn.Module):
        def __init__(self, hidden):
            super().__init__()
            self.embed = nn.Linear(1, hidden)
            self.encoder = nn.LSTM(hidden, hidden, batch_first=True)
            self.decoder = nn.LSTMCell(hidden, hidden)
            self.W1 = nn.Linear(hidden, hidden, bias=False)
            self.W2 = nn.Linear(hidden, hidden, bias=False)
            self.v = nn.Linear(hidden, 1, bias=False)
            self.decoder_start = nn.Parameter(torch.zeros(hidden))

        def forward(self, x, targets=None):
            B, n = x.shape
            embedded = self.embed(x.unsqueeze(-1))                       # (B, n, H)
            enc, (h, c) = self.encoder(embedded)
            h, c = h[0], c[0]
            dec_in = self.decoder_start.unsqueeze(0).expand(B, -1)
            mask = torch.zeros(B, n, dtype=torch.bool)
            log_pointers, pointers = [], []
            enc_proj = self.W1(enc)
            for i in range(n):
                h, c = self.decoder(dec_in, (h, c))
                scores = self.v(torch.tanh(enc_proj + self.W2(h).unsqueeze(1))).squeeze(-1)
                scores = scores.masked_fill(mask, float("-inf"))
                log_p = F.log_softmax(scores, dim=-1)
                idx = targets[:, i] if targets is not None else log_p.argmax(dim=-1)
                log_pointers.append(log_p)
                pointers.append(idx)
                mask = mask.scatter(1, idx.unsqueeze(1), True)
                dec_in = embedded[torch.arange(B), idx]
            return torch.stack(log_pointers, dim=1), torch.stack(pointers, dim=1)

    model = env.init(PointerNet(H))
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
    x = env.rand(16, N)
    targets = x.argsort(dim=1)

    def train_step(x, targets):
        model.train()
        optimizer.zero_grad()
        log_pointers, _ = model(x, targets)
        loss = F.nll_loss(log_pointers.reshape(-1, N), targets.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for epoch in range(6):
        env.rec(f"loss {epoch}", train_step(x[:8] if epoch % 2 else x[8:],
                                            targets[:8] if epoch % 2 else targets[8:]))
        scheduler.step()

    model.eval()
    with torch.no_grad():
        _, pointers = model(x)
        sorted_x = x.gather(1, pointers)
        exact = (pointers == targets).all(dim=1).float().mean()
    env.rec("eval", (pointers, sorted_x, exact, (sorted_x[:, 1:] >= sorted_x[:, :-1]).all()))


def spatial_transformer(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class Net(nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.conv1 = nn.Conv2d(1, 4, kernel_size=3)
            self.fc1 = nn.Linear(4 * 5 * 5, 3)
            # Spatial transformer localization-network
            self.localization = nn.Sequential(
                nn.Conv2d(1, 4, kernel_size=3), nn.MaxPool2d(2, stride=2), nn.ReLU(True))
            # Regressor for the 3 * 2 affine matrix
            self.fc_loc = nn.Sequential(nn.Linear(4 * 5 * 5, 8), nn.ReLU(True),
                                        nn.Linear(8, 3 * 2))
            # Initialize the weights/bias with identity transformation
            self.fc_loc[2].weight.data.zero_()
            self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

        def stn(self, x):
            xs = self.localization(x)
            xs = xs.view(-1, 4 * 5 * 5)
            theta = self.fc_loc(xs)
            theta = theta.view(-1, 2, 3)
            grid = F.affine_grid(theta, x.size(), align_corners=False)
            return F.grid_sample(x, grid, align_corners=False)

        def forward(self, x):
            x = self.stn(x)
            x = F.relu(F.max_pool2d(self.conv1(x), 2))
            x = x.view(-1, 4 * 5 * 5)
            return F.log_softmax(self.fc1(x), dim=1)

    model = env.init(Net())
    optimizer = optim.SGD(model.parameters(), lr=0.05)
    data, target = env.randn(16, 1, 12, 12), env.randint(0, 3, (16,))

    def train_step(data, target):
        model.train()
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for epoch in range(4):
        env.rec(f"loss {epoch}", train_step(data[:8], target[:8]))
        env.rec(f"loss {epoch} b", train_step(data[8:], target[8:]))

    model.eval()
    with torch.no_grad():
        output = model(data)
        pred = output.max(1, keepdim=True)[1]
        correct = pred.eq(target.view_as(pred)).sum().item()
        transformed = model.stn(data[:2])
    env.rec("test", (F.nll_loss(output, target, reduction="sum"), correct, transformed))
    env.rec("state", model.state_dict())


def ddpm(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    T = 20
    betas = torch.linspace(1e-4, 0.2, T)
    alphas = 1.0 - betas
    alphas_cumprod = torch.cumprod(alphas, dim=0)
    alphas_cumprod_prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.0)
    sqrt_recip_alphas = torch.sqrt(1.0 / alphas)
    sqrt_alphas_cumprod = torch.sqrt(alphas_cumprod)
    sqrt_one_minus_alphas_cumprod = torch.sqrt(1.0 - alphas_cumprod)
    posterior_variance = betas * (1.0 - alphas_cumprod_prev) / (1.0 - alphas_cumprod)

    def extract(a, t, x_shape):
        batch_size = t.shape[0]
        out = a.gather(-1, t)
        return out.reshape(batch_size, *((1,) * (len(x_shape) - 1)))

    class SinusoidalPositionEmbeddings(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dim = dim

        def forward(self, time):
            half_dim = self.dim // 2
            embeddings = math.log(10000) / (half_dim - 1)
            embeddings = torch.exp(torch.arange(half_dim) * -embeddings)
            embeddings = time[:, None] * embeddings[None, :]
            return torch.cat((embeddings.sin(), embeddings.cos()), dim=-1)

    class Denoiser(nn.Module):
        def __init__(self, dim=2, hidden=32, time_dim=8):
            super().__init__()
            self.time_mlp = nn.Sequential(SinusoidalPositionEmbeddings(time_dim),
                                          nn.Linear(time_dim, hidden), nn.SiLU())
            self.inp = nn.Linear(dim, hidden)
            self.net = nn.Sequential(nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                     nn.Linear(hidden, dim))

        def forward(self, x, t):
            return self.net(self.inp(x) + self.time_mlp(t.float()))

    model = env.init(Denoiser())
    optimizer = optim.Adam(model.parameters(), lr=2e-3)

    def q_sample(x_start, t, noise):
        return extract(sqrt_alphas_cumprod, t, x_start.shape) * x_start + \
            extract(sqrt_one_minus_alphas_cumprod, t, x_start.shape) * noise

    def p_losses(x_start, t, noise):
        x_noisy = q_sample(x_start, t, noise)
        predicted_noise = model(x_noisy, t)
        return F.smooth_l1_loss(noise, predicted_noise)

    def train_step(x_start, t, noise):
        optimizer.zero_grad()
        loss = p_losses(x_start, t, noise)
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    angles = env.rand(64) * 2 * math.pi
    data = torch.stack([angles.cos(), angles.sin()], dim=1)         # points on a circle
    for step in range(6):
        batch = data[(step % 4) * 16:(step % 4) * 16 + 16]
        env.rec(f"loss {step}", train_step(batch, env.randint(0, T, (16,)), env.randn(16, 2)))

    @torch.no_grad()
    def p_sample(x, t, t_index, noise):
        betas_t = extract(betas, t, x.shape)
        sqrt_one_minus_alphas_cumprod_t = extract(sqrt_one_minus_alphas_cumprod, t, x.shape)
        sqrt_recip_alphas_t = extract(sqrt_recip_alphas, t, x.shape)
        model_mean = sqrt_recip_alphas_t * (
            x - betas_t * model(x, t) / sqrt_one_minus_alphas_cumprod_t)
        if t_index == 0:
            return model_mean
        posterior_variance_t = extract(posterior_variance, t, x.shape)
        return model_mean + torch.sqrt(posterior_variance_t) * noise

    model.eval()
    x = env.randn(8, 2)
    for i in reversed(range(0, T)):
        x = p_sample(x, torch.full((8,), i, dtype=torch.long), i, env.randn(8, 2))
    env.rec("samples", x)


def ctc_recognizer(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    BLANK, C, T, FEATS = 0, 5, 12, 6

    class Recognizer(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(FEATS, 16, kernel_size=3, padding=1)
            self.rnn = nn.GRU(16, 16, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(32, C)

        def forward(self, x):                                   # x: (B, FEATS, T)
            x = F.relu(self.conv(x)).transpose(1, 2)            # (B, T, 16)
            x, _ = self.rnn(x)
            return self.fc(x).log_softmax(2)                    # (B, T, C)

    model = env.init(Recognizer())
    optimizer = optim.Adam(model.parameters(), lr=5e-3)
    ctc_loss = nn.CTCLoss(blank=BLANK, zero_infinity=True)
    features = env.randn(6, FEATS, T)
    target_lengths = torch.tensor([3, 4, 2, 4, 3, 1])
    targets = env.randint(1, C, (6, 4))
    input_lengths = torch.tensor([12, 12, 10, 11, 12, 8])

    def train_step(x, targets, input_lengths, target_lengths):
        optimizer.zero_grad()
        log_probs = model(x).transpose(0, 1)                    # (T, B, C)
        loss = ctc_loss(log_probs, targets, input_lengths, target_lengths)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for epoch in range(5):
        env.rec(f"loss {epoch}", train_step(features, targets, input_lengths, target_lengths))

    # the same loss on concatenated targets, per sample
    flat = torch.cat([targets[i, :n] for i, n in enumerate(target_lengths.tolist())])
    model.eval()
    with torch.no_grad():
        log_probs = model(features).transpose(0, 1)
        per_sample = F.ctc_loss(log_probs, flat, input_lengths, target_lengths,
                                blank=BLANK, reduction="none")
        best = log_probs.argmax(dim=2).t()                      # (B, T) greedy decoding
    decoded = []
    for seq, n in zip(best.tolist(), input_lengths.tolist()):
        out, prev = [], BLANK
        for s in seq[:n]:
            if s != prev and s != BLANK:
                out.append(s)
            prev = s
        decoded.append(out)
    env.rec("eval", (per_sample, best, decoded))
