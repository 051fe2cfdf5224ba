"""Programs of common kinds: a Vision Transformer (Conv2d patch embedding, cls token,
positional embedding, nn.TransformerEncoder); an MLP-Mixer (unfold patches, token- and
channel-mixing MLPs, OneCycleLR); a Kim-style text CNN (Conv1d over embeddings,
max-over-time pooling); a matrix-factorisation recommender (user/item embeddings and
biases, AdamW, top-k recommendations). Programs `f(torch, env)`, see tutorial_harness.py."""
import math


def vit_classifier(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class PatchEmbedding(nn.Module):
        def __init__(self, img_size, patch_size, in_chans, embed_dim):
            super().__init__()
            self.num_patches = (img_size // patch_size) ** 2
            self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

        def forward(self, x):
            x = self.proj(x)                        # (B, E, H/P, W/P)
            return x.flatten(2).transpose(1, 2)     # (B, N, E)

    class ViT(nn.Module):
        def __init__(self, img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=16,
                     depth=2, num_heads=4, mlp_ratio=2.0):
            super().__init__()
            self.patch_embed = PatchEmbedding(img_size, patch_size, in_chans, embed_dim)
            num_patches = self.patch_embed.num_patches
            self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
            self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, embed_dim))
            nn.init.trunc_normal_(self.pos_embed, std=0.02)
            nn.init.trunc_normal_(self.cls_token, std=0.02)
            encoder_layer = nn.TransformerEncoderLayer(
                d_model=embed_dim, nhead=num_heads, dim_feedforward=int(embed_dim * mlp_ratio),
                dropout=0.0, activation="gelu", batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(encoder_layer, num_layers=depth)
            self.norm = nn.LayerNorm(embed_dim)
            self.head = nn.Linear(embed_dim, num_classes)

        def forward(self, x):
            B = x.shape[0]
            x = self.patch_embed(x)
            cls_tokens = self.cls_token.expand(B, -1, -1)
            x = torch.cat((cls_tokens, x), dim=1)
            x = x + self.pos_embed
            x = self.encoder(x)
            x = self.norm(x[:, 0])
            return self.head(x)

    model = env.init(ViT())
    optimizer = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=4)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

    images, labels = env.randn(32, 1, 8, 8), env.randint(0, 3, (32,))
    images[labels == 1, :, :4] += 1.0       # (a learnable signal per class)
    images[labels == 2, :, :, 4:] -= 1.0
    dataset = torch.utils.data.TensorDataset(images, labels)
    loader = torch.utils.data.DataLoader(dataset, batch_size=16, shuffle=False)

    def train_step(x, y):
        model.train()
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for epoch in range(2):
        for i, (x, y) in enumerate(loader):
            env.rec(f"loss {epoch} {i}", train_step(x, y))
        scheduler.step()
        env.rec(f"lr {epoch}", scheduler.get_last_lr())

    model.eval()
    correct, total = 0, 0
    with torch.no_grad():
        for x, y in loader:
            outputs = model(x)
            _, predicted = torch.max(outputs.data, 1)
            total += y.size(0)
            correct += (predicted == y).sum().item()
    env.rec("accuracy", 100 * correct / total)
    # (the key projection's bias has no effect on the attention, its gradient is rounding
    # noise that AdamW scales up: compared are the query and value parts)
    state = model.state_dict()
    D = model.head.in_features
    for k in [k for k in state if k.endswith("in_proj_bias")]:
        state[k] = torch.cat([state[k][:D], state[k][2 * D:]])
    env.rec("state", state)


def mlp_mixer(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class FeedForward(nn.Sequential):
        def __init__(self, dim, hidden_dim):
            super().__init__(nn.Linear(dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, dim))

    class MixerBlock(nn.Module):
        def __init__(self, num_patches, dim, token_dim, channel_dim):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim)
            self.token_mix = FeedForward(num_patches, token_dim)
            self.norm2 = nn.LayerNorm(dim)
            self.channel_mix = FeedForward(dim, channel_dim)

        def forward(self, x):
            y = self.norm1(x).transpose(1, 2)                 # (B, D, N): mix over tokens
            x = x + self.token_mix(y).transpose(1, 2)
            return x + self.channel_mix(self.norm2(x))

    class MLPMixer(nn.Module):
        def __init__(self, image_size=8, channels=3, patch_size=2, dim=16, depth=2,
                     num_classes=4):
            super().__init__()
            self.patch_size = patch_size
            num_patches = (image_size // patch_size) ** 2
            self.to_patch_embedding = nn.Linear(channels * patch_size ** 2, dim)
            self.blocks = nn.Sequential(*[MixerBlock(num_patches, dim, 2 * num_patches, 4 * dim)
                                          for _ in range(depth)])
            self.layer_norm = nn.LayerNorm(dim)
            self.mlp_head = nn.Linear(dim, num_classes)

        def forward(self, img):
            p = self.patch_size
            B, C = img.shape[:2]
            patches = img.unfold(2, p, p).unfold(3, p, p)     # (B, C, H/p, W/p, p, p)
            patches = patches.permute(0, 2, 3, 1, 4, 5).reshape(B, -1, C * p * p)
            x = self.blocks(self.to_patch_embedding(patches))
            x = self.layer_norm(x).mean(dim=1)                  # global average pooling
            return self.mlp_head(x)

    model = env.init(MLPMixer())
    images, labels = env.randn(24, 3, 8, 8), env.randint(0, 4, (24,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images, labels),
                                         batch_size=8)
    epochs = 2
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)
    scheduler = optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, epochs=epochs,
                                              steps_per_epoch=len(loader))

    def train_step(x, y):
        optimizer.zero_grad()
        output = model(x)
        loss = F.cross_entropy(output, y)
        loss.backward()
        optimizer.step()
        acc = (output.argmax(dim=1) == y).float().mean()
        return loss.item(), acc.item()

    train_step = env.step(train_step)
    model.train()
    for epoch in range(epochs):
        for i, (x, y) in enumerate(loader):
            env.rec(f"step {epoch} {i}", train_step(x, y))
            scheduler.step()
        env.rec(f"lr {epoch}", (scheduler.get_last_lr(), optimizer.param_groups[0]["momentum"]))

    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict()}, env.path("mixer.pt"))
    checkpoint = torch.load(env.path("mixer.pt"), weights_only=True)
    restored = MLPMixer()
    restored.load_state_dict(checkpoint["model"])
    restored.eval()
    with torch.no_grad():
        env.rec("restored logits", restored(images[:5]))
        env.rec("same", torch.allclose(restored(images), model(images)))
    env.rec("optimizer state", checkpoint["optimizer"]["state"][0]["momentum_buffer"])


def kim_text_cnn(torch, env, dropout=0.5):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    PAD_IDX, VOCAB, cross = 0, 30, dropout == 0.0

    class CNN(nn.Module):
        def __init__(self, vocab_size, embedding_dim, n_filters, filter_sizes, output_dim,
                     dropout, pad_idx):
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_idx)
            self.convs = nn.ModuleList([
                nn.Conv1d(in_channels=embedding_dim, out_channels=n_filters, kernel_size=fs)
                for fs in filter_sizes])
            self.fc = nn.Linear(len(filter_sizes) * n_filters, output_dim)
            self.dropout = nn.Dropout(dropout)

        def forward(self, text):
            embedded = self.embedding(text)                 # (B, L, E)
            embedded = embedded.permute(0, 2, 1)            # (B, E, L)
            conved = [F.relu(conv(embedded)) for conv in self.convs]
            pooled = [F.max_pool1d(conv, conv.shape[2]).squeeze(2) for conv in conved]
            cat = self.dropout(torch.cat(pooled, dim=1))
            return self.fc(cat)

    model = env.init(CNN(VOCAB, 12, 6, [2, 3, 4], 1, dropout, PAD_IDX))
    env.rec("parameters", sum(p.numel() for p in model.parameters() if p.requires_grad))
    optimizer = optim.Adam(model.parameters(), lr=5e-3)
    criterion = nn.BCEWithLogitsLoss()

    def binary_accuracy(preds, y):
        rounded_preds = torch.round(torch.sigmoid(preds))
        correct = (rounded_preds == y).float()
        return correct.sum() / len(correct)

    def batch(n, length):
        text = env.randint(1, VOCAB, (n, length))
        lengths = env.randint(4, length + 1, (n,))
        text[torch.arange(length).unsqueeze(0) >= lengths.unsqueeze(1)] = PAD_IDX
        label = ((text >= VOCAB // 2).sum(1) * 2 > lengths).float()   # (mostly high tokens)
        return text, label

    batches = [batch(8, 9), batch(8, 9), batch(8, 7)]

    def train(text, label):
        optimizer.zero_grad()
        predictions = model(text).squeeze(1)
        loss = criterion(predictions, label)
        acc = binary_accuracy(predictions, label)
        loss.backward()
        optimizer.step()
        return loss.item(), acc.item()

    train = env.step(train)
    model.train()
    for epoch in range(3):
        for i, (text, label) in enumerate(batches):
            env.rec(f"train {epoch} {i}", train(text, label), cross)

    model.eval()
    with torch.no_grad():
        text, label = batch(6, 8)
        predictions = model(text).squeeze(1)
        env.rec("eval", (criterion(predictions, label), binary_accuracy(predictions, label)),
                cross)
        env.rec("embedding pad row", model.embedding.weight[PAD_IDX])

    def predict_sentiment(tokens, min_len=5):
        if len(tokens) < min_len:
            tokens = tokens + [PAD_IDX] * (min_len - len(tokens))
        tensor = torch.LongTensor(tokens).unsqueeze(0)
        return torch.sigmoid(model(tensor)).item()

    env.rec("predictions", [predict_sentiment([20, 25, 28]), predict_sentiment([1, 2, 3, 4, 5, 6])],
            cross)


def matrix_factorization(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    n_users, n_items = 12, 15

    class MatrixFactorization(nn.Module):
        def __init__(self, n_users, n_items, n_factors=6):
            super().__init__()
            self.user_factors = nn.Embedding(n_users, n_factors)
            self.item_factors = nn.Embedding(n_items, n_factors)
            self.user_bias = nn.Embedding(n_users, 1)
            self.item_bias = nn.Embedding(n_items, 1)
            self.global_bias = nn.Parameter(torch.zeros(1))
            nn.init.normal_(self.user_factors.weight, std=0.1)
            nn.init.normal_(self.item_factors.weight, std=0.1)
            nn.init.zeros_(self.user_bias.weight)
            nn.init.zeros_(self.item_bias.weight)

        def forward(self, user, item):
            dot = (self.user_factors(user) * self.item_factors(item)).sum(dim=1)
            bias = self.user_bias(user).squeeze(1) + self.item_bias(item).squeeze(1)
            return dot + bias + self.global_bias

    # ratings 1..5 from hidden tastes; 80/20 split of the observed pairs
    tastes = env.randn(n_users, 3) @ env.randn(3, n_items)
    users, items = env.randint(0, n_users, (120,)), env.randint(0, n_items, (120,))
    ratings = (3 + tastes[users, items]).clamp(1, 5).round()
    dataset = torch.utils.data.TensorDataset(users, items, ratings)
    train_set = torch.utils.data.Subset(dataset, range(96))
    test_set = torch.utils.data.Subset(dataset, range(96, 120))
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=32)
    test_loader = torch.utils.data.DataLoader(test_set, batch_size=24)

    model = env.init(MatrixFactorization(n_users, n_items))
    model.global_bias.data.fill_(ratings[:96].mean().item())
    optimizer = optim.AdamW(model.parameters(), lr=0.05, weight_decay=1e-2)
    loss_fn = nn.MSELoss()

    def train_step(user, item, rating):
        optimizer.zero_grad()
        prediction = model(user, item)
        loss = loss_fn(prediction, rating)
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for epoch in range(4):
        model.train()
        total = 0.0
        for user, item, rating in train_loader:
            total += train_step(user, item, rating) * len(rating)
        model.eval()
        with torch.no_grad():
            sq = sum(F.mse_loss(model(u, i).clamp(1, 5), r, reduction="sum")
                     for u, i, r in test_loader)
        env.rec(f"epoch {epoch}", (total / len(train_set), math.sqrt(sq.item() / len(test_set))))

    # top-3 unseen items per user
    with torch.no_grad():
        scores = model.user_factors.weight @ model.item_factors.weight.T
        scores = scores + model.item_bias.weight.T + model.user_bias.weight
        seen = torch.zeros(n_users, n_items, dtype=torch.bool)
        seen[users[:96], items[:96]] = True
        scores = scores.masked_fill(seen, float("-inf"))
        top_scores, top_items = torch.topk(scores, k=3, dim=1)
    env.rec("recommendations", (top_scores, top_items))
    env.rec("state", model.state_dict())

