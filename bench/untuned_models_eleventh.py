"""Five more training steps beside bench/untuned_models.py's, written as their reference code
writes them and run before llgrad was tuned on any of them (2026-12-06): a ShuffleNetV2 for
CIFAR (torchvision's InvertedResidual: chunk, depthwise 3x3 convolutions, channel_shuffle by
view / transpose / contiguous; SGD with momentum and weight decay), a masked autoencoder
(facebookresearch/mae's models_mae.py: patch embedding, fixed sin-cos position embeddings,
random_masking by argsort of fresh noise and gather, timm-style attention blocks, the decoder's
mask tokens unshuffled by gather, the normalised-pixel loss on the masked patches; AdamW), and
in untuned_models_eleventh_b.py a WGAN-GP step (igul222/caogang's gan_mnist: the critic's
gradient penalty by autograd.grad(create_graph=True), then the generator's step with the
critic's requires_grad switched off), MADE (karpathy/pytorch-made: MaskedLinear's mask
buffers, two orderings resampled every step by set_mask's copy_ of a NumPy mask) and a gMLP
(the spatial gating unit: chunk, LayerNorm, a Conv1d across the tokens).

    python bench/untuned_models_eleventh.py [name,...] [--torch-compile]

Per model: torch eager, torch.compile (with --torch-compile), jax.jit (MADE and gMLP, written
in untuned_models_eleventh_jax.py), llgrad eager and llgrad compiled (LLGRAD_COMPILE=sync,
warm), 1 thread each (jax: PJRT_NPROC=1, XLA's Eigen pool off), seeded alike: the losses of 6
steps and the gradients and parameters after them against torch's, then blocks of 3 steps
interleaved, process-CPU medians of 7 blocks, each over torch eager and over the best peer.
build(lib, name, small=True) makes the tests' smaller versions."""
import os
import statistics
import sys
import time
import warnings

import untuned_models_eleventh_b
from untuned_models_fifth import training_step

NAMES = ("shufflenet", "mae", "wgangp", "made", "gmlp")


def build(lib, name, small=False):
    make = getattr(untuned_models_eleventh_b, "_" + name, None) or globals()["_" + name]
    return training_step(lib, lambda lib: make(lib, small))


def _shufflenet(lib, small):
    # (torchvision's shufflenetv2.py at width 0.5 with kuangliu/pytorch-cifar's CIFAR stem: a
    # stride-1 3x3 conv and no max-pool; 32x32 images)
    nn, F = lib.nn, lib.nn.functional
    batch, size, repeats, channels = ((4, 8, [1, 1, 1], [8, 16, 32, 64, 64]) if small else
                                      (32, 32, [4, 8, 4], [24, 48, 96, 192, 1024]))

    def channel_shuffle(x, groups):
        batchsize, num_channels, height, width = x.size()
        channels_per_group = num_channels // groups
        x = x.view(batchsize, groups, channels_per_group, height, width)
        x = lib.transpose(x, 1, 2).contiguous()
        x = x.view(batchsize, -1, height, width)
        return x

    class InvertedResidual(nn.Module):
        def __init__(self, inp, oup, stride):
            super().__init__()
            self.stride = stride
            branch_features = oup // 2
            if self.stride > 1:
                self.branch1 = nn.Sequential(
                    self.depthwise_conv(inp, inp, kernel_size=3, stride=self.stride, padding=1),
                    nn.BatchNorm2d(inp),
                    nn.Conv2d(inp, branch_features, kernel_size=1, stride=1, padding=0, bias=False),
                    nn.BatchNorm2d(branch_features),
                    nn.ReLU(inplace=True))
            else:
                self.branch1 = nn.Sequential()
            self.branch2 = nn.Sequential(
                nn.Conv2d(inp if (self.stride > 1) else branch_features, branch_features,
                          kernel_size=1, stride=1, padding=0, bias=False),
                nn.BatchNorm2d(branch_features),
                nn.ReLU(inplace=True),
                self.depthwise_conv(branch_features, branch_features, kernel_size=3,
                                    stride=self.stride, padding=1),
                nn.BatchNorm2d(branch_features),
                nn.Conv2d(branch_features, branch_features, kernel_size=1, stride=1, padding=0, bias=False),
                nn.BatchNorm2d(branch_features),
                nn.ReLU(inplace=True))

        @staticmethod
        def depthwise_conv(i, o, kernel_size, stride=1, padding=0, bias=False):
            return nn.Conv2d(i, o, kernel_size, stride, padding, bias=bias, groups=i)

        def forward(self, x):
            if self.stride == 1:
                x1, x2 = x.chunk(2, dim=1)
                out = lib.cat((x1, self.branch2(x2)), dim=1)
            else:
                out = lib.cat((self.branch1(x), self.branch2(x)), dim=1)
            out = channel_shuffle(out, 2)
            return out

    class ShuffleNetV2(nn.Module):
        def __init__(self, stages_repeats, stages_out_channels, num_classes=10):
            super().__init__()
            input_channels = 3
            output_channels = stages_out_channels[0]
            self.conv1 = nn.Sequential(
                nn.Conv2d(input_channels, output_channels, 3, 1, 1, bias=False),
                nn.BatchNorm2d(output_channels),
                nn.ReLU(inplace=True))
            input_channels = output_channels
            stage_names = [f"stage{i}" for i in [2, 3, 4]]
            for name, repeats, output_channels in zip(stage_names, stages_repeats, stages_out_channels[1:]):
                seq = [InvertedResidual(input_channels, output_channels, 2)]
                for i in range(repeats - 1):
                    seq.append(InvertedResidual(output_channels, output_channels, 1))
                setattr(self, name, nn.Sequential(*seq))
                input_channels = output_channels
            output_channels = stages_out_channels[-1]
            self.conv5 = nn.Sequential(
                nn.Conv2d(input_channels, output_channels, 1, 1, 0, bias=False),
                nn.BatchNorm2d(output_channels),
                nn.ReLU(inplace=True))
            self.fc = nn.Linear(output_channels, num_classes)

        def forward(self, x):
            x = self.conv1(x)
            x = self.stage2(x)
            x = self.stage3(x)
            x = self.stage4(x)
            x = self.conv5(x)
            x = x.mean([2, 3])  # globalpool
            x = self.fc(x)
            return x

    model = ShuffleNetV2(repeats, channels)
    optimizer = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    criterion = nn.CrossEntropyLoss()
    inputs = lib.randn(batch, 3, size, size)
    targets = lib.randint(0, 10, (batch,))
    return model, optimizer, lambda: criterion(model(inputs), targets)


def _mae(lib, small):
    # (facebookresearch/mae's models_mae.py MaskedAutoencoderViT with timm's Block written out,
    # norm_pix_loss=True, mask ratio 0.75, on 32x32 images in 4x4 patches)
    import numpy as np
    nn, F = lib.nn, lib.nn.functional
    batch, img, p, dim, depth, heads, ddim, ddepth = ((2, 8, 4, 16, 1, 2, 8, 1) if small else
                                                      (32, 32, 4, 128, 4, 4, 64, 2))
    L = (img // p) ** 2

    def sincos_2d(embed_dim, grid_size):
        # (get_2d_sincos_pos_embed with its cls_token row of zeros)
        grid = np.meshgrid(np.arange(grid_size, dtype=np.float32), np.arange(grid_size, dtype=np.float32))
        def one_d(d, pos):
            omega = 1. / 10000 ** (np.arange(d // 2, dtype=np.float64) / (d / 2.))
            out = np.einsum('m,d->md', pos.reshape(-1), omega)
            return np.concatenate([np.sin(out), np.cos(out)], axis=1)
        emb = np.concatenate([one_d(embed_dim // 2, grid[0]), one_d(embed_dim // 2, grid[1])], axis=1)
        return np.concatenate([np.zeros([1, embed_dim]), emb], axis=0)

    class Attention(nn.Module):
        def __init__(self, dim, num_heads=8, qkv_bias=True):
            super().__init__()
            self.num_heads = num_heads
            self.scale = (dim // num_heads) ** -0.5
            self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            B, N, C = x.shape
            qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)
            attn = (q @ k.transpose(-2, -1)) * self.scale
            attn = attn.softmax(dim=-1)
            x = (attn @ v).transpose(1, 2).reshape(B, N, C)
            return self.proj(x)

    class Block(nn.Module):
        def __init__(self, dim, num_heads, mlp_ratio=4.):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim, eps=1e-6)
            self.attn = Attention(dim, num_heads)
            self.norm2 = nn.LayerNorm(dim, eps=1e-6)
            self.mlp = nn.Sequential(nn.Linear(dim, int(dim * mlp_ratio)), nn.GELU(),
                                     nn.Linear(int(dim * mlp_ratio), dim))

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            x = x + self.mlp(self.norm2(x))
            return x

    class MaskedAutoencoderViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = nn.Conv2d(3, dim, kernel_size=p, stride=p)
            self.cls_token = nn.Parameter(lib.zeros(1, 1, dim))
            self.pos_embed = nn.Parameter(lib.zeros(1, L + 1, dim), requires_grad=False)
            self.blocks = nn.ModuleList([Block(dim, heads) for i in range(depth)])
            self.norm = nn.LayerNorm(dim, eps=1e-6)
            self.decoder_embed = nn.Linear(dim, ddim, bias=True)
            self.mask_token = nn.Parameter(lib.zeros(1, 1, ddim))
            self.decoder_pos_embed = nn.Parameter(lib.zeros(1, L + 1, ddim), requires_grad=False)
            self.decoder_blocks = nn.ModuleList([Block(ddim, heads) for i in range(ddepth)])
            self.decoder_norm = nn.LayerNorm(ddim, eps=1e-6)
            self.decoder_pred = nn.Linear(ddim, p ** 2 * 3, bias=True)
            self.initialize_weights()

        def initialize_weights(self):
            grid = int(L ** .5)
            self.pos_embed.data.copy_(lib.from_numpy(sincos_2d(dim, grid)).float().unsqueeze(0))
            self.decoder_pos_embed.data.copy_(lib.from_numpy(sincos_2d(ddim, grid)).float().unsqueeze(0))
            w = self.patch_embed.weight.data
            lib.nn.init.xavier_uniform_(w.view([w.shape[0], -1]))
            lib.nn.init.normal_(self.cls_token, std=.02)
            lib.nn.init.normal_(self.mask_token, std=.02)
            self.apply(self._init_weights)

        def _init_weights(self, m):
            if isinstance(m, nn.Linear):
                lib.nn.init.xavier_uniform_(m.weight)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.LayerNorm):
                nn.init.constant_(m.bias, 0)
                nn.init.constant_(m.weight, 1.0)

        def patchify(self, imgs):
            h = w = imgs.shape[2] // p
            x = imgs.reshape(shape=(imgs.shape[0], 3, h, p, w, p))
            x = lib.einsum('nchpwq->nhwpqc', x)
            x = x.reshape(shape=(imgs.shape[0], h * w, p ** 2 * 3))
            return x

        def random_masking(self, x, mask_ratio):
            N, L, D = x.shape  # batch, length, dim
            len_keep = int(L * (1 - mask_ratio))
            noise = lib.rand(N, L)  # noise in [0, 1]
            ids_shuffle = lib.argsort(noise, dim=1)  # ascend: small is keep, large is remove
            ids_restore = lib.argsort(ids_shuffle, dim=1)
            ids_keep = ids_shuffle[:, :len_keep]
            x_masked = lib.gather(x, dim=1, index=ids_keep.unsqueeze(-1).repeat(1, 1, D))
            mask = lib.ones([N, L])
            mask[:, :len_keep] = 0
            mask = lib.gather(mask, dim=1, index=ids_restore)
            return x_masked, mask, ids_restore

        def forward_encoder(self, x, mask_ratio):
            x = self.patch_embed(x).flatten(2).transpose(1, 2)
            x = x + self.pos_embed[:, 1:, :]
            x, mask, ids_restore = self.random_masking(x, mask_ratio)
            cls_token = self.cls_token + self.pos_embed[:, :1, :]
            cls_tokens = cls_token.expand(x.shape[0], -1, -1)
            x = lib.cat((cls_tokens, x), dim=1)
            for blk in self.blocks:
                x = blk(x)
            x = self.norm(x)
            return x, mask, ids_restore

        def forward_decoder(self, x, ids_restore):
            x = self.decoder_embed(x)
            mask_tokens = self.mask_token.repeat(x.shape[0], ids_restore.shape[1] + 1 - x.shape[1], 1)
            x_ = lib.cat([x[:, 1:, :], mask_tokens], dim=1)  # no cls token
            x_ = lib.gather(x_, dim=1, index=ids_restore.unsqueeze(-1).repeat(1, 1, x.shape[2]))
            x = lib.cat([x[:, :1, :], x_], dim=1)  # append cls token
            x = x + self.decoder_pos_embed
            for blk in self.decoder_blocks:
                x = blk(x)
            x = self.decoder_norm(x)
            x = self.decoder_pred(x)
            x = x[:, 1:, :]
            return x

        def forward_loss(self, imgs, pred, mask):
            target = self.patchify(imgs)
            mean = target.mean(dim=-1, keepdim=True)
            var = target.var(dim=-1, keepdim=True)
            target = (target - mean) / (var + 1.e-6) ** .5
            loss = (pred - target) ** 2
            loss = loss.mean(dim=-1)  # [N, L], mean loss per patch
            loss = (loss * mask).sum() / mask.sum()  # mean loss on removed patches
            return loss

        def forward(self, imgs, mask_ratio=0.75):
            latent, mask, ids_restore = self.forward_encoder(imgs, mask_ratio)
            pred = self.forward_decoder(latent, ids_restore)
            loss = self.forward_loss(imgs, pred, mask)
            return loss, pred, mask

    model = MaskedAutoencoderViT()
    optimizer = lib.optim.AdamW(model.parameters(), lr=1.5e-4, betas=(0.9, 0.95), weight_decay=0.05)
    samples = lib.rand(batch, 3, img, img)
    return model, optimizer, lambda: model(samples, mask_ratio=0.75)[0]


def _cpu_medians(fns, blocks=7, per_block=3):
    """measure.block_medians with process-CPU time: {name: median ms a call}."""
    times = {k: [] for k in fns}
    for _ in range(blocks):
        for k, f in fns.items():
            t0 = time.process_time()
            for _ in range(per_block):
                f()
            times[k].append((time.process_time() - t0) / per_block * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def main(names, with_torch_compile, steps=6, build=build, raw=None, jax_models=None):
    """Each model of `names` checked and timed (raw(lib, name) -> the maker's (model,
    optimizer, loss, extras) for the jax versions; the twelfth set runs here too)."""
    import llgrad
    import torch
    if jax_models is None:
        import untuned_models_eleventh_jax as jax_models
    if raw is None:
        raw = lambda lib, name: getattr(untuned_models_eleventh_b, "_" + name)(lib, False)
    from llgrad.compile.eager_builds import wait as wait_eager_builds
    from untuned_models_seventh import _grads, _rel, _rel_where
    torch.set_num_threads(1)
    llgrad.set_num_threads(1)
    rows = []
    for name in names:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            fns, losses, state = {}, {}, {}
            variants = [("torch", torch, None), ("llgrad eager", llgrad, None),
                        ("llgrad compiled", llgrad, llgrad.compile)]
            if with_torch_compile:
                variants.insert(1, ("torch.compile", torch, torch.compile))
            for k, lib, wrap in variants:
                m, step = build(lib, name)      # (seeded: each run draws from the same state)
                fns[k] = step = wrap(step) if wrap else step
                t0 = time.perf_counter()
                try:
                    losses[k] = [float(step()) for _ in range(steps)]
                except Exception as e:      # (torch.compile: no double backward, WGAN-GP's)
                    if k != "torch.compile":
                        raise
                    print(f"    (torch.compile failed: {str(e).splitlines()[0][:120]})")
                    del fns[k]
                    continue
                state[k] = _grads(m)
                if k == "torch.compile":
                    print(f"    (torch.compile: first {steps} steps {time.perf_counter() - t0:.1f} s)")
            if name in jax_models.NAMES:
                torch.manual_seed(0)
                m, _, _, extra = raw(torch, name)
                fns["jax.jit"] = jstep = jax_models.build(name, m, extra["data"])
                losses["jax.jit"] = [float(jstep()) for _ in range(steps)]
            fns["llgrad compiled"].wait()
            wait_eager_builds()     # (an eager kernel still building would be timed too)
        notes = sorted({str(x.message)[:200] for x in w if "llgrad" in str(x.message)})
        for k in [k for k in losses if k.startswith("llgrad")]:
            ref, got = state["torch"], state[k]
            d_loss = max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(losses[k], losses["torch"]))
            g_top = max(abs(g).max() for _, g in ref.values() if g is not None and g.size)
            d_par = max(_rel_where(got[n][0], ref[n][0], ref[n][1], 1e-6 * g_top) for n in ref)
            d_grad = max(_rel(got[n][1], ref[n][1]) for n in ref if ref[n][1] is not None)
            print(f"    {k}: max rel diff over {steps} steps: loss {d_loss:.1e}, grads {d_grad:.1e}, "
                  f"params {d_par:.1e}")
        if "jax.jit" in losses:
            d = max(abs(a - b) / abs(b) for a, b in zip(losses["jax.jit"], losses["torch"]))
            print(f"    jax.jit: max rel loss diff over {steps} steps {d:.1e}")
        med = _cpu_medians(fns)
        t = med["torch"]
        best = min(v for k, v in med.items() if not k.startswith("llgrad"))
        print(f"{name:10s} " + "  ".join(f"{k} {v:7.2f} ms ({v / t:.2f}x)" for k, v in med.items())
              + f"  | compiled / best peer {med['llgrad compiled'] / best:.2f}x", flush=True)
        for n in notes:
            print("    ", n)
        rows.append((name, med))
    return rows


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    chosen = args[0].split(",") if args else list(NAMES)
    if "-h" in sys.argv or "--help" in sys.argv or set(chosen) - set(NAMES):
        sys.exit(__doc__ + f"\n\nmodels: {', '.join(NAMES)}")
    os.environ.setdefault("LLGRAD_COMPILE", "sync")     # (read when llgrad is imported)
    os.environ.setdefault("LLGRAD_NUM_THREADS", "1")
    os.environ["PJRT_NPROC"] = "1"                      # (read when jax starts)
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_cpu_multi_thread_eigen=false").strip()
    main(chosen, "--torch-compile" in sys.argv)
