"""Sweep 63 (t8), file c: GAN and mixed-precision training steps as their reference repos
write them, run with PyTorch, with llgrad eagerly and with llgrad compiling the whole step
through tutorial_harness.py.

- StyleGAN2's (rosinality) discriminator step with lazy R1 regularisation: the real batch
  made a leaf by `real_img.requires_grad = True` inside the step, the R1 gradient by
  autograd.grad(create_graph=True) of real_pred.sum(), `(r1 / 2 * r1_loss * d_reg_every +
  0 * real_pred[0]).backward()` on every d_reg_every-th step (a Python bool argument), the
  generator step with `requires_grad(model, flag)` toggles and the non-saturating loss;
  g_ema accumulated by `par1[k].data.mul_(decay).add_(par2[k].data, alpha=1 - decay)`;
- a CPU bfloat16 autocast classifier step (torch.autocast("cpu", dtype=torch.bfloat16)):
  matmuls in bfloat16, the loss in float32, float32 master weights and gradients; eager
  gives torch's numbers, compile runs it eagerly with its warning (no bfloat16 in compiled
  code)."""
import copy

import pytest

import llgrad

torch = pytest.importorskip("torch")

import tutorial_harness  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _grads(model):
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def stylegan2_r1_lazy(torch, env):
    nn, F = torch.nn, torch.nn.functional
    z_dim, x_dim, batch, d_reg_every, r1 = 4, 6, 16, 2, 10.0

    def requires_grad(model, flag=True):
        for p in model.parameters():
            p.requires_grad = flag

    def accumulate(model1, model2, decay=0.999):
        par1 = dict(model1.named_parameters())
        par2 = dict(model2.named_parameters())
        for k in par1.keys():
            par1[k].data.mul_(decay).add_(par2[k].data, alpha=1 - decay)

    def d_logistic_loss(real_pred, fake_pred):
        real_loss = F.softplus(-real_pred)
        fake_loss = F.softplus(fake_pred)
        return real_loss.mean() + fake_loss.mean()

    def d_r1_loss(real_pred, real_img):
        grad_real, = torch.autograd.grad(outputs=real_pred.sum(), inputs=real_img,
                                         create_graph=True)
        return grad_real.pow(2).reshape(grad_real.shape[0], -1).sum(1).mean()

    def g_nonsaturating_loss(fake_pred):
        return F.softplus(-fake_pred).mean()

    generator = env.init(nn.Sequential(nn.Linear(z_dim, 16), nn.LeakyReLU(0.2),
                                       nn.Linear(16, x_dim)))
    discriminator = env.init(nn.Sequential(nn.Linear(x_dim, 16), nn.LeakyReLU(0.2),
                                           nn.Linear(16, 1)))
    g_ema = env.init(nn.Sequential(nn.Linear(z_dim, 16), nn.LeakyReLU(0.2),
                                   nn.Linear(16, x_dim)))
    g_ema.eval()
    accumulate(g_ema, generator, 0)
    d_reg_ratio = d_reg_every / (d_reg_every + 1)
    g_optim = torch.optim.Adam(generator.parameters(), lr=2e-3, betas=(0.0, 0.99))
    d_optim = torch.optim.Adam(discriminator.parameters(), lr=2e-3 * d_reg_ratio,
                               betas=(0 ** d_reg_ratio, 0.99 ** d_reg_ratio))
    loss_dict = {}

    def train_step(real_img, noise, noise2, d_regularize):
        requires_grad(generator, False)
        requires_grad(discriminator, True)
        fake_img = generator(noise)
        fake_pred = discriminator(fake_img)
        real_pred = discriminator(real_img)
        d_loss = d_logistic_loss(real_pred, fake_pred)
        loss_dict["d"] = d_loss
        loss_dict["real_score"] = real_pred.mean()
        discriminator.zero_grad()
        d_loss.backward()
        d_optim.step()

        if d_regularize:
            real_img.requires_grad = True
            real_pred = discriminator(real_img)
            r1_loss = d_r1_loss(real_pred, real_img)
            discriminator.zero_grad()
            (r1 / 2 * r1_loss * d_reg_every + 0 * real_pred[0]).backward()
            d_optim.step()
            loss_dict["r1"] = r1_loss

        requires_grad(generator, True)
        requires_grad(discriminator, False)
        fake_pred = discriminator(generator(noise2))
        g_loss = g_nonsaturating_loss(fake_pred)
        loss_dict["g"] = g_loss
        generator.zero_grad()
        g_loss.backward()
        g_optim.step()
        accumulate(g_ema, generator, 0.5 ** (32 / (10 * 1000)))
        return {k: v.detach() for k, v in loss_dict.items()}

    step = env.step(train_step)
    mean = env.randn(x_dim) * 2
    for it in range(4):
        real = env.randn(batch, x_dim) + mean
        env.rec(f"step {it}", step(real, env.randn(batch, z_dim), env.randn(batch, z_dim),
                                   it % d_reg_every == 0))
    env.rec("requires_grad", [p.requires_grad for p in discriminator.parameters()])
    env.rec("d grads", _grads(discriminator))
    env.rec("g grads", _grads(generator))
    env.rec("params", {**{"g." + k: v for k, v in generator.state_dict().items()},
                       **{"d." + k: v for k, v in discriminator.state_dict().items()},
                       **{"ema." + k: v for k, v in g_ema.state_dict().items()}})


def bf16_autocast_classifier(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.LayerNorm(32),
                                   nn.Linear(32, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def train_step(x, y):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        return logits.dtype, loss.dtype, loss.detach(), logits.detach().float()

    step = env.step(train_step)
    w = env.randn(8, 4)
    for it in range(4):
        x = env.randn(16, 8)
        env.rec(f"step {it}", step(x, (x @ w).argmax(1)))
    env.rec("grad dtypes", [p.grad.dtype for p in model.parameters()])
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


@pytest.mark.slow      # (two traces, one per d_regularize: ~3 s of cold compile)
def test_stylegan2_r1_lazy():
    run_tutorial(stylegan2_r1_lazy, rtol=1e-4, atol=1e-5)


def test_bf16_autocast_classifier_eager_and_compile_fallback():
    # (bfloat16 has 8 bits of mantissa: one rounding apart is 2**-8 relative.) Compiled code
    # has no bfloat16 values (a design limit, tracer/bindings.py): the step must run eagerly
    # with the warning and torch's numbers, never a float32 answer
    program, rtol, atol = bf16_autocast_classifier, 1e-2, 1e-3
    states = []
    tenv = tutorial_harness.Env(torch, "torch", states)
    torch.manual_seed(0)
    program(torch, tenv)
    eager = tutorial_harness._run_llgrad(program, "eager", copy.deepcopy(states), 0)
    tutorial_harness.compare(tenv.records, eager.records, "eager vs torch", True, rtol, atol)
    compiled = tutorial_harness.Env(llgrad, "compiled", copy.deepcopy(states))
    llgrad.manual_seed(0)
    with pytest.warns(Warning, match="no bfloat16 values"):
        program(llgrad, compiled)
    tutorial_harness.compare(eager.records, compiled.records, "compiled vs eager", False,
                             0.0, 0.0)
