"""Tutorial programs that change what a compiled step reads between its calls, written as
blog posts write them (seeded with torch.manual_seed, modules built by their constructors;
see tutorial_harness.py): a transfer-learning head swapped with a new optimiser mid
training, a forward hook registered and removed between calls, add_param_group for a
layer unfrozen later, an EMA whose decay warms up with a Python counter, a compiled no_grad
evaluation between training steps."""
import copy
import math


def head_swap_new_optimizer(torch, env):
    """Fine-tuning in two phases as transfer-learning posts write it: train a head on a
    frozen backbone, then replace model.fc by a fresh nn.Linear for a new label set and
    rebind the optimiser (a new torch.optim.SGD over the new head); the same compiled step
    function, which reads model and opt from its closure, trains on."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(nn.Linear(6, 10), nn.ReLU())
            self.fc = nn.Linear(10, 3)

        def forward(self, x):
            return self.fc(self.backbone(x))

    model = Net()
    for p in model.backbone.parameters():
        p.requires_grad = False
    opt = torch.optim.SGD(model.fc.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(8, 6)
    y3, y5 = torch.randint(0, 3, (8,)), torch.randint(0, 5, (8,))

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    hist = [step(x, y3) for _ in range(3)]
    model.fc = nn.Linear(10, 5)
    opt = torch.optim.SGD(model.fc.parameters(), lr=0.05)
    hist += [step(x, y5) for _ in range(3)]
    env.rec("hist", hist)
    env.rec("params", list(model.parameters()))
    env.rec("frozen grads", [p.grad for p in model.backbone.parameters()])


def hook_between_calls(torch, env):
    """Feature extraction with a forward hook (the 'activation' dict pattern): the hook is
    registered after some compiled steps, read after each, and removed with its handle;
    the step goes on without it."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = torch.randn(6, 4), torch.randn(6, 2)
    activation = {}

    def get_activation(name):
        def hook(model, input, output):
            activation[name] = output.detach()
        return hook

    def train_step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    hist = [step(x, y) for _ in range(2)]
    handle = model[1].register_forward_hook(get_activation("relu"))
    for _ in range(2):
        hist.append(step(x, y))
        hist.append(activation["relu"].sum().item())
    handle.remove()
    activation.clear()
    hist += [step(x, y) for _ in range(2)]
    env.rec("hist", hist)
    env.rec("no activation after remove", len(activation))
    env.rec("params", list(model.parameters()))


def add_param_group_unfreeze(torch, env):
    """Gradual unfreezing (ULMFiT style): the optimiser starts with the head only; after
    some steps the last body layer is unfrozen and given to the optimiser with
    add_param_group at a smaller learning rate; Adam's state for the new group starts
    then."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    body = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh())
    head = nn.Linear(8, 2)
    for p in body.parameters():
        p.requires_grad_(False)
    opt = torch.optim.Adam(head.parameters(), lr=0.01)
    x, y = torch.randn(10, 5), torch.randint(0, 2, (10,))

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(head(body(x)), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    hist = [step(x, y) for _ in range(3)]
    for p in body[2].parameters():
        p.requires_grad_(True)
    opt.add_param_group({"params": body[2].parameters(), "lr": 0.001})
    hist += [step(x, y) for _ in range(3)]
    env.rec("hist", hist)
    env.rec("groups", [(g["lr"], len(g["params"])) for g in opt.param_groups])
    env.rec("params", list(body.parameters()) + list(head.parameters()))


def ema_python_counter(torch, env):
    """An EMA of the weights as the 'ModelEMA' helpers of detection repositories write it:
    a deepcopy in eval mode, self.updates (a Python int) counting calls, the decay warming
    up as d = decay * (1 - exp(-updates / 2000)); the update in the training step under
    no_grad with v.mul_(d).add_(msd[k].detach(), alpha=1 - d) over the state_dict's
    floating point entries."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class ModelEMA:
        def __init__(self, model, decay=0.9999, tau=20):
            self.ema = copy.deepcopy(model).eval()
            self.updates = 0
            self.decay = lambda x: decay * (1 - math.exp(-x / tau))
            for p in self.ema.parameters():
                p.requires_grad_(False)

        def update(self, model):
            with torch.no_grad():
                self.updates += 1
                d = self.decay(self.updates)
                msd = model.state_dict()
                for k, v in self.ema.state_dict().items():
                    if v.dtype.is_floating_point:
                        v.mul_(d).add_(msd[k].detach(), alpha=1 - d)

    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    ema = ModelEMA(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        ema.update(model)
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(x, y) for _ in range(5)])
    env.rec("updates", ema.updates)
    env.rec("ema", list(ema.ema.state_dict().values()))


def compiled_eval_between_steps(torch, env):
    """A compiled train step and a compiled evaluate function decorated @torch.no_grad()
    that switches the model to eval() (dropout off, batch norm running statistics) and
    back to train() after; the two alternate every epoch."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 12), nn.BatchNorm1d(12), nn.ReLU(), nn.Dropout(0.3),
                          nn.Linear(12, 3))
    # (SGD: the first Linear's bias has a zero gradient under batch norm, rounding noise
    # that Adam would scale up to steps of lr)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    xt, yt = torch.randn(8, 5), torch.randint(0, 3, (8,))
    xv, yv = torch.randn(6, 5), torch.randint(0, 3, (6,))

    def train_step(x, y):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    @torch.no_grad()
    def evaluate(x, y):
        model.eval()
        out = model(x)
        loss = F.cross_entropy(out, y, reduction="sum").item()
        correct = (out.argmax(1) == y).sum().item()
        model.train()
        return loss, correct, out.requires_grad

    train_step, evaluate = env.step(train_step), env.step(evaluate)
    hist = []
    for epoch in range(4):
        hist.append(train_step(xt, yt))
        hist.append(evaluate(xv, yv))
    env.rec("hist", hist)
    env.rec("training", model.training)
    env.rec("state", list(model.state_dict().values()))
