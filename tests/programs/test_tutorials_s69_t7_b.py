"""Sweep 69 (t7), file b: d2l.ai's from-scratch chapters and pytorch.org's custom-Function
tutorials, run with PyTorch, with llgrad eagerly and with llgrad compiling the whole
training step through tutorial_harness.py.

- d2l 3.6 / 4.1 softmax regression from scratch: W from `torch.normal(0, 0.01, size=...,
  requires_grad=True)` (llgrad's generator gives torch's draws), d2l's data_iter (Python
  random.shuffle, a smaller last batch), softmax and cross-entropy by hand with
  `y_hat[range(len(y_hat)), y]`, the minibatch `sgd` updating under no_grad with
  `param -= lr * param.grad / batch_size; param.grad.zero_()`, d2l's Accumulator and
  accuracy through `y_hat.argmax(axis=1)` and `.type(y.dtype)`;
- d2l 5.6 dropout from scratch (`(torch.rand(X.shape) > dropout).float()`) in a module
  whose forward branches on a Python flag, and d2l 3.7 weight decay from scratch (an
  `l2_penalty` added to the loss, `lambd` a Python number per run) with the concise
  version's param groups (`{"params": net[0].weight, "weight_decay": wd}`);
- pytorch.org "Fusing Convolution and Batch Norm using Custom Function": Conv2D and a
  batch-norm backward by hand, tensors kept on ctx as attributes (ctx.sum, ctx.sqrt_var),
  a backward returning more Nones than the forward had inputs, the fused module trained;
- pytorch.org "Double Backward with Custom Functions": an Exp saving its output, a Sinh
  returning intermediates as outputs, used under a gradient penalty (create_graph)."""
import random

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


class Accumulator:
    """d2l's: sums over n variables."""
    def __init__(self, n):
        self.data = [0.0] * n

    def add(self, *args):
        self.data = [a + float(b) for a, b in zip(self.data, args)]

    def __getitem__(self, idx):
        return self.data[idx]


def d2l_softmax_scratch(torch, env):
    num_inputs, num_outputs, batch_size, lr = 20, 4, 16, 0.1
    W = torch.normal(0, 0.01, size=(num_inputs, num_outputs), requires_grad=True)
    b = torch.zeros(num_outputs, requires_grad=True)
    features, labels = env.randn(72, num_inputs), env.randint(0, num_outputs, (72,))

    def data_iter(batch_size, features, labels):
        num_examples = len(features)
        indices = list(range(num_examples))
        random.shuffle(indices)
        for i in range(0, num_examples, batch_size):
            batch_indices = torch.tensor(indices[i: min(i + batch_size, num_examples)])
            yield features[batch_indices], labels[batch_indices]

    def softmax(X):
        X_exp = torch.exp(X)
        partition = X_exp.sum(1, keepdim=True)
        return X_exp / partition

    def net(X):
        return softmax(torch.matmul(X.reshape((-1, W.shape[0])), W) + b)

    def cross_entropy(y_hat, y):
        return - torch.log(y_hat[range(len(y_hat)), y])

    def accuracy(y_hat, y):
        if len(y_hat.shape) > 1 and y_hat.shape[1] > 1:
            y_hat = y_hat.argmax(axis=1)
        cmp = y_hat.type(y.dtype) == y
        return float(cmp.type(y.dtype).sum())

    def sgd(params, lr, batch_size):
        with torch.no_grad():
            for param in params:
                param -= lr * param.grad / batch_size
                param.grad.zero_()

    def train_batch(X, y):
        y_hat = net(X)
        l = cross_entropy(y_hat, y)
        l.sum().backward()
        sgd([W, b], lr, X.shape[0])
        return l, y_hat

    step = env.step(train_batch)
    random.seed(0)
    for epoch in range(3):
        metric = Accumulator(3)
        for X, y in data_iter(batch_size, features, labels):
            l, y_hat = step(X, y)
            metric.add(float(l.sum()), accuracy(y_hat, y), y.numel())
        env.rec(f"epoch {epoch}", f"loss {metric[0] / metric[2]:.5f} "
                                  f"acc {metric[1] / metric[2]:.4f}")
    with torch.no_grad():
        env.rec("eval acc", accuracy(net(features), labels) / len(labels))
    env.rec("W b", (W, b))
    env.rec("grads zeroed", (W.grad, b.grad))
    if env.compiled:     # (.grad None at the first call; the 16-row batches and the 8-row
        # last one, traced again with plain sizes as `range(len(y_hat))` reads the size)
        assert step.n_traces <= 4, step.n_traces


def d2l_dropout_weight_decay(torch, env):
    nn = torch.nn
    dropout1, dropout2 = 0.2, 0.5

    def dropout_layer(X, dropout):
        assert 0 <= dropout <= 1
        if dropout == 1:
            return torch.zeros_like(X)
        if dropout == 0:
            return X
        mask = (torch.rand(X.shape) > dropout).float()
        return mask * X / (1.0 - dropout)

    class Net(nn.Module):
        def __init__(self, num_inputs, num_outputs, num_hiddens1, num_hiddens2,
                     is_training=True):
            super(Net, self).__init__()
            self.num_inputs = num_inputs
            self.training = is_training
            self.lin1 = nn.Linear(num_inputs, num_hiddens1)
            self.lin2 = nn.Linear(num_hiddens1, num_hiddens2)
            self.lin3 = nn.Linear(num_hiddens2, num_outputs)
            self.relu = nn.ReLU()

        def forward(self, X):
            H1 = self.relu(self.lin1(X.reshape((-1, self.num_inputs))))
            if self.training == True:  # noqa: E712 (d2l's spelling)
                H1 = dropout_layer(H1, dropout1)
            H2 = self.relu(self.lin2(H1))
            if self.training == True:  # noqa: E712
                H2 = dropout_layer(H2, dropout2)
            return self.lin3(H2)

    def l2_penalty(w):
        return torch.sum(w.pow(2)) / 2

    net = env.init(Net(12, 3, 24, 16))
    loss = nn.CrossEntropyLoss(reduction='none')
    trainer = torch.optim.SGD(net.parameters(), lr=0.2)
    X, Y = env.randn(32, 12), env.randint(0, 3, (32,))

    def step(X, y, lambd):
        l = loss(net(X), y) + lambd * l2_penalty(net.lin1.weight)
        trainer.zero_grad()
        l.mean().backward()
        trainer.step()
        return l.mean()

    step = env.step(step)
    torch.manual_seed(1)
    for i in range(4):
        env.rec(f"dropout loss {i}", step(X, Y, 0.0), cross=False)
    for i in range(3):
        env.rec(f"wd loss {i}", step(X, Y, 3.0), cross=False)
    env.rec("params", dict(net.state_dict()), cross=False)
    net.eval()
    with torch.no_grad():
        env.rec("eval", net(X), cross=False)

    # the concise version: no dropout, weight decay on the weight's param group only
    lin = env.init(nn.Sequential(nn.Linear(12, 1)))
    for param in lin.parameters():
        param.data.normal_()
    wd = 3.0
    trainer = torch.optim.SGD([{"params": lin[0].weight, 'weight_decay': wd},
                               {"params": lin[0].bias}], lr=0.003)
    mse = nn.MSELoss(reduction='none')
    y = env.randn(32, 1)
    torch.manual_seed(2)
    w0 = lin[0].weight.detach().clone()

    def concise_step(X, y):
        trainer.zero_grad()
        l = mse(lin(X), y)
        l.mean().backward()
        trainer.step()
        return l.mean()

    concise_step = env.step(concise_step)
    for i in range(4):
        env.rec(f"concise {i}", concise_step(X, y), cross=False)
    env.rec("concise params", (w0, lin[0].weight, lin[0].bias), cross=False)
    env.rec("L2 norm of w", lin[0].weight.norm().item(), cross=False)


def _unsqueeze_all(t):
    return t[None, :, None, None]


def fused_conv_bn(torch, env):
    nn, F = torch.nn, torch.nn.functional

    def convolution_backward(grad_out, X, weight):
        grad_input = F.conv2d(X.transpose(0, 1), grad_out.transpose(0, 1)).transpose(0, 1)
        grad_X = F.conv_transpose2d(grad_out, weight)
        return grad_X, grad_input

    def batch_norm_backward(grad_out, X, sum, sqrt_var, N, eps):
        tmp = ((X - _unsqueeze_all(sum) / N) * grad_out).sum(dim=(0, 2, 3))
        tmp *= -1
        d_denom = tmp / (sqrt_var + eps)**2
        d_var = d_denom / (2 * sqrt_var)
        d_mean_dx = grad_out / _unsqueeze_all(sqrt_var + eps)
        d_mean_dx = _unsqueeze_all(-d_mean_dx.sum(dim=(0, 2, 3)) / N)
        grad_input = X * _unsqueeze_all(d_var * N)
        grad_input += _unsqueeze_all(-d_var * sum)
        grad_input *= 2 / ((N - 1) * N)
        grad_input += d_mean_dx
        grad_input *= _unsqueeze_all(sqrt_var + eps)
        grad_input += grad_out
        grad_input /= _unsqueeze_all(sqrt_var + eps)
        return grad_input

    class FusedConvBN2DFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, X, conv_weight, eps=1e-3):
            assert X.ndim == 4
            ctx.save_for_backward(X, conv_weight)
            X = F.conv2d(X, conv_weight)
            sum = X.sum(dim=(0, 2, 3))
            var = X.var(unbiased=True, dim=(0, 2, 3))
            N = X.numel() / X.size(1)
            sqrt_var = torch.sqrt(var)
            ctx.eps = eps
            ctx.sum = sum
            ctx.N = N
            ctx.sqrt_var = sqrt_var
            mean = sum / N
            denom = sqrt_var + eps
            out = X - _unsqueeze_all(mean)
            out /= _unsqueeze_all(denom)
            return out

        @staticmethod
        def backward(ctx, grad_out):
            X, conv_weight, = ctx.saved_tensors
            X_conv_out = F.conv2d(X, conv_weight)
            grad_out = batch_norm_backward(grad_out, X_conv_out, ctx.sum, ctx.sqrt_var,
                                           ctx.N, ctx.eps)
            grad_X, grad_input = convolution_backward(grad_out, X, conv_weight)
            return grad_X, grad_input, None, None, None, None, None

    class FusedConvBN(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, exp_avg_factor=0.1,
                     eps=1e-3):
            super(FusedConvBN, self).__init__()
            weight_shape = (out_channels, in_channels, kernel_size, kernel_size)
            self.conv_weight = nn.Parameter(torch.empty(*weight_shape))
            self.eps = eps
            self.reset_parameters()

        def forward(self, X):
            return FusedConvBN2DFunction.apply(X, self.conv_weight, self.eps)

        def reset_parameters(self) -> None:
            nn.init.kaiming_uniform_(self.conv_weight, a=5 ** 0.5)

    class Net(nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.conv1 = FusedConvBN(1, 4, 3)
            self.conv2 = FusedConvBN(4, 6, 3)
            self.fc1 = nn.Linear(6 * 2 * 2, 10)

        def forward(self, x):
            x = F.relu(self.conv1(x))
            x = F.relu(self.conv2(x))
            x = F.max_pool2d(x, 2)
            x = torch.flatten(x, 1)
            return F.log_softmax(self.fc1(x), dim=1)

    model = env.init(Net())
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)

    def train_step(data, target):
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        return loss

    step = env.step(train_step)
    data, target = env.randn(24, 1, 8, 8), env.randint(0, 10, (24,))
    for epoch in range(2):
        for i in range(0, 24, 8):
            loss = step(data[i:i + 8], target[i:i + 8])
            env.rec(f"epoch {epoch} batch {i}", f"loss {loss.item():.6f}")
        scheduler.step()
    env.rec("params", dict(model.state_dict()))
    env.rec("grads", {n: p.grad for n, p in model.named_parameters()})
    with torch.no_grad():
        pred = model(data).argmax(dim=1, keepdim=True)
        env.rec("correct", pred.eq(target.view_as(pred)).sum().item())
    if env.compiled:
        assert step.n_traces == 1, step.n_traces


def double_backward_functions(torch, env):
    nn = torch.nn

    class Exp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            result = torch.exp(x)
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad_out):
            result, = ctx.saved_tensors
            return result * grad_out

    class Sinh(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            expx = torch.exp(x)
            expnegx = torch.exp(-x)
            ctx.save_for_backward(expx, expnegx)
            return (expx - expnegx) / 2, expx, expnegx

        @staticmethod
        def backward(ctx, grad_out, _grad_out_exp, _grad_out_negexp):
            expx, expnegx = ctx.saved_tensors
            grad_input = grad_out * (expx + expnegx) / 2
            grad_input += _grad_out_exp * expx
            grad_input -= _grad_out_negexp * expnegx
            return grad_input

    def sinh(x):
        return Sinh.apply(x)[0]

    net = env.init(nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1)))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)

    def train_step(x, y):
        x = x.clone().requires_grad_(True)
        h = net(x)
        out = sinh(h) + 0.1 * Exp.apply(-h * h)
        fit = ((out - y) ** 2).mean()
        gx, = torch.autograd.grad(out.sum(), x, create_graph=True)
        penalty = ((gx.norm(dim=1) - 1) ** 2).mean()
        loss = fit + 0.1 * penalty
        opt.zero_grad()
        loss.backward()
        opt.step()
        return fit.detach(), penalty.detach()

    step = env.step(train_step)
    x, y = env.randn(16, 3), env.randn(16, 1)
    for i in range(4):
        env.rec(f"step {i}", step(x, y))
    env.rec("params", dict(net.state_dict()))
    xd = env.randn(4, 2).double().requires_grad_()
    env.rec("gradgradcheck", (torch.autograd.gradcheck(Exp.apply, (xd,)),
                              torch.autograd.gradgradcheck(sinh, (xd,))))
    if env.compiled:
        assert step.n_traces == 1, step.n_traces


PROGRAMS = {"d2l_softmax_scratch": d2l_softmax_scratch,
            "d2l_dropout_weight_decay": d2l_dropout_weight_decay,
            "fused_conv_bn": fused_conv_bn,
            "double_backward_functions": double_backward_functions}


# (d2l_dropout_weight_decay: two steps with rand-made masks, 1-7 s cold)
@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=("d2l_dropout_weight_decay",)))
def test_program(name, program):
    run_tutorial(program, rtol=1e-5, atol=1e-6)
