"""Six more training steps for bench/untuned_models.py, written as the reference code of the
tutorials and papers writes them and run before llgrad was tuned on any of them (2026-12-05):
a Swin Transformer stage (window partition by view/permute/contiguous, a relative position
bias table indexed by a buffer, shifted windows by roll with an attention mask; AdamW), a
WaveNet stack (dilated causal Conv1d by F.pad, gated tanh * sigmoid, residual and skip
sums, 1x1 convolutions), a top-2 Mixture-of-Experts MLP (softmax gate, topk, tokens sent to
each expert by index_select and gathered back by index_add_, a load-balancing loss), a
PointNet classifier (shared MLPs as Conv1d, T-Nets whose transforms are applied by bmm, max
over points, the orthogonality regulariser), a RealNVP flow on images (checkerboard then
channel masks, affine couplings with a tanh scale, the log-determinant, a Gaussian prior;
trained by NLL) and a two-layer GAT on a random graph (per-edge scores gathered by the edge
index, leaky_relu, a softmax over each node's edges by scatter_reduce and index_add_).
build(lib, name) -> (model, step) as in untuned_models_third.py; the last three models are
in untuned_models_fourth_b.py."""
import untuned_models_fourth_b

NAMES = ("swin", "wavenet", "moe", "pointnet", "flow", "gat")


def build(lib, name):
    lib.manual_seed(0)
    make = getattr(untuned_models_fourth_b, "_" + name, None) or globals()["_" + name]
    m, opt, loss = make(lib)
    m.train()

    def step():
        opt.zero_grad()
        l = loss()
        l.backward()
        opt.step()
        return l
    return m, step


def _swin(lib):
    nn, F = lib.nn, lib.nn.functional

    def window_partition(x, window_size):
        B, H, W, C = x.shape
        x = x.view(B, H // window_size, window_size, W // window_size, window_size, C)
        return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size, window_size, C)

    def window_reverse(windows, window_size, H, W):
        B = int(windows.shape[0] / (H * W / window_size / window_size))
        x = windows.view(B, H // window_size, W // window_size, window_size, window_size, -1)
        return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)

    class WindowAttention(nn.Module):
        def __init__(self, dim, window_size, num_heads):
            super().__init__()
            self.window_size, self.num_heads = window_size, num_heads
            self.scale = (dim // num_heads) ** -0.5
            self.relative_position_bias_table = nn.Parameter(
                lib.zeros((2 * window_size[0] - 1) * (2 * window_size[1] - 1), num_heads))
            coords = lib.stack(lib.meshgrid([lib.arange(window_size[0]), lib.arange(window_size[1])],
                                            indexing="ij"))
            coords_flatten = lib.flatten(coords, 1)
            relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]
            relative_coords = relative_coords.permute(1, 2, 0).contiguous()
            relative_coords[:, :, 0] += window_size[0] - 1
            relative_coords[:, :, 1] += window_size[1] - 1
            relative_coords[:, :, 0] *= 2 * window_size[1] - 1
            self.register_buffer("relative_position_index", relative_coords.sum(-1))
            self.qkv = nn.Linear(dim, dim * 3)
            self.attn_drop = nn.Dropout(0.0)
            self.proj = nn.Linear(dim, dim)
            self.proj_drop = nn.Dropout(0.0)
            nn.init.trunc_normal_(self.relative_position_bias_table, std=.02)
            self.softmax = nn.Softmax(dim=-1)

        def forward(self, x, mask=None):
            B_, N, C = x.shape
            qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            q = q * self.scale
            attn = (q @ k.transpose(-2, -1))
            relative_position_bias = self.relative_position_bias_table[self.relative_position_index.view(-1)].view(
                self.window_size[0] * self.window_size[1], self.window_size[0] * self.window_size[1], -1)
            relative_position_bias = relative_position_bias.permute(2, 0, 1).contiguous()
            attn = attn + relative_position_bias.unsqueeze(0)
            if mask is not None:
                nW = mask.shape[0]
                attn = attn.view(B_ // nW, nW, self.num_heads, N, N) + mask.unsqueeze(1).unsqueeze(0)
                attn = attn.view(-1, self.num_heads, N, N)
            attn = self.attn_drop(self.softmax(attn))
            x = (attn @ v).transpose(1, 2).reshape(B_, N, C)
            return self.proj_drop(self.proj(x))

    class SwinBlock(nn.Module):
        def __init__(self, dim, input_resolution, num_heads, window_size=4, shift_size=0):
            super().__init__()
            self.input_resolution, self.window_size, self.shift_size = input_resolution, window_size, shift_size
            self.norm1 = nn.LayerNorm(dim)
            self.attn = WindowAttention(dim, (window_size, window_size), num_heads)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
            if self.shift_size > 0:
                H, W = self.input_resolution
                img_mask = lib.zeros((1, H, W, 1))
                slices = (slice(0, -window_size), slice(-window_size, -shift_size), slice(-shift_size, None))
                cnt = 0
                for h in slices:
                    for w in slices:
                        img_mask[:, h, w, :] = cnt
                        cnt += 1
                mask_windows = window_partition(img_mask, window_size).view(-1, window_size * window_size)
                attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
                attn_mask = attn_mask.masked_fill(attn_mask != 0, float(-100.0)).masked_fill(attn_mask == 0, float(0.0))
            else:
                attn_mask = None
            self.register_buffer("attn_mask", attn_mask)

        def forward(self, x):
            H, W = self.input_resolution
            B, L, C = x.shape
            shortcut = x
            x = self.norm1(x).view(B, H, W, C)
            if self.shift_size > 0:
                shifted_x = lib.roll(x, shifts=(-self.shift_size, -self.shift_size), dims=(1, 2))
            else:
                shifted_x = x
            x_windows = window_partition(shifted_x, self.window_size).view(-1, self.window_size * self.window_size, C)
            attn_windows = self.attn(x_windows, mask=self.attn_mask)
            attn_windows = attn_windows.view(-1, self.window_size, self.window_size, C)
            shifted_x = window_reverse(attn_windows, self.window_size, H, W)
            if self.shift_size > 0:
                x = lib.roll(shifted_x, shifts=(self.shift_size, self.shift_size), dims=(1, 2))
            else:
                x = shifted_x
            x = shortcut + x.view(B, H * W, C)
            return x + self.mlp(self.norm2(x))

    class Swin(nn.Module):
        def __init__(self, dim=48):
            super().__init__()
            self.patch_embed = nn.Conv2d(3, dim, 4, 4)
            self.blocks = nn.Sequential(SwinBlock(dim, (8, 8), 3, 4, 0), SwinBlock(dim, (8, 8), 3, 4, 2))
            self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, 10)

        def forward(self, x):
            x = self.patch_embed(x).flatten(2).transpose(1, 2)
            return self.head(self.norm(self.blocks(x)).mean(1))

    m = Swin()
    opt = lib.optim.AdamW(m.parameters(), 1e-3, weight_decay=0.05)
    x, y = lib.randn(16, 3, 32, 32), lib.randint(0, 10, (16,))
    return m, opt, lambda: F.cross_entropy(m(x), y)


def _wavenet(lib):
    nn, F = lib.nn, lib.nn.functional

    class ResidualBlock(nn.Module):
        def __init__(self, res_channels, skip_channels, dilation):
            super().__init__()
            self.dilation = dilation
            self.dilated = nn.Conv1d(res_channels, 2 * res_channels, kernel_size=2, dilation=dilation)
            self.res = nn.Conv1d(res_channels, res_channels, 1)
            self.skip = nn.Conv1d(res_channels, skip_channels, 1)

        def forward(self, x):
            h = self.dilated(F.pad(x, (self.dilation, 0)))     # causal: pad on the left only
            filt, gate = h.chunk(2, dim=1)
            z = lib.tanh(filt) * lib.sigmoid(gate)
            return x + self.res(z), self.skip(z)

    class WaveNet(nn.Module):
        def __init__(self, classes=256, res_channels=32, skip_channels=64, layers=6, stacks=2):
            super().__init__()
            self.causal = nn.Conv1d(classes, res_channels, 2)
            self.blocks = nn.ModuleList([ResidualBlock(res_channels, skip_channels, 2 ** i)
                                         for _ in range(stacks) for i in range(layers)])
            self.out1 = nn.Conv1d(skip_channels, skip_channels, 1)
            self.out2 = nn.Conv1d(skip_channels, classes, 1)

        def forward(self, x):
            x = self.causal(F.pad(x, (1, 0)))
            skip = 0
            for block in self.blocks:
                x, s = block(x)
                skip = skip + s
            return self.out2(F.relu(self.out1(F.relu(skip))))

    m = WaveNet()
    opt = lib.optim.Adam(m.parameters(), 1e-3)
    audio = lib.randint(0, 256, (4, 257))
    x = F.one_hot(audio[:, :-1], 256).float().transpose(1, 2)
    y = audio[:, 1:]
    return m, opt, lambda: F.cross_entropy(m(x), y)


def _moe(lib):
    nn, F = lib.nn, lib.nn.functional

    class MoE(nn.Module):
        def __init__(self, d, num_experts=8, hidden=128, k=2):
            super().__init__()
            self.num_experts, self.k = num_experts, k
            self.gate = nn.Linear(d, num_experts, bias=False)
            self.experts = nn.ModuleList([nn.Sequential(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d))
                                          for _ in range(num_experts)])

        def forward(self, x):
            B, T, D = x.shape
            x = x.view(-1, D)
            probs = F.softmax(self.gate(x), dim=-1)
            topk_probs, topk_idx = probs.topk(self.k, dim=-1)
            topk_probs = topk_probs / topk_probs.sum(dim=-1, keepdim=True)
            out = lib.zeros_like(x)
            for e, expert in enumerate(self.experts):
                token_idx, slot = lib.where(topk_idx == e)
                if token_idx.numel() == 0:
                    continue
                y = expert(x.index_select(0, token_idx)) * topk_probs[token_idx, slot].unsqueeze(-1)
                out.index_add_(0, token_idx, y)
            # Switch Transformer's load balancing: fraction routed times mean gate probability
            frac = F.one_hot(topk_idx[:, 0], self.num_experts).float().mean(0)
            aux = self.num_experts * (frac * probs.mean(0)).sum()
            return out.view(B, T, D), aux

    class Net(nn.Module):
        def __init__(self, d=64):
            super().__init__()
            self.inp = nn.Linear(32, d)
            self.norms = nn.ModuleList([nn.LayerNorm(d) for _ in range(2)])
            self.moes = nn.ModuleList([MoE(d) for _ in range(2)])
            self.head = nn.Linear(d, 10)

        def forward(self, x):
            h, aux = self.inp(x), 0.0
            for norm, moe in zip(self.norms, self.moes):
                o, a = moe(norm(h))
                h, aux = h + o, aux + a
            return self.head(h.mean(1)), aux

    m = Net()
    opt = lib.optim.Adam(m.parameters(), 1e-3)
    x, y = lib.randn(16, 32, 32), lib.randint(0, 10, (16,))

    def loss():
        out, aux = m(x)
        return F.cross_entropy(out, y) + 0.01 * aux
    return m, opt, loss
