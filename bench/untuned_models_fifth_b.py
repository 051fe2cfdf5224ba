"""untuned_models_fifth.py's SimCLR, DDPM and DeepFM (that file holds the other three and
build()): each _name(lib) -> (model, optimizer, loss closure[, {"clip"/"scheduler"}]),
seeded by build."""
import math


def _simclr(lib):
    # (sthalles/SimCLR's info_nce_loss and training loop; the views made in the step by a
    # random horizontal flip and Gaussian noise instead of a DataLoader's transforms)
    nn, F = lib.nn, lib.nn.functional
    batch_size, n_views, temperature = 8, 2, 0.07

    class ResNetSimCLR(nn.Module):
        def __init__(self, out_dim):
            super(ResNetSimCLR, self).__init__()
            self.backbone = nn.Sequential(
                nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
                nn.Conv2d(32, 64, 3, 2, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                nn.Conv2d(64, 64, 3, 2, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten())
            dim_mlp = 64
            self.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), nn.Linear(dim_mlp, out_dim))

        def forward(self, x):
            return self.fc(self.backbone(x))

    def augment(x):
        flip = lib.rand(x.shape[0], 1, 1, 1) < 0.5
        x = lib.where(flip, lib.flip(x, dims=[3]), x)
        return x + 0.1 * lib.randn_like(x)

    def info_nce_loss(features):
        labels = lib.cat([lib.arange(batch_size) for i in range(n_views)], dim=0)
        labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()
        features = F.normalize(features, dim=1)
        similarity_matrix = lib.matmul(features, features.T)
        # discard the main diagonal from both: labels and similarities matrix
        mask = lib.eye(labels.shape[0], dtype=lib.bool)
        labels = labels[~mask].view(labels.shape[0], -1)
        similarity_matrix = similarity_matrix[~mask].view(similarity_matrix.shape[0], -1)
        positives = similarity_matrix[labels.bool()].view(labels.shape[0], -1)
        negatives = similarity_matrix[~labels.bool()].view(similarity_matrix.shape[0], -1)
        logits = lib.cat([positives, negatives], dim=1)
        labels = lib.zeros(logits.shape[0], dtype=lib.long)
        logits = logits / temperature
        return logits, labels

    m = ResNetSimCLR(out_dim=32)
    opt = lib.optim.AdamW(m.parameters(), 3e-4, weight_decay=1e-4)
    scheduler = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100, eta_min=0, last_epoch=-1)
    criterion = nn.CrossEntropyLoss()
    images = lib.rand(batch_size, 3, 32, 32)

    def loss():
        views = lib.cat([augment(images) for _ in range(n_views)], dim=0)
        features = m(views)
        logits, labels = info_nce_loss(features)
        return criterion(logits, labels)
    return m, opt, loss, {"scheduler": scheduler}


def _ddpm(lib):
    # (Hugging Face's "The Annotated Diffusion Model": the schedule, extract, q_sample and
    # p_losses; the U-Net cut to one down and one up level of GroupNorm/SiLU blocks)
    nn, F = lib.nn, lib.nn.functional
    timesteps = 200

    def linear_beta_schedule(timesteps):
        beta_start = 0.0001
        beta_end = 0.02
        return lib.linspace(beta_start, beta_end, timesteps)

    betas = linear_beta_schedule(timesteps=timesteps)
    alphas = 1. - betas
    alphas_cumprod = lib.cumprod(alphas, axis=0)
    sqrt_alphas_cumprod = lib.sqrt(alphas_cumprod)
    sqrt_one_minus_alphas_cumprod = lib.sqrt(1. - alphas_cumprod)

    def extract(a, t, x_shape):
        batch_size = t.shape[0]
        out = a.gather(-1, t.cpu())
        return out.reshape(batch_size, *((1,) * (len(x_shape) - 1))).to(t.device)

    def q_sample(x_start, t, noise=None):
        if noise is None:
            noise = lib.randn_like(x_start)
        sqrt_alphas_cumprod_t = extract(sqrt_alphas_cumprod, t, x_start.shape)
        sqrt_one_minus_alphas_cumprod_t = extract(sqrt_one_minus_alphas_cumprod, t, x_start.shape)
        return sqrt_alphas_cumprod_t * x_start + sqrt_one_minus_alphas_cumprod_t * noise

    class SinusoidalPositionEmbeddings(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dim = dim

        def forward(self, time):
            device = time.device
            half_dim = self.dim // 2
            embeddings = math.log(10000) / (half_dim - 1)
            embeddings = lib.exp(lib.arange(half_dim, device=device) * -embeddings)
            embeddings = time[:, None] * embeddings[None, :]
            embeddings = lib.cat((embeddings.sin(), embeddings.cos()), dim=-1)
            return embeddings

    class Block(nn.Module):
        def __init__(self, dim, dim_out, groups=8):
            super().__init__()
            self.proj = nn.Conv2d(dim, dim_out, 3, padding=1)
            self.norm = nn.GroupNorm(groups, dim_out)
            self.act = nn.SiLU()

        def forward(self, x, scale_shift=None):
            x = self.proj(x)
            x = self.norm(x)
            if scale_shift is not None:
                scale, shift = scale_shift
                x = x * (scale + 1) + shift
            return self.act(x)

    class ResnetBlock(nn.Module):
        def __init__(self, dim, dim_out, *, time_emb_dim=None, groups=8):
            super().__init__()
            self.mlp = nn.Sequential(nn.SiLU(), nn.Linear(time_emb_dim, dim_out * 2)) if time_emb_dim else None
            self.block1 = Block(dim, dim_out, groups=groups)
            self.block2 = Block(dim_out, dim_out, groups=groups)
            self.res_conv = nn.Conv2d(dim, dim_out, 1) if dim != dim_out else nn.Identity()

        def forward(self, x, time_emb=None):
            scale_shift = None
            if self.mlp is not None and time_emb is not None:
                time_emb = self.mlp(time_emb)
                time_emb = time_emb[:, :, None, None]
                scale_shift = time_emb.chunk(2, dim=1)
            h = self.block1(x, scale_shift=scale_shift)
            h = self.block2(h)
            return h + self.res_conv(x)

    class Unet(nn.Module):
        def __init__(self, dim=16, channels=1):
            super().__init__()
            time_dim = dim * 4
            self.init_conv = nn.Conv2d(channels, dim, 1, padding=0)
            self.time_mlp = nn.Sequential(SinusoidalPositionEmbeddings(dim), nn.Linear(dim, time_dim),
                                          nn.GELU(), nn.Linear(time_dim, time_dim))
            self.down1 = ResnetBlock(dim, dim, time_emb_dim=time_dim)
            self.downsample = nn.Conv2d(dim, 2 * dim, 4, 2, 1)
            self.mid = ResnetBlock(2 * dim, 2 * dim, time_emb_dim=time_dim)
            self.upsample = nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"),
                                          nn.Conv2d(2 * dim, dim, 3, padding=1))
            self.up1 = ResnetBlock(2 * dim, dim, time_emb_dim=time_dim)
            self.final_conv = nn.Conv2d(dim, channels, 1)

        def forward(self, x, time):
            x = self.init_conv(x)
            t = self.time_mlp(time)
            h = self.down1(x, t)
            x = self.mid(self.downsample(h), t)
            x = self.upsample(x)
            x = lib.cat((x, h), dim=1)
            x = self.up1(x, t)
            return self.final_conv(x)

    def p_losses(denoise_model, x_start, t, noise=None, loss_type="l2"):
        if noise is None:
            noise = lib.randn_like(x_start)
        x_noisy = q_sample(x_start=x_start, t=t, noise=noise)
        predicted_noise = denoise_model(x_noisy, t)
        if loss_type == "l1":
            loss = F.l1_loss(noise, predicted_noise)
        elif loss_type == "l2":
            loss = F.mse_loss(noise, predicted_noise)
        else:
            loss = F.smooth_l1_loss(noise, predicted_noise)
        return loss

    model = Unet(dim=16, channels=1)
    optimizer = lib.optim.Adam(model.parameters(), lr=1e-3)
    batch = lib.rand(16, 1, 16, 16) * 2 - 1
    batch_size = batch.shape[0]

    def loss():
        t = lib.randint(0, timesteps, (batch_size,), device="cpu").long()
        return p_losses(model, batch, t, loss_type="l2")
    return model, optimizer, loss


def _deepfm(lib):
    # (DeepCTR-Torch's DeepFM layout: an Embedding per sparse field, a linear part of
    # 1-wide embeddings plus the dense features, the FM cross term, a DNN tower of
    # Linear-BatchNorm-ReLU-Dropout; BCEWithLogitsLoss and Adagrad as in rixwew/pytorch-fm)
    nn = lib.nn
    field_dims = [100, 50, 1000, 20, 300, 8, 500, 60]
    num_dense, embed_dim = 4, 8

    class FM(nn.Module):
        def forward(self, inputs):
            fm_input = inputs
            square_of_sum = lib.pow(lib.sum(fm_input, dim=1, keepdim=True), 2)
            sum_of_square = lib.sum(fm_input * fm_input, dim=1, keepdim=True)
            cross_term = square_of_sum - sum_of_square
            cross_term = 0.5 * lib.sum(cross_term, dim=2, keepdim=False)
            return cross_term

    class DNN(nn.Module):
        def __init__(self, inputs_dim, hidden_units, dropout_rate=0.2):
            super(DNN, self).__init__()
            hidden_units = [inputs_dim] + list(hidden_units)
            self.linears = nn.ModuleList([nn.Linear(hidden_units[i], hidden_units[i + 1])
                                          for i in range(len(hidden_units) - 1)])
            self.bn = nn.ModuleList([nn.BatchNorm1d(hidden_units[i + 1]) for i in range(len(hidden_units) - 1)])
            self.activation_layers = nn.ModuleList([nn.ReLU(inplace=True) for i in range(len(hidden_units) - 1)])
            self.dropout = nn.Dropout(dropout_rate)

        def forward(self, inputs):
            deep_input = inputs
            for i in range(len(self.linears)):
                fc = self.linears[i](deep_input)
                fc = self.bn[i](fc)
                fc = self.activation_layers[i](fc)
                fc = self.dropout(fc)
                deep_input = fc
            return deep_input

    class DeepFM(nn.Module):
        def __init__(self, dnn_hidden_units=(128, 64)):
            super(DeepFM, self).__init__()
            self.embedding_dict = nn.ModuleDict({f"C{i}": nn.Embedding(n, embed_dim) for i, n in enumerate(field_dims)})
            self.linear_embedding_dict = nn.ModuleDict({f"C{i}": nn.Embedding(n, 1) for i, n in enumerate(field_dims)})
            self.linear_dense = nn.Linear(num_dense, 1, bias=False)
            for tensor in self.embedding_dict.values():
                nn.init.normal_(tensor.weight, mean=0, std=0.0001)
            self.fm = FM()
            self.dnn = DNN(len(field_dims) * embed_dim + num_dense, dnn_hidden_units)
            self.dnn_linear = nn.Linear(dnn_hidden_units[-1], 1, bias=False)
            self.bias = nn.Parameter(lib.zeros((1,)))

        def forward(self, X_sparse, X_dense):
            sparse_embedding_list = [self.embedding_dict[f"C{i}"](X_sparse[:, i:i + 1]) for i in range(len(field_dims))]
            linear_list = [self.linear_embedding_dict[f"C{i}"](X_sparse[:, i:i + 1]) for i in range(len(field_dims))]
            linear_logit = lib.sum(lib.cat(linear_list, dim=-1), dim=-1, keepdim=False) + self.linear_dense(X_dense)
            fm_input = lib.cat(sparse_embedding_list, dim=1)
            logit = linear_logit + self.fm(fm_input)
            dnn_input = lib.cat([lib.flatten(lib.cat(sparse_embedding_list, dim=-1), start_dim=1), X_dense], dim=-1)
            dnn_output = self.dnn(dnn_input)
            logit = logit + self.dnn_linear(dnn_output) + self.bias
            return logit

    m = DeepFM()
    opt = lib.optim.Adagrad(m.parameters(), lr=0.01)
    criterion = nn.BCEWithLogitsLoss()
    B = 256
    X_sparse = lib.stack([lib.randint(0, n, (B,)) for n in field_dims], dim=1)
    X_dense = lib.randn(B, num_dense)
    y = (lib.rand(B, 1) < 0.3).float()
    return m, opt, lambda: criterion(m(X_sparse, X_dense), y)
