"""Stop 78 (M), part 1: Godoy's "Deep Learning with PyTorch Step-by-Step" (the StepByStep
class whose train step is a closure made by a higher-order function), fast.ai's Practical
Deep Learning lesson 5 "Linear model and neural net from scratch" (Titanic coefficients
updated in place with coeffs.sub_(coeffs.grad * lr)), Stanford CS224n assignment 3's
ParserModel (embedding lookup by hand, xavier_uniform_ on bare nn.Parameters) and MIT
6.S191 lab 1 (OurDenseLayer, gradient descent on an input tensor). Toy sizes, synthetic data.
Programs `f(torch, env)`, see tutorial_harness.py."""
import numpy as np


def godoy_step_by_step(torch, env):
    nn = torch.nn

    class StepByStep(object):
        def __init__(self, model, loss_fn, optimizer):
            self.model = model
            self.loss_fn = loss_fn
            self.optimizer = optimizer
            self.device = "cpu"
            self.model.to(self.device)
            self.train_loader = None
            self.val_loader = None
            self.losses = []
            self.val_losses = []
            self.total_epochs = 0
            self.train_step_fn = env.step(self._make_train_step_fn())
            self.val_step_fn = self._make_val_step_fn()

        def set_loaders(self, train_loader, val_loader=None):
            self.train_loader = train_loader
            self.val_loader = val_loader

        def _make_train_step_fn(self):
            def perform_train_step_fn(x, y):
                self.model.train()
                yhat = self.model(x)
                loss = self.loss_fn(yhat, y)
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
                return loss.item()
            return perform_train_step_fn

        def _make_val_step_fn(self):
            def perform_val_step_fn(x, y):
                self.model.eval()
                yhat = self.model(x)
                loss = self.loss_fn(yhat, y)
                return loss.item()
            return perform_val_step_fn

        def _mini_batch(self, validation=False):
            if validation:
                data_loader = self.val_loader
                step_fn = self.val_step_fn
            else:
                data_loader = self.train_loader
                step_fn = self.train_step_fn
            if data_loader is None:
                return None
            mini_batch_losses = []
            for x_batch, y_batch in data_loader:
                x_batch = x_batch.to(self.device)
                y_batch = y_batch.to(self.device)
                mini_batch_loss = step_fn(x_batch, y_batch)
                mini_batch_losses.append(mini_batch_loss)
            return np.mean(mini_batch_losses)

        def train(self, n_epochs, seed=42):
            for epoch in range(n_epochs):
                self.total_epochs += 1
                loss = self._mini_batch(validation=False)
                self.losses.append(loss)
                with torch.no_grad():
                    val_loss = self._mini_batch(validation=True)
                    self.val_losses.append(val_loss)

        def predict(self, x):
            self.model.eval()
            x_tensor = torch.as_tensor(x).float()
            y_hat_tensor = self.model(x_tensor.to(self.device))
            self.model.train()
            return y_hat_tensor.detach().cpu().numpy()

    # chapter 2: y = 1 + 2x + noise
    rng = np.random.default_rng(42)
    x = rng.random((40, 1))
    y = 1 + 2 * x + .1 * rng.standard_normal((40, 1))
    x_tensor = torch.as_tensor(x).float()
    y_tensor = torch.as_tensor(y).float()
    dataset = torch.utils.data.TensorDataset(x_tensor, y_tensor)
    train_data = torch.utils.data.Subset(dataset, list(range(32)))
    val_data = torch.utils.data.Subset(dataset, list(range(32, 40)))
    train_loader = torch.utils.data.DataLoader(dataset=train_data, batch_size=16)
    val_loader = torch.utils.data.DataLoader(dataset=val_data, batch_size=16)
    lr = 0.1
    model = env.init(nn.Sequential(nn.Linear(1, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = nn.MSELoss(reduction='mean')
    sbs = StepByStep(model, loss_fn, optimizer)
    sbs.set_loaders(train_loader, val_loader)
    sbs.train(n_epochs=12)
    env.rec("state", dict(model.state_dict()))
    env.rec("losses", [float(v) for v in sbs.losses])
    env.rec("val_losses", [float(v) for v in sbs.val_losses])
    env.rec("total_epochs", sbs.total_epochs)
    env.rec("predict", torch.as_tensor(sbs.predict(np.array([[.5], [.3], [.7]]))))

    # chapter 3: binary classification with BCEWithLogitsLoss
    X = rng.standard_normal((24, 2))
    Y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.float32).reshape(-1, 1)
    X_t = torch.as_tensor(X).float()
    Y_t = torch.as_tensor(Y).float()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X_t, Y_t), batch_size=8)
    model2 = nn.Sequential()
    model2.add_module('linear', nn.Linear(2, 1))
    env.init(model2)
    optimizer2 = torch.optim.SGD(model2.parameters(), lr=0.1)
    sbs2 = StepByStep(model2, nn.BCEWithLogitsLoss(), optimizer2)
    sbs2.set_loaders(loader)
    sbs2.train(n_epochs=8)
    env.rec("clf losses", [float(v) for v in sbs2.losses])
    env.rec("clf val", [v is None for v in sbs2.val_losses])
    logits_val = sbs2.predict(X[:6])
    probabilities_val = torch.sigmoid(torch.as_tensor(logits_val).float())
    env.rec("probs", probabilities_val)
    env.rec("classes", (probabilities_val >= 0.5).int())


def fastai_titanic_scratch(torch, env):
    n = 40
    age = env.rand(n) * 80
    fare = env.rand(n) * 100
    sex_male = (env.rand(n) > 0.5).float()
    pclass = env.randint(1, 4, (n,))
    survived = ((sex_male < 0.5) | (pclass == 1)).float()
    t_indep = torch.stack([age, torch.log1p(fare), sex_male,
                           (pclass == 1).float(), (pclass == 2).float(),
                           torch.ones(n)], dim=1)
    t_dep = survived
    vals, indices = t_indep.max(dim=0)
    t_indep = t_indep / vals
    env.rec("vals", vals)
    trn_indep, val_indep = t_indep[:32], t_indep[32:]
    trn_dep, val_dep = t_dep[:32], t_dep[32:]
    n_coeff = t_indep.shape[1]

    # the linear model
    def init_coeffs():
        return (env.rand(n_coeff) - 0.5).requires_grad_()

    def calc_preds(coeffs, indeps):
        return torch.sigmoid((indeps * coeffs).sum(axis=1))

    def calc_loss(coeffs, indeps, deps):
        return torch.abs(calc_preds(coeffs, indeps) - deps).mean()

    def update_coeffs(coeffs, lr):
        coeffs.sub_(coeffs.grad * lr)
        coeffs.grad.zero_()

    def one_epoch(coeffs, lr):
        loss = calc_loss(coeffs, trn_indep, trn_dep)
        loss.backward()
        with torch.no_grad():
            update_coeffs(coeffs, lr)
        return loss

    step = env.step(one_epoch)
    coeffs = init_coeffs()
    printed = []
    for i in range(10):
        loss = step(coeffs, 2.0)
        printed.append(f"{loss:.3f}")
    env.rec("linear losses", "; ".join(printed))
    env.rec("coeffs", coeffs)
    env.rec("coeffs grad", coeffs.grad)

    def acc(coeffs):
        return (val_dep.bool() == (calc_preds(coeffs, val_indep) > 0.5)).float().mean()
    env.rec("acc", acc(coeffs))

    # the deep learning version: lists of layers and a constant
    def init_deep_coeffs():
        hiddens = [4, 4]
        sizes = [n_coeff] + hiddens + [1]
        n = len(sizes)
        layers = [(env.rand(sizes[i], sizes[i + 1]) - 0.3) / sizes[i + 1] * 4
                  for i in range(n - 1)]
        consts = [(env.rand(1)[0] - 0.5) * 0.1 for i in range(n - 1)]
        for l in layers + consts:
            l.requires_grad_()
        return layers, consts

    F = torch.nn.functional

    def calc_deep_preds(coeffs, indeps):
        layers, consts = coeffs
        n = len(layers)
        res = indeps
        for i, l in enumerate(layers):
            res = res @ l + consts[i]
            if i != n - 1:
                res = F.relu(res)
        return torch.sigmoid(res)

    def deep_loss(coeffs, indeps, deps):
        return torch.abs(calc_deep_preds(coeffs, indeps) - deps[:, None]).mean()

    def update_deep(coeffs, lr):
        layers, consts = coeffs
        for layer in layers + consts:
            layer.sub_(layer.grad * lr)
            layer.grad.zero_()

    def deep_epoch(coeffs, lr):
        loss = deep_loss(coeffs, trn_indep, trn_dep)
        loss.backward()
        with torch.no_grad():
            update_deep(coeffs, lr)
        return loss

    deep_step = env.step(deep_epoch)
    coeffs = init_deep_coeffs()
    losses = [deep_step(coeffs, 1.4).item() for _ in range(8)]
    env.rec("deep losses", losses)
    env.rec("deep layers", coeffs[0])
    env.rec("deep consts", coeffs[1])


def cs224n_parser(torch, env):
    nn = torch.nn
    F = torch.nn.functional

    class ParserModel(nn.Module):
        def __init__(self, embeddings, n_features=6, hidden_size=10, n_classes=3,
                     dropout_prob=0.5):
            super(ParserModel, self).__init__()
            self.n_features = n_features
            self.n_classes = n_classes
            self.dropout_prob = dropout_prob
            self.embed_size = embeddings.shape[1]
            self.hidden_size = hidden_size
            self.embeddings = nn.Parameter(torch.tensor(embeddings))
            self.embed_to_hidden_weight = nn.Parameter(
                torch.empty(self.n_features * self.embed_size, self.hidden_size))
            nn.init.xavier_uniform_(self.embed_to_hidden_weight)
            self.embed_to_hidden_bias = nn.Parameter(torch.empty(self.hidden_size))
            nn.init.uniform_(self.embed_to_hidden_bias)
            self.dropout = nn.Dropout(self.dropout_prob)
            self.hidden_to_logits_weight = nn.Parameter(
                torch.empty(self.hidden_size, self.n_classes))
            nn.init.xavier_uniform_(self.hidden_to_logits_weight)
            self.hidden_to_logits_bias = nn.Parameter(torch.empty(self.n_classes))
            nn.init.uniform_(self.hidden_to_logits_bias)

        def embedding_lookup(self, w):
            x = self.embeddings[w.view(-1)]
            x = x.view(w.shape[0], self.n_features * self.embed_size)
            return x

        def forward(self, w):
            x = self.embedding_lookup(w)
            h = F.relu(torch.matmul(x, self.embed_to_hidden_weight) + self.embed_to_hidden_bias)
            h = self.dropout(h)
            logits = torch.matmul(h, self.hidden_to_logits_weight) + self.hidden_to_logits_bias
            return logits

    embeddings = np.random.default_rng(0).standard_normal((20, 5)).astype(np.float32)
    model = env.init(ParserModel(embeddings))
    env.rec("shapes", [tuple(p.shape) for p in model.parameters()])
    train_x = env.randint(0, 20, (24, 6))
    train_y = env.randint(0, 3, (24,))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005)
    loss_func = nn.CrossEntropyLoss()

    def train_for_batch(train_x, train_y):
        optimizer.zero_grad()
        logits = model(train_x)
        loss = loss_func(logits, train_y)
        loss.backward()
        optimizer.step()
        return loss

    step = env.step(train_for_batch)
    for epoch in range(2):
        model.train()
        n_minibatches = 3
        loss_meter = []
        for i in range(n_minibatches):
            loss = step(train_x[i * 8:(i + 1) * 8], train_y[i * 8:(i + 1) * 8])
            loss_meter.append(loss.item())
        env.rec(f"epoch {epoch} avg", float(np.mean(loss_meter)), cross=False)
        model.eval()
        with torch.no_grad():
            pred = model(train_x).argmax(dim=1)
            uas = (pred == train_y).float().mean().item() * 100.0
        env.rec(f"epoch {epoch} UAS", f"- dev UAS: {uas:.2f}", cross=False)
    env.rec("state", dict(model.state_dict()), cross=False)
    # the assignment's sanity check of the lookup itself (no dropout involved)
    inds = torch.randint(0, 100, (4, 6), dtype=torch.long) % 20
    assert model.embedding_lookup(inds).shape == (4, 30)


def mit6s191_lab1(torch, env):
    nn = torch.nn

    class OurDenseLayer(torch.nn.Module):
        def __init__(self, num_inputs, num_outputs):
            super(OurDenseLayer, self).__init__()
            self.W = torch.nn.Parameter(torch.randn(num_inputs, num_outputs))
            self.bias = torch.nn.Parameter(torch.randn(num_outputs))

        def forward(self, x):
            z = torch.matmul(x, self.W) + self.bias
            y = torch.sigmoid(z)
            return y

    layer = env.init(OurDenseLayer(2, 3))
    x_input = torch.tensor([[1, 2.]])
    y = layer(x_input)
    env.rec("input shape", tuple(x_input.shape))
    env.rec("output", y)

    class LinearWithSigmoidActivation(nn.Module):
        def __init__(self, num_inputs, num_outputs):
            super(LinearWithSigmoidActivation, self).__init__()
            self.linear = nn.Linear(num_inputs, num_outputs)
            self.activation = nn.Sigmoid()

        def forward(self, inputs):
            linear_output = self.linear(inputs)
            output = self.activation(linear_output)
            return output

    class LinearButSometimesIdentity(nn.Module):
        def __init__(self, num_inputs, num_outputs):
            super(LinearButSometimesIdentity, self).__init__()
            self.linear = nn.Linear(num_inputs, num_outputs)

        def forward(self, inputs, isidentity=False):
            if isidentity:
                return inputs
            return self.linear(inputs)

    model = env.init(LinearWithSigmoidActivation(2, 3))
    env.rec("model out", model(x_input))
    model2 = env.init(LinearButSometimesIdentity(2, 3))
    env.rec("identity", model2(x_input, isidentity=True))
    env.rec("linear", model2(x_input, isidentity=False))

    # gradient computation: y = x^2 at x = 3
    x = torch.tensor(3.0, requires_grad=True)
    y = x ** 2
    y.backward()
    dy_dx = x.grad
    env.rec("dy_dx", dy_dx)

    # gradient descent on x to reach x_f
    x = torch.tensor([float(env.randn(1).item())], requires_grad=True)
    learning_rate = 1e-2
    history = []
    x_f = 4

    def gd_step(x):
        loss = (x - x_f) ** 2
        loss.backward()
        with torch.no_grad():
            x -= learning_rate * x.grad
        x.grad.zero_()
        return x.item()

    gd_step = env.step(gd_step)
    for i in range(60):
        history.append(gd_step(x))
    env.rec("history", history)
    env.rec("x", x)
