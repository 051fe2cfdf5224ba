"""Sweep 69 (t7), file d: trainer classes as blog posts and course notebooks write them, the
training step a method of the trainer compiled as a bound method, run with PyTorch, with
llgrad eagerly and with llgrad compiled through tutorial_harness.py. The trainers hold what
the step does not read (pre-made batches it is called with, history lists, the best state
so far, an epoch counter, the last loss): the step traces a bounded number of times over
epochs (compile/self_reads.py walks the trainer through what the step reads).

- a regression Trainer: batches pre-made into a list on the trainer, `train_step(self, x,
  y)` calling `self.compute_loss` (a helper method followed), `self.global_step += 1`,
  `self.history.append(loss.item())` outside the step, validation in a
  `@torch.no_grad()` method, the best state kept by copy.deepcopy(state_dict) and restored;
- a DCGAN-style trainer at toy size: `self.fixed_noise` read only by a sampling method, two
  optimizers, the step storing `self.last_d_loss` / `self.last_g_loss` before reading them,
  the real-and-fake labels made with torch.full inside the step."""
import copy

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def regression_trainer(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Trainer:
        def __init__(self, model, lr, data, val):
            self.model = model
            self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
            self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, 2, gamma=0.5)
            self.batches = [(data[0][i:i + 8], data[1][i:i + 8]) for i in range(0, 32, 8)]
            self.val = val
            self.history, self.val_history = [], []
            self.global_step, self.epoch = 0, 0
            self.best, self.best_state = float("inf"), None

        def compute_loss(self, x, y):
            return F.smooth_l1_loss(self.model(x), y)

        def train_step(self, x, y):
            self.model.train()
            loss = self.compute_loss(x, y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.global_step += 1
            return loss.detach()

        @torch.no_grad()
        def validate(self):
            self.model.eval()
            return self.compute_loss(*self.val).item()

        def fit(self, epochs):
            self.step = env.step(self.train_step)
            for self.epoch in range(epochs):
                for x, y in self.batches:
                    self.history.append(self.step(x, y).item())
                self.scheduler.step()
                val = self.validate()
                self.val_history.append(val)
                if val < self.best:
                    self.best, self.best_state = val, copy.deepcopy(self.model.state_dict())
            self.model.load_state_dict(self.best_state)

    model = env.init(torch.nn.Sequential(nn.Linear(5, 16), nn.BatchNorm1d(16), nn.Tanh(),
                                         nn.Linear(16, 2)))
    data = (env.randn(32, 5), env.randn(32, 2))
    trainer = Trainer(model, 0.05, data, (env.randn(12, 5), env.randn(12, 2)))
    trainer.fit(5)
    env.rec("history", trainer.history)
    env.rec("val", trainer.val_history)
    env.rec("global step", trainer.global_step)
    env.rec("best", trainer.best)
    env.rec("restored", dict(model.state_dict()))
    if env.compiled:    # (.grad None at the first call, the global step made an input)
        assert trainer.step.n_traces <= 3, trainer.step.n_traces


def gan_trainer(torch, env):
    nn, F = torch.nn, torch.nn.functional
    nz = 4

    class GANTrainer:
        def __init__(self, netG, netD):
            self.netG, self.netD = netG, netD
            self.optD = torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
            self.optG = torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
            self.criterion = nn.BCEWithLogitsLoss()
            self.fixed_noise = env.randn(6, nz)
            self.samples, self.G_losses, self.D_losses = [], [], []
            self.real_label, self.fake_label = 1., 0.

        def step(self, real, noise):
            b = real.size(0)
            self.optD.zero_grad()
            label = torch.full((b,), self.real_label)
            errD_real = self.criterion(self.netD(real).view(-1), label)
            errD_real.backward()
            fake = self.netG(noise)
            label.fill_(self.fake_label)
            errD_fake = self.criterion(self.netD(fake.detach()).view(-1), label)
            errD_fake.backward()
            self.optD.step()
            self.optG.zero_grad()
            label.fill_(self.real_label)
            errG = self.criterion(self.netD(fake).view(-1), label)
            errG.backward()
            self.optG.step()
            self.last_d_loss = (errD_real + errD_fake).detach()
            self.last_g_loss = errG.detach()
            return self.last_d_loss, self.last_g_loss

        def sample(self):
            with torch.no_grad():
                return self.netG(self.fixed_noise)

    netG = env.init(nn.Sequential(nn.Linear(nz, 16), nn.ReLU(), nn.Linear(16, 3)))
    netD = env.init(nn.Sequential(nn.Linear(3, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1)))
    tr = GANTrainer(netG, netD)
    step = env.step(tr.step)
    real_batches = [env.randn(10, 3) + 2.0 for _ in range(3)]
    for epoch in range(3):
        for real in real_batches:
            d, g = step(real, env.randn(10, nz))
            tr.D_losses.append(d.item())
            tr.G_losses.append(g.item())
        tr.samples.append(tr.sample())
    env.rec("D", tr.D_losses)
    env.rec("G", tr.G_losses)
    env.rec("samples", tr.samples)
    env.rec("params", {**netG.state_dict(), **netD.state_dict()})
    if env.compiled:
        assert step.n_traces <= 2, step.n_traces


PROGRAMS = {"regression_trainer": regression_trainer, "gan_trainer": gan_trainer}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-5, atol=1e-6)
