"""Stop 78 (E), part 3: Zero to Mastery's 08 paper replicating (the ViT: PatchEmbedding by a
Conv2d and nn.Flatten(start_dim=2, end_dim=3) then permute, a class token
nn.Parameter(torch.randn(1, 1, D)) expanded over the batch, nn.MultiheadAttention(
batch_first=True) with need_weights=False, the MLP block, and the same encoder as
nn.TransformerEncoderLayer(norm_first=True, activation="gelu")) and UvA DL tutorial 5's
GoogleNet InceptionBlock (a dict of channel counts, four branches concatenated) and
DenseNet DenseLayer / TransitionLayer at toy sizes. Synthetic data. Programs
`f(torch, env)`, see tutorial_harness.py."""


def ztm_vit(torch, env):
    nn = torch.nn

    class PatchEmbedding(nn.Module):
        def __init__(self, in_channels=3, patch_size=4, embedding_dim=16):
            super().__init__()
            self.patch_size = patch_size
            self.patcher = nn.Conv2d(in_channels=in_channels, out_channels=embedding_dim,
                                     kernel_size=patch_size, stride=patch_size, padding=0)
            self.flatten = nn.Flatten(start_dim=2, end_dim=3)

        def forward(self, x):
            image_resolution = x.shape[-1]
            assert image_resolution % self.patch_size == 0, \
                f"Input image size must be divisble by patch size, image shape: " \
                f"{image_resolution}, patch size: {self.patch_size}"
            x_patched = self.patcher(x)
            x_flattened = self.flatten(x_patched)
            return x_flattened.permute(0, 2, 1)

    class MultiheadSelfAttentionBlock(nn.Module):
        def __init__(self, embedding_dim=16, num_heads=2, attn_dropout=0):
            super().__init__()
            self.layer_norm = nn.LayerNorm(normalized_shape=embedding_dim)
            self.multihead_attn = nn.MultiheadAttention(embed_dim=embedding_dim,
                                                        num_heads=num_heads,
                                                        dropout=attn_dropout, batch_first=True)

        def forward(self, x):
            x = self.layer_norm(x)
            attn_output, _ = self.multihead_attn(query=x, key=x, value=x, need_weights=False)
            return attn_output

    class MLPBlock(nn.Module):
        def __init__(self, embedding_dim=16, mlp_size=32, dropout=0.1):
            super().__init__()
            self.layer_norm = nn.LayerNorm(normalized_shape=embedding_dim)
            self.mlp = nn.Sequential(
                nn.Linear(in_features=embedding_dim, out_features=mlp_size), nn.GELU(),
                nn.Dropout(p=dropout),
                nn.Linear(in_features=mlp_size, out_features=embedding_dim),
                nn.Dropout(p=dropout))

        def forward(self, x):
            return self.mlp(self.layer_norm(x))

    class TransformerEncoderBlock(nn.Module):
        def __init__(self, embedding_dim=16, num_heads=2, mlp_size=32, mlp_dropout=0.1,
                     attn_dropout=0):
            super().__init__()
            self.msa_block = MultiheadSelfAttentionBlock(embedding_dim, num_heads, attn_dropout)
            self.mlp_block = MLPBlock(embedding_dim, mlp_size, mlp_dropout)

        def forward(self, x):
            x = self.msa_block(x) + x
            x = self.mlp_block(x) + x
            return x

    class ViT(nn.Module):
        def __init__(self, img_size=8, in_channels=3, patch_size=4, num_transformer_layers=2,
                     embedding_dim=16, mlp_size=32, num_heads=2, attn_dropout=0,
                     mlp_dropout=0.1, embedding_dropout=0.1, num_classes=3):
            super().__init__()
            self.num_patches = (img_size * img_size) // patch_size ** 2
            self.class_embedding = nn.Parameter(data=torch.randn(1, 1, embedding_dim),
                                                requires_grad=True)
            self.position_embedding = nn.Parameter(
                data=torch.randn(1, self.num_patches + 1, embedding_dim), requires_grad=True)
            self.embedding_dropout = nn.Dropout(p=embedding_dropout)
            self.patch_embedding = PatchEmbedding(in_channels, patch_size, embedding_dim)
            self.transformer_encoder = nn.Sequential(*[
                TransformerEncoderBlock(embedding_dim, num_heads, mlp_size, mlp_dropout)
                for _ in range(num_transformer_layers)])
            self.classifier = nn.Sequential(
                nn.LayerNorm(normalized_shape=embedding_dim),
                nn.Linear(in_features=embedding_dim, out_features=num_classes))

        def forward(self, x):
            batch_size = x.shape[0]
            class_token = self.class_embedding.expand(batch_size, -1, -1)
            x = self.patch_embedding(x)
            x = torch.cat((class_token, x), dim=1)
            x = self.position_embedding + x
            x = self.embedding_dropout(x)
            x = self.transformer_encoder(x)
            x = self.classifier(x[:, 0])
            return x

    torch.manual_seed(42)
    vit = env.init(ViT())
    images = env.randn(4, 3, 8, 8)
    labels = env.randint(0, 3, (4,))
    env.rec("patch shape", tuple(vit.patch_embedding(images).shape))
    optimizer = torch.optim.Adam(params=vit.parameters(), lr=3e-3, betas=(0.9, 0.999),
                                 weight_decay=0.3)
    loss_fn = torch.nn.CrossEntropyLoss()

    def train_step(X, y):
        vit.train()
        y_pred = vit(X)
        loss = loss_fn(y_pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        y_pred_class = torch.argmax(torch.softmax(y_pred, dim=1), dim=1)
        acc = (y_pred_class == y).sum().item() / len(y_pred)
        return loss.item(), acc

    train_step = env.step(train_step)
    for epoch in range(3):
        env.rec(f"train {epoch}", train_step(images, labels), cross=False)
    vit.eval()
    with torch.inference_mode():
        test_pred_logits = vit(images)
    env.rec("eval", test_pred_logits, cross=False)

    # (torch's own layer in place of the hand-written block, dropout off: compared to torch)
    torch_transformer_encoder_layer = nn.TransformerEncoderLayer(
        d_model=16, nhead=2, dim_feedforward=32, dropout=0.0, activation="gelu",
        batch_first=True, norm_first=True)
    env.init(torch_transformer_encoder_layer)
    enc_opt = torch.optim.SGD(torch_transformer_encoder_layer.parameters(), lr=0.05)
    tokens = env.randn(2, 5, 16)

    def enc_step(tokens):
        out = torch_transformer_encoder_layer(tokens)
        loss = out.pow(2).mean()
        enc_opt.zero_grad()
        loss.backward()
        enc_opt.step()
        return loss

    enc_step = env.step(enc_step)
    for i in range(3):
        env.rec(f"encoder {i}", enc_step(tokens))
    env.rec("encoder state", dict(torch_transformer_encoder_layer.state_dict()))


def uva_inception_densenet(torch, env):
    nn = torch.nn
    act_fn_by_name = {"tanh": nn.Tanh, "relu": nn.ReLU, "leakyrelu": nn.LeakyReLU,
                      "gelu": nn.GELU}

    class InceptionBlock(nn.Module):
        def __init__(self, c_in, c_red: dict, c_out: dict, act_fn):
            super().__init__()
            self.conv_1x1 = nn.Sequential(
                nn.Conv2d(c_in, c_out["1x1"], kernel_size=1), nn.BatchNorm2d(c_out["1x1"]),
                act_fn())
            self.conv_3x3 = nn.Sequential(
                nn.Conv2d(c_in, c_red["3x3"], kernel_size=1), nn.BatchNorm2d(c_red["3x3"]),
                act_fn(),
                nn.Conv2d(c_red["3x3"], c_out["3x3"], kernel_size=3, padding=1),
                nn.BatchNorm2d(c_out["3x3"]), act_fn())
            self.conv_5x5 = nn.Sequential(
                nn.Conv2d(c_in, c_red["5x5"], kernel_size=1), nn.BatchNorm2d(c_red["5x5"]),
                act_fn(),
                nn.Conv2d(c_red["5x5"], c_out["5x5"], kernel_size=5, padding=2),
                nn.BatchNorm2d(c_out["5x5"]), act_fn())
            self.max_pool = nn.Sequential(
                nn.MaxPool2d(kernel_size=3, padding=1, stride=1),
                nn.Conv2d(c_in, c_out["max"], kernel_size=1), nn.BatchNorm2d(c_out["max"]),
                act_fn())

        def forward(self, x):
            x_1x1 = self.conv_1x1(x)
            x_3x3 = self.conv_3x3(x)
            x_5x5 = self.conv_5x5(x)
            x_max = self.max_pool(x)
            x_out = torch.cat([x_1x1, x_3x3, x_5x5, x_max], dim=1)
            return x_out

    class DenseLayer(nn.Module):
        def __init__(self, c_in, bn_size, growth_rate, act_fn):
            super().__init__()
            self.net = nn.Sequential(
                nn.BatchNorm2d(c_in), act_fn(),
                nn.Conv2d(c_in, bn_size * growth_rate, kernel_size=1, bias=False),
                nn.BatchNorm2d(bn_size * growth_rate), act_fn(),
                nn.Conv2d(bn_size * growth_rate, growth_rate, kernel_size=3, padding=1,
                          bias=False))

        def forward(self, x):
            out = self.net(x)
            out = torch.cat([out, x], dim=1)
            return out

    class DenseBlock(nn.Module):
        def __init__(self, c_in, num_layers, bn_size, growth_rate, act_fn):
            super().__init__()
            layers = []
            for layer_idx in range(num_layers):
                layers.append(DenseLayer(c_in=c_in + layer_idx * growth_rate,
                                         bn_size=bn_size, growth_rate=growth_rate,
                                         act_fn=act_fn))
            self.block = nn.Sequential(*layers)

        def forward(self, x):
            return self.block(x)

    class TransitionLayer(nn.Module):
        def __init__(self, c_in, c_out, act_fn):
            super().__init__()
            self.transition = nn.Sequential(
                nn.BatchNorm2d(c_in), act_fn(), nn.Conv2d(c_in, c_out, kernel_size=1, bias=False),
                nn.AvgPool2d(kernel_size=2, stride=2))

        def forward(self, x):
            return self.transition(x)

    act_fn = act_fn_by_name["relu"]
    net = nn.Sequential(
        nn.Conv2d(3, 8, kernel_size=3, padding=1), nn.BatchNorm2d(8), act_fn(),
        InceptionBlock(8, c_red={"3x3": 4, "5x5": 2}, c_out={"1x1": 4, "3x3": 4, "5x5": 2,
                                                            "max": 2}, act_fn=act_fn),
        DenseBlock(c_in=12, num_layers=2, bn_size=2, growth_rate=4, act_fn=act_fn),
        TransitionLayer(c_in=20, c_out=10, act_fn=act_fn),
        nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(10, 4))
    for m in net.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.constant_(m.weight, 1)
            nn.init.constant_(m.bias, 0)
    env.init(net)
    imgs = env.randn(4, 3, 8, 8)
    labels = env.randint(0, 4, (4,))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2, 3], gamma=0.1)
    loss_module = nn.CrossEntropyLoss()

    def training_step(imgs, labels):
        preds = net(imgs)
        loss = loss_module(preds, labels)
        acc = (preds.argmax(dim=-1) == labels).float().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss, acc

    training_step = env.step(training_step)
    net.train()
    for epoch in range(4):
        env.rec(f"epoch {epoch}", training_step(imgs, labels))
        scheduler.step()
    net.eval()
    with torch.no_grad():
        env.rec("eval", net(imgs))
    env.rec("state", dict(net.state_dict()))
