"""Sweep 20 (C), part 17: vision idioms. A spatial transformer network: a localisation net
whose last Linear starts at the identity transform (weight zeroed, bias copied in under
no_grad), F.affine_grid(theta, x.size(), align_corners=False) and F.grid_sample, then a
classifier; trained with forward hooks registered outside the step collecting activations
into a dict (`activation[name] = output.detach()`) read after each call. Then a
super-resolution net (ESPCN): Conv2d layers, nn.PixelShuffle(2), an L1 loss against the
target with F.interpolate(mode="bicubic") as the baseline, and PSNR = 10 * log10(1 / mse)
per image, with torch.optim.lr_scheduler.ReduceLROnPlateau stepped on the validation loss.
Run with PyTorch, with llgrad eagerly and with llgrad.compile (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def spatial_transformer(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3, padding=1)
            self.fc = nn.Linear(4 * 4 * 4, 3)
            self.localization = nn.Sequential(nn.Conv2d(1, 4, 3), nn.MaxPool2d(2, stride=2), nn.ReLU(True))
            self.fc_loc = nn.Sequential(nn.Linear(4 * 3 * 3, 8), nn.ReLU(True), nn.Linear(8, 6))

        def stn(self, x):
            xs = self.localization(x)
            xs = xs.view(-1, 4 * 3 * 3)
            theta = self.fc_loc(xs).view(-1, 2, 3)
            grid = F.affine_grid(theta, x.size(), align_corners=False)
            return F.grid_sample(x, grid, align_corners=False)

        def forward(self, x):
            x = self.stn(x)
            x = F.max_pool2d(F.relu(self.conv(x)), 2)
            return F.log_softmax(self.fc(x.flatten(1)), dim=1)

    model = Net()
    env.init(model)
    with torch.no_grad():
        model.fc_loc[2].weight.zero_()
        model.fc_loc[2].bias.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))
        model.fc_loc[2].weight.add_(0.01 * env.randn(6, 8))
    activation = {}

    def get_activation(name):
        def hook(module, inp, output):
            activation[name] = output.detach()
        return hook
    model.localization.register_forward_hook(get_activation("loc"))
    model.conv.register_forward_hook(get_activation("conv"))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    X, y = env.randn(4, 1, 8, 8), env.randint(0, 3, (4,))

    def train_step(x, y):
        model.train()
        opt.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()
    train_step = env.step(train_step)
    for i in range(4):
        env.rec(f"loss{i}", train_step(X, y))
        env.rec(f"act{i}", (activation["loc"].sum(), activation["conv"].mean()))
    env.rec("state", model.state_dict())


def espcn(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class ESPCN(nn.Module):
        def __init__(self, r=2):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 8, 5, padding=2)
            self.conv2 = nn.Conv2d(8, 4, 3, padding=1)
            self.conv3 = nn.Conv2d(4, r * r, 3, padding=1)
            self.pixel_shuffle = nn.PixelShuffle(r)

        def forward(self, x):
            x = torch.tanh(self.conv1(x))
            x = torch.tanh(self.conv2(x))
            return torch.sigmoid(self.pixel_shuffle(self.conv3(x)))

    model = env.init(ESPCN())
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=0)
    hr = env.rand(4, 1, 8, 8)
    lr_img = F.avg_pool2d(hr, 2)

    def train_step(lr_img, hr):
        opt.zero_grad()
        out = model(lr_img)
        loss = F.l1_loss(out, hr)
        loss.backward()
        opt.step()
        return loss

    @torch.no_grad()
    def validate(lr_img, hr):
        model.eval()
        out = model(lr_img)
        mse = ((out - hr) ** 2).mean(dim=(1, 2, 3))
        psnr = 10 * torch.log10(1 / mse)
        bicubic = F.interpolate(lr_img, scale_factor=2, mode="bicubic", align_corners=False).clamp(0, 1)
        base = 10 * torch.log10(1 / ((bicubic - hr) ** 2).mean(dim=(1, 2, 3)))
        model.train()
        return F.l1_loss(out, hr).item(), psnr, base
    train_step, validate = env.step(train_step), env.step(validate)
    for epoch in range(4):
        env.rec(f"loss{epoch}", train_step(lr_img, hr))
        val, psnr, base = validate(lr_img, hr)
        sched.step(val if epoch != 2 else val + 1.0)
        env.rec(f"val{epoch}", (val, psnr, base, opt.param_groups[0]["lr"]))
    env.rec("state", model.state_dict())


@pytest.mark.parametrize("program", [spatial_transformer, espcn])
def test_vision(program):
    run_tutorial(program)
