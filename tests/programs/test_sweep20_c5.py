"""Sweep 20 (C), part 5: two-network training. A DCGAN-style GAN: the discriminator step on
real and fake (`fake.detach()`) batches with BCEWithLogitsLoss and one-sided label
smoothing (real labels 0.9, made with torch.full), errD_real.backward() and
errD_fake.backward() accumulating before optimizerD.step(), then the generator step with
the labels flipped; D(x).mean().item() tracked as in the DCGAN tutorial; the loop
body compiled as one step, the generator's netD grads zeroed with zero_grad(set_to_none=False).
Then knowledge distillation: a teacher in eval() under no_grad, the student trained on
alpha * KLDiv(log_softmax(s/T), softmax(t/T), reduction="batchmean") * T^2 plus
(1 - alpha) * cross-entropy, and nn.KLDivLoss(log_target=True) checked too. Run with
PyTorch, with llgrad eagerly and with llgrad.compile (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def dcgan(torch, env):
    nn = torch.nn
    nz = 6

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.ConvTranspose2d(nz, 16, 4, 1, 0, bias=False), nn.BatchNorm2d(16), nn.ReLU(True),
                nn.ConvTranspose2d(16, 1, 4, 2, 1, bias=False), nn.Tanh())

        def forward(self, z):
            return self.main(z)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.Conv2d(1, 16, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(16, 32, 4, 2, 1, bias=False), nn.BatchNorm2d(32), nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(32, 1, 2, 1, 0, bias=False))

        def forward(self, x):
            return self.main(x).view(-1)

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find("BatchNorm") != -1:
            nn.init.constant_(m.bias.data, 0)

    netG, netD = Generator(), Discriminator()
    netG.apply(weights_init)
    env.init(netG)
    env.init(netD)
    criterion = nn.BCEWithLogitsLoss()
    optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
    real_label, fake_label = 0.9, 0.0

    def d_step(real, noise):
        netD.zero_grad()
        b_size = real.size(0)
        label = torch.full((b_size,), real_label, dtype=torch.float)
        output = netD(real)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = torch.sigmoid(output).mean().item()
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = torch.sigmoid(output).mean().item()
        optimizerD.step()
        return errD_real + errD_fake, D_x, D_G_z1, fake

    def g_step(fake):
        netG.zero_grad()
        netD.zero_grad(set_to_none=False)
        label = torch.full((fake.size(0),), 1.0)
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        optimizerG.step()
        return errG, torch.sigmoid(output).mean().item()

    def train_step(real, noise):     # (the tutorial's loop body: fake flows from D's step to G's)
        errD, D_x, D_G_z1, fake = d_step(real, noise)
        errG, D_G_z2 = g_step(fake)
        return errD, D_x, D_G_z1, errG, D_G_z2

    train_step = env.step(train_step)
    G_losses, D_losses = [], []
    real = env.rand(5, 1, 8, 8) * 2 - 1
    for i in range(4):
        noise = env.randn(5, nz, 1, 1)
        errD, D_x, D_G_z1, errG, D_G_z2 = train_step(real, noise)
        G_losses.append(errG.item())
        D_losses.append(errD.item())
        env.rec(f"iter{i}", (D_x, D_G_z1, D_G_z2))
    env.rec("losses", (G_losses, D_losses))
    env.rec("G", netG.state_dict())
    env.rec("D", netD.state_dict())
    env.rec("D grads zeroed", [p.grad for p in netD.parameters()])


def distillation(torch, env):
    nn, F = torch.nn, torch.nn.functional
    teacher = env.init(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 4)))
    student = env.init(nn.Sequential(nn.Linear(10, 8), nn.ReLU(), nn.Linear(8, 4)))
    opt = torch.optim.SGD(student.parameters(), lr=0.1, momentum=0.9)
    ce = nn.CrossEntropyLoss()
    T, alpha = 4.0, 0.7
    X, y = env.randn(16, 10), env.randint(0, 4, (16,))

    def train_knowledge_distillation(x, y):
        teacher.eval()
        student.train()
        with torch.no_grad():
            teacher_logits = teacher(x)
        student_logits = student(x)
        soft_targets = F.softmax(teacher_logits / T, dim=-1)
        soft_prob = F.log_softmax(student_logits / T, dim=-1)
        soft_loss = F.kl_div(soft_prob, soft_targets, reduction="batchmean") * T ** 2
        label_loss = ce(student_logits, y)
        loss = alpha * soft_loss + (1 - alpha) * label_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), soft_loss.detach()
    step = env.step(train_knowledge_distillation)
    for i in range(5):
        env.rec(f"step{i}", step(X, y))
    kl = nn.KLDivLoss(reduction="batchmean", log_target=True)
    fn = env.step(lambda s, t: kl(F.log_softmax(s / T, 1), F.log_softmax(t / T, 1)))
    env.rec("kl log_target", fn(student(X), teacher(X).detach()))
    env.rec("student", student.state_dict())
    env.rec("teacher grads", [p.grad for p in teacher.parameters()])


@pytest.mark.parametrize("program", [dcgan, distillation])
def test_two_networks(program):
    run_tutorial(program)
