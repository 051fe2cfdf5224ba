"""Sweep 68 (a9), the compile contract on training programs built on parametrizations,
higher-order gradients and torch.func, with state changed between compiled calls, run
with PyTorch, with llgrad eagerly and with llgrad compiling the step (tutorial_harness.py),
compared at every call:

- nn.utils.parametrizations.weight_norm (dim=0 and dim=None) trained by one compiled
  step with a second compiled eval function, train()/eval() toggled between calls;
- parametrizations.orthogonal on a square Linear;
- register_parametrization of user modules (a symmetric matrix, then a scale that reads
  self.training and counts its calls), the model put in eval and back between calls;
- a user parametrization evaluated under parametrize.cached(), removed
  (leave_parametrized=True) and registered again between calls, the optimizer remade;
- WGAN-GP's gradient penalty (autograd.grad(create_graph=True)) in the critic's step;
- a Hessian-vector product by double backward, the loss on it backpropagated;
- torch.func.grad of a functional_call and vmap of it (per-sample gradients);
- one compiled function called with float32, then float64 (model.double()), then float32;
- a compiled forward called plainly, under no_grad and under inference_mode;
- enable_grad inside a compiled saliency function called under no_grad, functions
  decorated with no_grad() / inference_mode() compiled, set_grad_enabled(train) by a
  Python argument of one step used for training and evaluation."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _train_step(torch, model, opt, loss_fn):
    def train_step(x, y):
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return train_step


def weight_norm_toggle(torch, env):
    nn, F = torch.nn, torch.nn.functional
    P = nn.utils.parametrizations
    model = env.init(nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3)))
    P.weight_norm(model[0])
    P.weight_norm(model[2], dim=None)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    step = env.step(_train_step(torch, model, opt, F.cross_entropy))

    def evaluate(x):
        with torch.no_grad():
            return model(x)

    evaluate = env.step(evaluate)
    for it in range(4):
        model.train()
        env.rec(f"loss {it}", step(env.randn(8, 5), env.randint(0, 3, (8,))))
        model.eval()
        env.rec(f"eval {it}", evaluate(env.randn(4, 5)))
    env.rec("params", dict(model.state_dict()))
    env.rec("weight", model[0].weight)


def orthogonal(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2)))
    nn.utils.parametrizations.orthogonal(model[0])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = env.step(_train_step(torch, model, opt, F.cross_entropy))
    for it in range(4):
        env.rec(f"loss {it}", step(env.randn(8, 4), env.randint(0, 2, (8,))))
    env.rec("weight", model[0].weight)
    env.rec("params", dict(model.state_dict()))


def user_parametrizations(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

    class Scale(nn.Module):      # (reads the mode the model is put in between calls)
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, X):
            self.calls += 1
            return X * (2.0 if self.training else 0.5)

    model = env.init(nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)))
    nn.utils.parametrize.register_parametrization(model[0], "weight", Symmetric())
    nn.utils.parametrize.register_parametrization(model[0], "weight", Scale())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    step = env.step(_train_step(torch, model, opt, F.cross_entropy))
    for it in range(5):
        if it == 2:
            model.eval()
        if it == 4:
            model.train()
        env.rec(f"loss {it}", step(env.randn(8, 4), env.randint(0, 2, (8,))))
    env.rec("weight", model[0].weight)
    env.rec("params", dict(model.state_dict()))
    env.rec("scale ran", model[0].parametrizations.weight[1].calls > 0)


def gradient_penalty(torch, env):
    nn = torch.nn
    D = env.init(nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1)))
    opt = torch.optim.Adam(D.parameters(), lr=1e-3, betas=(0.5, 0.9))

    def critic_step(real, fake, eps):
        xh = (eps * real + (1 - eps) * fake).requires_grad_(True)
        g, = torch.autograd.grad(D(xh).sum(), xh, create_graph=True)
        gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
        loss = D(fake).mean() - D(real).mean() + 10 * gp
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), gp.detach()

    step = env.step(critic_step)
    for it in range(4):
        env.rec(f"loss {it}", step(env.randn(6, 3), env.randn(6, 3), env.rand(6, 1)))
    env.rec("params", dict(D.state_dict()))


def hessian_vector(torch, env):
    nn = torch.nn
    model = env.init(nn.Sequential(nn.Linear(3, 8), nn.Softplus(), nn.Linear(8, 1)))

    def hvp_loss(x, v):
        x = x.clone().requires_grad_()
        g, = torch.autograd.grad(model(x).sum(), x, create_graph=True)
        hv, = torch.autograd.grad((g * v).sum(), x, create_graph=True)
        loss = hv.pow(2).mean()
        loss.backward()
        return loss.detach(), hv.detach()

    step = env.step(hvp_loss)
    for it in range(3):
        env.rec(f"loss {it}", step(env.randn(5, 3), env.randn(5, 3)))
        env.rec(f"grads {it}", [p.grad for p in model.parameters()])


def func_grad_vmap(torch, env):
    nn, F, fn = torch.nn, torch.nn.functional, torch.func
    model = env.init(nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 1)))
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss_fn(p, x, y):
        return F.mse_loss(fn.functional_call(model, p, (x,)), y)

    def grads(p, x, y):
        g = fn.grad(loss_fn)(p, x, y)
        per = fn.vmap(fn.grad(loss_fn), in_dims=(None, 0, 0))(p, x.unsqueeze(1), y.unsqueeze(1))
        return g, {k: v.norm(dim=tuple(range(1, v.dim()))) for k, v in per.items()}

    step = env.step(grads)
    for it in range(3):
        g, per = step(params, env.randn(4, 3), env.randn(4, 1))
        env.rec(f"grad {it}", g)
        env.rec(f"per-sample norms {it}", per)
        params = {k: v - 0.1 * g[k] for k, v in params.items()}


def dtype_switch(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)))

    def loss_backward(x, y):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss.detach()

    step = env.step(loss_backward)
    for it in range(6):
        if it == 2:
            model.double()
        if it == 4:
            model.float()
        dt = torch.float64 if it in (2, 3) else torch.float32
        env.rec(f"loss {it}", step(env.randn(5, 4).to(dt), env.randn(5, 2).to(dt)))
        env.rec(f"grads {it}", [p.grad for p in model.parameters()])
        for p in model.parameters():
            p.grad = None


def grad_modes_around(torch, env):
    nn = torch.nn
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)))
    f = env.step(lambda x: model(x).sum())
    for it in range(6):
        x = env.randn(3, 4)
        if it % 3 == 0:
            out = f(x)
            env.rec(f"requires_grad {it}", out.requires_grad)
            out.backward()
            env.rec(f"grads {it}", [p.grad for p in model.parameters()])
        elif it % 3 == 1:
            with torch.no_grad():
                out = f(x)
            env.rec(f"requires_grad {it}", out.requires_grad)
        else:
            with torch.inference_mode():
                out = f(x)
            env.rec(f"requires_grad {it}", (out.requires_grad, out.is_inference()))
        env.rec(f"out {it}", out)


def grad_modes_inside(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)

    def saliency(x):
        with torch.enable_grad():
            x = x.clone().requires_grad_()
            out = model(x).max(1)[0].sum()
            g, = torch.autograd.grad(out, x)
        return g, out.requires_grad

    @torch.no_grad()
    def predict(x):
        return model(x).argmax(1)

    @torch.inference_mode()
    def probs(x):
        return model(x).softmax(1)

    saliency, predict, probs = env.step(saliency), env.step(predict), env.step(probs)
    step = env.step(_train_step(torch, model, opt, F.cross_entropy))
    for it in range(5):
        x = env.randn(5, 4)
        if it % 2 == 0:
            with torch.no_grad():       # (enable_grad inside wins, as eagerly)
                env.rec(f"saliency {it}", saliency(x))
        else:
            env.rec(f"saliency {it}", saliency(x))
        env.rec(f"predict {it}", predict(x))
        p = probs(x)
        env.rec(f"probs {it}", (p, p.requires_grad, p.is_inference()))
        env.rec(f"loss {it}", step(x, env.randint(0, 3, (5,))))


def set_grad_enabled_by_argument(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(0.0),
                                   nn.Linear(8, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)

    def run_batch(x, y, train):
        model.train(train)
        with torch.set_grad_enabled(train):
            out = model(x)
            loss = F.cross_entropy(out, y)
            if train:
                opt.zero_grad()
                loss.backward()
                opt.step()
        return loss.detach(), (out.argmax(1) == y).float().mean()

    step = env.step(run_batch)
    for it in range(6):
        env.rec(f"out {it}", step(env.randn(5, 4), env.randint(0, 3, (5,)), it % 3 != 2))
    env.rec("params", dict(model.state_dict()))


def parametrization_cached_removed(torch, env):
    nn, F = torch.nn, torch.nn.functional
    P = nn.utils.parametrize

    class Positive(nn.Module):
        def forward(self, X):
            return F.softplus(X)

    model = env.init(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)))
    P.register_parametrization(model[2], "weight", Positive())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    # (a closure over opt: the step uses the optimizer remade below)
    step = env.step(lambda x, y: _train_step(torch, model, opt, F.cross_entropy)(x, y))
    twice = env.step(lambda x: model(x) + model(x))
    for it in range(6):
        if it == 1:
            with P.cached(), torch.no_grad():
                env.rec("cached", twice(env.randn(3, 4)))
        if it == 3:
            P.remove_parametrizations(model[2], "weight", leave_parametrized=True)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
        if it == 5:
            P.register_parametrization(model[2], "weight", Positive())
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
        env.rec(f"loss {it}", step(env.randn(5, 4), env.randint(0, 3, (5,))))
        env.rec(f"weight {it}", model[2].weight)


PROGRAMS = {f.__name__: f for f in (
    weight_norm_toggle, orthogonal, user_parametrizations, gradient_penalty, hessian_vector,
    func_grad_vmap, dtype_switch, grad_modes_around,
    grad_modes_inside, set_grad_enabled_by_argument, parametrization_cached_removed)}

# (the default run keeps the quickest; the others, 0.7-4 s each with a cold kernel
# cache, are marked slow)
SLOW = ('weight_norm_toggle', 'user_parametrizations', 'grad_modes_inside',
        'parametrization_cached_removed', 'set_grad_enabled_by_argument')


@pytest.mark.parametrize("name, program", program_params(PROGRAMS, slow=SLOW))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
