"""Vision and representation-learning programs of common kinds: ESPCN super-resolution
(PixelShuffle, interpolate, Upsample), a VQ-VAE (vector quantisation with a straight-through
estimator), a siamese/triplet embedding network with hard-negative mining, and
initialisation schemes with forward/backward hooks for feature extraction. Programs
`f(torch, env)`, see tutorial_harness.py."""
import math


def super_resolution(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    upscale = 2

    class ESPCN(nn.Module):
        def __init__(self, upscale_factor, channels=1):
            super().__init__()
            self.conv1 = nn.Conv2d(channels, 8, kernel_size=5, padding=2)
            self.conv2 = nn.Conv2d(8, 4, kernel_size=3, padding=1)
            self.conv3 = nn.Conv2d(4, channels * upscale_factor ** 2, kernel_size=3, padding=1)
            self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
            self.upscale_factor = upscale_factor

        def forward(self, x):
            base = F.interpolate(x, scale_factor=self.upscale_factor, mode="bilinear",
                                 align_corners=False)
            x = torch.tanh(self.conv1(x))
            x = torch.tanh(self.conv2(x))
            return base + self.pixel_shuffle(self.conv3(x))

    model = env.init(ESPCN(upscale))
    optimizer = optim.Adam(model.parameters(), lr=3e-3, amsgrad=True)
    scheduler = optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2], gamma=0.5)
    criterion = nn.L1Loss()
    hr = env.rand(4, 1, 8, 8)
    lr_img = F.avg_pool2d(hr, kernel_size=upscale)          # the low-resolution inputs

    def psnr(sr, hr):
        mse = F.mse_loss(sr.clamp(0, 1), hr)
        return 10 * torch.log10(1.0 / mse)

    def train_step(lr_img, hr):
        optimizer.zero_grad()
        sr = model(lr_img)
        loss = criterion(sr, hr) + 0.5 * F.huber_loss(sr, hr, delta=0.1)
        loss.backward()
        optimizer.step()
        return loss.item(), psnr(sr.detach(), hr).item()

    train_step = env.step(train_step)
    for epoch in range(4):
        env.rec(f"epoch {epoch}", train_step(lr_img, hr))
        scheduler.step()
    env.rec("state", model.state_dict())

    model.eval()
    with torch.no_grad():
        sr = model(lr_img)
        nearest = nn.Upsample(scale_factor=upscale, mode="nearest")(lr_img)
        bicubic = F.interpolate(lr_img, size=(8, 8), mode="bicubic", align_corners=False)
        env.rec("psnr", (psnr(sr, hr), psnr(nearest, hr), psnr(bicubic, hr)))
        env.rec("sr", sr)
        # PixelUnshuffle undoes PixelShuffle
        feats = model.conv3(torch.tanh(model.conv2(torch.tanh(model.conv1(lr_img)))))
        env.rec("unshuffle", torch.equal(nn.PixelUnshuffle(upscale)(model.pixel_shuffle(feats)),
                                         feats))


def vq_vae(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class VectorQuantizer(nn.Module):
        def __init__(self, num_embeddings, embedding_dim, commitment_cost):
            super().__init__()
            self._embedding_dim = embedding_dim
            self._num_embeddings = num_embeddings
            self._embedding = nn.Embedding(num_embeddings, embedding_dim)
            self._embedding.weight.data.uniform_(-1 / num_embeddings, 1 / num_embeddings)
            self._commitment_cost = commitment_cost

        def forward(self, inputs):
            inputs = inputs.permute(0, 2, 3, 1).contiguous()          # BCHW -> BHWC
            input_shape = inputs.shape
            flat_input = inputs.view(-1, self._embedding_dim)
            distances = (torch.sum(flat_input ** 2, dim=1, keepdim=True)
                         + torch.sum(self._embedding.weight ** 2, dim=1)
                         - 2 * torch.matmul(flat_input, self._embedding.weight.t()))
            encoding_indices = torch.argmin(distances, dim=1).unsqueeze(1)
            encodings = torch.zeros(encoding_indices.shape[0], self._num_embeddings,
                                    device=inputs.device)
            encodings.scatter_(1, encoding_indices, 1)
            quantized = torch.matmul(encodings, self._embedding.weight).view(input_shape)

            e_latent_loss = F.mse_loss(quantized.detach(), inputs)
            q_latent_loss = F.mse_loss(quantized, inputs.detach())
            loss = q_latent_loss + self._commitment_cost * e_latent_loss
            quantized = inputs + (quantized - inputs).detach()       # straight-through
            avg_probs = torch.mean(encodings, dim=0)
            perplexity = torch.exp(-torch.sum(avg_probs * torch.log(avg_probs + 1e-10)))
            return loss, quantized.permute(0, 3, 1, 2).contiguous(), perplexity, encodings

    class Model(nn.Module):
        def __init__(self, num_embeddings=6, embedding_dim=3, commitment_cost=0.25):
            super().__init__()
            self._encoder = nn.Sequential(nn.Conv2d(1, 8, 4, stride=2, padding=1), nn.ReLU(True),
                                          nn.Conv2d(8, embedding_dim, kernel_size=1))
            self._vq_vae = VectorQuantizer(num_embeddings, embedding_dim, commitment_cost)
            self._decoder = nn.Sequential(
                nn.ConvTranspose2d(embedding_dim, 8, 4, stride=2, padding=1), nn.ReLU(True),
                nn.Conv2d(8, 1, kernel_size=3, padding=1))

        def forward(self, x):
            z = self._encoder(x)
            loss, quantized, perplexity, _ = self._vq_vae(z)
            x_recon = self._decoder(quantized)
            return loss, x_recon, perplexity

    model = env.init(Model())
    optimizer = optim.Adam(model.parameters(), lr=1e-2, amsgrad=False)
    data = env.rand(6, 1, 8, 8)
    data_variance = data.var().item()

    def train_step(x):
        optimizer.zero_grad()
        vq_loss, data_recon, perplexity = model(x)
        recon_error = F.mse_loss(data_recon, x) / data_variance
        loss = recon_error + vq_loss
        loss.backward()
        optimizer.step()
        return recon_error.item(), vq_loss.item(), perplexity.item()

    train_step = env.step(train_step)
    for i in range(4):
        env.rec(f"step {i}", train_step(data))
    env.rec("state", model.state_dict())

    model.eval()
    with torch.no_grad():
        z = model._encoder(data[:2])
        _, quantized, _, encodings = model._vq_vae(z)
        flat = z.permute(0, 2, 3, 1).reshape(-1, 3)
        codes = torch.cdist(flat, model._vq_vae._embedding.weight).argmin(dim=1)
        env.rec("codes", (encodings.argmax(1), codes))
        env.rec("codebook usage", torch.bincount(codes, minlength=6))
        env.rec("reconstruction", model._decoder(quantized))


def siamese_triplet(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class EmbeddingNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Sequential(nn.Linear(8, 16), nn.PReLU(), nn.Linear(16, 16),
                                    nn.PReLU(num_parameters=16), nn.Linear(16, 4))

        def forward(self, x):
            return F.normalize(self.fc(x), p=2, dim=1)

    class TripletNet(nn.Module):
        def __init__(self, embedding_net):
            super().__init__()
            self.embedding_net = embedding_net

        def forward(self, x1, x2, x3):
            return self.embedding_net(x1), self.embedding_net(x2), self.embedding_net(x3)

        def get_embedding(self, x):
            return self.embedding_net(x)

    # three classes around three centres
    centres = env.randn(3, 8, scale=2.0)
    labels = env.randint(0, 3, (12,))
    x = centres[labels] + env.randn(12, 8, scale=0.5)

    model = env.init(TripletNet(EmbeddingNet()))
    optimizer = optim.Adam(model.parameters(), lr=5e-3)
    triplet_loss = nn.TripletMarginLoss(margin=0.5, p=2)
    cosine_triplet = nn.TripletMarginWithDistanceLoss(
        distance_function=lambda a, b: 1.0 - F.cosine_similarity(a, b), margin=0.3)

    def batch_hard_triplets(emb, labels):
        """Online mining: for each anchor the farthest positive and the nearest negative."""
        dist = torch.cdist(emb, emb)
        same = labels.unsqueeze(0) == labels.unsqueeze(1)
        hardest_pos = (dist * same.float()).argmax(dim=1)
        hardest_neg = dist.masked_fill(same, float("inf")).argmin(dim=1)
        return hardest_pos, hardest_neg

    def train_step(x, labels):
        with torch.no_grad():
            pos_idx, neg_idx = batch_hard_triplets(model.get_embedding(x), labels)
        optimizer.zero_grad()
        anchor, positive, negative = model(x, x[pos_idx], x[neg_idx])
        loss = triplet_loss(anchor, positive, negative) + \
            0.5 * cosine_triplet(anchor, positive, negative)
        loss.backward()
        optimizer.step()
        return loss.item(), (pos_idx, neg_idx)

    train_step = env.step(train_step)
    for i in range(4):
        env.rec(f"triplet {i}", train_step(x, labels))

    # a siamese pair objective on the same embedding net: contrastive + cosine embedding
    pairs_a, pairs_b = x[:6], x[6:]
    target = (labels[:6] == labels[6:]).float()
    cos_loss = nn.CosineEmbeddingLoss(margin=0.2)
    rank_loss = nn.MarginRankingLoss(margin=0.1)

    def contrastive(d, y, margin=1.0):
        return (y * d.pow(2) + (1 - y) * F.relu(margin - d).pow(2)).mean() / 2

    def pair_step(a, b, target):
        optimizer.zero_grad()
        ea, eb = model.get_embedding(a), model.get_embedding(b)
        d = F.pairwise_distance(ea, eb)
        sim = F.cosine_similarity(ea, eb, dim=1)
        loss = contrastive(d, target) + cos_loss(ea, eb, 2 * target - 1) + \
            rank_loss(sim, -d, 2 * target - 1)
        loss.backward()
        optimizer.step()
        return loss

    pair_step = env.step(pair_step)
    for i in range(3):
        env.rec(f"pair {i}", pair_step(pairs_a, pairs_b, target))
    env.rec("state", model.state_dict())

    model.eval()
    with torch.no_grad():
        emb = model.get_embedding(x)
        sims = F.cosine_similarity(emb.unsqueeze(1), emb.unsqueeze(0), dim=-1)
        sims.fill_diagonal_(-2.0)
        nearest = sims.argmax(dim=1)
        env.rec("retrieval", (sims, (labels[nearest] == labels).float().mean()))


def init_and_hooks(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class ConvNet(nn.Module):
        def __init__(self, num_classes=5):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(inplace=True),
                nn.MaxPool2d(2),
                nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(inplace=True),
                nn.AdaptiveAvgPool2d((1, 1)))
            self.classifier = nn.Linear(8, num_classes)

        def forward(self, x):
            return self.classifier(torch.flatten(self.features(x), 1))

    def init_weights(m):
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.constant_(m.bias, 0.01)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight, gain=nn.init.calculate_gain("relu"))
            nn.init.zeros_(m.bias)

    model = ConvNet()
    model.apply(init_weights)
    # the draws are each library's own: their statistics, and the deterministic inits
    conv = model.features[0].weight
    fan_out = conv.size(0) * conv[0, 0].numel()
    env.rec("kaiming std", abs(conv.std().item() - math.sqrt(2.0 / fan_out)) < 0.5)
    bound = nn.init.calculate_gain("relu") * math.sqrt(6.0 / (8 + 5))
    env.rec("xavier bound", bool(model.classifier.weight.abs().max() <= bound))
    env.rec("deterministic", (model.features[0].bias, model.features[1].weight,
                              model.classifier.bias))
    env.rec("gains", [nn.init.calculate_gain(n) for n in ("linear", "tanh", "relu", "selu")]
            + [nn.init.calculate_gain("leaky_relu", 0.2)])
    w = torch.empty(4, 6)
    nn.init.orthogonal_(w)
    env.rec("orthogonal", torch.allclose(w @ w.t(), torch.eye(4), atol=1e-5))
    env.rec("eye dirac", (nn.init.eye_(torch.empty(3, 5)),
                          nn.init.dirac_(torch.empty(2, 2, 3, 3))))
    model = env.init(model)

    # forward hooks keep intermediate features; the loss uses them (feature regulariser)
    features = {}

    def get_features(name):
        def hook(module, input, output):
            features[name] = output
        return hook

    grad_norms = []

    def backward_hook(module, grad_input, grad_output):
        grad_norms.append(grad_output[0].norm())

    handles = [model.features[2].register_forward_hook(get_features("block1")),
               model.features[6].register_forward_hook(get_features("pooled"))]
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()

    def train_step(x, y):
        model.train()
        optimizer.zero_grad()
        out = model(x)
        loss = criterion(out, y) + 1e-3 * features["block1"].pow(2).mean()
        loss.backward()
        optimizer.step()
        return loss, features["pooled"].detach().flatten(1)

    train_step = env.step(train_step)
    x, y = env.randn(4, 3, 8, 8), env.randint(0, 5, (4,))
    for i in range(3):
        env.rec(f"step {i}", train_step(x, y))
        env.rec(f"hooked {i}", features["block1"].detach().sum())
    # a backward hook for diagnostics, on an eager pass (a compiled step with a module
    # backward hook runs eagerly, as torch.compile breaks the graph there)
    handles.append(model.classifier.register_full_backward_hook(backward_hook))
    for i in range(2):
        model.zero_grad()
        criterion(model(x[i:i + 2]), y[i:i + 2]).backward()
    env.rec("grad norms", grad_norms)
    for h in handles:
        h.remove()
    model.eval()
    features.clear()
    with torch.no_grad():
        env.rec("eval", model(x))
    env.rec("after remove", sorted(features))
    env.rec("state", model.state_dict())
