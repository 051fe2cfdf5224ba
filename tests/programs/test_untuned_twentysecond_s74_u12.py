"""Batch 22 (s74, u12): programs modelled on the official PyTorch tutorials, run with PyTorch,
llgrad eagerly and llgrad compiling the step (tutorial_harness.py). Here: "Learning PyTorch with
Examples" (a cubic fitted by hand under no_grad with `p -= lr * p.grad; p.grad = None`, a
LegendrePolynomial3 autograd.Function, nn.Sequential with Flatten(0, 1) and RMSprop), transfer
learning (a frozen backbone whose BatchNorm still tracks statistics, a new fc head alone in
the optimiser, StepLR, set_grad_enabled per phase, the best weights saved and reloaded) and
FGSM (a per-example attack on a trained net: data.requires_grad, data.grad.sign(),
denormalise / clamp / renormalise). Parts 2 and 3: _2.py, _3.py."""
import functools
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def pytorch_with_examples(torch, env):
    nn = torch.nn
    x = torch.linspace(-math.pi, math.pi, 200)
    y = torch.sin(x)
    a, b, c, d = (torch.tensor(v, requires_grad=True) for v in env.randn(4).tolist())
    lr = 1e-6

    def manual_step():
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum()
        loss.backward()
        with torch.no_grad():
            for p in (a, b, c, d):
                p -= lr * p.grad
                p.grad = None
        return loss.detach()
    step = env.step(manual_step)
    for t in range(4):
        env.rec(f"manual {t}", step())
    env.rec("manual result", f"y = {a.item():.5f} + {b.item():.5f} x + {c.item():.5f} x^2 "
                             f"+ {d.item():.5f} x^3")

    class LegendrePolynomial3(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input ** 3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input ** 2 - 1)

    a2, b2, c2, d2 = (torch.full((), v, requires_grad=True) for v in (0.0, -1.0, 0.0, 0.3))

    def legendre_step(lr=5e-6):
        P3 = LegendrePolynomial3.apply
        y_pred = a2 + b2 * P3(c2 + d2 * x)
        loss = (y_pred - y).pow(2).sum()
        loss.backward()
        with torch.no_grad():
            for p in (a2, b2, c2, d2):
                p -= lr * p.grad
                p.grad = None
        return loss.detach()
    step = env.step(legendre_step)
    for t in range(4):
        env.rec(f"legendre {t}", step())
    env.rec("legendre params", [a2, b2, c2, d2])

    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)
    env.rec("xx dtype", xx.dtype)
    model = env.init(nn.Sequential(nn.Linear(3, 1), nn.Flatten(0, 1)))
    loss_fn = nn.MSELoss(reduction="sum")
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)

    def nn_step():
        loss = loss_fn(model(xx), y)
        optimizer.zero_grad(); loss.backward(); optimizer.step()
        return loss.item()
    step = env.step(nn_step)
    for t in range(5):
        env.rec(f"nn {t}", step())
    linear_layer = model[0]
    env.rec("nn result", f"y = {linear_layer.bias.item():.5f} + {linear_layer.weight[:, 0].item():.5f} x"
                         f" + {linear_layer.weight[:, 1].item():.5f} x^2 + "
                         f"{linear_layer.weight[:, 2].item():.5f} x^3")


def transfer_learning(torch, env):
    nn, optim = torch.nn, torch.optim

    class Backbone(nn.Module):       # ("resnet18": features, avgpool, fc)
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8),
                                          nn.ReLU(inplace=True), nn.MaxPool2d(2),
                                          nn.Conv2d(8, 12, 3, padding=1), nn.BatchNorm2d(12),
                                          nn.ReLU(inplace=True))
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(12, 10)

        def forward(self, x):
            return self.fc(torch.flatten(self.avgpool(self.features(x)), 1))

    model_conv = Backbone()
    for param in model_conv.parameters():
        param.requires_grad = False
    num_ftrs = model_conv.fc.in_features
    model_conv.fc = nn.Linear(num_ftrs, 2)
    env.init(model_conv)
    criterion = nn.CrossEntropyLoss()
    optimizer_conv = optim.SGD(model_conv.fc.parameters(), lr=0.01, momentum=0.9)
    exp_lr_scheduler = optim.lr_scheduler.StepLR(optimizer_conv, step_size=2, gamma=0.1)
    env.rec("trainable", [n for n, p in model_conv.named_parameters() if p.requires_grad])

    def make(n):
        labels = env.randint(0, 2, (n,))
        imgs = env.rand(n, 3, 8, 8) + labels.view(-1, 1, 1, 1) * torch.linspace(0, 0.5, 8)
        return [(imgs[i:i + 4], labels[i:i + 4]) for i in range(0, n, 4)]
    dataloaders = {"train": make(8), "val": make(8)}
    dataset_sizes = {k: sum(len(b[1]) for b in v) for k, v in dataloaders.items()}

    def phase_step(inputs, labels, phase):
        with torch.set_grad_enabled(phase == "train"):
            outputs = model_conv(inputs)
            _, preds = torch.max(outputs, 1)
            loss = criterion(outputs, labels)
            if phase == "train":
                optimizer_conv.zero_grad()
                loss.backward()
                optimizer_conv.step()
        return loss, preds
    step = env.step(phase_step)
    best_path = env.path("best_model_params.pt")
    torch.save(model_conv.state_dict(), best_path)
    best_acc = 0.0
    for epoch in range(3):
        for phase in ["train", "val"]:
            model_conv.train() if phase == "train" else model_conv.eval()
            running_loss, running_corrects = 0.0, 0
            for inputs, labels in dataloaders[phase]:
                loss, preds = step(inputs, labels, phase)
                running_loss += loss.item() * inputs.size(0)
                running_corrects += torch.sum(preds == labels.data)
            if phase == "train":
                exp_lr_scheduler.step()
            epoch_loss = running_loss / dataset_sizes[phase]
            epoch_acc = running_corrects.double() / dataset_sizes[phase]
            env.rec(f"{epoch} {phase}", f"{phase} Loss: {epoch_loss:.4f} Acc: {epoch_acc:.4f}")
            env.rec(f"{epoch} {phase} acc", epoch_acc)
            if phase == "val" and epoch_acc > best_acc:
                best_acc = epoch_acc
                torch.save(model_conv.state_dict(), best_path)
    env.rec("last", dict(model_conv.state_dict()))
    model_conv.load_state_dict(torch.load(best_path, weights_only=True))
    env.rec("best", (best_acc, dict(model_conv.state_dict())))
    env.rec("lr", exp_lr_scheduler.get_last_lr())


def fgsm_attack_program(torch, env, keep_graph=False):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, 1)
            self.conv2 = nn.Conv2d(4, 8, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.fc1 = nn.Linear(8 * 2 * 2, 16)
            self.fc2 = nn.Linear(16, 3)

        def forward(self, x):
            x = F.relu(self.conv1(x))
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = torch.flatten(self.dropout1(x), 1)
            return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)

    model = env.init(Net())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    mean, std = (0.1307,), (0.3081,)

    def normalize(batch):
        return (batch - torch.tensor(mean).view(1, -1, 1, 1)) / torch.tensor(std).view(1, -1, 1, 1)

    def denorm(batch):
        return batch * torch.tensor(std).view(1, -1, 1, 1) + torch.tensor(mean).view(1, -1, 1, 1)

    def train_step(data, target):
        model.eval()                            # (dropout off: the same run in every library)
        loss = F.nll_loss(model(data), target)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.detach()

    def images(n):
        target = env.randint(0, 3, (n,))
        img = env.rand(n, 1, 8, 8) * 0.3
        for i, t in enumerate(target.tolist()):
            img[i, 0, 2 * t:2 * t + 3, :] += 0.6
        return normalize(img.clamp(0, 1)), target
    step = env.step(train_step)
    for it in range(5):
        env.rec(f"train {it}", step(*images(8)))

    def fgsm_attack(image, epsilon, data_grad):
        sign_data_grad = data_grad.sign()
        perturbed_image = image + epsilon * sign_data_grad
        return torch.clamp(perturbed_image, 0, 1)

    def attack_one(data, target, epsilon):
        data.requires_grad = True
        output = model(data)
        init_pred = output.max(1, keepdim=True)[1]
        loss = F.nll_loss(output, target)
        model.zero_grad()
        loss.backward()
        data_grad = data.grad.data
        perturbed_data = fgsm_attack(denorm(data), epsilon, data_grad)
        output = model(normalize(perturbed_data))
        final_pred = output.max(1, keepdim=True)[1]
        # (the tutorial detaches the perturbed image only when it stores it, later)
        return init_pred, final_pred, perturbed_data if keep_graph else perturbed_data.detach()
    attack = env.step(attack_one)
    test_x, test_y = images(6)
    for epsilon in [0, 0.1, 0.3]:
        correct, adv_examples = 0, []
        for i in range(len(test_y)):
            data, target = test_x[i:i + 1].clone(), test_y[i:i + 1]
            init_pred, final_pred, perturbed = attack(data, target, epsilon)
            if init_pred.item() != target.item():
                continue
            if final_pred.item() == target.item():
                correct += 1
            if len(adv_examples) < 2:
                adv_ex = perturbed.squeeze().detach().cpu().numpy()
                adv_examples.append((init_pred.item(), final_pred.item(), adv_ex))
        final_acc = correct / float(len(test_y))
        env.rec(f"eps {epsilon}", f"Epsilon: {epsilon}\tTest Accuracy = {correct} / "
                                  f"{len(test_y)} = {final_acc}")
        env.rec(f"adv {epsilon}", adv_examples)
    env.rec("grads", [p.grad for p in model.parameters()])
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {f.__name__: f for f in (pytorch_with_examples, transfer_learning, fgsm_attack_program)}
# (the attack returns the perturbed image undetached, as the tutorial's test() holds it until
# it stores it: made after the call's backward, it requires grad, and compile refuses that
# output and runs the call eagerly, with a warning)
PROGRAMS["fgsm_keep_graph"] = pytest.param(
    functools.partial(fgsm_attack_program, keep_graph=True), marks=pytest.mark.xfail(
        strict=True, reason="compile runs eagerly a function returning a result that requires "
        "grad made after its own backward (compile/entry.py: 'runs a backward and returns')"))


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
