"""Sweep 17 (D), part 11: UvA tutorials 10, 15 and 17 at toy sizes: the Vision Transformer
(img_to_patch by reshape / permute / flatten, a class token repeated over the batch,
nn.MultiheadAttention on (T, B, C), AdamW with MultiStepLR), FGSM against it (the input's
gradient sign, detach_ of the perturbed images) and SimCLR's InfoNCE loss (cosine
similarity of every pair by broadcasting, masked_fill_ of the diagonal, the positive pairs
by roll, the ranking metrics by argsort().argmin()). See tutorial_harness.py."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def vit_simclr_fgsm(torch, env):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(42)

    def img_to_patch(x, patch_size, flatten_channels=True):
        B, C, H, W = x.shape
        x = x.reshape(B, C, H // patch_size, patch_size, W // patch_size, patch_size)
        x = x.permute(0, 2, 4, 1, 3, 5)
        x = x.flatten(1, 2)
        if flatten_channels:
            x = x.flatten(2, 4)
        return x

    class AttentionBlock(nn.Module):
        def __init__(self, embed_dim, hidden_dim, num_heads, dropout=0.0):
            super().__init__()
            self.layer_norm_1 = nn.LayerNorm(embed_dim)
            self.attn = nn.MultiheadAttention(embed_dim, num_heads, dropout=dropout)
            self.layer_norm_2 = nn.LayerNorm(embed_dim)
            self.linear = nn.Sequential(nn.Linear(embed_dim, hidden_dim), nn.GELU(), nn.Dropout(dropout),
                                        nn.Linear(hidden_dim, embed_dim), nn.Dropout(dropout))
        def forward(self, x):
            inp_x = self.layer_norm_1(x)
            x = x + self.attn(inp_x, inp_x, inp_x)[0]
            x = x + self.linear(self.layer_norm_2(x))
            return x

    class VisionTransformer(nn.Module):
        def __init__(self, embed_dim, hidden_dim, num_channels, num_heads, num_layers, num_classes,
                     patch_size, num_patches, dropout=0.0):
            super().__init__()
            self.patch_size = patch_size
            self.input_layer = nn.Linear(num_channels * (patch_size ** 2), embed_dim)
            self.transformer = nn.Sequential(*(AttentionBlock(embed_dim, hidden_dim, num_heads, dropout=dropout)
                                               for _ in range(num_layers)))
            self.mlp_head = nn.Sequential(nn.LayerNorm(embed_dim), nn.Linear(embed_dim, num_classes))
            self.dropout = nn.Dropout(dropout)
            self.cls_token = nn.Parameter(torch.randn(1, 1, embed_dim))
            self.pos_embedding = nn.Parameter(torch.randn(1, 1 + num_patches, embed_dim))
        def forward(self, x):
            x = img_to_patch(x, self.patch_size)
            B, T, _ = x.shape
            x = self.input_layer(x)
            cls_token = self.cls_token.repeat(B, 1, 1)
            x = torch.cat([cls_token, x], dim=1)
            x = x + self.pos_embedding[:, :T + 1]
            x = self.dropout(x)
            x = x.transpose(0, 1)
            x = self.transformer(x)
            cls = x[0]
            return self.mlp_head(cls)

    model = VisionTransformer(embed_dim=16, hidden_dim=32, num_channels=3, num_heads=2, num_layers=1,
                              num_classes=5, patch_size=4, num_patches=4)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[2], gamma=0.1)
    imgs = torch.randn(6, 3, 8, 8)
    labels = torch.randint(0, 5, (6,))
    def step(imgs, labels):
        preds = model(imgs)
        loss = F.cross_entropy(preds, labels)
        acc = (preds.argmax(dim=-1) == labels).float().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, acc
    step = env.step(step)
    for i in range(3):
        env.rec(f"vit {i}", step(imgs, labels))
        sched.step()

    # FGSM on the trained model
    def fast_gradient_sign_method(model, imgs, labels, epsilon=0.02):
        inp_imgs = imgs.clone().requires_grad_()
        preds = model(inp_imgs)
        preds = F.log_softmax(preds, dim=-1)
        loss = -torch.gather(preds, 1, labels[:, None])
        loss.sum().backward()
        noise_grad = torch.sign(inp_imgs.grad.to(torch.float32))
        fake_imgs = imgs + epsilon * noise_grad
        fake_imgs.detach_()
        return fake_imgs, noise_grad
    model.eval()
    fake, noise = fast_gradient_sign_method(model, imgs, labels)
    env.rec("fgsm", (fake, noise))
    with torch.no_grad():
        env.rec("fgsm preds", model(fake).softmax(-1))

    # SimCLR's InfoNCE loss with its ranking metrics
    def info_nce_loss(feats, temperature=0.07):
        cos_sim = F.cosine_similarity(feats[:, None, :], feats[None, :, :], dim=-1)
        self_mask = torch.eye(cos_sim.shape[0], dtype=torch.bool, device=cos_sim.device)
        cos_sim.masked_fill_(self_mask, -9e15)
        pos_mask = self_mask.roll(shifts=cos_sim.shape[0] // 2, dims=0)
        cos_sim = cos_sim / temperature
        nll = -cos_sim[pos_mask] + torch.logsumexp(cos_sim, dim=-1)
        nll = nll.mean()
        comb_sim = torch.cat([cos_sim[pos_mask][:, None], cos_sim.masked_fill(pos_mask, -9e15)], dim=-1)
        sim_argsort = comb_sim.argsort(dim=-1, descending=True).argmin(dim=-1)
        return nll, (sim_argsort == 0).float().mean(), (sim_argsort < 5).float().mean(), sim_argsort.float().mean() + 1
    proj = nn.Sequential(nn.Linear(12, 16), nn.ReLU(inplace=True), nn.Linear(16, 8))
    popt = torch.optim.AdamW(proj.parameters(), lr=5e-4, weight_decay=1e-4)
    def simclr_step(x1, x2):
        feats = proj(torch.cat([x1, x2], dim=0))
        nll, top1, top5, mean_pos = info_nce_loss(feats)
        popt.zero_grad()
        nll.backward()
        popt.step()
        return nll, top1, top5, mean_pos
    simclr_step = env.step(simclr_step)
    base = torch.randn(6, 12)
    for i in range(3):
        x1 = base + 0.3 * torch.randn(6, 12)
        x2 = base + 0.3 * torch.randn(6, 12)
        env.rec(f"simclr {i}", simclr_step(x1, x2))


def test_vit_fgsm_simclr():
    run_tutorial(vit_simclr_fgsm)
