"""Sweep 64 (p1), vision and physics-informed programs as tutorials write them, run with
PyTorch, with llgrad eagerly and with llgrad compiling the step (tutorial_harness.py):

- the PyTorch neural-style-transfer tutorial: ContentLoss / StyleLoss modules that store
  their loss as an attribute, Gram matrices, the input image optimised by LBFGS with a
  closure that clamps `input_img.data` first (the closure compiled);
- a physics-informed network for the 1D heat equation u_t = k u_xx: first and second
  derivatives by torch.autograd.grad(create_graph=True) of the network's output;
- a small U-Net: Conv2d + BatchNorm2d blocks, MaxPool2d, ConvTranspose2d, skip
  concatenation, BCEWithLogits plus a soft Dice loss;
- a small ViT: patches by a strided Conv2d, a cls token, learned position embeddings,
  nn.TransformerEncoder of norm_first layers with GELU, AdamW;
- a Siamese embedding trained with batch-hard triplet mining (pairwise distances, masks
  by label equality, masked max/min) and TripletMarginLoss on the mined triplets."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def neural_style_lbfgs(torch, env):
    nn, F = torch.nn, torch.nn.functional

    def gram_matrix(x):
        a, b, c, d = x.size()
        features = x.view(a * b, c * d)
        G = torch.mm(features, features.t())
        return G.div(a * b * c * d)

    class ContentLoss(nn.Module):
        def __init__(self, target):
            super().__init__()
            self.target = target.detach()

        def forward(self, x):
            self.loss = F.mse_loss(x, self.target)
            return x

    class StyleLoss(nn.Module):
        def __init__(self, target_feature):
            super().__init__()
            self.target = gram_matrix(target_feature).detach()

        def forward(self, x):
            self.loss = F.mse_loss(gram_matrix(x), self.target)
            return x

    cnn = env.init(nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                                 nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU()))
    cnn.eval().requires_grad_(False)
    style_img, content_img = env.rand(1, 3, 8, 8), env.rand(1, 3, 8, 8)

    model = nn.Sequential()
    content_losses, style_losses = [], []
    i = 0
    for layer in cnn.children():           # (the tutorial's rebuild with loss layers)
        if isinstance(layer, nn.Conv2d):
            i += 1
            name = f"conv_{i}"
        elif isinstance(layer, nn.ReLU):
            name = f"relu_{i}"
            layer = nn.ReLU(inplace=False)
        else:
            name = f"pool_{i}"
        model.add_module(name, layer)
        if name == "conv_2":
            target = model(content_img).detach()
            content_losses.append(ContentLoss(target))
            model.add_module(f"content_loss_{i}", content_losses[-1])
        if name.startswith("conv"):
            target_feature = model(style_img).detach()
            style_losses.append(StyleLoss(target_feature))
            model.add_module(f"style_loss_{i}", style_losses[-1])

    input_img = content_img.clone().requires_grad_(True)
    optimizer = torch.optim.LBFGS([input_img], max_iter=4)
    style_weight, content_weight = 1e4, 1.0

    def closure():
        with torch.no_grad():
            input_img.clamp_(0, 1)
        optimizer.zero_grad()
        model(input_img)
        style_score = sum(sl.loss for sl in style_losses) * style_weight
        content_score = sum(cl.loss for cl in content_losses) * content_weight
        loss = style_score + content_score
        loss.backward()
        return loss

    step = env.step(closure)
    for it in range(3):
        env.rec(f"loss {it}", optimizer.step(step))
    with torch.no_grad():
        input_img.clamp_(0, 1)
    env.rec("image", input_img)


def pinn_heat(torch, env):
    nn = torch.nn
    k = 0.1

    net = env.init(nn.Sequential(nn.Linear(2, 20), nn.Tanh(), nn.Linear(20, 20), nn.Tanh(),
                                 nn.Linear(20, 1)))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)

    def u(x, t):
        return net(torch.cat([x, t], dim=1))

    def train_step(x_f, t_f, x_0, u_0, t_b):
        x_f = x_f.clone().requires_grad_(True)
        t_f = t_f.clone().requires_grad_(True)
        u_f = u(x_f, t_f)
        u_t, u_x = torch.autograd.grad(u_f, (t_f, x_f), torch.ones_like(u_f),
                                       create_graph=True)
        u_xx = torch.autograd.grad(u_x.sum(), x_f, create_graph=True)[0]
        residual = u_t - k * u_xx
        loss_f = (residual ** 2).mean()
        loss_0 = ((u(x_0, torch.zeros_like(x_0)) - u_0) ** 2).mean()
        loss_b = ((u(torch.zeros_like(t_b), t_b) ** 2).mean()
                  + (u(torch.ones_like(t_b), t_b) ** 2).mean())
        loss = loss_f + loss_0 + loss_b
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), loss_f.detach()

    step = env.step(train_step)
    x_0 = env.rand(16, 1)
    u_0 = torch.sin(3.141592653589793 * x_0)
    for it in range(4):
        env.rec(f"step {it}", step(env.rand(32, 1), env.rand(32, 1), x_0, u_0, env.rand(8, 1)))
    env.rec("params", dict(net.state_dict()))


def small_unet(torch, env):
    nn, F = torch.nn, torch.nn.functional

    def block(c_in, c_out):
        return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
                             nn.BatchNorm2d(c_out), nn.ReLU(inplace=True))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.down1, self.down2 = block(1, 4), block(4, 8)
            self.pool = nn.MaxPool2d(2)
            self.bottom = block(8, 16)
            self.up2 = nn.ConvTranspose2d(16, 8, 2, stride=2)
            self.dec2 = block(16, 8)
            self.up1 = nn.ConvTranspose2d(8, 4, 2, stride=2)
            self.dec1 = block(8, 4)
            self.head = nn.Conv2d(4, 1, 1)

        def forward(self, x):
            d1 = self.down1(x)
            d2 = self.down2(self.pool(d1))
            b = self.bottom(self.pool(d2))
            u2 = self.dec2(torch.cat([self.up2(b), d2], dim=1))
            u1 = self.dec1(torch.cat([self.up1(u2), d1], dim=1))
            return self.head(u1)

    def dice_loss(logits, target, eps=1.0):
        p = torch.sigmoid(logits)
        inter = (p * target).sum(dim=(1, 2, 3))
        union = p.sum(dim=(1, 2, 3)) + target.sum(dim=(1, 2, 3))
        return 1 - ((2 * inter + eps) / (union + eps)).mean()

    model = env.init(UNet())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    bce = nn.BCEWithLogitsLoss()

    def train_step(x, mask):
        model.train()
        logits = model(x)
        loss = bce(logits, mask) + dice_loss(logits, mask)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        x = env.randn(2, 1, 8, 8)
        env.rec(f"loss {it}", step(x, (x > 0.3).float()))
    model.eval()
    with torch.no_grad():
        env.rec("eval", model(env.randn(1, 1, 8, 8)))
    env.rec("params", dict(model.state_dict()))


def tiny_vit(torch, env):
    nn, F = torch.nn, torch.nn.functional
    P, D, n_cls = 4, 16, 3

    class ViT(nn.Module):
        def __init__(self, img=8):
            super().__init__()
            n_patches = (img // P) ** 2
            self.patch_embed = nn.Conv2d(1, D, kernel_size=P, stride=P)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
            self.pos_embed = nn.Parameter(torch.zeros(1, n_patches + 1, D))
            layer = nn.TransformerEncoderLayer(D, nhead=2, dim_feedforward=32, dropout=0.0,
                                               activation="gelu", batch_first=True,
                                               norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, num_layers=2,
                                                 enable_nested_tensor=False)
            self.norm = nn.LayerNorm(D)
            self.head = nn.Linear(D, n_cls)

        def forward(self, x):
            x = self.patch_embed(x).flatten(2).transpose(1, 2)
            cls = self.cls_token.expand(x.shape[0], -1, -1)
            x = torch.cat([cls, x], dim=1) + self.pos_embed
            x = self.encoder(x)
            return self.head(self.norm(x[:, 0]))

    model = ViT()
    with torch.no_grad():
        model.cls_token.copy_(env.randn(1, 1, D, scale=0.02))
        model.pos_embed.copy_(env.randn(1, 5, D, scale=0.02))
    model = env.init(model)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2 or "embed" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": no_decay, "weight_decay": 0.0}], lr=3e-3)

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"loss {it}", step(env.randn(4, 1, 8, 8), env.randint(0, n_cls, (4,))))
    # (the key projection's bias adds q.b_k to a whole row of scores, which softmax cancels:
    # its gradient is rounding noise (eager's and compiled's differ too) that AdamW scales
    # to lr-sized steps: it is left out)
    params = dict(model.state_dict())
    for i in range(2):
        name = f"encoder.layers.{i}.self_attn.in_proj_bias"
        bias = params.pop(name)
        env.rec(name, (bias[:D], bias[2 * D:]))
    env.rec("params", params)


def triplet_batch_hard(torch, env):
    nn, F = torch.nn, torch.nn.functional

    net = env.init(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 8)))
    criterion = nn.TripletMarginLoss(margin=0.5, p=2)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True)

    def train_step(x, labels):
        emb = F.normalize(net(x), p=2, dim=1)
        with torch.no_grad():
            dist = torch.cdist(emb, emb)
            same = labels.unsqueeze(0) == labels.unsqueeze(1)
            eye = torch.eye(len(labels), dtype=torch.bool)
            pos_d = dist.masked_fill(~same | eye, float("-inf"))
            neg_d = dist.masked_fill(same, float("inf"))
            hardest_pos = pos_d.argmax(dim=1)
            hardest_neg = neg_d.argmin(dim=1)
        loss = criterion(emb, emb[hardest_pos], emb[hardest_neg])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), hardest_pos, hardest_neg

    step = env.step(train_step)
    centers = env.randn(3, 10) * 2
    for it in range(5):
        labels = torch.tensor([0, 0, 1, 1, 2, 2, 0, 1])
        x = centers[labels] + env.randn(8, 10)
        env.rec(f"step {it}", step(x, labels))
    env.rec("params", dict(net.state_dict()))


PROGRAMS = {"neural_style_lbfgs": neural_style_lbfgs, "pinn_heat": pinn_heat,
            "small_unet": small_unet, "tiny_vit": tiny_vit,
            "triplet_batch_hard": triplet_batch_hard}


# (the default run keeps the quickest; the others, 1.5-8 s each with a cold kernel
# cache, are marked slow)
FAST = ('triplet_batch_hard',)


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
