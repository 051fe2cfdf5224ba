"""Sweep 68 (a9), the compile contract on optimizer and gradient state changed between
compiled calls, run with PyTorch, with llgrad eagerly and with llgrad compiling the step
(tutorial_harness.py), compared at every call:

- Adam's param_group hyperparameters changed between calls (betas, weight_decay,
  maximize, eps, lr);
- model and optimizer state_dicts saved, more steps, loaded back; the optimizer's state
  cleared, then its exp_avg zeroed in place;
- Adam with a tensor learning rate filled in place, then replaced by another tensor;
- optimizer step pre- and post-hooks (register_step_pre_hook / _post_hook) registered and
  removed mid-training, the pre-hook scaling the grads and the post-hook clamping params;
- the optimizer fused into backward: one Adam per parameter stepped by
  register_post_accumulate_grad_hook, the hooks added and removed between calls;
- FGSM on a leaf input whose .grad accumulates over calls, is set to None and zeroed;
- zero_grad inside the step after opt.step, set_to_none alternating, .grad read outside;
- backward(inputs=[...]) over alternating parameter sets, autograd.grad(allow_unused)
  and a second backward of a retained graph in one step;
- an ensemble by torch.func.stack_module_state and vmap of functional_call, trained by
  plain SGD on the stacked parameters outside the step;
- per-sample Jacobians by vmap(jacrev) and a jvp, backpropagated;
- activation checkpointing, use_reentrant alternating between calls (with
  checkpoint_sequential over an input that needs no grad);
- a compiled GRUCell tick chained three times per update, the hidden state carried across
  compiled calls without detach, then detached (with and without requires_grad);
- functional_call over a BatchNorm model with buffers given (their running statistics
  written) or the model's own (strict=False), the model put in eval mid-way;
- TRPO's line search: vector_to_parameters between calls of a compiled surrogate (the
  parameters views of a new vector each time) and of a compiled flat gradient."""
import copy

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _mlp(torch, env, i=4, h=6, o=3):
    nn = torch.nn
    return env.init(nn.Sequential(nn.Linear(i, h), nn.Tanh(), nn.Linear(h, o)))


def _train_step(torch, model, opt):
    def train_step(x, y):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return train_step


def _batch(env, n=5):
    return env.randn(n, 4), env.randint(0, 3, (n,))


def adam_hypers(torch, env):
    model = _mlp(torch, env)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    step = env.step(_train_step(torch, model, opt))
    changes = {2: {"betas": (0.5, 0.9)}, 3: {"weight_decay": 0.1}, 4: {"weight_decay": 0.0},
               5: {"maximize": True}, 6: {"eps": 1e-3}, 7: {"lr": 0.1, "maximize": False}}
    for it in range(8):
        opt.param_groups[0].update(changes.get(it, {}))
        env.rec(f"loss {it}", step(*_batch(env)))
        env.rec(f"params {it}", dict(model.state_dict()))


def state_reloaded(torch, env):
    model = _mlp(torch, env)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    step = env.step(_train_step(torch, model, opt))
    for it in range(9):
        if it == 2:
            saved = copy.deepcopy((model.state_dict(), opt.state_dict()))
        if it == 4:
            model.load_state_dict(saved[0])
            opt.load_state_dict(saved[1])
        if it == 6:
            opt.state.clear()
        if it == 7:
            for st in opt.state.values():
                st["exp_avg"].zero_()
        env.rec(f"loss {it}", step(*_batch(env)))
        env.rec(f"params {it}", dict(model.state_dict()))
        env.rec(f"exp_avg_sq {it}", [opt.state[p]["exp_avg_sq"] for p in model.parameters()])


def tensor_lr(torch, env):
    model = _mlp(torch, env)
    opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.01))
    step = env.step(_train_step(torch, model, opt))
    for it in range(6):
        if it == 2:
            opt.param_groups[0]["lr"].fill_(0.1)
        if it == 4:
            opt.param_groups[0]["lr"] = torch.tensor(0.001)
        env.rec(f"loss {it}", step(*_batch(env)))
        env.rec(f"params {it}", dict(model.state_dict()))


def optimizer_step_hooks(torch, env):
    model = _mlp(torch, env)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    calls = []

    def pre(o, args, kwargs):
        calls.append("pre")
        for p in o.param_groups[0]["params"]:
            if p.grad is not None:
                p.grad.mul_(0.5)

    def post(o, args, kwargs):
        calls.append("post")
        with torch.no_grad():
            for p in o.param_groups[0]["params"]:
                p.clamp_(-0.4, 0.4)

    step = env.step(_train_step(torch, model, opt))
    handles = []
    for it in range(6):
        if it == 2:
            handles.append(opt.register_step_pre_hook(pre))
        if it == 3:
            handles.append(opt.register_step_post_hook(post))
        if it == 5:
            for h in handles:
                h.remove()
        env.rec(f"loss {it}", step(*_batch(env)))
        env.rec(f"params {it}", dict(model.state_dict()))
    env.rec("calls", calls)


def optimizer_in_backward(torch, env):
    model = _mlp(torch, env)
    opts = {p: torch.optim.Adam([p], lr=1e-2) for p in model.parameters()}

    def step_now(p):
        opts[p].step()
        opts[p].zero_grad()

    def loss_backward(x, y):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return loss.detach()

    step = env.step(loss_backward)
    handles = []
    for it in range(6):
        if it == 2:
            handles = [p.register_post_accumulate_grad_hook(step_now)
                       for p in model.parameters()]
        if it == 4:
            for h in handles:
                h.remove()
        env.rec(f"loss {it}", step(*_batch(env)))
        env.rec(f"params {it}", dict(model.state_dict()))
        env.rec(f"grads {it}", [p.grad for p in model.parameters()])
        model.zero_grad()


def fgsm_leaf_grad(torch, env):
    model = _mlp(torch, env)
    x = env.randn(5, 4).requires_grad_()

    def fgsm(y, eps):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return loss.detach(), (x + eps * x.grad.sign()).detach()

    fgsm = env.step(fgsm)
    for it in range(6):
        if it == 3:
            x.grad = None
        if it == 4:
            x.grad.zero_()
        env.rec(f"out {it}", fgsm(env.randint(0, 3, (5,)), 0.1))
        env.rec(f"x.grad {it}", x.grad)
        env.rec(f"grads {it}", [p.grad for p in model.parameters()])
        with torch.no_grad():
            x.add_(0.01)


def zero_grad_after_step(torch, env):
    model = env.init(torch.nn.Linear(4, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def train_step(x, y, set_to_none):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=set_to_none)
        return loss.detach()

    step = env.step(train_step)
    for it in range(6):
        env.rec(f"loss {it}", step(*_batch(env), it % 3 != 1))
        env.rec(f"grads {it}", [p.grad for p in model.parameters()])
        env.rec(f"momentum {it}", [opt.state[p]["momentum_buffer"] for p in model.parameters()])


def selective_backward(torch, env):
    model = _mlp(torch, env)
    params = list(model.parameters())

    def grads(x, y, which):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward(inputs=[params[i] for i in which], retain_graph=True)
        g = torch.autograd.grad(loss * 2, [params[0], params[3]], allow_unused=True,
                                retain_graph=True)
        (loss * 0.5).backward()
        return loss.detach(), g

    step = env.step(grads)
    for it in range(6):
        env.rec(f"out {it}", step(*_batch(env), (0, 1) if it % 2 == 0 else (2, 3)))
        env.rec(f"grads {it}", [p.grad for p in params])
        if it == 3:
            model.zero_grad()


def vmap_ensemble(torch, env):
    nn, F, fn = torch.nn, torch.nn.functional, torch.func
    models = [_mlp(torch, env) for _ in range(3)]
    params, buffers = fn.stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")

    def call(p, b, x):
        return fn.functional_call(base, (p, b), (x,))

    def loss_backward(params, x, y):
        out = fn.vmap(call, in_dims=(0, 0, None))(params, buffers, x)
        loss = F.cross_entropy(out.reshape(-1, 3), y.repeat(3))
        loss.backward()
        return loss.detach(), out.detach()

    step = env.step(loss_backward)
    for it in range(4):
        env.rec(f"out {it}", step(params, *_batch(env)))
        env.rec(f"grads {it}", {k: v.grad for k, v in params.items()})
        with torch.no_grad():
            for v in params.values():
                v.sub_(0.1 * v.grad)
                v.grad = None


def jacobian_penalty(torch, env):
    nn, fn = torch.nn, torch.func
    model = env.init(nn.Sequential(nn.Linear(3, 5), nn.Softplus(), nn.Linear(5, 2)))

    def loss_backward(x):
        p = dict(model.named_parameters())

        def f(xx):
            return fn.functional_call(model, p, (xx,))

        J = fn.vmap(fn.jacrev(f))(x)
        tangent = fn.jvp(f, (x,), (torch.ones_like(x),))[1]
        loss = J.pow(2).mean() + tangent.sum()
        loss.backward()
        return loss.detach(), J.detach()

    step = env.step(loss_backward)
    for it in range(3):
        env.rec(f"out {it}", step(env.randn(4, 3)))
        env.rec(f"grads {it}", [p.grad for p in model.parameters()])
        model.zero_grad()


def checkpoint_modes(torch, env):
    nn, F = torch.nn, torch.nn.functional
    cp = torch.utils.checkpoint
    model = env.init(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 6), nn.Tanh(),
                                   nn.Linear(6, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_step(x, y, reentrant):
        h = cp.checkpoint(lambda z: model[3](model[2](model[1](z))), model[0](x),
                          use_reentrant=reentrant)
        # (reentrant: x needs no grad, so the segments' parameters get none through h2)
        h2 = cp.checkpoint_sequential(model[:4], 2, x, use_reentrant=reentrant)
        loss = F.cross_entropy(model[4](h + h2), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):
        env.rec(f"loss {it}", step(*_batch(env), it % 2 == 0))
        env.rec(f"params {it}", dict(model.state_dict()))


def chained_cell_calls(torch, env):
    nn = torch.nn
    cell, head = env.init(nn.GRUCell(3, 4)), env.init(nn.Linear(4, 2))
    opt = torch.optim.SGD(list(cell.parameters()) + list(head.parameters()), lr=0.1)

    def tick(x, h):
        h = cell(x, h)
        return h, head(h)

    tick = env.step(tick)
    h = torch.zeros(2, 4)
    for it in range(8):
        loss = 0
        for t in range(3):
            h, out = tick(env.randn(2, 3), h)
            loss = loss + out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        h = h.detach() if it % 2 else h.detach().requires_grad_()
        env.rec(f"loss {it}", loss)
        env.rec(f"hidden {it}", h)
    env.rec("params", dict(cell.state_dict()))


def functional_call_buffers(torch, env):
    nn, F, fn = torch.nn, torch.nn.functional, torch.func
    model = env.init(nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(),
                                   nn.Linear(6, 3)))
    params = {k: v.detach().clone().requires_grad_() for k, v in model.named_parameters()}
    buffers = {k: v.clone() for k, v in model.named_buffers()}

    def grads(params, x, y, own_buffers):
        # (BatchNorm's running statistics go to the buffers given, or to the model's own)
        out = fn.functional_call(model, params if own_buffers else (params, buffers), (x,),
                                 strict=False)
        loss = F.cross_entropy(out, y)
        return loss.detach(), torch.autograd.grad(loss, list(params.values()))

    step = env.step(grads)
    for it in range(6):
        loss, g = step(params, *_batch(env), it % 3 == 2)
        env.rec(f"out {it}", (loss, g))
        env.rec(f"buffers {it}", (dict(buffers), dict(model.named_buffers())))
        with torch.no_grad():
            params = {k: (v - 0.1 * gi).requires_grad_() for (k, v), gi in zip(params.items(), g)}
        if it == 3:
            model.eval()


def trpo_line_search(torch, env):
    nn, F, U = torch.nn, torch.nn.functional, torch.nn.utils
    policy = env.init(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)))

    def surrogate(x, a, adv, old_logp):
        logp = F.log_softmax(policy(x), -1).gather(1, a[:, None]).squeeze(1)
        return (torch.exp(logp - old_logp) * adv).mean()

    def flat_grad(x, a, adv, old_logp):
        loss = surrogate(x, a, adv, old_logp)
        g = torch.autograd.grad(loss, list(policy.parameters()))
        return loss.detach(), torch.cat([t.reshape(-1) for t in g])

    surr, flat_grad = env.step(surrogate), env.step(flat_grad)
    for it in range(4):
        x, a, adv = env.randn(6, 4), env.randint(0, 3, (6,)), env.randn(6)
        with torch.no_grad():
            old_logp = F.log_softmax(policy(x), -1).gather(1, a[:, None]).squeeze(1)
        loss, g = flat_grad(x, a, adv, old_logp)
        env.rec(f"grad {it}", (loss, g))
        old = U.parameters_to_vector(policy.parameters())
        for k, frac in enumerate((1.0, 0.5, 0.25)):
            # (the parameters become views of one new vector at every try)
            U.vector_to_parameters(old + frac * 0.1 * g, policy.parameters())
            with torch.no_grad():
                env.rec(f"try {it} {k}", surr(x, a, adv, old_logp))


PROGRAMS = {f.__name__: f for f in (
    adam_hypers, state_reloaded, tensor_lr, optimizer_step_hooks, optimizer_in_backward,
    fgsm_leaf_grad, zero_grad_after_step, selective_backward, vmap_ensemble,
    jacobian_penalty, checkpoint_modes, chained_cell_calls, functional_call_buffers,
    trpo_line_search)}

# (the default run keeps the quickest; the others, 0.7-6 s each with a cold kernel
# cache, are marked slow)
SLOW = ('adam_hypers', 'jacobian_penalty', 'tensor_lr', 'selective_backward',
        'checkpoint_modes', 'chained_cell_calls', 'vmap_ensemble', 'functional_call_buffers')


@pytest.mark.parametrize("name, program", program_params(PROGRAMS, slow=SLOW))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
