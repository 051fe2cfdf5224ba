"""Sweep 63 (t1), file c: tutorial programs run with PyTorch, with llgrad eagerly and with
llgrad compiling each whole training step through tutorial_harness.py (the same per-step
losses, parameters and gradients, no llgrad warning, compiled code for every step).

- shake-shake regularisation (Gastaldi): a ResNet block's two branches mixed by a custom
  autograd.Function with one random alpha per sample forward and an independent beta in
  backward (saved on ctx), 0.5 in eval; the draws come from the data stream as inputs;
- dynamic convolution (Chen et al.): a squeeze-and-excitation-style attention over K
  kernels with a softmax temperature, the per-sample aggregated kernel applied by the
  grouped-convolution trick (batch folded into channels, groups=batch);
- a Compacter / PHM adapter (Mahabadi et al.): a frozen pretrained Linear plus a
  low-rank update sum_i kron(A_i, B_i) made of Kronecker products of small shared and
  per-layer factors, only the adapter trained (requires_grad_(False) on the backbone)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _grads(model):
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def shake_shake_resnet(torch, env):
    nn, F = torch.nn, torch.nn.functional
    ch, img, n_classes, batch = 4, 8, 3, 6

    class ShakeShake(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x1, x2, alpha, beta):
            ctx.save_for_backward(beta)
            return alpha * x1 + (1 - alpha) * x2

        @staticmethod
        def backward(ctx, grad_output):
            beta, = ctx.saved_tensors
            return beta * grad_output, (1 - beta) * grad_output, None, None

    class ShakeBlock(nn.Module):
        def __init__(self, channels):
            super().__init__()
            self.branch1 = self._branch(channels)
            self.branch2 = self._branch(channels)

        @staticmethod
        def _branch(c):
            return nn.Sequential(nn.ReLU(), nn.Conv2d(c, c, 3, padding=1, bias=False),
                                 nn.BatchNorm2d(c), nn.ReLU(),
                                 nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c))

        def forward(self, x, alpha=None, beta=None):
            h1, h2 = self.branch1(x), self.branch2(x)
            if self.training:
                h = ShakeShake.apply(h1, h2, alpha, beta)
            else:
                h = 0.5 * (h1 + h2)
            return x + h

    class ShakeResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, ch, 3, padding=1)
            self.blocks = nn.ModuleList([ShakeBlock(ch), ShakeBlock(ch)])
            self.fc = nn.Linear(ch, n_classes)

        def forward(self, x, alphas=None, betas=None):
            h = self.stem(x)
            for i, block in enumerate(self.blocks):
                if self.training:
                    h = block(h, alphas[i].view(-1, 1, 1, 1), betas[i].view(-1, 1, 1, 1))
                else:
                    h = block(h)
            return self.fc(F.adaptive_avg_pool2d(F.relu(h), 1).flatten(1))

    model = env.init(ShakeResNet())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                                weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=5)

    def train_step(x, y, alphas, betas):
        model.train()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x, alphas, betas), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):
        x, y = env.randn(batch, 3, img, img), env.randint(0, n_classes, (batch,))
        env.rec(f"step {it}", step(x, y, env.rand(2, batch), env.rand(2, batch)))
        scheduler.step()
    env.rec("grads", _grads(model))
    model.eval()
    with torch.no_grad():
        env.rec("eval logits", model(env.randn(2, 3, img, img)))
    env.rec("params", dict(model.state_dict()))


def dynamic_conv(torch, env):
    nn, F = torch.nn, torch.nn.functional
    c_in, c_out, K, img, n_classes, batch = 3, 6, 4, 8, 3, 5

    class Attention2d(nn.Module):
        def __init__(self, in_planes, K, temperature):
            super().__init__()
            hidden = max(in_planes // 4, 1) + 2
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc1 = nn.Conv2d(in_planes, hidden, 1)
            self.fc2 = nn.Conv2d(hidden, K, 1)
            self.temperature = temperature

        def forward(self, x):
            x = F.relu(self.fc1(self.avgpool(x)))
            x = self.fc2(x).view(x.size(0), -1)
            return F.softmax(x / self.temperature, 1)

    class DynamicConv2d(nn.Module):
        def __init__(self, in_planes, out_planes, kernel_size, padding, K, temperature):
            super().__init__()
            self.in_planes, self.out_planes = in_planes, out_planes
            self.kernel_size, self.padding, self.K = kernel_size, padding, K
            self.attention = Attention2d(in_planes, K, temperature)
            self.weight = nn.Parameter(torch.randn(K, out_planes, in_planes, kernel_size,
                                                   kernel_size) * 0.2)
            self.bias = nn.Parameter(torch.zeros(K, out_planes))

        def forward(self, x):
            softmax_attention = self.attention(x)
            batch_size, _, height, width = x.size()
            x = x.view(1, -1, height, width)        # (the batch becomes conv groups)
            weight = self.weight.view(self.K, -1)
            aggregate_weight = torch.mm(softmax_attention, weight).view(
                -1, self.in_planes, self.kernel_size, self.kernel_size)
            aggregate_bias = torch.mm(softmax_attention, self.bias).view(-1)
            output = F.conv2d(x, weight=aggregate_weight, bias=aggregate_bias, stride=1,
                              padding=self.padding, groups=batch_size)
            return output.view(batch_size, self.out_planes, output.size(-2), output.size(-1))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.dconv1 = DynamicConv2d(c_in, c_out, 3, 1, K, temperature=30)
            self.dconv2 = DynamicConv2d(c_out, c_out, 3, 1, K, temperature=30)
            self.fc = nn.Linear(c_out, n_classes)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.dconv1(x)), 2)
            x = F.relu(self.dconv2(x))
            return self.fc(x.mean(dim=(2, 3)))

    model = env.init(Net())
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    def train_step(x, y, temperature):
        for m in model.modules():       # (the paper anneals the temperature from 30 to 1)
            if isinstance(m, Attention2d):
                m.temperature = temperature
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):
        x, y = env.randn(batch, c_in, img, img), env.randint(0, n_classes, (batch,))
        env.rec(f"step {it}", step(x, y, 30.0 if it < 3 else 10.0))
    env.rec("grads", _grads(model))
    env.rec("params", dict(model.state_dict()))


def compacter_kron_adapter(torch, env):
    nn, F = torch.nn, torch.nn.functional
    d_model, n_phm, rank, vocab, batch, seq = 16, 4, 2, 20, 4, 6

    class PHMLinear(nn.Module):
        """W = sum_i kron(A_i, s_i t_i): A shared between the adapters, B low-rank."""
        def __init__(self, in_features, out_features, shared_A):
            super().__init__()
            self.shared_A = shared_A
            self.s = nn.Parameter(torch.randn(n_phm, in_features // n_phm, rank) * 0.1)
            self.t = nn.Parameter(torch.randn(n_phm, rank, out_features // n_phm) * 0.1)
            self.bias = nn.Parameter(torch.zeros(out_features))

        def forward(self, x):
            B = torch.bmm(self.s, self.t)
            W = sum(torch.kron(self.shared_A[i], B[i]) for i in range(n_phm))
            return torch.matmul(x, W) + self.bias

    class Adapter(nn.Module):
        def __init__(self, shared_A):
            super().__init__()
            self.down = PHMLinear(d_model, d_model // 2, shared_A)
            self.up = PHMLinear(d_model // 2, d_model, shared_A)

        def forward(self, h):
            return h + self.up(F.gelu(self.down(h)))

    class TinyEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d_model)
            self.layers = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(2)])
            self.norms = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(2)])
            self.shared_A = nn.Parameter(torch.randn(n_phm, n_phm, n_phm) * 0.5)
            self.adapters = nn.ModuleList([Adapter(self.shared_A) for _ in range(2)])
            self.head = nn.Linear(d_model, 2)

        def forward(self, tokens):
            h = self.embed(tokens)
            for layer, norm, adapter in zip(self.layers, self.norms, self.adapters):
                h = norm(h + adapter(torch.tanh(layer(h))))
            return self.head(h.mean(1))

    model = env.init(TinyEncoder())
    for name, p in model.named_parameters():      # (freeze the "pretrained" backbone)
        if not (name.startswith("adapters") or name == "shared_A" or name.startswith("norms")
                or name.startswith("head")):
            p.requires_grad_(False)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=5e-3)

    def train_step(tokens, labels):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(tokens), labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, max_norm=1.0)
        optimizer.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):
        tokens = env.randint(0, vocab, (batch, seq))
        env.rec(f"step {it}", step(tokens, (tokens.sum(1) % 2)))
    env.rec("grads", _grads(model))
    env.rec("frozen untouched", [p.grad is None for p in model.layers.parameters()])
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {    # name: (program, most traces of any of its compiled steps)
    "shake_shake_resnet": (shake_shake_resnet, 1),
    # (the temperature is a Python float: its two values are two traces)
    "dynamic_conv": (dynamic_conv, 2),
    "compacter_kron_adapter": (compacter_kron_adapter, 1),
}


# (over ~1 s each on an idle machine, most of it cold compile)
SLOW = {'dynamic_conv', 'compacter_kron_adapter'}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW
                                               else [], id=n) for n in PROGRAMS])
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program, rtol=1e-4, atol=1e-5)
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (cf.fn.__name__, cf.n_traces)
