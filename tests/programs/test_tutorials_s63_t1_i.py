"""Sweep 63 (t1), file i: older-style repository code run with PyTorch, with llgrad
eagerly and with llgrad compiling each whole training step through tutorial_harness.py
(the same per-step losses, parameters and gradients, no llgrad warning, compiled code
for every step).

- BinaryNet (Courbariaux, Hubara et al.; itayhubara/BinaryNet.pytorch's
  binarized_modules.py and training loop, nearly verbatim): BinarizeLinear keeps the
  real-valued weights as a Python attribute `weight.org` of the Parameter, sets
  `self.weight.data = sign(org)` in every forward and binarises its hidden input by
  `input.data = sign(input.data)` (the straight-through estimator: the backward goes
  through the Hardtanh as if no sign were taken), adds the bias in place; the loop
  copies org back into the parameters before optimizer.step() and clamps it after;
- Mean Teacher (Tarvainen & Valpola; CuriousAI/mean-teacher's main.py, nearly verbatim):
  the EMA model's parameters detach_()ed, `ema_param.data.mul_(alpha).add_(1 - alpha,
  param.data)` (the deprecated overload, warning as PyTorch does) with alpha from a
  global_step counter bumped inside the step, CrossEntropyLoss(size_average=False,
  ignore_index=NO_LABEL) for the unlabelled half, softmax-MSE consistency with
  size_average=False and the sigmoid ramp-up computed by NumPy from the epoch.

BinaryNet found compile never keeping a trace whose step puts a new tensor into an
attribute of a tensor (every call traced again, silently: test_tensor_attr_writes_s63_t1);
Mean Teacher found NumPy's reading of the epoch making compile guard the step counter by
value too, so every call traced again (test_numpy_reads_stand_in_s63_t1)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def binarynet_ste(torch, env):
    nn = torch.nn
    n_in, hidden, n_classes, batch = 20, 32, 4, 16

    def Binarize(tensor, quant_mode="det"):
        if quant_mode == "det":
            return tensor.sign()
        return tensor.add_(1).div_(2).add_(torch.rand(tensor.size()).add(-0.5)) \
            .clamp_(0, 1).round().mul_(2).add_(-1)

    class BinarizeLinear(nn.Linear):
        def __init__(self, *kargs, **kwargs):
            super(BinarizeLinear, self).__init__(*kargs, **kwargs)

        def forward(self, input):
            if input.size(1) != n_in:
                input.data = Binarize(input.data)
            if not hasattr(self.weight, "org"):
                self.weight.org = self.weight.data.clone()
            self.weight.data = Binarize(self.weight.org)
            out = nn.functional.linear(input, self.weight)
            if self.bias is not None:
                self.bias.org = self.bias.data.clone()
                out += self.bias.view(1, -1).expand_as(out)
            return out

    class Net(nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.infl_ratio = 1
            # (no bias before a BatchNorm: its gradient is rounding noise Adam scales up)
            self.fc1 = BinarizeLinear(n_in, hidden * self.infl_ratio, bias=False)
            self.htanh1 = nn.Hardtanh()
            self.bn1 = nn.BatchNorm1d(hidden * self.infl_ratio)
            self.fc2 = BinarizeLinear(hidden * self.infl_ratio, hidden * self.infl_ratio,
                                      bias=False)
            self.htanh2 = nn.Hardtanh()
            self.bn2 = nn.BatchNorm1d(hidden * self.infl_ratio)
            self.fc3 = BinarizeLinear(hidden * self.infl_ratio, n_classes)
            self.logsoftmax = nn.LogSoftmax(dim=1)

        def forward(self, x):
            x = x.view(-1, n_in)
            x = self.fc1(x)
            x = self.bn1(x)
            x = self.htanh1(x)
            x = self.fc2(x)
            x = self.bn2(x)
            x = self.htanh2(x)
            x = self.fc3(x)
            return self.logsoftmax(x)

    model = env.init(Net())
    criterion = nn.CrossEntropyLoss()
    # (SGD, not the repository's Adam: here a row of fc2's gradient is zero up to rounding
    # (~1e-9, different in every library), which Adam would scale up to lr-sized steps)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def train_step(data, target):
        model.train()
        output = model(data)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        for p in list(model.parameters()):
            if hasattr(p, "org"):
                p.data.copy_(p.org)
        optimizer.step()
        for p in list(model.parameters()):
            if hasattr(p, "org"):
                p.org.copy_(p.data.clamp_(-1, 1))
        return loss.detach()

    step = env.step(train_step)
    w_true = env.randn(n_in, n_classes)
    for it in range(6):
        x = env.randn(batch, n_in)
        env.rec(f"step {it}", step(x, (x @ w_true).argmax(1)))
    env.rec("grads", {n: p.grad for n, p in model.named_parameters()})
    env.rec("org", [model.fc1.weight.org, model.fc2.weight.org, model.fc3.weight.org,
                    model.fc3.bias.org])
    env.rec("params", dict(model.state_dict()))


def mean_teacher(torch, env):
    nn, F = torch.nn, torch.nn.functional
    n_in, n_classes, batch, NO_LABEL = 6, 3, 8, -1
    Variable = torch.autograd.Variable

    def sigmoid_rampup(current, rampup_length):
        """Exponential rampup from https://arxiv.org/abs/1610.02242"""
        if rampup_length == 0:
            return 1.0
        current = np.clip(current, 0.0, rampup_length)
        phase = 1.0 - current / rampup_length
        return float(np.exp(-5.0 * phase * phase))

    def softmax_mse_loss(input_logits, target_logits):
        assert input_logits.size() == target_logits.size()
        input_softmax = F.softmax(input_logits, dim=1)
        target_softmax = F.softmax(target_logits, dim=1)
        num_classes = input_logits.size()[1]
        return F.mse_loss(input_softmax, target_softmax, size_average=False) / num_classes

    def create_model(ema=False):
        model = env.init(nn.Sequential(nn.Linear(n_in, 16), nn.ReLU(), nn.Linear(16, n_classes)))
        if ema:
            for param in model.parameters():
                param.detach_()
        return model

    model = create_model()
    ema_model = create_model(ema=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    class_criterion = nn.CrossEntropyLoss(size_average=False, ignore_index=NO_LABEL)
    consistency_criterion = softmax_mse_loss
    ema_decay, consistency, rampup = 0.99, 10.0, 5
    global_step = 0

    def update_ema_variables(model, ema_model, alpha, global_step):
        # Use the true average until the exponential average is more correct
        alpha = min(1 - 1 / (global_step + 1), alpha)
        for ema_param, param in zip(ema_model.parameters(), model.parameters()):
            ema_param.data.mul_(alpha).add_(1 - alpha, param.data)

    def train_step(input, ema_input, target, epoch):
        nonlocal global_step
        minibatch_size = len(target)
        input_var = Variable(input)
        ema_input_var = Variable(ema_input)
        target_var = Variable(target)
        ema_logit = ema_model(ema_input_var)
        logit1 = model(input_var)
        ema_logit = Variable(ema_logit.detach().data, requires_grad=False)
        class_loss = class_criterion(logit1, target_var) / minibatch_size
        consistency_weight = consistency * sigmoid_rampup(epoch, rampup)
        consistency_loss = consistency_weight * consistency_criterion(logit1, ema_logit) \
            / minibatch_size
        loss = class_loss + consistency_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        global_step += 1
        update_ema_variables(model, ema_model, ema_decay, global_step)
        return loss.detach(), class_loss.detach(), consistency_loss.detach()

    step = env.step(train_step)
    w_true = env.randn(n_in, n_classes)
    for it in range(6):
        x = env.randn(batch, n_in)
        target = (x @ w_true).argmax(1)
        target[batch // 2:] = NO_LABEL                  # (the unlabelled half)
        noise = 0.1 * env.randn(2, batch, n_in)
        env.rec(f"step {it}", step(x + noise[0], x + noise[1], target, it // 2))
    env.rec("global_step", global_step)
    env.rec("grads", {n: p.grad for n, p in model.named_parameters()})
    env.rec("ema", dict(ema_model.state_dict()))
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {     # name: (program, most traces of any of its compiled steps)
    "binarynet_ste": (binarynet_ste, 1),
    # (the epoch is a Python int NumPy reads (np.clip): a trace per value, and the trace
    # that found NumPy reading it; global_step stays an input)
    "mean_teacher": (mean_teacher, 4),
}


# (four traces: over ~1 s; its bug has a fast test of its own)
SLOW = {'mean_teacher'}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW
                                               else [], id=n) for n in PROGRAMS])
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program, rtol=1e-4, atol=1e-5)
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (cf.fn.__name__, cf.n_traces)
