"""Stop 70 (t8), file h: detection, image-translation and embedding programs as their
reference repositories write them, run with PyTorch, with llgrad eagerly and with llgrad
compiling the step through tutorial_harness.py.

- CycleGAN at toy size (junyanz/pytorch-CycleGAN-and-pix2pix): an ImagePool of generated
  images replaced at random by Python's `random` (seeded alike in every run), the
  model's `set_requires_grad(nets, False)` toggled inside the compiled step around the
  generators' update, LSGAN, cycle and identity losses, itertools.chain over both
  generators' parameters, LambdaLR with the linear decay rule; the generators' and the
  discriminators' updates compiled apart with the pool's queries between them (the
  repository's one-method step, the pool inside it, runs eagerly and says why: the test at
  the end);
- SSD's MultiBoxLoss hard negative mining (amdegroot/ssd.pytorch): a per-anchor
  confidence loss with the positives zeroed, the double sort that ranks the negatives,
  `num_neg = torch.clamp(negpos_ratio * num_pos, max=...)`, the kept anchors' cross-entropy
  summed and divided by the positives, smooth-L1 on the positive anchors' offsets;
- Monte Carlo dropout (Gal & Ghahramani, the uncertainty blog posts): a trained model put
  in eval mode with only its Dropout modules switched back to train, T stochastic passes
  under no_grad in a compiled predict function, the predictive mean and variance;
- Poincare embeddings (Nickel & Kiela re-implementations): the hyperbolic distance with
  arcosh, a Riemannian SGD written as a torch.optim.Optimizer subclass (the gradient
  rescaled by (1 - |theta|^2)^2 / 4, then projected back into the ball), a negative
  sampling loss as cross-entropy over [positive, negatives] distances."""
import copy
import itertools
import os
import random
import re
import warnings

import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from tutorial_harness import Env, compare, program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def cyclegan(torch, env, whole_step=False):
    nn, F = torch.nn, torch.nn.functional
    random.seed(3)

    class ImagePool:
        def __init__(self, pool_size):
            self.pool_size, self.num_imgs, self.images = pool_size, 0, []

        def query(self, images):
            return_images = []
            for image in images:
                image = torch.unsqueeze(image.data, 0)
                if self.num_imgs < self.pool_size:
                    self.num_imgs += 1
                    self.images.append(image)
                    return_images.append(image)
                elif random.uniform(0, 1) > 0.5:
                    random_id = random.randint(0, self.pool_size - 1)
                    tmp = self.images[random_id].clone()
                    self.images[random_id] = image
                    return_images.append(tmp)
                else:
                    return_images.append(image)
            return torch.cat(return_images, 0)

    def generator():
        # (no bias before InstanceNorm: its gradient is zero up to rounding, which Adam
        # turns into steps of either sign)
        return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, padding_mode="reflect", bias=False),
                             nn.InstanceNorm2d(4), nn.ReLU(), nn.Conv2d(4, 1, 3, padding=1),
                             nn.Tanh())

    def discriminator():
        return nn.Sequential(nn.Conv2d(1, 4, 4, stride=2, padding=1), nn.LeakyReLU(0.2),
                             nn.Conv2d(4, 1, 3, padding=1))

    netG_A, netG_B = env.init(generator()), env.init(generator())
    netD_A, netD_B = env.init(discriminator()), env.init(discriminator())
    optimizer_G = torch.optim.Adam(itertools.chain(netG_A.parameters(), netG_B.parameters()),
                                   lr=2e-3, betas=(0.5, 0.999))
    optimizer_D = torch.optim.Adam(itertools.chain(netD_A.parameters(), netD_B.parameters()),
                                   lr=2e-3, betas=(0.5, 0.999))
    n_epochs, n_epochs_decay = 2, 2

    def lambda_rule(epoch):
        return 1.0 - max(0, epoch - n_epochs) / float(n_epochs_decay + 1)

    schedulers = [torch.optim.lr_scheduler.LambdaLR(o, lr_lambda=lambda_rule)
                  for o in (optimizer_G, optimizer_D)]
    fake_A_pool, fake_B_pool = ImagePool(3), ImagePool(3)
    lambda_A = lambda_B = 10.0
    lambda_idt = 0.5

    def gan_loss(pred, target_is_real):
        target = torch.ones_like(pred) if target_is_real else torch.zeros_like(pred)
        return F.mse_loss(pred, target)

    def set_requires_grad(nets, requires_grad=False):
        for net in nets:
            for param in net.parameters():
                param.requires_grad = requires_grad

    def backward_D_basic(netD, real, fake):
        loss_D = (gan_loss(netD(real), True) + gan_loss(netD(fake.detach()), False)) * 0.5
        loss_D.backward()
        return loss_D

    def optimize_G(real_A, real_B):
        fake_B = netG_A(real_A)
        rec_A = netG_B(fake_B)
        fake_A = netG_B(real_B)
        rec_B = netG_A(fake_A)
        set_requires_grad([netD_A, netD_B], False)
        optimizer_G.zero_grad()
        idt_A = netG_A(real_B)
        loss_idt_A = F.l1_loss(idt_A, real_B) * lambda_B * lambda_idt
        idt_B = netG_B(real_A)
        loss_idt_B = F.l1_loss(idt_B, real_A) * lambda_A * lambda_idt
        loss_G = (gan_loss(netD_A(fake_B), True) + gan_loss(netD_B(fake_A), True)
                  + F.l1_loss(rec_A, real_A) * lambda_A + F.l1_loss(rec_B, real_B) * lambda_B
                  + loss_idt_A + loss_idt_B)
        loss_G.backward()
        optimizer_G.step()
        set_requires_grad([netD_A, netD_B], True)
        return loss_G.detach(), fake_A, fake_B

    def optimize_D(real_A, real_B, fake_A, fake_B):
        optimizer_D.zero_grad()
        loss_D_A = backward_D_basic(netD_A, real_B, fake_B)
        loss_D_B = backward_D_basic(netD_B, real_A, fake_A)
        optimizer_D.step()
        return loss_D_A.detach(), loss_D_B.detach()

    def optimize_parameters(real_A, real_B):        # (the repository's: one method)
        loss_G, fake_A, fake_B = optimize_G(real_A, real_B)
        loss_D = optimize_D(real_A, real_B, fake_A_pool.query(fake_A),
                            fake_B_pool.query(fake_B))
        return (loss_G, *loss_D)

    if whole_step:
        step = env.step(optimize_parameters)
    else:   # (the pool's draws, read as list indices, between two compiled steps)
        step_G, step_D = env.step(optimize_G), env.step(optimize_D)

        def step(real_A, real_B):
            loss_G, fake_A, fake_B = step_G(real_A, real_B)
            loss_D = step_D(real_A, real_B, fake_A_pool.query(fake_A),
                            fake_B_pool.query(fake_B))
            return (loss_G, *loss_D)

    domain_A, domain_B = env.rand(8, 1, 6, 6) * 2 - 1, env.randn(8, 1, 6, 6).tanh()
    history = []
    for epoch in range(n_epochs + n_epochs_decay):
        for i in range(0, 8, 2):
            history.append(tuple(v.item() for v in step(domain_A[i:i + 2], domain_B[i:i + 2])))
        for s in schedulers:
            s.step()
    env.rec("history", history)
    env.rec("lr", optimizer_G.param_groups[0]["lr"])
    env.rec("pool", fake_A_pool.images)
    env.rec("G_A", dict(netG_A.state_dict()))
    env.rec("D_B", dict(netD_B.state_dict()))
    env.rec("D requires grad", [p.requires_grad for p in netD_A.parameters()])


def ssd_hard_negative_mining(torch, env):
    nn, F = torch.nn, torch.nn.functional
    num_anchors, num_classes, negpos_ratio = 12, 4, 3

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
            self.loc = nn.Linear(32, num_anchors * 4)
            self.conf = nn.Linear(32, num_anchors * num_classes)

        def forward(self, x):
            h = self.body(x)
            return (self.loc(h).view(x.size(0), num_anchors, 4),
                    self.conf(h).view(x.size(0), num_anchors, num_classes))

    def multibox_loss(loc_data, conf_data, loc_t, conf_t):
        num = loc_data.size(0)
        pos = conf_t > 0
        num_pos = pos.sum(dim=1, keepdim=True)
        pos_idx = pos.unsqueeze(pos.dim()).expand_as(loc_data)
        loc_p = loc_data[pos_idx].view(-1, 4)
        loss_l = F.smooth_l1_loss(loc_p, loc_t[pos_idx].view(-1, 4), reduction="sum")
        batch_conf = conf_data.view(-1, num_classes)
        loss_c = (torch.logsumexp(batch_conf, 1, keepdim=True)
                  - batch_conf.gather(1, conf_t.view(-1, 1)))
        loss_c = loss_c.view(num, -1)
        loss_c[pos] = 0
        _, loss_idx = loss_c.sort(1, descending=True)
        _, idx_rank = loss_idx.sort(1)
        num_neg = torch.clamp(negpos_ratio * num_pos, max=pos.size(1) - 1)
        neg = idx_rank < num_neg.expand_as(idx_rank)
        pos_idx = pos.unsqueeze(2).expand_as(conf_data)
        neg_idx = neg.unsqueeze(2).expand_as(conf_data)
        conf_p = conf_data[(pos_idx + neg_idx).gt(0)].view(-1, num_classes)
        targets_weighted = conf_t[(pos + neg).gt(0)]
        loss_c = F.cross_entropy(conf_p, targets_weighted, reduction="sum")
        N = num_pos.sum().float()
        return loss_l / N, loss_c / N

    model = env.init(Head())
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9, weight_decay=5e-4)
    X = env.randn(16, 10)
    # (about one anchor in four positive, with a random class 1..3)
    conf_t = env.randint(1, num_classes, (16, num_anchors)) * (env.rand(16, num_anchors)
                                                              < 0.25).long()
    loc_t = env.randn(16, num_anchors, 4) * 0.5

    def train_step(x, lt, ct):
        loc, conf = model(x)
        loss_l, loss_c = multibox_loss(loc, conf, lt, ct)
        loss = loss_l + loss_c
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss_l.detach(), loss_c.detach()

    step = env.step(train_step)
    history = []
    for epoch in range(4):
        for i in range(0, 16, 8):
            history.append(tuple(v.item() for v in step(X[i:i + 8], loc_t[i:i + 8],
                                                        conf_t[i:i + 8])))
    env.rec("history", history)
    env.rec("params", dict(model.state_dict()))


def mc_dropout(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(1, 32), nn.ReLU(), nn.Dropout(0.2),
                                   nn.Linear(32, 32), nn.ReLU(), nn.Dropout(0.2),
                                   nn.Linear(32, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    X = torch.linspace(-2, 2, 32).unsqueeze(1)
    y = torch.sin(2 * X) + 0.1 * env.randn(32, 1)

    def train_step(x, t):
        model.train()
        opt.zero_grad()
        loss = F.mse_loss(model(x), t)
        loss.backward()
        opt.step()
        return loss

    def enable_dropout(m):
        for mod in m.modules():
            if mod.__class__.__name__.startswith("Dropout"):
                mod.train()

    @torch.no_grad()
    def mc_predict(x, T=10):
        preds = torch.stack([model(x) for _ in range(T)])
        return preds.mean(0), preds.var(0)

    step = env.step(train_step)
    predict = env.step(mc_predict)
    losses = [step(X, y).item() for _ in range(10)]
    model.eval()
    enable_dropout(model)
    X_test = torch.linspace(-3, 3, 7).unsqueeze(1)
    mean, var = predict(X_test)
    env.rec("losses", losses)
    env.rec("mean", mean)
    env.rec("var", var)
    env.rec("dropout training", [m.training for m in model.modules()])


def poincare_embeddings(torch, env):
    nn, F = torch.nn, torch.nn.functional
    eps = 1e-5

    class RiemannianSGD(torch.optim.Optimizer):
        def __init__(self, params, lr):
            super().__init__(params, dict(lr=lr))

        @torch.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    d_p = p.grad
                    sqnorm = p.pow(2).sum(dim=-1, keepdim=True)
                    d_p = d_p * ((1 - sqnorm) ** 2 / 4)
                    p.add_(d_p, alpha=-group["lr"])
                    norm = p.norm(dim=-1, keepdim=True)
                    p.copy_(torch.where(norm >= 1, p / norm * (1 - eps), p))

    def poincare_distance(u, v):
        sq = ((u - v) ** 2).sum(-1)
        alpha = 1 - (u ** 2).sum(-1)
        beta = 1 - (v ** 2).sum(-1)
        x = 1 + 2 * sq / (alpha * beta).clamp_min(eps)
        return torch.log(x + torch.sqrt(x.pow(2) - 1).clamp_min(eps))   # arcosh

    n_nodes, dim, n_neg = 12, 2, 4
    emb = nn.Embedding(n_nodes, dim)
    with torch.no_grad():
        emb.weight.copy_(env.rand(n_nodes, dim) * 2e-3 - 1e-3)
    opt = RiemannianSGD(emb.parameters(), lr=0.3)
    parents = [0, 0, 0, 1, 1, 2, 2, 3, 4, 5, 6]
    edges = torch.tensor([[p, c + 1] for c, p in enumerate(parents)])

    def train_step(batch, negatives):
        u = emb(batch[:, 0]).unsqueeze(1)                               # (B, 1, d)
        v = emb(torch.cat([batch[:, 1:], negatives], dim=1))            # (B, 1 + K, d)
        logits = -poincare_distance(u, v)
        loss = F.cross_entropy(logits, torch.zeros(len(batch), dtype=torch.long))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    losses = []
    for epoch in range(6):
        negs = env.randint(0, n_nodes, (len(edges), n_neg))
        losses.append(step(edges, negs).item())
    env.rec("losses", losses)
    env.rec("embeddings", emb.weight)
    env.rec("norms", emb.weight.norm(dim=1))


PROGRAMS = {"cyclegan": cyclegan, "ssd_hard_negative_mining": ssd_hard_negative_mining,
            "mc_dropout": mc_dropout, "poincare_embeddings": poincare_embeddings}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-5, atol=1e-6)


def test_cyclegan_whole_step_runs_eagerly_with_its_reason():
    """The repository's optimize_parameters compiled whole: the ImagePool's
    `random.randint` draw read as a list index cannot be replayed by a compiled call (a
    guard per drawn value would be one entry per pool slot: 50 in the repository), so the
    call runs eagerly, warning once with the reason and the user's line, with torch's
    numbers."""
    def program(lib, env):
        return cyclegan(lib, env, whole_step=True)

    states, runs = [], {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for mode in ("torch", "compiled"):
            lib = torch if mode == "torch" else llgrad
            env = Env(lib, mode, states if mode == "torch" else copy.deepcopy(states))
            lib.manual_seed(0)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                program(lib, env)
            runs[mode] = env, [str(w.message) for w in caught if "llgrad" in str(w.message)]
    finally:
        torch.set_num_threads(threads)
    warned = runs["compiled"][1]
    here = os.path.basename(__file__)
    assert len(warned) == 1, warned
    assert re.search(r"running eagerly: the function draws from Python's random module",
                     warned[0]) and here in warned[0], warned
    compare(runs["torch"][0].records, runs["compiled"][0].records, "compiled vs torch", True,
            1e-5, 1e-6)
