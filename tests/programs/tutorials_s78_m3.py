"""Stop 78 (M), part 3: Raschka, Liu & Mirjalili's "Machine Learning with PyTorch and
Scikit-Learn" chapters 12-13 (an Iris net ending in nn.Softmax fed to CrossEntropyLoss as the
book does, accuracy_hist accumulated per epoch, XOR by add_module, the NoisyLinear layer
adding noise only while training), the NYU Deep Learning (Canziani) spiral classifier
(SGD weight_decay, "[EPOCH]: %i, [LOSS]: %.6f, [ACCURACY]: %.3f") and PyTorch's "Visualizing
Gradients" tutorial (forward hooks registering tensor hooks that collect every layer's output
gradient, a deep net with and without BatchNorm). Toy sizes, synthetic data.
Programs `f(torch, env)`, see tutorial_harness.py."""
import math


def raschka_iris_xor(torch, env):
    nn = torch.nn
    TensorDataset, DataLoader = torch.utils.data.TensorDataset, torch.utils.data.DataLoader

    X = env.randn(30, 4)
    y = env.randint(0, 3, (30,))
    X_train, y_train = X[:24], y[:24]
    X_test, y_test = X[24:], y[24:]
    X_train_norm = (X_train - torch.mean(X_train)) / torch.std(X_train)
    train_ds = TensorDataset(X_train_norm, y_train)
    train_dl = DataLoader(train_ds, batch_size=8, shuffle=False)

    class Model(nn.Module):
        def __init__(self, input_size, hidden_size, output_size):
            super().__init__()
            self.layer1 = nn.Linear(input_size, hidden_size)
            self.layer2 = nn.Linear(hidden_size, output_size)

        def forward(self, x):
            x = self.layer1(x)
            x = nn.Sigmoid()(x)
            x = self.layer2(x)
            x = nn.Softmax(dim=1)(x)
            return x

    model = env.init(Model(4, 16, 3))
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)

    def step(x_batch, y_batch):
        pred = model(x_batch)
        loss = loss_fn(pred, y_batch.long())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return pred, loss

    step = env.step(step)
    num_epochs = 4
    loss_hist = [0] * num_epochs
    accuracy_hist = [0] * num_epochs
    for epoch in range(num_epochs):
        for x_batch, y_batch in train_dl:
            pred, loss = step(x_batch, y_batch)
            loss_hist[epoch] += loss.item() * y_batch.size(0)
            is_correct = (torch.argmax(pred, dim=1) == y_batch).float()
            accuracy_hist[epoch] += is_correct.sum()
        loss_hist[epoch] /= len(train_dl.dataset)
        accuracy_hist[epoch] /= len(train_dl.dataset)
    env.rec("loss_hist", loss_hist)
    env.rec("accuracy_hist", accuracy_hist)
    X_test_norm = (X_test - torch.mean(X_train)) / torch.std(X_train)
    pred_test = model(X_test_norm)
    correct = (torch.argmax(pred_test, dim=1) == y_test).float()
    accuracy = correct.mean()
    env.rec("test acc", f'Test Acc.: {accuracy:.4f}')
    path = env.path('iris_classifier.pt')
    torch.save(model.state_dict(), path)
    model_new = Model(4, 16, 3)
    model_new.load_state_dict(torch.load(path))
    env.rec("reloaded", model_new(X_test_norm))

    # chapter 13: XOR with add_module, then a NoisyLinear layer
    x = env.rand(40, 2) * 2 - 1
    y = torch.ones(len(x))
    y[x[:, 0] * x[:, 1] < 0] = 0
    x_train, y_train = x[:30], y[:30]
    x_valid, y_valid = x[30:], y[30:]
    model = nn.Sequential()
    model.add_module('fc1', nn.Linear(2, 4))
    model.add_module('relu1', nn.ReLU())
    model.add_module('fc2', nn.Linear(4, 4))
    model.add_module('relu2', nn.ReLU())
    model.add_module('fc3', nn.Linear(4, 1))
    model.add_module('sigmoid', nn.Sigmoid())
    env.init(model)
    env.rec("xor repr", repr(model))
    loss_fn = nn.BCELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.015)
    train_dl = DataLoader(TensorDataset(x_train, y_train), 2 * 5, shuffle=False)

    def xor_step(x_batch, y_batch):
        pred = model(x_batch)[:, 0]
        loss = loss_fn(pred, y_batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        is_correct = ((pred >= 0.5).float() == y_batch).float()
        return loss, is_correct.sum()

    xor_step = env.step(xor_step)
    hist = []
    for epoch in range(5):
        loss_e, acc_e = 0, 0
        for x_batch, y_batch in train_dl:
            loss, n_ok = xor_step(x_batch, y_batch)
            loss_e += loss.item() * y_batch.size(0)
            acc_e += n_ok.item()
        pred = model(x_valid)[:, 0]
        hist.append((loss_e / x_train.size(0), acc_e / x_train.size(0),
                     ((pred >= 0.5).float() == y_valid).float().mean().item()))
    env.rec("xor hist", hist)

    class NoisyLinear(nn.Module):
        def __init__(self, input_size, output_size, noise_stddev=0.1):
            super().__init__()
            w = torch.Tensor(input_size, output_size)
            self.w = nn.Parameter(w)
            nn.init.xavier_uniform_(self.w)
            b = torch.Tensor(output_size).fill_(0)
            self.b = nn.Parameter(b)
            self.noise_stddev = noise_stddev

        def forward(self, x, training=False):
            if training:
                noise = torch.normal(0.0, self.noise_stddev, x.shape)
                x_new = torch.add(x, noise)
            else:
                x_new = x
            return torch.add(torch.mm(x_new, self.w), self.b)

    class MyNoisyModule(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = NoisyLinear(2, 4, 0.07)
            self.a1 = nn.ReLU()
            self.l2 = nn.Linear(4, 4)
            self.a2 = nn.ReLU()
            self.l3 = nn.Linear(4, 1)
            self.a3 = nn.Sigmoid()

        def forward(self, x, training=False):
            x = self.l1(x, training)
            x = self.a1(x)
            x = self.l2(x)
            x = self.a2(x)
            x = self.l3(x)
            x = self.a3(x)
            return x

        def predict(self, x):
            x = torch.tensor(x, dtype=torch.float32)
            pred = self.forward(x)[:, 0]
            return (pred >= 0.5).float()

    torch.manual_seed(1)
    model = env.init(MyNoisyModule())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.015)

    def noisy_step(x_batch, y_batch):
        pred = model(x_batch, True)[:, 0]
        loss = loss_fn(pred, y_batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    noisy_step = env.step(noisy_step)
    for epoch in range(3):
        for x_batch, y_batch in train_dl:
            env.rec(f"noisy {epoch}", noisy_step(x_batch, y_batch), cross=False)
    env.rec("noisy valid", model(x_valid)[:, 0], cross=False)
    env.rec("predict", model.predict([[0.5, -0.5], [0.5, 0.5]]), cross=False)


def nyu_spiral(torch, env):
    nn = torch.nn
    N, D, C, H = 20, 2, 3, 16
    X = torch.zeros(N * C, D)
    y = torch.zeros(N * C, dtype=torch.long)
    noise = env.randn(N * C)
    for c in range(C):
        index = 0
        t = torch.linspace(0, 1, N)
        inner_var = torch.linspace((2 * math.pi / C) * (c), (2 * math.pi / C) * (2 + c), N) \
            + noise[c * N:(c + 1) * N] * 0.2
        for ix in range(N * c, N * (c + 1)):
            X[ix] = t[index] * torch.FloatTensor((math.sin(inner_var[index]),
                                                  math.cos(inner_var[index])))
            y[ix] = c
            index += 1
    env.rec("X", X)
    learning_rate = 1e-3
    lambda_l2 = 1e-5
    for nonlinear in (False, True):
        if nonlinear:
            model = nn.Sequential(nn.Linear(D, H), nn.ReLU(), nn.Linear(H, C))
        else:
            model = nn.Sequential(nn.Linear(D, H), nn.Linear(H, C))
        env.init(model)
        criterion = torch.nn.CrossEntropyLoss()
        optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate,
                                     weight_decay=lambda_l2)

        def train(X, y):
            y_pred = model(X)
            loss = criterion(y_pred, y)
            score, predicted = torch.max(y_pred, 1)
            acc = (y == predicted).sum().float() / len(y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss, acc

        train = env.step(train)
        for t in range(40):
            loss, acc = train(X, y)
            if t % 13 == 0:
                env.rec(f"{nonlinear} {t}", "[EPOCH]: %i, [LOSS]: %.6f, [ACCURACY]: %.3f"
                        % (t, loss.item(), acc))
        with torch.no_grad():
            Z = model(torch.stack([torch.linspace(-1, 1, 5), torch.linspace(1, -1, 5)], 1))
        env.rec(f"{nonlinear} Z", torch.argmax(Z, dim=1))
        env.rec(f"{nonlinear} params", list(model.parameters()))


def visualizing_gradients(torch, env):
    nn = torch.nn

    def fc_layer(in_size, out_size, norm_layer):
        return nn.Sequential(nn.Linear(in_size, out_size), norm_layer(out_size), nn.Sigmoid())

    class Net(nn.Module):
        def __init__(self, in_size=8, hidden_units=6, out_size=2, num_layers=4,
                     batchnorm=False):
            super(Net, self).__init__()
            self.fc = nn.Linear(in_size, hidden_units)
            norm_layer = nn.BatchNorm1d if batchnorm else nn.Identity
            layers = [fc_layer(hidden_units, hidden_units, norm_layer)
                      for _ in range(num_layers)]
            self.layers = nn.Sequential(*layers)
            self.out_layer = nn.Linear(hidden_units, out_size)

        def forward(self, x):
            x = self.fc(x)
            x = self.layers(x)
            x = self.out_layer(x)
            return x

    def hook_forward(module_name, grads, hook_backward):
        def hook(module, args, output):
            output.register_hook(hook_backward(module_name, grads))
        return hook

    def hook_backward(module_name, grads):
        def hook(grad):
            grads.append((module_name, grad))
        return hook

    def get_all_layers(model, hook_forward, hook_backward):
        layers = dict()
        grads = []
        for name, layer in model.named_modules():
            if any(layer.children()) is False:
                layers[name] = layer
                layer.register_forward_hook(hook_forward(name, grads, hook_backward))
        return layers, grads

    x = env.randn(8, 8)
    target = env.randint(0, 2, (8,))
    for batchnorm in (False, True):
        model = env.init(Net(batchnorm=batchnorm))
        layers, grads = get_all_layers(model, hook_forward, hook_backward)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(x, target):
            out = model(x)
            loss = nn.CrossEntropyLoss()(out, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss

        step = env.step(step)
        for epoch in range(3):
            grads.clear()
            loss = step(x, target)
            env.rec(f"bn={batchnorm} loss {epoch}", loss)
            layer_idx = []
            avg_grads = []
            for idx, (name, grad) in enumerate(grads):
                if grad is not None and name in layers:
                    avg_grad = grad.abs().mean()
                    avg_grads.append(avg_grad.item())
                    layer_idx.append(name)
            env.rec(f"bn={batchnorm} names {epoch}", layer_idx)
            env.rec(f"bn={batchnorm} avg grads {epoch}", avg_grads)
        env.rec(f"bn={batchnorm} state", dict(model.state_dict()))
