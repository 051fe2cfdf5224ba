"""Sweep 19 (C), part 1: CS231n assignment code. The two-layer net's loss with its
hand-written backward pass (dscores, the ReLU mask written through a boolean index) checked
with rel_error against autograd and against eval_numerical_gradient, which nudges one entry
of a parameter in place at a time and calls the loss again; and the layers.py style of
affine/ReLU/softmax forward and backward functions returning caches, trained by a Solver
with update-rule config dicts (sgd_momentum, adam) that setdefault their hyperparameters.
Run with PyTorch, with llgrad eagerly and with llgrad.compile (tutorial_harness.py)."""
import itertools

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def two_layer_net_gradcheck(torch, env):
    class TwoLayerNet:
        def __init__(self, D, H, C, std=1e-1):
            self.params = {
                "W1": std * env.randn(D, H).double(), "b1": torch.zeros(H, dtype=torch.float64),
                "W2": std * env.randn(H, C).double(), "b2": torch.zeros(C, dtype=torch.float64)}

        def loss(self, X, y, reg=0.0):
            W1, b1 = self.params["W1"], self.params["b1"]
            W2, b2 = self.params["W2"], self.params["b2"]
            N = X.shape[0]
            h1 = X.mm(W1) + b1
            hidden = torch.clamp(h1, min=0)
            scores = hidden.mm(W2) + b2
            shifted = scores - scores.max(dim=1, keepdim=True)[0]
            probs = torch.exp(shifted)
            probs /= probs.sum(dim=1, keepdim=True)
            loss = -torch.log(probs[torch.arange(N), y]).sum() / N
            loss += reg * (torch.sum(W1 * W1) + torch.sum(W2 * W2))
            grads = {}
            dscores = probs.clone()
            dscores[torch.arange(N), y] -= 1
            dscores /= N
            grads["W2"] = hidden.t().mm(dscores) + 2 * reg * W2
            grads["b2"] = dscores.sum(dim=0)
            dhidden = dscores.mm(W2.t())
            dhidden[h1 <= 0] = 0
            grads["W1"] = X.t().mm(dhidden) + 2 * reg * W1
            grads["b1"] = dhidden.sum(dim=0)
            return loss, grads

    def rel_error(x, y):
        return torch.max(torch.abs(x - y) / torch.clamp(torch.abs(x) + torch.abs(y), min=1e-8)).item()

    def eval_numerical_gradient(f, x, h=1e-5):
        grad = torch.zeros_like(x)
        for ix in itertools.product(*[range(n) for n in x.shape]):
            oldval = x[ix].item()
            x[ix] = oldval + h
            fxph = f(x)
            x[ix] = oldval - h
            fxmh = f(x)
            x[ix] = oldval
            grad[ix] = (fxph - fxmh) / (2 * h)
        return grad

    net = TwoLayerNet(4, 6, 3)
    X = env.randn(5, 4).double()
    y = env.randint(0, 3, (5,))
    loss_fn = env.step(net.loss)
    loss, grads = loss_fn(X, y, reg=0.05)
    env.rec("loss", loss)
    env.rec("grads", grads)
    for name in ("W2", "b2", "W1"):
        f = lambda W: loss_fn(X, y, reg=0.05)[0].item()  # noqa: E731
        num = eval_numerical_gradient(f, net.params[name])
        env.rec(f"num {name}", num)
        assert rel_error(num, grads[name]) < 1e-7, name

    # the same loss through autograd
    params = {k: v.clone().requires_grad_() for k, v in net.params.items()}

    def autograd_loss(X, y):
        h = torch.relu(X @ params["W1"] + params["b1"])
        scores = h @ params["W2"] + params["b2"]
        loss = torch.nn.functional.cross_entropy(scores, y)
        loss = loss + 0.05 * sum((params[k] ** 2).sum() for k in ("W1", "W2"))
        for p in params.values():
            p.grad = None
        loss.backward()
        return loss
    autograd_loss = env.step(autograd_loss)
    l2 = autograd_loss(X, y)
    env.rec("autograd loss", l2)
    for k in params:
        assert rel_error(params[k].grad, grads[k]) < 1e-9, k
    # SGD with learning-rate decay per epoch, the assignment's train()
    lr, loss_history = 0.5, []
    for it in range(8):
        loss, grads = loss_fn(X, y, reg=1e-3)
        loss_history.append(loss.item())
        for k in net.params:
            net.params[k] += -lr * grads[k]
        if it % 4 == 3:
            lr *= 0.95
    env.rec("history", loss_history)
    env.rec("params", net.params)


def layers_solver(torch, env):
    def affine_forward(x, w, b):
        out = x.reshape(x.shape[0], -1).mm(w) + b
        return out, (x, w, b)

    def affine_backward(dout, cache):
        x, w, b = cache
        dx = dout.mm(w.t()).reshape(x.shape)
        dw = x.reshape(x.shape[0], -1).t().mm(dout)
        db = torch.sum(dout, dim=0)
        return dx, dw, db

    def relu_forward(x):
        return torch.maximum(x, torch.zeros_like(x)), x

    def relu_backward(dout, cache):
        return dout * (cache > 0)

    def softmax_loss(x, y):
        shifted = x - x.max(dim=1, keepdim=True).values
        Z = torch.exp(shifted).sum(dim=1, keepdim=True)
        log_probs = shifted - torch.log(Z)
        probs = torch.exp(log_probs)
        N = x.shape[0]
        loss = -log_probs[torch.arange(N), y].sum() / N
        dx = probs.clone()
        dx[torch.arange(N), y] -= 1
        dx /= N
        return loss, dx

    def sgd_momentum(w, dw, config=None):
        if config is None:
            config = {}
        config.setdefault("learning_rate", 1e-2)
        config.setdefault("momentum", 0.9)
        v = config.get("velocity", torch.zeros_like(w))
        v = config["momentum"] * v - config["learning_rate"] * dw
        next_w = w + v
        config["velocity"] = v
        return next_w, config

    def adam(w, dw, config=None):
        if config is None:
            config = {}
        config.setdefault("learning_rate", 1e-3)
        config.setdefault("beta1", 0.9)
        config.setdefault("beta2", 0.999)
        config.setdefault("epsilon", 1e-8)
        config.setdefault("m", torch.zeros_like(w))
        config.setdefault("v", torch.zeros_like(w))
        config.setdefault("t", 0)
        config["t"] += 1
        config["m"] = config["beta1"] * config["m"] + (1 - config["beta1"]) * dw
        config["v"] = config["beta2"] * config["v"] + (1 - config["beta2"]) * dw ** 2
        mt = config["m"] / (1 - config["beta1"] ** config["t"])
        vt = config["v"] / (1 - config["beta2"] ** config["t"])
        next_w = w - config["learning_rate"] * mt / (torch.sqrt(vt) + config["epsilon"])
        return next_w, config

    class TwoLayerNet:
        def __init__(self, input_dim=12, hidden_dim=10, num_classes=4, reg=0.01):
            self.reg = reg
            self.params = {"W1": 0.1 * env.randn(input_dim, hidden_dim), "b1": torch.zeros(hidden_dim),
                           "W2": 0.1 * env.randn(hidden_dim, num_classes), "b2": torch.zeros(num_classes)}

        def loss(self, X, y):
            h, c1 = affine_forward(X, self.params["W1"], self.params["b1"])
            a, cr = relu_forward(h)
            scores, c2 = affine_forward(a, self.params["W2"], self.params["b2"])
            loss, dscores = softmax_loss(scores, y)
            loss += 0.5 * self.reg * (torch.sum(self.params["W1"] ** 2) + torch.sum(self.params["W2"] ** 2))
            grads = {}
            da, grads["W2"], grads["b2"] = affine_backward(dscores, c2)
            dh = relu_backward(da, cr)
            _, grads["W1"], grads["b1"] = affine_backward(dh, c1)
            grads["W1"] += self.reg * self.params["W1"]
            grads["W2"] += self.reg * self.params["W2"]
            return loss, grads

    class Solver:
        def __init__(self, model, data, update_rule, optim_config, batch_size=6, step=None):
            self.model, self.data = model, data
            self.update_rule = update_rule
            self.optim_config = optim_config
            self.batch_size = batch_size
            self.optim_configs = {p: {k: v for k, v in optim_config.items()} for p in model.params}
            self.loss_history = []
            self.step_fn = step

        def _step(self):
            X, y = self.data["X_train"], self.data["y_train"]
            mask = self.data["order"][len(self.loss_history) % 4]
            loss, grads = self.step_fn(X[mask], y[mask])
            self.loss_history.append(loss.item())
            for p, w in self.model.params.items():
                next_w, next_config = self.update_rule(w, grads[p], self.optim_configs[p])
                self.model.params[p] = next_w
                self.optim_configs[p] = next_config

    for rule, cfg in ((sgd_momentum, {"learning_rate": 0.1}), (adam, {"learning_rate": 5e-3})):
        model = TwoLayerNet()
        data = {"X_train": env.randn(24, 3, 2, 2), "y_train": env.randint(0, 4, (24,)),
                "order": env.randint(0, 24, (4, 6))}
        # the loss reads model.params, which the update rule replaces by new tensors
        solver = Solver(model, data, rule, cfg, step=env.step(lambda X, y: model.loss(X, y)))
        for _ in range(7):
            solver._step()
        env.rec(f"{rule.__name__} history", solver.loss_history)
        env.rec(f"{rule.__name__} params", model.params)
        env.rec(f"{rule.__name__} t", solver.optim_configs["W1"].get("t", -1))


@pytest.mark.parametrize("program", [two_layer_net_gradcheck, layers_solver])
def test_cs231n(program):
    run_tutorial(program)
