"""Tutorial programs as 2017-2019 code wrote them, which PyTorch still runs (with a
deprecation warning where it says so; see tutorial_harness.py): Variable, hand-written SGD
with p.data.add_(-lr, p.grad.data), a hand-written Adam with the value-first addcmul_ /
addcdiv_ of the original AdamW and RAdam repositories."""
import math


def old_style_sgd_variable(torch, env):
    """The 2017 word_language_model loop: Variable inputs, a manual SGD update
    p.data.add_(-lr, p.grad.data) after clip_grad_norm (the old name, no underscore,
    deprecated), hidden state repackaged with .data."""
    nn = torch.nn
    Variable = torch.autograd.Variable
    torch.manual_seed(0)

    class RNNModel(nn.Module):
        def __init__(self, ntoken=12, ninp=6, nhid=8):
            super().__init__()
            self.encoder = nn.Embedding(ntoken, ninp)
            self.rnn = nn.GRU(ninp, nhid)
            self.decoder = nn.Linear(nhid, ntoken)
            self.nhid = nhid

        def forward(self, input, hidden):
            output, hidden = self.rnn(self.encoder(input), hidden)
            return self.decoder(output.view(-1, self.nhid)), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters()).data
            return Variable(weight.new(1, bsz, self.nhid).zero_())

    model = RNNModel()
    criterion = nn.CrossEntropyLoss()
    data = torch.randint(0, 12, (9, 2))
    lr = 0.5

    def train_step(inp, targets, hidden):
        hidden = Variable(hidden.data)
        model.zero_grad()
        output, hidden = model(inp, hidden)
        loss = criterion(output, targets.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(-lr, p.grad.data)
        return loss.data.item(), hidden

    step = env.step(train_step)
    hidden = model.init_hidden(2)
    hist = []
    for epoch in range(2):
        for i in range(0, 8, 4):
            loss, hidden = step(Variable(data[i:i + 4]), Variable(data[i + 1:i + 5]), hidden)
            hist.append(loss)
    env.rec("hist", hist)
    env.rec("hidden", hidden)
    env.rec("params", list(model.parameters()))


def old_style_adamw(torch, env):
    """A hand-written AdamW as the 2018-2019 repositories wrote it (before PyTorch had
    one): exp_avg.mul_(beta1).add_(1 - beta1, grad), exp_avg_sq.mul_(beta2).addcmul_(1 -
    beta2, grad, grad), p.data.addcdiv_(-step_size, exp_avg, denom), decoupled decay by
    p.data.add_(-group['lr'] * group['weight_decay'], p.data)."""
    nn = torch.nn

    class AdamW(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0):
            super().__init__(params, dict(lr=lr, betas=betas, eps=eps,
                                          weight_decay=weight_decay))

        def step(self, closure=None):
            loss = closure() if closure is not None else None
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad.data
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = 0
                        state["exp_avg"] = torch.zeros_like(p.data)
                        state["exp_avg_sq"] = torch.zeros_like(p.data)
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    beta1, beta2 = group["betas"]
                    state["step"] += 1
                    exp_avg.mul_(beta1).add_(1 - beta1, grad)
                    exp_avg_sq.mul_(beta2).addcmul_(1 - beta2, grad, grad)
                    denom = exp_avg_sq.sqrt().add_(group["eps"])
                    bias_correction1 = 1 - beta1 ** state["step"]
                    bias_correction2 = 1 - beta2 ** state["step"]
                    step_size = group["lr"] * math.sqrt(bias_correction2) / bias_correction1
                    p.data.addcdiv_(-step_size, exp_avg, denom)
                    if group["weight_decay"] > 0:
                        p.data.add_(-group["lr"] * group["weight_decay"], p.data)
            return loss

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
    x, y = torch.randn(10, 5), torch.randint(0, 2, (10,))

    def forward_backward(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return loss.item()

    # (the compiled part is forward and backward: the update reads state["step"], a Python
    # int that every step changes, which a compiled call cannot replay)
    forward_backward = env.step(forward_backward)
    hist = []
    for _ in range(5):
        hist.append(forward_backward(x, y))
        opt.step()
    env.rec("hist", hist)
    env.rec("params", list(model.parameters()))
