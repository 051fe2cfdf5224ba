"""Sweep 64 (p1), programs whose training step reads and writes state beside the graph, run
with PyTorch, with llgrad eagerly and with llgrad compiling the step (tutorial_harness.py):

- BYOL: an online network with a predictor, a target network updated inside the step by
  an EMA whose momentum follows a cosine schedule of a Python step counter, and the
  symmetric 2 - 2 cos loss;
- DP-SGD (Opacus' recipe by hand): per-sample gradients by torch.func.vmap(grad(...)) of a
  functional_call, each clipped to a norm bound, summed, Gaussian noise (drawn outside)
  added, and the parameters updated in place under no_grad;
- Grad-CAM: a forward hook keeping the last conv block's activations, a tensor hook
  keeping their gradient, the class-activation map upsampled by F.interpolate; the model
  is trained by the same compiled step that computes the map;
- the spatial transformer tutorial: a localisation net initialised to the identity
  transform, F.affine_grid and F.grid_sample in front of a classifier;
- progressive unfreezing: a backbone frozen by requires_grad_(False), then unfrozen and
  given its own learning rate by add_param_group, the same compiled step throughout;
- checkpoint and resume: model and optimizer state_dicts saved with torch.save after a few
  compiled steps, loaded into fresh objects, and training continued compiled;
- CycleGAN's optimize_parameters as one compiled step: ReflectionPad2d, InstanceNorm2d,
  ConvTranspose2d with output_padding, LSGAN and cycle/identity L1 losses, and the
  discriminators' requires_grad switched off for the generators' update and on again."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def byol(torch, env):
    nn, F = torch.nn, torch.nn.functional
    base_m, total = 0.9, 6

    def mlp(i, h, o):
        return nn.Sequential(nn.Linear(i, h), nn.BatchNorm1d(h), nn.ReLU(), nn.Linear(h, o))

    online = env.init(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), mlp(16, 16, 8)))
    predictor = env.init(mlp(8, 16, 8))
    target = env.init(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), mlp(16, 16, 8)))
    target.load_state_dict(online.state_dict())
    target.requires_grad_(False)
    opt = torch.optim.SGD(list(online.parameters()) + list(predictor.parameters()), lr=0.05,
                          momentum=0.9)
    counter = {"step": 0}

    def regression_loss(p, z):
        return 2 - 2 * F.cosine_similarity(p, z.detach(), dim=-1).mean()

    def train_step(v1, v2):
        p1, p2 = predictor(online(v1)), predictor(online(v2))
        with torch.no_grad():
            z1, z2 = target(v1), target(v2)
        loss = regression_loss(p1, z2) + regression_loss(p2, z1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        m = 1 - (1 - base_m) * (math.cos(math.pi * counter["step"] / total) + 1) / 2
        with torch.no_grad():
            for po, pt in zip(online.parameters(), target.parameters()):
                pt.data.mul_(m).add_(po.data, alpha=1 - m)
        counter["step"] += 1
        return loss.detach()

    step = env.step(train_step)
    for it in range(total):
        x = env.randn(8, 8)
        env.rec(f"loss {it}", step(x + 0.1 * env.randn(8, 8), x * (1 + 0.1 * env.randn(8, 8))))
    env.rec("target", dict(target.state_dict()))
    env.rec("online", dict(online.state_dict()))


def dp_sgd_per_sample(torch, env):
    nn, F = torch.nn, torch.nn.functional
    from_func = torch.func
    max_norm, sigma, lr = 1.0, 0.5, 0.1

    model = env.init(nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3)))

    def loss_one(params, buffers, x, y):
        out = from_func.functional_call(model, (params, buffers), (x.unsqueeze(0),))
        return F.cross_entropy(out, y.unsqueeze(0))

    per_sample_grads = from_func.vmap(from_func.grad(loss_one), in_dims=(None, None, 0, 0))

    def train_step(x, y, noise):
        params = {k: v.detach() for k, v in model.named_parameters()}
        buffers = dict(model.named_buffers())
        grads = per_sample_grads(params, buffers, x, y)
        norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()], 1).norm(dim=1)
        factor = (max_norm / (norms + 1e-6)).clamp(max=1.0)
        with torch.no_grad():
            for (name, p), n in zip(model.named_parameters(), noise):
                g = torch.einsum("i,i...->...", factor, grads[name])
                p.sub_(lr * (g + sigma * max_norm * n) / x.shape[0])
        return norms, factor

    step = env.step(train_step)
    shapes = [p.shape for p in model.parameters()]
    for it in range(4):
        noise = [env.randn(*s) for s in shapes]
        env.rec(f"step {it}", step(env.randn(8, 6), env.randint(0, 3, (8,)), noise))
    env.rec("params", dict(model.state_dict()))


def grad_cam(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(),
                                          nn.MaxPool2d(2), nn.Conv2d(4, 8, 3, padding=1),
                                          nn.ReLU())
            self.classifier = nn.Linear(8, 3)

        def forward(self, x):
            return self.classifier(self.features(x).mean((2, 3)))

    net = env.init(Net())
    store = {}

    def save_activation(module, inputs, output):
        store["act"] = output
        output.register_hook(lambda g: store.__setitem__("grad", g))

    net.features[4].register_forward_hook(save_activation)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)

    def train_step(x, y):
        logits = net(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        weights = store["grad"].mean(dim=(2, 3), keepdim=True)
        cam = F.relu((weights * store["act"].detach()).sum(1, keepdim=True))
        cam = F.interpolate(cam, size=x.shape[2:], mode="bilinear", align_corners=False)
        cam = cam / (cam.amax(dim=(2, 3), keepdim=True) + 1e-8)
        opt.step()
        return loss.detach(), cam

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"step {it}", step(env.randn(2, 1, 8, 8), env.randint(0, 3, (2,))))
    env.rec("params", dict(net.state_dict()))


def spatial_transformer(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class STN(nn.Module):
        def __init__(self):
            super().__init__()
            self.localization = nn.Sequential(nn.Conv2d(1, 4, 3), nn.MaxPool2d(2), nn.ReLU())
            self.fc_loc = nn.Sequential(nn.Linear(4 * 3 * 3, 16), nn.ReLU(), nn.Linear(16, 6))
            self.fc_loc[2].weight.data.zero_()
            self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0],
                                                        dtype=torch.float))
            self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(64, 4))

        def stn(self, x):
            xs = self.localization(x).view(-1, 4 * 3 * 3)
            theta = self.fc_loc(xs).view(-1, 2, 3)
            grid = F.affine_grid(theta, x.size(), align_corners=False)
            return F.grid_sample(x, grid, align_corners=False)

        def forward(self, x):
            return F.log_softmax(self.classifier(self.stn(x)), dim=1)

    model = env.init(STN())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"loss {it}", step(env.randn(3, 1, 8, 8), env.randint(0, 4, (3,))))
    with torch.no_grad():
        env.rec("warped", model.stn(env.randn(1, 1, 8, 8)))
    env.rec("params", dict(model.state_dict()))


def progressive_unfreezing(torch, env):
    nn, F = torch.nn, torch.nn.functional

    backbone = env.init(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU()))
    head = env.init(nn.Linear(16, 2))
    backbone.requires_grad_(False)
    opt = torch.optim.Adam(head.parameters(), lr=1e-2)

    def train_step(x, y):
        loss = F.cross_entropy(head(backbone(x)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(6):
        if it == 3:          # (unfreeze the top layer, then everything)
            backbone[2].requires_grad_(True)
            opt.add_param_group({"params": backbone[2].parameters(), "lr": 1e-3})
        if it == 5:
            backbone[0].requires_grad_(True)
            opt.add_param_group({"params": backbone[0].parameters(), "lr": 1e-4})
        env.rec(f"loss {it}", step(env.randn(8, 6), env.randint(0, 2, (8,))))
        env.rec(f"grad {it}", backbone[0].weight.grad is None)
    env.rec("params", {**backbone.state_dict(), **head.state_dict()})


def checkpoint_resume(torch, env):
    nn, F = torch.nn, torch.nn.functional

    def make():
        model = nn.Sequential(nn.Linear(5, 10), nn.LayerNorm(10), nn.GELU(), nn.Linear(10, 1))
        opt = torch.optim.Adam(model.parameters(), lr=1e-2, amsgrad=True)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        return model, opt, sched

    model, opt, sched = make()
    env.init(model)

    def make_step(model, opt):
        def train_step(x, y):
            loss = F.smooth_l1_loss(model(x), y, beta=0.5)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss.detach()
        return env.step(train_step)

    step = make_step(model, opt)
    w = env.randn(5, 1)
    for it in range(3):
        x = env.randn(8, 5)
        env.rec(f"loss {it}", step(x, x @ w))
        sched.step()
    path = env.path("ckpt.pt")
    torch.save({"epoch": 3, "model": model.state_dict(), "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict()}, path)

    model2, opt2, sched2 = make()
    ckpt = torch.load(path)
    model2.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["optimizer"])
    sched2.load_state_dict(ckpt["scheduler"])
    step2 = make_step(model2, opt2)
    for it in range(ckpt["epoch"], 6):
        x = env.randn(8, 5)
        env.rec(f"loss {it}", step2(x, x @ w))
        sched2.step()
        env.rec(f"lr {it}", opt2.param_groups[0]["lr"])
    env.rec("params", dict(model2.state_dict()))
    env.rec("max_exp_avg_sq", [s["max_exp_avg_sq"] for s in opt2.state.values()])


def cyclegan(torch, env):
    nn, F = torch.nn, torch.nn.functional
    def gen():
        return nn.Sequential(
            nn.ReflectionPad2d(1), nn.Conv2d(2, 4, 3), nn.InstanceNorm2d(4, affine=True),
            nn.ReLU(True), nn.Conv2d(4, 4, 3, stride=2, padding=1), nn.InstanceNorm2d(4),
            nn.ReLU(True), nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1, output_padding=1),
            nn.ReLU(True), nn.ReflectionPad2d(1), nn.Conv2d(4, 2, 3), nn.Tanh())
    def disc():
        return nn.Sequential(nn.Conv2d(2, 4, 4, stride=2, padding=1), nn.LeakyReLU(0.2, True),
                             nn.Conv2d(4, 1, 3, padding=1))
    G_A, G_B, D_A, D_B = [env.init(m) for m in (gen(), gen(), disc(), disc())]
    opt_G = torch.optim.Adam(list(G_A.parameters()) + list(G_B.parameters()), lr=2e-3,
                             betas=(0.5, 0.999))
    opt_D = torch.optim.Adam(list(D_A.parameters()) + list(D_B.parameters()), lr=2e-3,
                             betas=(0.5, 0.999))
    mse, l1 = nn.MSELoss(), nn.L1Loss()
    def set_requires_grad(nets, flag):     # (the CycleGAN repository's helper)
        for net in nets:
            for p in net.parameters():
                p.requires_grad = flag
    def gan_loss(pred, real):
        return mse(pred, torch.ones_like(pred) if real else torch.zeros_like(pred))
    def optimize(real_A, real_B):
        fake_B, fake_A = G_A(real_A), G_B(real_B)
        rec_A, rec_B = G_B(fake_B), G_A(fake_A)
        set_requires_grad([D_A, D_B], False)
        opt_G.zero_grad()
        loss_G = (gan_loss(D_A(fake_B), True) + gan_loss(D_B(fake_A), True)
                  + 10 * (l1(rec_A, real_A) + l1(rec_B, real_B))
                  + 5 * (l1(G_A(real_B), real_B) + l1(G_B(real_A), real_A)))
        loss_G.backward()
        opt_G.step()
        set_requires_grad([D_A, D_B], True)
        opt_D.zero_grad()
        loss_D_A = 0.5 * (gan_loss(D_A(real_B), True) + gan_loss(D_A(fake_B.detach()), False))
        loss_D_A.backward()
        loss_D_B = 0.5 * (gan_loss(D_B(real_A), True) + gan_loss(D_B(fake_A.detach()), False))
        loss_D_B.backward()
        opt_D.step()
        return loss_G.detach(), loss_D_A.detach(), loss_D_B.detach()
    s = env.step(optimize)
    for it in range(3):
        env.rec(f"s{it}", s(env.randn(2, 2, 8, 8), env.randn(2, 2, 8, 8)))
    # (a conv bias before InstanceNorm cancels: its gradient is rounding noise, which Adam
    # scales to lr-sized steps; CycleGAN keeps such biases: they are left out)
    p = {k: v for k, v in G_A.state_dict().items() if k not in ("1.bias", "4.bias")}
    env.rec("p", {**p, **D_B.state_dict()})


PROGRAMS = {"byol": byol, "dp_sgd_per_sample": dp_sgd_per_sample, "grad_cam": grad_cam,
            "spatial_transformer": spatial_transformer,
            "progressive_unfreezing": progressive_unfreezing,
            "checkpoint_resume": checkpoint_resume, "cyclegan_toggled_grads": cyclegan}


# (the default run keeps the quickest; the others, 1.5-8 s each with a cold kernel
# cache, are marked slow)
FAST = ('dp_sgd_per_sample', 'checkpoint_resume')


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
