"""Sweep 65 (p1), programs whose modules change between compiled steps or that lean on
hooks and custom autograd, run with PyTorch, with llgrad eagerly and with llgrad compiling
the training step (tutorial_harness.py):

- magnitude pruning mid-training: prune.global_unstructured (L1) over two Linear weights
  after two steps (weight becomes weight_orig * weight_mask through a forward pre-hook),
  more steps, then prune.remove and more steps, the same compiled step throughout;
- nn.utils.spectral_norm (the hook API: weight_orig, weight_u and weight_v buffers
  updated by one power iteration per training forward), the model switched to eval for a
  validation call of a second compiled function between training steps;
- activation checkpointing (torch.utils.checkpoint, use_reentrant=False) of blocks with
  Dropout inside: the recomputation replays the same dropout mask;
- a custom autograd.Function returning (value, argmax index) with
  ctx.mark_non_differentiable on the index, ctx.needs_input_grad consulted in backward and
  ctx.set_materialize_grads(False) (the index output's grad arrives as None);
- a perceptual (feature-matching) loss: a frozen feature network whose intermediate
  activations are collected by register_forward_hook into a dict, L1 between the
  activations for the output and for the target;
- CenterNet's penalty-reduced focal loss on a Gaussian heatmap, with an L1 size loss
  gathered at the object centres;
- matching networks' one-shot classification: cosine attention of each query over the
  support set's embeddings, the label distribution as attention-weighted one-hots;
- prototypical networks on raw class ids relabelled by torch.unique(return_inverse=True)
  inside the step, prototypes by bincount and index_add, squared cdist logits;
- a multi-task model whose head is picked by a str argument from an nn.ModuleDict.

protonet_unique found torch.unique sending the step to eager with a warning (it is traced
now, its count a guard: tests/compile/test_unique_traced_s65_p1.py)."""
import importlib

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


def pruning_mid_training(torch, env):
    nn, F = torch.nn, torch.nn.functional
    prune = importlib.import_module(torch.__name__ + ".nn.utils.prune")
    model = env.init(nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = env.step(_train_step(torch, model, opt, F.cross_entropy))

    def run(tag, n):
        for it in range(n):
            env.rec(f"{tag} {it}", step(env.randn(16, 6), env.randint(0, 3, (16,))))

    run("dense", 2)
    prune.global_unstructured([(model[0], "weight"), (model[2], "weight")],
                              pruning_method=prune.L1Unstructured, amount=0.4)
    # (the optimizer still holds the original Parameter, now weight_orig)
    run("pruned", 3)
    env.rec("masks", (model[0].weight_mask, model[2].weight_mask))
    env.rec("sparsity", float((model[0].weight == 0).float().mean()))
    for m in (model[0], model[2]):
        prune.remove(m, "weight")
    run("removed", 2)
    env.rec("params", dict(model.state_dict()))


def spectral_norm_eval(torch, env):
    nn, F = torch.nn, torch.nn.functional
    SN = nn.utils.spectral_norm
    model = env.init(nn.Sequential(SN(nn.Linear(4, 16)), nn.LeakyReLU(0.2),
                                   SN(nn.Linear(16, 1))))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.5, 0.9))

    def train_step(x, y):
        loss = F.softplus(-model(x) * y).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    def validate(x):
        with torch.no_grad():
            return model(x)

    step, val = env.step(train_step), env.step(validate)
    xv = env.randn(8, 4)
    for it in range(4):
        model.train()
        x = env.randn(16, 4)
        env.rec(f"loss {it}", step(x, torch.sign(x[:, :1])))
        model.eval()
        env.rec(f"val {it}", val(xv))
    env.rec("params", dict(model.state_dict()))


def checkpoint_dropout(torch, env):
    nn, F = torch.nn, torch.nn.functional
    from_utils = torch.utils.checkpoint

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Dropout(0.2),
                                     nn.Linear(32, 16))
            self.norm = nn.LayerNorm(16)

        def forward(self, x):
            return self.norm(x + self.net(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(5, 16)
            self.blocks = nn.ModuleList([Block() for _ in range(3)])
            self.out = nn.Linear(16, 2)

        def forward(self, x):
            h = self.inp(x)
            for b in self.blocks:
                h = from_utils.checkpoint(b, h, use_reentrant=False)
            return self.out(h)

    model = env.init(Net())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    step = env.step(_train_step(torch, model, opt, F.cross_entropy))
    for it in range(4):
        # (dropout's draws are the library's: compared between llgrad's runs only)
        env.rec(f"loss {it}", step(env.randn(8, 5), env.randint(0, 2, (8,))), cross=False)
    env.rec("params", dict(model.state_dict()), cross=False)
    model.eval()
    x = env.randn(4, 5)
    env.rec("eval out", model(x), cross=False)


def custom_max_function(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class MaxWithIndex(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            value, index = x.max(dim=1)
            ctx.save_for_backward(index)
            ctx.n = x.shape[1]
            ctx.mark_non_differentiable(index)
            return value, index

        @staticmethod
        def backward(ctx, grad_value, grad_index):
            assert grad_index is None
            if grad_value is None or not ctx.needs_input_grad[0]:
                return None
            (index,) = ctx.saved_tensors
            return F.one_hot(index, ctx.n).to(grad_value.dtype) * grad_value.unsqueeze(1)

    class MaxPoolNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(3, 8, 3, padding=1)
            self.fc = nn.Linear(8, 2)

        def forward(self, x):
            h = torch.relu(self.conv(x))                   # (B, 8, L)
            b, c, L = h.shape
            value, index = MaxWithIndex.apply(h.reshape(b * c, L))
            return self.fc(value.reshape(b, c)), index.reshape(b, c)

    model = env.init(MaxPoolNet())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_step(x, y):
        logits, where = model(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), where, where.requires_grad

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"step {it}", step(env.randn(4, 3, 7), env.randint(0, 2, (4,))))
    env.rec("params", dict(model.state_dict()))


def perceptual_hooks(torch, env):
    nn, F = torch.nn, torch.nn.functional
    features = env.init(nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(4, 6, 3, padding=1, stride=2), nn.ReLU(),
                                      nn.Conv2d(6, 8, 3, padding=1)))
    features.requires_grad_(False)
    features.eval()
    acts = {}

    def keep(name):
        def hook(module, inp, out):
            acts[name] = out
        return hook

    features[1].register_forward_hook(keep("relu1"))
    features[3].register_forward_hook(keep("relu2"))
    generator = env.init(nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                                       nn.Conv2d(8, 1, 3, padding=1)))
    opt = torch.optim.Adam(generator.parameters(), lr=3e-3)

    def perceptual(a, b):
        features(b)
        target = {k: v.detach() for k, v in acts.items()}
        features(a)
        return sum(F.l1_loss(acts[k], target[k]) for k in sorted(target))

    def train_step(noisy, clean):
        out = noisy + generator(noisy)
        loss = F.mse_loss(out, clean) + 0.5 * perceptual(out, clean)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        clean = env.rand(2, 1, 8, 8)
        env.rec(f"loss {it}", step(clean + 0.2 * env.randn(2, 1, 8, 8), clean))
    env.rec("params", dict(generator.state_dict()))


def centernet_focal(torch, env):
    nn, F = torch.nn, torch.nn.functional
    H = W = 8

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
            self.hm = nn.Conv2d(8, 1, 1)
            self.wh = nn.Conv2d(8, 2, 1)
            with torch.no_grad():
                self.hm.bias.fill_(-2.19)

        def forward(self, x):
            h = self.body(x)
            return torch.sigmoid(self.hm(h)).clamp(1e-4, 1 - 1e-4), self.wh(h)

    def focal(pred, gt):
        pos = gt.eq(1).float()
        neg = 1 - pos
        pos_loss = (torch.log(pred) * (1 - pred) ** 2 * pos).sum()
        neg_loss = (torch.log(1 - pred) * pred ** 2 * (1 - gt) ** 4 * neg).sum()
        num_pos = pos.sum()
        return -(pos_loss + neg_loss) / num_pos.clamp(min=1)

    model = env.init(Head())
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    ys, xs = torch.meshgrid(torch.arange(H).float(), torch.arange(W).float(), indexing="ij")

    def train_step(img, centers, sizes):
        gt = torch.exp(-((xs - centers[:, 0, None, None]) ** 2
                         + (ys - centers[:, 1, None, None]) ** 2) / 2.0).unsqueeze(1)
        hm, wh = model(img)
        ind = (centers[:, 1] * W + centers[:, 0]).long()
        pred_wh = wh.flatten(2).gather(2, ind[:, None, None].expand(-1, 2, 1)).squeeze(-1)
        loss = focal(hm, gt) + 0.1 * F.l1_loss(pred_wh, sizes)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        centers = env.randint(0, H, (3, 2)).float()
        env.rec(f"loss {it}", step(env.randn(3, 3, H, W), centers, env.rand(3, 2) * 4))
    env.rec("params", dict(model.state_dict()))


def matching_networks(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_way, k_shot, n_query = 3, 2, 4
    embed = env.init(nn.Sequential(nn.Linear(10, 24), nn.ReLU(), nn.Linear(24, 16)))
    opt = torch.optim.Adam(embed.parameters(), lr=3e-3)

    def episode(support, support_y, query, query_y):
        s = F.normalize(embed(support), dim=-1)
        q = F.normalize(embed(query), dim=-1)
        attn = F.softmax(10.0 * q @ s.T, dim=-1)           # (Q, S)
        probs = attn @ F.one_hot(support_y, n_way).float()
        loss = F.nll_loss(torch.log(probs + 1e-8), query_y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), (probs.argmax(-1) == query_y).float().mean()

    step = env.step(episode)
    protos = env.randn(n_way, 10)
    for it in range(5):
        sy = torch.arange(n_way).repeat_interleave(k_shot)
        qy = env.randint(0, n_way, (n_query,))
        env.rec(f"ep {it}", step(protos[sy] + 0.5 * env.randn(n_way * k_shot, 10), sy,
                                 protos[qy] + 0.5 * env.randn(n_query, 10), qy))
    env.rec("params", dict(embed.state_dict()))


def protonet_unique(torch, env):
    nn, F = torch.nn, torch.nn.functional
    embed = env.init(nn.Sequential(nn.Linear(10, 24), nn.ReLU(), nn.Linear(24, 16)))
    # (SGD, not Adam: distances do not move with the last bias, so its gradient is rounding
    # noise that Adam would scale up to lr-sized steps)
    opt = torch.optim.SGD(embed.parameters(), lr=0.05, momentum=0.9)

    def episode(x, labels, n_support):
        classes, y = torch.unique(labels, return_inverse=True)
        z = embed(x)
        zs, ys, zq, yq = z[:n_support], y[:n_support], z[n_support:], y[n_support:]
        counts = torch.bincount(ys, minlength=len(classes)).float()
        protos = torch.zeros(len(classes), z.shape[1]).index_add(0, ys, zs) / counts[:, None]
        loss = F.cross_entropy(-torch.cdist(zq, protos) ** 2, yq)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), classes

    step = env.step(episode)
    centres = env.randn(20, 10)
    for it in range(5):
        ids = env.randint(0, 20, (3,))                   # (3-way, raw class ids)
        labels = torch.cat([ids.repeat_interleave(2), ids.repeat(2)])
        x = centres[labels] + 0.5 * env.randn(12, 10)
        env.rec(f"ep {it}", step(x, labels, 6))
    env.rec("params", dict(embed.state_dict()))


def multitask_moduledict(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class MultiTask(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(6, 16), nn.ReLU())
            self.heads = nn.ModuleDict({"cls": nn.Linear(16, 3), "reg": nn.Linear(16, 1)})

        def forward(self, x, task):
            return self.heads[task](self.trunk(x))

    model = env.init(MultiTask())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, y, task):
        out = model(x, task)
        loss = F.cross_entropy(out, y) if task == "cls" else F.mse_loss(out.squeeze(-1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(6):
        x = env.randn(8, 6)
        if it % 2 == 0:
            env.rec(f"cls {it}", step(x, env.randint(0, 3, (8,)), "cls"))
        else:
            env.rec(f"reg {it}", step(x, x.sum(1), "reg"))
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {"pruning_mid_training": pruning_mid_training,
            "spectral_norm_eval": spectral_norm_eval, "checkpoint_dropout": checkpoint_dropout,
            "custom_max_function": custom_max_function, "perceptual_hooks": perceptual_hooks,
            "centernet_focal": centernet_focal, "matching_networks": matching_networks,
            "protonet_unique": protonet_unique,
            "multitask_moduledict": multitask_moduledict}

# (the default run keeps the quickest; the others are marked slow)
FAST = ("matching_networks", "custom_max_function")


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
