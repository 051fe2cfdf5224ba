"""Sweep 17 (D), part 8: Dive into Deep Learning chapters earlier sweeps left out: the
optimisation chapter (Adagrad, RMSProp, Adadelta and Yogi written with in-place state
updates `s[:] = ...` under no_grad, d2l's square-root and warm-up cosine schedulers set into
param_groups, torch's MultiStepLR told apart by `scheduler.__module__ ==
lr_scheduler.__name__`, torch's own Adagrad / RMSprop / Adadelta compiled), word2vec's
skip-gram with negative sampling and BERT's MaskLM head. See tutorial_harness.py."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def d2l_optimizers(torch, env):
    """d2l chapter 12: Adagrad, RMSProp, Adadelta, Adam and Yogi from scratch (states
    updated in place with s[:] = ...), the learning-rate schedulers, and torch's own."""
    nn = torch.nn

    def init_states(feature_dim):
        s_w, s_b = torch.zeros((feature_dim, 1)), torch.zeros(1)
        d_w, d_b = torch.zeros((feature_dim, 1)), torch.zeros(1)
        return ((s_w, d_w), (s_b, d_b))

    def adagrad(params, states, hyperparams):
        eps = 1e-6
        for p, s in zip(params, states):
            with torch.no_grad():
                s[:] += torch.square(p.grad)
                p[:] -= hyperparams['lr'] * p.grad / torch.sqrt(s + eps)
            p.grad.data.zero_()

    def rmsprop(params, states, hyperparams):
        gamma, eps = hyperparams['gamma'], 1e-6
        for p, s in zip(params, states):
            with torch.no_grad():
                s[:] = gamma * s + (1 - gamma) * torch.square(p.grad)
                p[:] -= hyperparams['lr'] * p.grad / torch.sqrt(s + eps)
            p.grad.data.zero_()

    def adadelta(params, states, hyperparams):
        rho, eps = hyperparams['rho'], 1e-5
        for p, (s, delta) in zip(params, states):
            with torch.no_grad():
                s[:] = rho * s + (1 - rho) * torch.square(p.grad)
                g = (torch.sqrt(delta + eps) / torch.sqrt(s + eps)) * p.grad
                p[:] -= g
                delta[:] = rho * delta + (1 - rho) * g * g
            p.grad.data.zero_()

    def yogi(params, states, hyperparams):
        beta1, beta2, eps = 0.9, 0.999, 1e-3
        for p, (v, s) in zip(params, states):
            with torch.no_grad():
                v[:] = beta1 * v + (1 - beta1) * p.grad
                s[:] = s + (1 - beta2) * torch.sign(torch.square(p.grad) - s) * torch.square(p.grad)
                v_bias_corr = v / (1 - beta1 ** hyperparams['t'])
                s_bias_corr = s / (1 - beta2 ** hyperparams['t'])
                p[:] -= hyperparams['lr'] * v_bias_corr / (torch.sqrt(s_bias_corr) + eps)
            p.grad.data.zero_()
        hyperparams['t'] += 1

    X = env.randn(40, 5)
    y = X @ torch.tensor([[1.0], [-2.0], [0.5], [0.0], [3.0]]) + 0.1 * env.randn(40, 1)

    def train_ch11(trainer_fn, states, hyperparams, num_epochs=2):
        w = torch.tensor(np.linspace(-0.1, 0.1, 5, dtype=np.float32).reshape(5, 1), requires_grad=True)
        b = torch.zeros((1), requires_grad=True)
        net = lambda X: torch.matmul(X, w) + b
        loss = lambda y_hat, y: (y_hat - y.reshape(y_hat.shape)) ** 2 / 2
        def grad_step(Xb, yb):
            l = loss(net(Xb), yb).mean()
            l.backward()
            return l
        grad_step = env.step(grad_step)
        ls = []
        for _ in range(num_epochs):
            for i in range(0, 40, 10):
                l = grad_step(X[i:i + 10], y[i:i + 10])
                trainer_fn([w, b], states, hyperparams)
                ls.append(l.item())
        return ls, w, b

    env.rec("adagrad", train_ch11(adagrad, [torch.zeros((5, 1)), torch.zeros(1)], {'lr': 0.1}))
    env.rec("rmsprop", train_ch11(rmsprop, [torch.zeros((5, 1)), torch.zeros(1)], {'lr': 0.01, 'gamma': 0.9}))
    env.rec("adadelta", train_ch11(adadelta, init_states(5), {'rho': 0.9}))
    env.rec("yogi", train_ch11(yogi, init_states(5), {'lr': 0.01, 't': 1}))

    class SquareRootScheduler:
        def __init__(self, lr=0.1):
            self.lr = lr
        def __call__(self, num_update):
            return self.lr * pow(num_update + 1.0, -0.5)

    class CosineScheduler:
        def __init__(self, max_update, base_lr=0.01, final_lr=0, warmup_steps=0, warmup_begin_lr=0):
            self.base_lr_orig = base_lr
            self.max_update = max_update
            self.final_lr = final_lr
            self.warmup_steps = warmup_steps
            self.warmup_begin_lr = warmup_begin_lr
            self.max_steps = self.max_update - self.warmup_steps
        def get_warmup_lr(self, epoch):
            increase = (self.base_lr_orig - self.warmup_begin_lr) * float(epoch) / float(self.warmup_steps)
            return self.warmup_begin_lr + increase
        def __call__(self, epoch):
            if epoch < self.warmup_steps:
                return self.get_warmup_lr(epoch)
            if epoch <= self.max_update:
                self.base_lr = self.final_lr + (self.base_lr_orig - self.final_lr) * (
                    1 + math.cos(math.pi * (epoch - self.warmup_steps) / self.max_steps)) / 2
            return self.base_lr

    net = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 1))
    env.init(net)
    trainer = torch.optim.SGD(net.parameters(), lr=0.5)
    for name, scheduler in [("sqrt", SquareRootScheduler(lr=0.1)),
                            ("cos", CosineScheduler(20, warmup_steps=5, base_lr=0.3, final_lr=0.01)),
                            ("multistep", torch.optim.lr_scheduler.MultiStepLR(trainer, milestones=[2, 4], gamma=0.5))]:
        out = []
        for epoch in range(6):
            for i in range(0, 40, 20):
                trainer.zero_grad()
                l = nn.MSELoss()(net(X[i:i + 20]), y[i:i + 20])
                l.backward()
                trainer.step()
            if scheduler:
                if scheduler.__module__ == torch.optim.lr_scheduler.__name__:
                    scheduler.step()
                else:
                    for param_group in trainer.param_groups:
                        param_group['lr'] = scheduler(epoch)
            out.append((l.item(), trainer.param_groups[0]['lr']))
        env.rec(name, out)
    env.rec("net", net.state_dict())
    for name, opt, kw in [("Adagrad", torch.optim.Adagrad, dict(lr=0.1)),
                          ("RMSprop", torch.optim.RMSprop, dict(lr=0.01, alpha=0.9)),
                          ("Adadelta", torch.optim.Adadelta, dict(rho=0.9))]:
        w = torch.zeros(5, 1, requires_grad=True)
        o = opt([w], **kw)
        def step():
            o.zero_grad()
            l = ((X @ w - y) ** 2).mean() / 2
            l.backward()
            o.step()
            return l
        step = env.step(step)
        env.rec(name, ([step() for _ in range(4)], w))


def word2vec_bert(torch, env):
    """d2l's skip-gram with negative sampling (SigmoidBCELoss with a mask, bmm of center and
    context embeddings, a cosine-similarity lookup with topk) and BERT's MaskLM head
    (repeat_interleave of the batch index over the prediction positions)."""
    nn, F = torch.nn, torch.nn.functional

    def skip_gram(center, contexts_and_negatives, embed_v, embed_u):
        v = embed_v(center)
        u = embed_u(contexts_and_negatives)
        return torch.bmm(v, u.permute(0, 2, 1))

    class SigmoidBCELoss(nn.Module):
        def forward(self, inputs, target, mask=None):
            out = F.binary_cross_entropy_with_logits(inputs, target, weight=mask, reduction="none")
            return out.mean(dim=1)

    loss = SigmoidBCELoss()
    vocab, embed_size = 30, 6
    net = nn.Sequential(nn.Embedding(num_embeddings=vocab, embedding_dim=embed_size),
                        nn.Embedding(num_embeddings=vocab, embedding_dim=embed_size))
    env.init(net)

    def init_weights(m):
        if type(m) == nn.Embedding:
            nn.init.xavier_uniform_(m.weight)
    torch.manual_seed(0)
    net.apply(init_weights)
    optimizer = torch.optim.Adam(net.parameters(), lr=0.01)

    def step(center, context_negative, mask, label):
        optimizer.zero_grad()
        pred = skip_gram(center, context_negative, net[0], net[1])
        l = (loss(pred.reshape(label.shape).float(), label.float(), mask)
             / mask.sum(axis=1) * mask.shape[1])
        l.sum().backward()
        optimizer.step()
        return l.sum(), l.numel()
    step = env.step(step)
    for i in range(4):
        center = env.randint(0, vocab, (8, 1))
        cn = env.randint(0, vocab, (8, 6))
        lens = env.randint(2, 7, (8,))
        mask = (torch.arange(6)[None, :] < lens[:, None]).float()
        label = torch.zeros(8, 6)
        label[:, :2] = 1
        env.rec(f"loss {i}", step(center, cn, mask, label))

    def get_similar_tokens(query_token, k, embed):
        W = embed.weight.data
        x = W[query_token]
        cos = torch.mv(W, x) / torch.sqrt(torch.sum(W * W, dim=1) * torch.sum(x * x) + 1e-9)
        topk = torch.topk(cos, k=k + 1)[1].cpu().numpy().astype('int32')
        return topk[1:], cos[topk[1:]]
    env.rec("similar", get_similar_tokens(3, 4, net[0]))

    class MaskLM(nn.Module):
        def __init__(self, vocab_size, num_hiddens, num_inputs=16):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(num_inputs, num_hiddens), nn.ReLU(),
                                     nn.LayerNorm(num_hiddens), nn.Linear(num_hiddens, vocab_size))
        def forward(self, X, pred_positions):
            num_pred_positions = pred_positions.shape[1]
            pred_positions = pred_positions.reshape(-1)
            batch_size = X.shape[0]
            batch_idx = torch.arange(0, batch_size)
            batch_idx = torch.repeat_interleave(batch_idx, num_pred_positions)
            masked_X = X[batch_idx, pred_positions]
            masked_X = masked_X.reshape((batch_size, num_pred_positions, -1))
            return self.mlp(masked_X)

    mlm = MaskLM(vocab, 12)
    env.init(mlm)
    encoded_X = env.randn(2, 8, 16, scale=1.0)
    encoded_X.requires_grad_(True)
    mlm_positions = torch.tensor([[1, 5, 2], [6, 1, 5]])
    fwd = env.step(lambda X, pos: mlm(X, pos))
    mlm_Y_hat = fwd(encoded_X, mlm_positions)
    mlm_Y = torch.tensor([[7, 8, 9], [10, 20, 29]])
    l = nn.CrossEntropyLoss(reduction='none')(mlm_Y_hat.reshape((-1, vocab)), mlm_Y.reshape(-1))
    l.sum().backward()
    env.rec("mlm", (mlm_Y_hat, l, encoded_X.grad))


@pytest.mark.parametrize("program", [d2l_optimizers, word2vec_bert])
def test_d2l(program):
    run_tutorial(program)


def test_schedulers_module_is_lr_scheduler():
    """Every scheduler class says it is torch.optim.lr_scheduler's (d2l's train loop calls
    step() on those and calls its own); llgrad's named the file each is defined in."""
    for lib in (torch, llgrad):
        mod = lib.optim.lr_scheduler
        for name in ("LRScheduler", "_LRScheduler", "StepLR", "MultiStepLR", "LambdaLR",
                     "CosineAnnealingLR", "CyclicLR", "OneCycleLR", "ReduceLROnPlateau",
                     "SequentialLR", "ChainedScheduler", "PolynomialLR"):
            assert getattr(mod, name).__module__ == mod.__name__, (lib.__name__, name)
