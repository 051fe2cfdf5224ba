"""Sweep 63 (t8), file e: continual-learning and plasticity programs from their reference
repositories, run with PyTorch, with llgrad eagerly and with llgrad compiling the whole
training step through tutorial_harness.py.

- Synaptic Intelligence (Zenke et al. 2017, as in GMvandeVen/continual-learning): per
  parameter buffers registered under computed names (`n.replace('.', '__') + '_SI_prev_task'`)
  and read back by getattr, the running path integral W[n].add_(-p.grad * (p.detach() -
  p_old[n])) after every optimizer step, p_old[n] = p.detach().clone(), the consolidation at
  the task switch (a separate call), and the surrogate loss added to the task loss;
- differentiable plasticity (Miconi et al. 2018, uber-research/differentiable-plasticity):
  a recurrent net with fixed weights w, plasticity coefficients alpha and a learned eta,
  the Hebbian trace updated at every time step by torch.bmm of pre- and post-activations
  and clamped, unrolled over an episode inside one step, Adam with gradient clipping."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _grads(model):
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def synaptic_intelligence(torch, env):
    nn, F = torch.nn, torch.nn.functional
    si_c, epsilon = 0.5, 0.1

    model = env.init(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    W, p_old = {}, {}
    for n, p in model.named_parameters():
        if p.requires_grad:
            n = n.replace('.', '__')
            W[n] = p.data.clone().zero_()
            p_old[n] = p.data.clone()

    def update_omega(W, epsilon):
        for n, p in model.named_parameters():
            if p.requires_grad:
                n = n.replace('.', '__')
                p_prev = p.detach().clone()
                p_change = p_prev - p_old[n]
                omega_add = W[n] / (p_change ** 2 + epsilon)
                try:
                    omega = getattr(model, '{}_SI_omega'.format(n))
                except AttributeError:
                    omega = p.detach().clone().zero_()
                omega_new = omega + omega_add
                model.register_buffer('{}_SI_prev_task'.format(n), p_prev)
                model.register_buffer('{}_SI_omega'.format(n), omega_new)

    def surrogate_loss():
        try:
            losses = []
            for n, p in model.named_parameters():
                if p.requires_grad:
                    n = n.replace('.', '__')
                    prev_values = getattr(model, '{}_SI_prev_task'.format(n))
                    omega = getattr(model, '{}_SI_omega'.format(n))
                    losses.append((omega * (p - prev_values) ** 2).sum())
            return sum(losses)
        except AttributeError:
            return torch.tensor(0.)

    def train_step(x, y):
        opt.zero_grad()
        loss_task = F.cross_entropy(model(x), y)
        loss_si = surrogate_loss()
        loss = loss_task + si_c * loss_si
        loss.backward()
        opt.step()
        for n, p in model.named_parameters():
            if p.requires_grad:
                n = n.replace('.', '__')
                if p.grad is not None:
                    W[n].add_(-p.grad * (p.detach() - p_old[n]))
                p_old[n] = p.detach().clone()
        return loss_task.detach(), torch.as_tensor(loss_si).detach()

    step = env.step(train_step)
    for task in range(2):
        w = env.randn(6, 3)
        for it in range(3):
            x = env.randn(16, 6)
            env.rec(f"task {task} step {it}", step(x, (x @ w).argmax(1)))
        update_omega(W, epsilon)
        W = {n: torch.zeros_like(v) for n, v in W.items()}
        env.rec(f"omega {task}", {k: v for k, v in model.named_buffers()})
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


def differentiable_plasticity(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_in, n_hidden, batch, n_steps = 4, 12, 3, 5

    class Network(nn.Module):
        def __init__(self):
            super().__init__()
            self.i2h = nn.Linear(n_in, n_hidden)
            self.w = nn.Parameter(.01 * torch.ones(n_hidden, n_hidden))
            self.alpha = nn.Parameter(.01 * torch.ones(n_hidden, n_hidden))
            self.eta = nn.Parameter(.01 * torch.ones(1))
            self.h2o = nn.Linear(n_hidden, n_in)

        def forward(self, inputs, hidden, hebb):
            hactiv = torch.tanh(self.i2h(inputs) + hidden.unsqueeze(1).bmm(
                self.w + torch.mul(self.alpha, hebb)).squeeze(1))
            output = self.h2o(hactiv)
            deltahebb = torch.bmm(hidden.unsqueeze(2), hactiv.unsqueeze(1))
            hebb = torch.clamp(hebb + self.eta * deltahebb, min=-1.0, max=1.0)
            return output, hactiv, hebb

        def initial_zero_state(self):
            return torch.zeros(batch, n_hidden)

        def initial_zero_hebb(self):
            return torch.zeros(batch, n_hidden, n_hidden)

    net = env.init(Network())
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
    all_losses = []

    def train_step(inputs, target):
        optimizer.zero_grad()
        loss = 0
        hidden = net.initial_zero_state()
        hebb = net.initial_zero_hebb()
        for numstep in range(n_steps):
            y, hidden, hebb = net(inputs[numstep], hidden, hebb)
        loss += (y - target).pow(2).sum()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optimizer.step()
        all_losses.append(loss.item())
        return loss.detach(), hebb.detach()

    step = env.step(train_step)
    for it in range(4):
        pattern = torch.sign(env.randn(batch, n_in))
        inputs = torch.stack([pattern if t % 2 == 0 else torch.zeros_like(pattern)
                              for t in range(n_steps)])
        env.rec(f"step {it}", step(inputs, pattern))
    env.rec("losses", all_losses)
    env.rec("grads", _grads(net))
    env.rec("params", dict(net.state_dict()))


@pytest.mark.parametrize("program", [synaptic_intelligence, differentiable_plasticity],
                         ids=lambda p: p.__name__)
def test_program(program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
