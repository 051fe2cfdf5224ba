"""Sweep 65 (l1), the Module API inside and between compiled training steps, run with
PyTorch, with llgrad eagerly and with llgrad compiling the step (tutorial_harness.py):

- forward hooks with kwargs (prepend, always_call) counting calls into one dict both capture
  (compiled: traced every call, then eager at the recompile limit, before the fix in
  compile/attr_writes.py: the dict's slots under the second hook's path),
  zero_grad(set_to_none=False), parameters_to_vector / vector_to_parameters;
- freezing a backbone with requires_grad_ between calls, then unfreezing it;
- train()/eval() inside the step around a BatchNorm1d(momentum=None) and Dropout(0);
- a forward pre-hook with kwargs rewriting a keyword argument and a forward hook reading one;
- a teacher EMA through state_dict() inside the step;
- a full backward hook and a backward pre-hook on submodules;
- tensor hooks clamping gradients and a post-accumulate-grad hook counting into a dict;
- model.double() / .float() between calls."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def module_hooks_step(torch, env):
    nn, F = torch.nn, torch.nn.functional
    m = env.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)))
    counts = {"pre": 0, "post": 0}
    def pre(mod, args, kwargs):
        counts["pre"] += 1
        return (args[0] * 0.5,), kwargs
    def post(mod, args, kwargs, out):
        counts["post"] += 1
        return out + 1.0
    m[0].register_forward_pre_hook(pre, with_kwargs=True, prepend=True)
    m[2].register_forward_hook(post, with_kwargs=True, always_call=True)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    vec0 = nn.utils.parameters_to_vector(m.parameters()).detach().clone()
    def step(x, y):
        loss = F.mse_loss(m(x), y)
        opt.zero_grad(set_to_none=False); loss.backward(); opt.step()
        return loss.detach()
    s = env.step(step)
    for it in range(3):
        env.rec(f"step {it}", s(env.randn(6, 4), env.randn(6, 2)))
    env.rec("counts", dict(counts))
    nn.utils.vector_to_parameters(vec0 * 0.5, m.parameters())
    env.rec("params", dict(m.state_dict()))


def freeze_unfreeze(torch, env):
    """fine-tuning: the backbone frozen for two steps, then unfrozen (requires_grad_ between
    calls)"""
    nn, F = torch.nn, torch.nn.functional
    m = env.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)))
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    def step(x, y):
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    s = env.step(step)
    for it in range(5):
        m[0].requires_grad_(it >= 2)
        env.rec(f"step {it}", s(env.randn(6, 4), env.randint(0, 3, (6,))))
        env.rec(f"g {it}", m[0].weight.grad is None)
    env.rec("params", dict(m.state_dict()))


def eval_train_toggle(torch, env):
    """model.train()/eval() inside and between steps, dropout p=0 and BN stats"""
    nn, F = torch.nn, torch.nn.functional
    m = env.init(nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6, momentum=None), nn.ReLU(),
                               nn.Dropout(0.0), nn.Linear(6, 2)))
    # (SGD: Adam would turn the first Linear's bias gradient, zero up to rounding under the
    # BatchNorm, into steps of lr in directions the rounding picks)
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    def step(x, y):
        m.train()
        loss = F.mse_loss(m(x), y)
        opt.zero_grad(set_to_none=False); loss.backward(); opt.step()
        m.eval()
        with torch.no_grad():
            val = F.mse_loss(m(x), y)
        return loss.detach(), val
    s = env.step(step)
    for it in range(4):
        env.rec(f"step {it}", s(env.randn(8, 4), env.randn(8, 2)))
        env.rec(f"nbt {it}", m[1].num_batches_tracked.clone())
    env.rec("params", dict(m.state_dict()))


def kwargs_hooks(torch, env):
    """a forward pre-hook with kwargs rewriting a keyword argument; a forward hook with kwargs"""
    nn, F = torch.nn, torch.nn.functional
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
        def forward(self, x, scale=1.0, mask=None):
            h = self.lin(x) * scale
            return h if mask is None else h * mask
    b = env.init(Block())
    def pre(mod, args, kwargs):
        kwargs = dict(kwargs); kwargs["scale"] = kwargs.get("scale", 1.0) * 0.5
        return args, kwargs
    def post(mod, args, kwargs, out):
        return out + (0 if kwargs.get("mask") is None else kwargs["mask"].sum())
    b.register_forward_pre_hook(pre, with_kwargs=True)
    b.register_forward_hook(post, with_kwargs=True)
    opt = torch.optim.SGD(b.parameters(), lr=0.1)
    def step(x, mask):
        loss = b(x, scale=3.0, mask=mask).pow(2).mean() + b(x).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    s = env.step(step)
    for it in range(3):
        env.rec(f"step {it}", s(env.randn(5, 4), (env.rand(5, 4) > 0.3).float()))
    env.rec("params", dict(b.state_dict()))


def state_dict_in_step(torch, env):
    """EMA of weights through state_dict() items inside the step (a teacher model)"""
    nn, F = torch.nn, torch.nn.functional
    student = env.init(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)))
    teacher = env.init(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)))
    teacher.requires_grad_(False)
    opt = torch.optim.SGD(student.parameters(), lr=0.1)
    def step(x):
        with torch.no_grad():
            t = teacher(x)
        loss = F.mse_loss(student(x), t.softmax(-1))
        opt.zero_grad(); loss.backward(); opt.step()
        with torch.no_grad():
            sd = student.state_dict()
            for k, v in teacher.state_dict().items():
                v.mul_(0.9).add_(sd[k], alpha=0.1)
        return loss.detach()
    s = env.step(step)
    for it in range(4):
        env.rec(f"step {it}", s(env.randn(5, 4)))
    env.rec("teacher", dict(teacher.state_dict()))


def bwd_hooks_step(torch, env):
    """a full backward hook scaling grad_input, a backward pre-hook clamping grad_output"""
    nn, F = torch.nn, torch.nn.functional
    m = env.init(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)))
    m[1].register_full_backward_hook(lambda mod, gi, go: (gi[0] * 0.5,))
    m[2].register_full_backward_pre_hook(lambda mod, go: (go[0].clamp(-0.1, 0.1),))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    def step(x, y):
        loss = F.mse_loss(m(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    s = env.step(step)
    for it in range(3):
        env.rec(f"step {it}", s(env.randn(5, 4), env.randn(5, 2)))
    env.rec("params", dict(m.state_dict()))


def grad_hooks_clip(torch, env):
    """param.register_hook clipping grads, post-accumulate-grad hook counting into a dict"""
    nn, F = torch.nn, torch.nn.functional
    m = env.init(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)))
    seen = {"n": 0}
    for p in m.parameters():
        p.register_hook(lambda g: g.clamp(-0.05, 0.05))
    def count(p):
        seen["n"] += 1
    m[2].weight.register_post_accumulate_grad_hook(count)
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    def step(x, y):
        loss = F.mse_loss(m(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()
    s = env.step(step)
    for it in range(4):
        env.rec(f"step {it}", s(env.randn(5, 4), env.randn(5, 2)))
    env.rec("seen", seen["n"])
    env.rec("params", dict(m.state_dict()))


def half_switch(torch, env):
    """model.double() between steps (the step retraces with the new dtype)"""
    nn, F = torch.nn, torch.nn.functional
    m = env.init(nn.Linear(3, 2))
    def step(x):
        return m(x).pow(2).sum()
    s = env.step(step)
    env.rec("f32", s(env.randn(4, 3)).detach())
    m.double()
    env.rec("f64", s(env.randn(4, 3).double()).detach())
    m.float()
    env.rec("f32b", s(env.randn(4, 3)).detach())


PROGRAMS = {p.__name__: p for p in (module_hooks_step, freeze_unfreeze, eval_train_toggle,
                                    kwargs_hooks, state_dict_in_step, bwd_hooks_step,
                                    grad_hooks_clip, half_switch)}

# (the default run keeps the quickest; the others are marked slow)
FAST = ('module_hooks_step',)


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
