"""Tutorial programs on losses (see tutorial_harness.py): supervised contrastive (SupCon)
loss with label masks, evidential deep learning with a Dirichlet (digamma / lgamma) and a
KL annealing coefficient passed as an argument, the asymmetric loss (ASL) for multi-label
classification, a token tagger over pack_padded_sequence(enforce_sorted=False) with
ignore_index=-100, a Charbonnier + SSIM-like image loss with avg_pool2d statistics, and a
generalised Dice + boundary loss for segmentation."""


def supcon_loss(torch, env):
    """Khosla et al.'s supervised contrastive loss: two augmented views concatenated,
    F.normalize projections, similarity / temperature minus its row max (detached), the
    self-contrast removed with a scatter'd logits mask, positives from labels.eq(labels.T),
    mean log-likelihood over positives."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    enc = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 8))
    opt = torch.optim.SGD(enc.parameters(), lr=0.05, momentum=0.9)
    x = torch.randn(12, 6)
    labels = torch.randint(0, 3, (12,))
    noise = env.randn(6, 2, 12, 6, scale=0.1)

    def supcon(features, labels, temperature=0.1):
        n = labels.shape[0]
        labels = labels.contiguous().view(-1, 1)
        mask = torch.eq(labels, labels.T).float().repeat(2, 2)
        feats = torch.cat(torch.unbind(features, dim=1), dim=0)
        logits = torch.div(feats @ feats.T, temperature)
        logits_max, _ = torch.max(logits, dim=1, keepdim=True)
        logits = logits - logits_max.detach()
        logits_mask = torch.scatter(torch.ones_like(mask), 1,
                                    torch.arange(2 * n).view(-1, 1), 0)
        mask = mask * logits_mask
        exp_logits = torch.exp(logits) * logits_mask
        log_prob = logits - torch.log(exp_logits.sum(1, keepdim=True))
        mean_log_prob_pos = (mask * log_prob).sum(1) / mask.sum(1)
        return -mean_log_prob_pos.mean()

    def train_step(v1, v2, labels):
        opt.zero_grad()
        f = torch.stack([F.normalize(enc(v1), dim=1), F.normalize(enc(v2), dim=1)], dim=1)
        loss = supcon(f, labels)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x + noise[i, 0], x + noise[i, 1], labels).item() for i in range(6)])
    env.rec("params", list(enc.parameters()))


def evidential_dirichlet(torch, env):
    """Sensoy et al.'s evidential classification: softplus evidence, alpha = evidence + 1,
    the expected-MSE loss under Dir(alpha) plus an annealed KL to the uniform Dirichlet
    (torch.lgamma, torch.digamma) whose coefficient min(1, epoch / 5) is an argument of the
    step; uncertainty K / S at the end."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    K = 3
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, K))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3, weight_decay=5e-3)
    x = torch.randn(30, 4)
    y = F.one_hot((x[:, 0] > 0).long() + (x[:, 1] > 0.5).long(), K).float()

    def kl_uniform(alpha):
        ones = torch.ones((1, K))
        s = alpha.sum(1, keepdim=True)
        first = torch.lgamma(s) - torch.lgamma(alpha).sum(1, keepdim=True) \
            - torch.lgamma(ones.sum(1, keepdim=True))
        second = ((alpha - ones) * (torch.digamma(alpha) - torch.digamma(s))).sum(
            1, keepdim=True)
        return first + second

    def train_step(x, y, coef):
        opt.zero_grad()
        alpha = F.softplus(model(x)) + 1
        s = alpha.sum(1, keepdim=True)
        p = alpha / s
        err = ((y - p) ** 2).sum(1, keepdim=True)
        var = (p * (1 - p) / (s + 1)).sum(1, keepdim=True)
        alpha_tilde = y + (1 - y) * alpha
        loss = (err + var + coef * kl_uniform(alpha_tilde)).mean()
        loss.backward()
        opt.step()
        return loss, K / s.detach()

    step = env.step(train_step)
    hist = []
    for epoch in range(8):
        loss, unc = step(x, y, min(1.0, epoch / 5))
        hist.append(loss.item())
    env.rec("hist", hist)
    env.rec("uncertainty", unc)
    env.rec("params", list(model.parameters()))


def asymmetric_multilabel_loss(torch, env):
    """The ASL loss (Ridnik et al.) for multi-label: sigmoid probabilities, the negative
    probabilities shifted by a clip (xs_neg + clip).clamp(max=1), log of clamp(min=eps),
    asymmetric focusing torch.pow(1 - pt, gamma) with gamma chosen per element by the
    targets, the focusing weight computed under torch.no_grad (disable_torch_grad_focal_loss)."""
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(7, 16), nn.ReLU(), nn.Linear(16, 5))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(20, 7)
    y = (torch.rand(20, 5) < 0.3).float()

    def asl(logits, y, gamma_neg=4, gamma_pos=1, clip=0.05, eps=1e-8):
        xs_pos = torch.sigmoid(logits)
        xs_neg = 1 - xs_pos
        xs_neg = (xs_neg + clip).clamp(max=1)
        loss = y * torch.log(xs_pos.clamp(min=eps)) + (1 - y) * torch.log(
            xs_neg.clamp(min=eps))
        with torch.no_grad():
            pt = xs_pos * y + xs_neg * (1 - y)
            gamma = gamma_pos * y + gamma_neg * (1 - y)
            w = torch.pow(1 - pt, gamma)
        return -(loss * w).sum()

    def train_step(x, y):
        opt.zero_grad()
        loss = asl(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(6)])
    env.rec("params", list(model.parameters()))


def packed_unsorted_tagger(torch, env):
    """A POS tagger over variable-length sentences: pad_sequence(batch_first=True), a
    2-layer bidirectional GRU run on pack_padded_sequence(lengths, batch_first=True,
    enforce_sorted=False), pad_packed_sequence(total_length=T), tags padded with -100 and
    F.cross_entropy's default ignore_index; token accuracy on real tokens."""
    nn, F = torch.nn, torch.nn.functional
    rnn_utils = torch.nn.utils.rnn
    torch.manual_seed(0)
    V, NT, T = 15, 4, 7
    lengths = [5, 7, 3, 6, 2]
    sents = [torch.randint(1, V, (n,)) for n in lengths]
    tags = [s % NT for s in sents]

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, 10, padding_idx=0)
            self.rnn = nn.GRU(10, 8, num_layers=2, bidirectional=True, batch_first=True)
            self.out = nn.Linear(16, NT)

        def forward(self, x, lengths):
            packed = rnn_utils.pack_padded_sequence(self.emb(x), lengths, batch_first=True,
                                                    enforce_sorted=False)
            out, h = self.rnn(packed)
            out, lens = rnn_utils.pad_packed_sequence(out, batch_first=True, total_length=T)
            return self.out(out), h

    model = Tagger()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = rnn_utils.pad_sequence(sents, batch_first=True)
    x = F.pad(x, (0, T - x.shape[1]))
    y = rnn_utils.pad_sequence(tags, batch_first=True, padding_value=-100)
    y = F.pad(y, (0, T - y.shape[1]), value=-100)
    lens = torch.tensor(lengths)

    def train_step(x, y, lens):
        opt.zero_grad()
        logits, h = model(x, lens)
        loss = F.cross_entropy(logits.reshape(-1, NT), y.reshape(-1))
        loss.backward()
        opt.step()
        mask = y != -100
        acc = ((logits.argmax(-1) == y) & mask).sum() / mask.sum()
        return loss, acc, h

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        loss, acc, h = step(x, y, lens)
        hist.append((loss.item(), acc.item()))
    env.rec("hist", hist)
    env.rec("h", h)
    env.rec("params", list(model.parameters()))


def charbonnier_ssim_loss(torch, env):
    """An image-restoration loss: Charbonnier sqrt((x - y)^2 + eps^2) plus 1 - SSIM with
    local statistics from F.avg_pool2d(kernel 3, stride 1, padding 1,
    count_include_pad=False), a denoising conv net with a global residual and
    F.pixel_shuffle upsampling of a downsampled branch."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.down = nn.Conv2d(1, 8, 3, stride=2, padding=1)
            self.mid = nn.Conv2d(8, 4, 3, padding=1)
            self.fuse = nn.Conv2d(2, 1, 3, padding=1)

        def forward(self, x):
            h = F.leaky_relu(self.down(x), 0.2)
            up = F.pixel_shuffle(self.mid(h), 2)
            return x + self.fuse(torch.cat([x, up], 1))

    def ssim(a, b, c1=0.01 ** 2, c2=0.03 ** 2):
        pool = lambda t: F.avg_pool2d(t, 3, 1, 1, count_include_pad=False)  # noqa: E731
        mu_a, mu_b = pool(a), pool(b)
        var_a = pool(a * a) - mu_a ** 2
        var_b = pool(b * b) - mu_b ** 2
        cov = pool(a * b) - mu_a * mu_b
        num = (2 * mu_a * mu_b + c1) * (2 * cov + c2)
        den = (mu_a ** 2 + mu_b ** 2 + c1) * (var_a + var_b + c2)
        return (num / den).mean()

    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    clean = torch.rand(4, 1, 8, 8)
    noisy = clean + env.randn(4, 1, 8, 8, scale=0.1)

    def train_step(noisy, clean):
        opt.zero_grad()
        out = model(noisy)
        charb = torch.sqrt((out - clean) ** 2 + 1e-6).mean()
        loss = charb + 0.5 * (1 - ssim(out, clean))
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(noisy, clean).item() for _ in range(5)])
    env.rec("params", list(model.parameters()))


def generalized_dice_boundary(torch, env):
    """Segmentation with a generalised Dice loss (class weights 1 / volume^2 from the
    one-hot targets, permute(0, 3, 1, 2)) plus a boundary term from a distance-like map
    computed by max_pool2d erosion / dilation of the targets under no_grad; softmax over
    channels of a small encoder-decoder with F.interpolate(bilinear, align_corners=False)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    C = 3
    model = nn.Sequential(nn.Conv2d(2, 8, 3, stride=2, padding=1), nn.ReLU(),
                          nn.Conv2d(8, C, 1))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    img = torch.randn(3, 2, 10, 10)
    target = (img[:, 0] > 0).long() + (img[:, 1] > 0.8).long()

    def train_step(img, target):
        opt.zero_grad()
        logits = F.interpolate(model(img), size=(10, 10), mode="bilinear",
                               align_corners=False)
        probs = logits.softmax(1)
        onehot = F.one_hot(target, C).permute(0, 3, 1, 2).float()
        w = 1.0 / (onehot.sum((0, 2, 3)) ** 2 + 1e-6)
        inter = (w * (probs * onehot).sum((0, 2, 3))).sum()
        union = (w * (probs + onehot).sum((0, 2, 3))).sum()
        dice = 1 - 2 * inter / union
        with torch.no_grad():
            dil = F.max_pool2d(onehot, 3, 1, 1)
            ero = -F.max_pool2d(-onehot, 3, 1, 1)
            edge = dil - ero
        boundary = (probs * edge).mean()
        loss = dice + boundary + 0.1 * F.cross_entropy(logits, target)
        loss.backward()
        opt.step()
        return loss, dice

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        loss, dice = step(img, target)
        hist.append((loss.item(), dice.item()))
    env.rec("hist", hist)
    env.rec("params", list(model.parameters()))
