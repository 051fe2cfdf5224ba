"""Sweep 65 (p2), programs whose compiled step keeps or changes state outside the model,
run with PyTorch, with llgrad eagerly and with llgrad compiling the training step
(tutorial_harness.py):

- MoCo: a momentum key encoder updated by param.data.mul_(m).add_(...), a queue of keys
  written at a Python pointer that advances each step, InfoNCE over (positive, queue);
- BERT's 80/10/10 masking drawn inside the step from the library's stream (torch.rand,
  torch.randint_like; eager vs compiled only);
- ReduceLROnPlateau stepped inside the compiled step with the loss tensor, and LambdaLR
  with one lambda per param group;
- AveragedModel(multi_avg_fn=get_ema_multi_avg_fn(0.9), use_buffers=True) over a BatchNorm
  model, updated inside the step, evaluated after;
- a Viterbi backtrace done in Python over .tolist() inside a compiled decode;
- a triplet loss with batch-hard mining (cdist, masked max / min by masked_fill);
- clip_grad_norm_(norm_type=inf, foreach=True) and clip_grad_value_ on a Conv1d model."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def moco_queue(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D, K, B = 6, 12, 4
    enc_q = env.init(nn.Sequential(nn.Linear(5, 12), nn.ReLU(), nn.Linear(12, D)))
    enc_k = env.init(nn.Sequential(nn.Linear(5, 12), nn.ReLU(), nn.Linear(12, D)))
    for pk, pq in zip(enc_k.parameters(), enc_q.parameters()):
        pk.data.copy_(pq.data)
        pk.requires_grad = False
    queue = F.normalize(env.randn(K, D), dim=1)
    ptr = [0]
    opt = torch.optim.SGD(enc_q.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)

    def train_step(xq, xk):
        q = F.normalize(enc_q(xq), dim=1)
        with torch.no_grad():
            for pk, pq in zip(enc_k.parameters(), enc_q.parameters()):
                pk.data.mul_(0.99).add_(pq.data, alpha=0.01)
            k = F.normalize(enc_k(xk), dim=1)
        l_pos = torch.einsum("nc,nc->n", q, k).unsqueeze(-1)
        l_neg = torch.einsum("nc,kc->nk", q, queue.clone().detach())
        logits = torch.cat([l_pos, l_neg], dim=1) / 0.07
        loss = F.cross_entropy(logits, torch.zeros(B, dtype=torch.long))
        opt.zero_grad()
        loss.backward()
        opt.step()
        queue[ptr[0]:ptr[0] + B] = k
        ptr[0] = (ptr[0] + B) % K
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):
        x = env.randn(B, 5)
        env.rec(f"loss {it}", step(x + env.randn(B, 5, scale=0.1), x + env.randn(B, 5, scale=0.1)))
    env.rec("queue", queue)
    env.rec("key encoder", dict(enc_k.state_dict()))


def bert_masking(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, D, MASK = 16, 8, 1
    emb = env.init(nn.Embedding(V, D))
    head = env.init(nn.Linear(D, V))
    opt = torch.optim.Adam(list(emb.parameters()) + list(head.parameters()), lr=1e-2)

    def train_step(tokens):
        labels = tokens.clone()
        chosen = torch.rand(tokens.shape) < 0.3
        labels[~chosen] = -100
        inputs = tokens.clone()
        replace = (torch.rand(tokens.shape) < 0.8) & chosen
        inputs[replace] = MASK
        rand_tok = (torch.rand(tokens.shape) < 0.5) & chosen & ~replace
        inputs[rand_tok] = torch.randint_like(tokens, 2, V)[rand_tok]
        loss = F.cross_entropy(head(emb(inputs)).view(-1, V), labels.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), inputs

    step = env.step(train_step)
    for it in range(3):
        loss, inputs = step(env.randint(2, V, (4, 6)))
        env.rec(f"loss {it}", loss, cross=False)
        env.rec(f"inputs {it}", inputs, cross=False)
    env.rec("emb", emb.weight, cross=False)


def schedulers_in_step(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)))
    opt = torch.optim.SGD([{"params": model[0].parameters()},
                           {"params": model[2].parameters(), "lr": 0.05}], lr=0.1)
    warm = torch.optim.lr_scheduler.LambdaLR(opt, [lambda s: min(1.0, (s + 1) / 3),
                                                   lambda s: 0.9 ** s])
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0,
                                                         threshold=0.5)

    def train_step(x, y):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        warm.step()
        plateau.step(loss)
        return loss.detach(), [g["lr"] for g in opt.param_groups]

    step = env.step(train_step)
    x, y = env.randn(10, 4), env.randn(10, 1)
    for it in range(6):
        env.rec(f"step {it}", step(x, y))
    env.rec("params", dict(model.state_dict()))


def ema_batchnorm(torch, env):
    nn, F = torch.nn, torch.nn.functional
    swa = torch.optim.swa_utils
    # (no bias before BatchNorm: it cancels, its gradient is rounding Adam would blow up)
    model = env.init(nn.Sequential(nn.Linear(5, 8, bias=False), nn.BatchNorm1d(8), nn.ReLU(),
                                   nn.Linear(8, 3)))
    ema = swa.AveragedModel(model, multi_avg_fn=swa.get_ema_multi_avg_fn(0.9),
                            use_buffers=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ema.update_parameters(model)
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"loss {it}", step(env.randn(8, 5), env.randint(0, 3, (8,))))
    ema.eval()
    with torch.no_grad():
        env.rec("ema out", ema(env.randn(3, 5)))
    env.rec("ema state", dict(ema.module.state_dict()))
    env.rec("n_averaged", ema.n_averaged)


def viterbi_tolist(torch, env):
    T, L = 4, 6
    trans = env.randn(T, T)
    start = env.randn(T)

    def decode(em):
        score = start + em[0]
        back = []
        for t in range(1, em.shape[0]):
            best, idx = (score[:, None] + trans).max(0)
            back.append(idx.tolist())
            score = best + em[t]
        last = int(score.argmax())
        path = [last]
        for ptrs in reversed(back):
            last = ptrs[last]
            path.append(last)
        return score.max(), path[::-1]

    step = env.step(torch.no_grad()(decode))
    for it in range(3):
        env.rec(f"viterbi {it}", step(env.randn(L, T)))


def triplet_batch_hard(torch, env):
    nn, F = torch.nn, torch.nn.functional
    net = env.init(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 4)))
    opt = torch.optim.SGD(net.parameters(), lr=0.05)

    def train_step(x, labels):
        z = F.normalize(net(x), dim=1)
        d = torch.cdist(z, z)
        same = labels[:, None] == labels[None, :]
        eye = torch.eye(len(labels), dtype=torch.bool)
        hardest_pos = d.masked_fill(~same | eye, 0.0).max(1).values
        hardest_neg = d.masked_fill(same, float("inf")).min(1).values
        loss = F.relu(hardest_pos - hardest_neg + 0.3).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 0, 1])
    for it in range(4):
        env.rec(f"loss {it}", step(env.randn(8, 6), labels))
    env.rec("params", dict(net.state_dict()))


def clip_inf_conv(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Conv1d(2, 4, 3, padding=1), nn.ReLU(),
                                   nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(4, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 0.05, norm_type=float("inf"),
                                        foreach=True)
        nn.utils.clip_grad_value_(model.parameters(), 0.02)
        opt.step()
        return loss.detach(), norm

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"step {it}", step(env.randn(4, 2, 10), env.randint(0, 2, (4,))))
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {"moco_queue": moco_queue, "bert_masking": bert_masking,
            "schedulers_in_step": schedulers_in_step, "ema_batchnorm": ema_batchnorm,
            "viterbi_tolist": viterbi_tolist, "triplet_batch_hard": triplet_batch_hard,
            "clip_inf_conv": clip_inf_conv}

# (the default run keeps the quickest; the others are marked slow)
FAST = ("moco_queue",)


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
