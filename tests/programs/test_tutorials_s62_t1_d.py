"""Sweep 62 (t1), file d: tutorial programs of kinds the earlier sweeps had not written,
run with PyTorch, with llgrad eagerly and with llgrad compiling each whole training step
through tutorial_harness.py (same losses, parameters, gradients and buffers; no llgrad
warning, so no eager fallback; compiled code for every step):

- deep CCA (Andrew et al.; Michaelvll/DeepCCA's cca_loss): centred covariances, eigh of
  both, D ** -0.5 root inverses, eigh of T'T, a floor by torch.where, topk of the
  correlations;
- an input convex neural network (Amos et al.): softplus layers whose z-path weights are
  clamped non-negative in place after every optimizer step, inside the compiled step, and
  the gradient map of the convex potential by autograd.grad(create_graph=True);
- training a deep ensemble with torch.func (the model-ensembling tutorial, trained):
  stack_module_state, functional_call on a meta-device copy, vmap over the members'
  parameters and minibatches, Adam on the stacked leaves;
- SimSiam (Chen & He): a stop-gradient twin with BatchNorm1d(affine=False) on the
  projection, nn.CosineSimilarity, a predictor param group carrying a custom 'fix_lr'
  key, cosine learning-rate schedule written into param_groups per epoch."""
import copy
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _grads(model):
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def deep_cca(torch, env):
    nn = torch.nn
    n, d1, d2, out_dim, k = 56, 6, 5, 3, 2          # (batches of 32 and 24)
    latent = env.randn(n, 2)
    view1 = latent @ env.randn(2, d1) + 0.3 * env.randn(n, d1)
    view2 = torch.tanh(latent @ env.randn(2, d2)) + 0.3 * env.randn(n, d2)

    def cca_loss(H1, H2, outdim_size):
        r1, r2, eps = 1e-3, 1e-3, 1e-9
        H1, H2 = H1.t(), H2.t()
        o1, o2, m = H1.size(0), H2.size(0), H1.size(1)
        H1bar = H1 - H1.mean(dim=1).unsqueeze(dim=1)
        H2bar = H2 - H2.mean(dim=1).unsqueeze(dim=1)
        SigmaHat12 = (1.0 / (m - 1)) * torch.matmul(H1bar, H2bar.t())
        SigmaHat11 = (1.0 / (m - 1)) * torch.matmul(H1bar, H1bar.t()) + r1 * torch.eye(o1)
        SigmaHat22 = (1.0 / (m - 1)) * torch.matmul(H2bar, H2bar.t()) + r2 * torch.eye(o2)
        D1, V1 = torch.linalg.eigh(SigmaHat11)
        D2, V2 = torch.linalg.eigh(SigmaHat22)
        root_inv11 = torch.matmul(torch.matmul(V1, torch.diag(D1 ** -0.5)), V1.t())
        root_inv22 = torch.matmul(torch.matmul(V2, torch.diag(D2 ** -0.5)), V2.t())
        Tval = torch.matmul(torch.matmul(root_inv11, SigmaHat12), root_inv22)
        trace_TT = torch.matmul(Tval.t(), Tval)
        trace_TT = torch.add(trace_TT, torch.eye(trace_TT.shape[0]) * r1)
        U, V = torch.linalg.eigh(trace_TT)
        U = torch.where(U > eps, U, torch.ones(U.shape).float() * eps)
        U = U.topk(outdim_size)[0]
        return -torch.sum(torch.sqrt(U))

    class DeepCCA(nn.Module):
        def __init__(self):
            super().__init__()
            # (no output bias: the loss centres the outputs, a bias's gradient is rounding)
            self.model1 = nn.Sequential(nn.Linear(d1, 16), nn.Sigmoid(),
                                        nn.Linear(16, out_dim, bias=False))
            self.model2 = nn.Sequential(nn.Linear(d2, 16), nn.Sigmoid(),
                                        nn.Linear(16, out_dim, bias=False))

        def forward(self, x1, x2):
            return self.model1(x1), self.model2(x2)

    model = env.init(DeepCCA())
    # (SGD: RMSprop's first steps turn a near-zero gradient's rounding into +-lr)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, weight_decay=1e-5)

    def train_step(x1, x2):
        optimizer.zero_grad()
        o1, o2 = model(x1, x2)
        loss = cca_loss(o1, o2, k)
        loss.backward()
        optimizer.step()
        return loss.detach()

    step = env.step(train_step)
    for epoch in range(2):
        for b in range(0, n, 32):
            env.rec(f"e{epoch} b{b}", step(view1[b:b + 32], view2[b:b + 32]))
    env.rec("grads", _grads(model))
    with torch.no_grad():
        env.rec("full-data corr", -cca_loss(*model(view1, view2), k))
    env.rec("params", dict(model.state_dict()))


def input_convex_nn(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n, dim, hidden = 44, 2, 16                      # (batches of 16, 16 and 12)
    x = env.randn(n, dim)
    y = 0.5 * (x ** 2).sum(1) + x[:, 0].abs() + 0.05 * env.randn(n)

    class ICNN(nn.Module):
        def __init__(self, n_layers=3):
            super().__init__()
            self.wx = nn.ModuleList([nn.Linear(dim, hidden) for _ in range(n_layers)]
                                    + [nn.Linear(dim, 1)])
            self.wz = nn.ModuleList([nn.Linear(hidden, hidden, bias=False)
                                     for _ in range(n_layers - 1)]
                                    + [nn.Linear(hidden, 1, bias=False)])

        def forward(self, x):
            z = F.softplus(self.wx[0](x))
            for wx, wz in zip(self.wx[1:-1], self.wz[:-1]):
                z = F.softplus(wz(z) + wx(x))
            return (self.wz[-1](z) + self.wx[-1](x)).squeeze(-1)

        @torch.no_grad()
        def convexify(self):
            for layer in self.wz:
                layer.weight.clamp_(min=0)

    model = env.init(ICNN())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, y):
        optimizer.zero_grad()
        x = x.clone().requires_grad_(True)
        f = model(x)
        grad_x, = torch.autograd.grad(f.sum(), x, create_graph=True)
        target_grad = x.detach() + torch.sign(x.detach()) * torch.tensor([1.0, 0.0])
        loss = F.mse_loss(f, y) + 0.1 * F.mse_loss(grad_x, target_grad)
        loss.backward()
        optimizer.step()
        model.convexify()
        return loss.detach(), grad_x.detach().norm()

    step = env.step(train_step)
    for epoch in range(3):
        for b in range(0, n, 16):
            env.rec(f"e{epoch} b{b}", step(x[b:b + 16], y[b:b + 16]))
    env.rec("grads", _grads(model))
    env.rec("min wz", [layer.weight.min() for layer in model.wz])
    env.rec("params", dict(model.state_dict()))


def func_ensemble_training(torch, env):
    nn, F = torch.nn, torch.nn.functional
    from_func = torch.func
    n_members, n_feat, n_cls, batch = 3, 6, 3, 8

    class SimpleMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(n_feat, 16), nn.Linear(16, n_cls)

        def forward(self, x):
            return self.fc2(F.relu(self.fc1(x)))

    models = [env.init(SimpleMLP()) for _ in range(n_members)]
    params, buffers = from_func.stack_module_state(models)
    base_model = copy.deepcopy(models[0]).to("meta")

    def fmodel(params, buffers, x):
        return from_func.functional_call(base_model, (params, buffers), (x,))

    def member_loss(params, buffers, x, y):
        return F.cross_entropy(fmodel(params, buffers, x), y)

    optimizer = torch.optim.Adam(list(params.values()), lr=1e-2)
    centers = env.randn(n_cls, n_feat) * 2

    def train_step(x, y):
        optimizer.zero_grad()
        losses = from_func.vmap(member_loss)(params, buffers, x, y)
        losses.sum().backward()
        optimizer.step()
        return losses.detach()

    step = env.step(train_step)
    for it in range(4):
        y = env.randint(0, n_cls, (n_members, batch))
        x = centers[y] + env.randn(n_members, batch, n_feat)
        env.rec(f"step {it}", step(x, y))
    env.rec("grads", {k: p.grad for k, p in params.items()})
    with torch.no_grad():
        test_y = env.randint(0, n_cls, (16,))
        test_x = centers[test_y] + env.randn(16, n_feat)
        logits = from_func.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, test_x)
        env.rec("ensemble probs", logits.softmax(-1).mean(0))
    env.rec("params", dict(params))


def simsiam(torch, env):
    nn = torch.nn
    n, d_in, dim, pred_dim, epochs, init_lr = 28, 10, 12, 6, 3, 0.05  # (16 and 12)
    base = env.randn(n, d_in)

    class SimSiam(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(
                nn.Linear(d_in, dim, bias=False), nn.BatchNorm1d(dim), nn.ReLU(inplace=True),
                nn.Linear(dim, dim, bias=False), nn.BatchNorm1d(dim, affine=False))
            self.predictor = nn.Sequential(
                nn.Linear(dim, pred_dim, bias=False), nn.BatchNorm1d(pred_dim),
                nn.ReLU(inplace=True), nn.Linear(pred_dim, dim))

        def forward(self, x1, x2):
            z1, z2 = self.encoder(x1), self.encoder(x2)
            p1, p2 = self.predictor(z1), self.predictor(z2)
            return p1, p2, z1.detach(), z2.detach()

    model = env.init(SimSiam())
    criterion = nn.CosineSimilarity(dim=1)
    optim_params = [{"params": model.encoder.parameters(), "fix_lr": False},
                    {"params": model.predictor.parameters(), "fix_lr": True}]
    optimizer = torch.optim.SGD(optim_params, init_lr, momentum=0.9, weight_decay=1e-4)

    def adjust_learning_rate(optimizer, init_lr, epoch):
        cur_lr = init_lr * 0.5 * (1.0 + math.cos(math.pi * epoch / epochs))
        for param_group in optimizer.param_groups:
            param_group["lr"] = init_lr if param_group["fix_lr"] else cur_lr

    def train_step(x1, x2):
        p1, p2, z1, z2 = model(x1, x2)
        loss = -(criterion(p1, z2).mean() + criterion(p2, z1).mean()) * 0.5
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    step = env.step(train_step)
    for epoch in range(epochs):
        adjust_learning_rate(optimizer, init_lr, epoch)
        for b in range(0, n, 16):
            x = base[b:b + 16]
            v1 = x + 0.2 * env.randn(x.shape[0], d_in)
            v2 = x * (env.rand(x.shape[0], d_in) > 0.2).float()
            env.rec(f"e{epoch} b{b}", step(v1, v2))
    env.rec("grads", _grads(model))
    env.rec("state", dict(model.state_dict()))


PROGRAMS = {        # name: (program, most traces of any of its compiled steps)
    # (two batch sizes; the loss's 1.0 / (m - 1) is a float of the batch size, which no
    # template follows: the second size's trace with SymInts refuses it and traces with ints)
    "deep_cca": (deep_cca, 3),
    "input_convex_nn": (input_convex_nn, 2),
    "func_ensemble_training": (func_ensemble_training, 1),
    "simsiam": (simsiam, 2),
}
# (two batch sizes, two builds each: 2-5 s cold)
SLOW = {"deep_cca", "input_convex_nn", "simsiam"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW
                                               else [], id=n) for n in PROGRAMS])
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program)
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (cf.fn.__name__, cf.n_traces)
