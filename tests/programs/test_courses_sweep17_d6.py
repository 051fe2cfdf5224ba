"""Sweep 17 (D), part 6: micrograd's checks against torch (legacy torch.Tensor([..]).double()
scalars, the lecture's neuron), UvA tutorials 3 and 4 (activation functions written by hand
and their gradients; SGD, momentum and Adam written by hand with no_grad updates on the
pathological and steep curves, the compiled part being the loss and its backward) and
nanoGPT's train.py loop (np.memmap batches, nullcontext for autocast on CPU, a disabled
GradScaler, gradient accumulation through torch.compile(model), a checkpoint saved and
loaded with its '_orig_mod.' prefix stripped). See tutorial_harness.py."""
from contextlib import nullcontext

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402
from test_courses_sweep17_d3 import TEXT, GPTConfig, make_gpt  # noqa: E402
import llgrad  # noqa: E402


@pytest.fixture(autouse=True)
def _matmul_flags_restored():
    """train.py sets allow_tf32 (and so the float32 matmul precision) for the process: put
    both libraries' settings back for the tests after it."""
    saved = [(lib, lib.get_float32_matmul_precision(), lib.backends.cudnn.allow_tf32)
             for lib in (torch, llgrad)]
    yield
    for lib, precision, cudnn_tf32 in saved:
        lib.set_float32_matmul_precision(precision)
        lib.backends.cudnn.allow_tf32 = cudnn_tf32

pytestmark = pytest.mark.torch


def micrograd(torch, env):
    x = torch.Tensor([-4.0]).double()
    x.requires_grad = True
    z = 2 * x + 2 + x
    q = z.relu() + z * x
    h = (z * z).relu()
    y = h + q + q * x
    y.backward()
    xpt, ypt = x, y
    env.rec("sanity", (ypt.data.item(), xpt.grad.item(), type(ypt.data.item()).__name__))

    def more(a, b):
        c = a + b
        d = a * b + b**3
        c = c + c + 1
        c = c + 1 + c + (-a)
        d = d + d * 2 + (b + a).relu()
        d = d + 3 * d + (b - a).relu()
        e = c - d
        f = e**2
        g = f / 2.0
        g = g + 10.0 / f
        g.backward()
        return g
    more = env.step(more)
    a = torch.Tensor([-4.0]).double()
    b = torch.Tensor([2.0]).double()
    a.requires_grad = True
    b.requires_grad = True
    g = more(a, b)
    env.rec("more", (g.data.item(), a.grad.item(), b.grad.item()))
    env.rec("legacy", (torch.Tensor(2, 3).shape, torch.Tensor([1, 2]).dtype, torch.FloatTensor([1]).dtype,
                       torch.LongTensor([1, 2]).dtype, torch.DoubleTensor(2).shape))
    # the neuron of the lecture: tanh(x1*w1 + x2*w2 + b)
    x1 = torch.Tensor([2.0]).double(); x1.requires_grad = True
    x2 = torch.Tensor([0.0]).double(); x2.requires_grad = True
    w1 = torch.Tensor([-3.0]).double(); w1.requires_grad = True
    w2 = torch.Tensor([1.0]).double(); w2.requires_grad = True
    b = torch.Tensor([6.8813735870195432]).double(); b.requires_grad = True
    n = x1 * w1 + x2 * w2 + b
    o = torch.tanh(n)
    o.backward()
    env.rec("neuron", (o.data.item(), x2.grad.item(), w2.grad.item(), x1.grad.item(), w1.grad.item()))


def activations_and_optimizers(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class ActivationFunction(nn.Module):
        def __init__(self):
            super().__init__()
            self.name = self.__class__.__name__
            self.config = {"name": self.name}

    class Sigmoid(ActivationFunction):
        def forward(self, x):
            return 1 / (1 + torch.exp(-x))

    class Tanh(ActivationFunction):
        def forward(self, x):
            x_exp, neg_x_exp = torch.exp(x), torch.exp(-x)
            return (x_exp - neg_x_exp) / (x_exp + neg_x_exp)

    class ReLU(ActivationFunction):
        def forward(self, x):
            return x * (x > 0).float()

    class LeakyReLU(ActivationFunction):
        def __init__(self, alpha=0.1):
            super().__init__()
            self.config["alpha"] = alpha
        def forward(self, x):
            return torch.where(x > 0, x, self.config["alpha"] * x)

    class ELU(ActivationFunction):
        def forward(self, x):
            return torch.where(x > 0, x, torch.exp(x) - 1)

    class Swish(ActivationFunction):
        def forward(self, x):
            return x * torch.sigmoid(x)

    def get_grads(act_fn, x):
        x = x.clone().requires_grad_()
        out = act_fn(x)
        out.sum().backward()
        return x.grad

    x = torch.linspace(-5, 5, 1000)
    for act in [Sigmoid(), Tanh(), ReLU(), LeakyReLU(), ELU(), Swish()]:
        env.rec(act.name, (act(x), get_grads(act, x), act.config))

    class OptimizerTemplate:
        def __init__(self, params, lr):
            self.params = list(params)
            self.lr = lr
        def zero_grad(self):
            for p in self.params:
                if p.grad is not None:
                    p.grad.detach_()
                    p.grad.zero_()
        @torch.no_grad()
        def step(self):
            for p in self.params:
                if p.grad is None:
                    continue
                self.update_param(p)

    class SGD(OptimizerTemplate):
        def update_param(self, p):
            p.add_(-self.lr * p.grad)

    class SGDMomentum(OptimizerTemplate):
        def __init__(self, params, lr, momentum=0.0):
            super().__init__(params, lr)
            self.momentum = momentum
            self.param_momentum = {p: torch.zeros_like(p.data) for p in self.params}
        def update_param(self, p):
            self.param_momentum[p] = (1 - self.momentum) * p.grad + self.momentum * self.param_momentum[p]
            p.add_(-self.lr * self.param_momentum[p])

    class Adam(OptimizerTemplate):
        def __init__(self, params, lr, beta1=0.9, beta2=0.999, eps=1e-8):
            super().__init__(params, lr)
            self.beta1, self.beta2, self.eps = beta1, beta2, eps
            self.param_step = {p: 0 for p in self.params}
            self.param_momentum = {p: torch.zeros_like(p.data) for p in self.params}
            self.param_2nd_momentum = {p: torch.zeros_like(p.data) for p in self.params}
        def update_param(self, p):
            self.param_step[p] += 1
            self.param_momentum[p] = (1 - self.beta1) * p.grad + self.beta1 * self.param_momentum[p]
            self.param_2nd_momentum[p] = (1 - self.beta2) * (p.grad) ** 2 + self.beta2 * self.param_2nd_momentum[p]
            bias_correction_1 = 1 - self.beta1 ** self.param_step[p]
            bias_correction_2 = 1 - self.beta2 ** self.param_step[p]
            p_2nd_mom = self.param_2nd_momentum[p] / bias_correction_2
            p_mom = self.param_momentum[p] / bias_correction_1
            p_lr = self.lr / (torch.sqrt(p_2nd_mom) + self.eps)
            p_update = -p_lr * p_mom
            p.add_(p_update)

    def pathological_curve_loss(w1, w2):
        x1_loss = torch.tanh(w1) ** 2 + 0.01 * torch.abs(w1)
        x2_loss = torch.sigmoid(w2)
        return x1_loss + x2_loss

    def train_curve(optimizer_func, curve_func=pathological_curve_loss, num_updates=15, init=[5, 5]):
        weights = nn.Parameter(torch.FloatTensor(init), requires_grad=True)
        optimizer = optimizer_func([weights])
        def loss_and_grad():
            loss = curve_func(weights[0], weights[1])
            loss.backward()
            return loss
        loss_and_grad = env.step(loss_and_grad)
        list_points = []
        for _ in range(num_updates):
            optimizer.zero_grad()
            loss = loss_and_grad()
            optimizer.step()
            list_points.append(torch.cat([weights.data.detach(), loss.unsqueeze(dim=0).detach()], dim=0))
        return torch.stack(list_points, dim=0)

    env.rec("sgd", train_curve(lambda params: SGD(params, lr=10)))
    env.rec("mom", train_curve(lambda params: SGDMomentum(params, lr=10, momentum=0.9)))
    env.rec("adam", train_curve(lambda params: Adam(params, lr=1)))
    env.rec("torch adam", train_curve(lambda params: optim.Adam(params, lr=1)))

    def bivar_gaussian(w1, w2, x_mean=0.0, y_mean=0.0, x_sig=1.0, y_sig=1.0):
        norm = 1 / (2 * np.pi * x_sig * y_sig)
        x_exp = (-1 * (w1 - x_mean) ** 2) / (2 * x_sig ** 2)
        y_exp = (-1 * (w2 - y_mean) ** 2) / (2 * y_sig ** 2)
        return norm * torch.exp(x_exp + y_exp)

    def comb_func(w1, w2):
        z = -bivar_gaussian(w1, w2, x_mean=1.0, y_mean=-0.5, x_sig=0.2, y_sig=0.2)
        z -= bivar_gaussian(w1, w2, x_mean=-1.0, y_mean=0.5, x_sig=0.2, y_sig=0.2)
        z -= bivar_gaussian(w1, w2, x_mean=-0.5, y_mean=-0.8, x_sig=0.2, y_sig=0.2)
        return z
    env.rec("steep adam", train_curve(lambda params: Adam(params, lr=0.02), comb_func, init=[0, 0]))
    env.rec("steep mom", train_curve(lambda params: SGDMomentum(params, lr=1, momentum=0.9), comb_func, init=[0, 0]))
    x, y = torch.meshgrid(torch.arange(-2, 2, 0.5), torch.arange(-2, 2, 0.5), indexing="xy")
    env.rec("grid", comb_func(x, y))


def train_py(torch, env):
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    device, device_type, dtype = 'cpu', 'cpu', 'float32'
    ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
    ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
    chars = sorted(list(set(TEXT)))
    stoi = {ch: i for i, ch in enumerate(chars)}
    arr = np.array([stoi[c] for c in TEXT], dtype=np.uint16)
    path = env.path("train.bin")
    arr.tofile(path)
    block_size, batch_size = 16, 4

    def get_batch(split):
        data = np.memmap(path, dtype=np.uint16, mode='r')
        ix = torch.randint(len(data) - block_size, (batch_size,))
        x = torch.stack([torch.from_numpy((data[i:i+block_size]).astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy((data[i+1:i+1+block_size]).astype(np.int64)) for i in ix])
        if device_type == 'cuda':
            x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
        else:
            x, y = x.to(device), y.to(device)
        return x, y

    torch.manual_seed(1337)
    GPT = make_gpt(torch)
    conf = GPTConfig(vocab_size=len(chars))
    conf.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')
    model = GPT(conf)
    model.to(device)
    scaler = torch.cuda.amp.GradScaler(enabled=(dtype == 'float16'))
    optimizer, _ = model.configure_optimizers(0.1, 1e-3, (0.9, 0.95), device_type)
    unoptimized_model = model
    model = torch.compile(model) if env.compiled else model
    raw_model = model
    X, Y = get_batch('train')
    losses = []
    for iter_num in range(4):
        for micro_step in range(2):
            with ctx:
                logits, loss = model(X, Y)
                loss = loss / 2
            X, Y = get_batch('train')
            scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item() * 2)
    env.rec("losses", losses)
    checkpoint = {
        'model': raw_model.state_dict(),
        'optimizer': optimizer.state_dict(),
        'model_args': dict(n_layer=2),
        'iter_num': 4,
        'best_val_loss': torch.tensor(1.5),
    }
    ckpt = env.path("ckpt.pt")
    torch.save(checkpoint, ckpt)
    checkpoint = torch.load(ckpt, map_location=device)
    state_dict = checkpoint['model']
    env.rec("keys", sorted(state_dict.keys()))
    unwanted_prefix = '_orig_mod.'
    for k, v in list(state_dict.items()):
        if k.startswith(unwanted_prefix):
            state_dict[k[len(unwanted_prefix):]] = state_dict.pop(k)
    torch.manual_seed(0)
    model2 = GPT(conf)
    model2.load_state_dict(state_dict)
    optimizer2, _ = model2.configure_optimizers(0.1, 1e-3, (0.9, 0.95), device_type)
    optimizer2.load_state_dict(checkpoint['optimizer'])
    env.rec("restored", model2.state_dict())
    env.rec("best", checkpoint['best_val_loss'])
    model2.eval()
    torch.manual_seed(42)
    y = model2.generate(torch.zeros((1, 1), dtype=torch.long), 10, temperature=0.8, top_k=4)
    env.rec("sample", y)
    # the compiled module passes attribute reads through
    env.rec("generate via compiled", raw_model.generate(torch.zeros((1, 1), dtype=torch.long), 3).shape)
    env.rec("num params", raw_model.get_num_params())


@pytest.mark.parametrize("program", [micrograd, activations_and_optimizers, train_py])
def test_program(program):
    run_tutorial(program)
