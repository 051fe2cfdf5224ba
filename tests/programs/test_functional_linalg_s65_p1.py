"""Sweep 65 (p1), functional-style and linear-algebra programs, run with PyTorch, with
llgrad eagerly and with llgrad compiling the step (tutorial_harness.py):

- a JAX-style loop: parameters as a dict passed in and returned, torch.func.grad_and_value
  (has_aux=True) of a functional_call loss, the SGD update as a dict comprehension, plus a
  chunked vmap(jacrev) of the per-example outputs and torch.func.linearize's jvp;
- model ensembling (the torch.func tutorial): stack_module_state of four models, a meta
  copy as the base, vmap(functional_call, in_dims=(0, 0, None)), Adam on the stacked
  parameters;
- attention with fully masked rows: MultiheadAttention with a key_padding_mask covering a
  whole sequence, scaled_dot_product_attention with a bool mask, softmax and log_softmax
  of all -inf rows (NaN as PyTorch gives them), nan_to_num, a TransformerEncoderLayer;
- decorrelated batch normalisation (ZCA whitening by torch.linalg.eigh of the batch
  covariance, running statistics by lerp_ under no_grad, eval mode using them);
- orthogonal Procrustes and friends: gradients through linalg.svd, the nuclear norm, qr,
  lstsq, cholesky, solve_triangular and matrix_exp in one loss."""
import copy

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def jax_style(torch, env):
    nn, F = torch.nn, torch.nn.functional
    fn = torch.func
    model = env.init(nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2)))
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss_fn(params, x, y):
        logits = fn.functional_call(model, params, (x,))
        return F.cross_entropy(logits, y), (logits.argmax(1) == y).float().mean()

    grad_and_value = fn.grad_and_value(loss_fn, has_aux=True)

    def train_step(params, x, y):
        grads, (loss, acc) = grad_and_value(params, x, y)
        new = {k: params[k] - 0.1 * grads[k] for k in params}

        def f(xi):
            return fn.functional_call(model, new, (xi,))
        jac = fn.vmap(fn.jacrev(f), chunk_size=3)(x[:5])
        out, jvp_fn = fn.linearize(f, x[:2])
        return new, loss, acc, jac, out, jvp_fn(torch.ones_like(x[:2]))

    step = env.step(train_step)
    for it in range(4):
        params, *rest = step(params, env.randn(8, 4), env.randint(0, 2, (8,)))
        env.rec(f"step {it}", rest)
    env.rec("params", params)


def ensembles(torch, env):
    nn, F = torch.nn, torch.nn.functional
    fn = torch.func
    models = [env.init(nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1)))
              for _ in range(4)]
    params, buffers = fn.stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")
    params = {k: v.detach().requires_grad_() for k, v in params.items()}
    opt = torch.optim.Adam(params.values(), lr=1e-2)

    def fmodel(p, b, x):
        return fn.functional_call(base, (p, b), (x,))

    def train_step(x, y):
        preds = fn.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x)     # (E, N, 1)
        loss = F.mse_loss(preds, y.expand_as(preds))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), preds.std(0).mean().detach()

    step = env.step(train_step)
    for it in range(4):
        x = env.randn(8, 3)
        env.rec(f"step {it}", step(x, x.sum(1, keepdim=True)))
    env.rec("params", params)


def fully_masked_rows(torch, env):
    nn, F = torch.nn, torch.nn.functional
    mha = env.init(nn.MultiheadAttention(4, 2, batch_first=True))
    enc = env.init(nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True))

    def forward(x, pad, amask):
        out, w = mha(x, x, x, key_padding_mask=pad)
        s = F.scaled_dot_product_attention(x[:, None], x[:, None], x[:, None], attn_mask=amask)
        m = torch.zeros(3, 3).masked_fill(amask, float("-inf"))
        sm = torch.softmax(x @ x.transpose(1, 2) + m, -1)
        lsm = torch.log_softmax(torch.full((2, 3), float("-inf")), -1)
        return out, w, s, sm, lsm, torch.nan_to_num(out).sum(), enc(x, src_key_padding_mask=pad)

    step = env.step(forward)
    pad = torch.tensor([[False, False, True], [True, True, True]])
    amask = torch.tensor([[True, True, False], [False, False, False], [True, False, True]])
    for it in range(2):
        env.rec(f"out {it}", step(env.randn(2, 3, 4), pad, amask))


def zca_batchnorm(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class DBN(nn.Module):
        def __init__(self, d, eps=1e-3):
            super().__init__()
            self.eps = eps
            self.register_buffer("running_mean", torch.zeros(d))
            self.register_buffer("running_wm", torch.eye(d))

        def forward(self, x):
            if not self.training:
                return (x - self.running_mean) @ self.running_wm
            mu = x.mean(0)
            xc = x - mu
            cov = xc.T @ xc / x.shape[0] + self.eps * torch.eye(x.shape[1])
            vals, vecs = torch.linalg.eigh(cov)
            wm = vecs @ torch.diag(vals.rsqrt()) @ vecs.T
            with torch.no_grad():
                self.running_mean.lerp_(mu, 0.1)
                self.running_wm.lerp_(wm, 0.1)
            return xc @ wm

    model = env.init(nn.Sequential(nn.Linear(5, 4), DBN(4), nn.ReLU(), nn.Linear(4, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    def evaluate(x):
        with torch.no_grad():
            return model(x)

    step, ev = env.step(train_step), env.step(evaluate)
    for it in range(4):
        model.train()
        env.rec(f"loss {it}", step(env.randn(16, 5), env.randint(0, 2, (16,))))
        model.eval()
        env.rec(f"eval {it}", ev(env.randn(4, 5)))
    env.rec("params", dict(model.state_dict()))


def procrustes_linalg(torch, env):
    nn = torch.nn
    enc = env.init(nn.Linear(6, 3))
    opt = torch.optim.Adam(enc.parameters(), lr=1e-2)

    def train_step(x, y):
        a = enc(x)
        M = a.T @ y
        U, S, Vh = torch.linalg.svd(M)
        loss = ((a @ (U @ Vh) - y) ** 2).mean() - 0.01 * S.sum()
        loss = loss + 0.001 * torch.linalg.matrix_norm(M, "nuc")
        _, r = torch.linalg.qr(a)
        loss = loss + 0.01 * r.diagonal().abs().log().sum()
        loss = loss + 0.01 * torch.linalg.lstsq(a, y).solution.pow(2).sum()
        L = torch.linalg.cholesky(a.T @ a + torch.eye(3))
        z = torch.linalg.solve_triangular(L, y.T[:3], upper=False)
        loss = loss + 0.01 * z.pow(2).sum() + 0.01 * torch.linalg.matrix_exp(M / 10).trace()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), S.detach()

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"step {it}", step(env.randn(12, 6), env.randn(12, 3)))
    env.rec("params", dict(enc.state_dict()))


PROGRAMS = {"jax_style": jax_style, "ensembles": ensembles,
            "fully_masked_rows": fully_masked_rows, "zca_batchnorm": zca_batchnorm,
            "procrustes_linalg": procrustes_linalg}

# (the default run keeps the quickest; the others are marked slow)
FAST = ()


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
