"""Sweep 17 (D), part 5: UvA Deep Learning tutorial 8's energy-based model at toy size
(Langevin sampling through the input's .grad with the parameters frozen, set_grad_enabled,
a sample buffer, contrastive divergence with Adam betas (0, 0.999), the energy's input
gradient by autograd.grad inside a compiled function). Tutorial 11's flow is in part 12.
Run with PyTorch, with llgrad eagerly and compiled (tutorial_harness.py)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def ebm(torch, env):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(42)

    class Swish(nn.Module):
        def forward(self, x):
            return x * torch.sigmoid(x)

    class CNNModel(nn.Module):
        def __init__(self, hidden_features=4):
            super().__init__()
            c1, c2 = hidden_features // 2, hidden_features
            self.cnn_layers = nn.Sequential(
                nn.Conv2d(1, c1, kernel_size=3, stride=2, padding=1), Swish(),
                nn.Conv2d(c1, c2, kernel_size=3, stride=2, padding=1), Swish(),
                nn.Flatten(), nn.Linear(c2 * 2 * 2, c2), Swish(), nn.Linear(c2, 1))
        def forward(self, x):
            return self.cnn_layers(x).squeeze(dim=-1)

    def generate_samples(model, inp_imgs, steps=6, step_size=10, return_img_per_step=False):
        is_training = model.training
        model.eval()
        for p in model.parameters():
            p.requires_grad = False
        inp_imgs.requires_grad = True
        had_gradients_enabled = torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        noise = torch.randn(inp_imgs.shape, device=inp_imgs.device)
        imgs_per_step = []
        for _ in range(steps):
            noise.normal_(0, 0.005)
            inp_imgs.data.add_(noise.data)
            inp_imgs.data.clamp_(min=-1.0, max=1.0)
            out_imgs = -model(inp_imgs)
            out_imgs.sum().backward()
            inp_imgs.grad.data.clamp_(-0.03, 0.03)
            inp_imgs.data.add_(-step_size * inp_imgs.grad.data)
            inp_imgs.grad.detach_()
            inp_imgs.grad.zero_()
            inp_imgs.data.clamp_(min=-1.0, max=1.0)
            if return_img_per_step:
                imgs_per_step.append(inp_imgs.clone().detach())
        for p in model.parameters():
            p.requires_grad = True
        model.train(is_training)
        torch.set_grad_enabled(had_gradients_enabled)
        return torch.stack(imgs_per_step, dim=0) if return_img_per_step else inp_imgs

    model = CNNModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.0, 0.999))
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.97)
    examples = [(torch.rand((1, 1, 8, 8)) * 2 - 1) for _ in range(8)]

    def train_step(real_imgs):
        small_noise = torch.randn_like(real_imgs) * 0.005
        real_imgs.add_(small_noise).clamp_(min=-1.0, max=1.0)
        n_new = np.random.binomial(4, 0.05)
        rand_imgs = torch.rand((n_new,) + (1, 8, 8)) * 2 - 1
        old_imgs = torch.cat([examples[i] for i in range(4 - n_new)], dim=0)
        inp_imgs = torch.cat([rand_imgs, old_imgs], dim=0).detach()
        fake_imgs = generate_samples(model, inp_imgs)
        examples[:0] = list(fake_imgs.cpu().chunk(4, dim=0))
        del examples[8:]
        inp_imgs = torch.cat([real_imgs, fake_imgs], dim=0)
        real_out, fake_out = model(inp_imgs).chunk(2, dim=0)
        reg_loss = 0.1 * (real_out ** 2 + fake_out ** 2).mean()
        cdiv_loss = fake_out.mean() - real_out.mean()
        loss = reg_loss + cdiv_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss, reg_loss, cdiv_loss, real_out.mean(), fake_out.mean()

    np.random.seed(0)
    for i in range(3):
        real = env.rand(4, 1, 8, 8) * 2 - 1
        env.rec(f"step {i}", train_step(real))
        scheduler.step()
    env.rec("state", model.state_dict())
    env.rec("lr", scheduler.get_last_lr())
    # the energy's gradient w.r.t. the input with autograd.grad, under a compiled function
    def energy_grad(x):
        x = x.detach().requires_grad_(True)
        e = model(x).sum()
        (g,) = torch.autograd.grad(e, x)
        return g
    energy_grad = env.step(energy_grad)
    x0 = env.rand(3, 1, 8, 8)
    env.rec("energy grad", energy_grad(x0))
    steps = generate_samples(model, torch.rand((2, 1, 8, 8)) * 2 - 1, steps=4, return_img_per_step=True)
    env.rec("steps", steps)


def test_ebm():
    run_tutorial(ebm)
