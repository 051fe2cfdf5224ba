"""Programs of tests/programs/test_tutorials_s77_b.py (stop 77, file b), written as
pytorch/examples, d2l.ai and Karpathy's code write them, against the module parameter
`torch` (tutorial_harness.py), at small sizes."""
import math


def hogwild_mnist(torch, env):
    """pytorch/examples mnist_hogwild: share_memory(), train() / test() over DataLoaders,
    one process here."""
    nn, F = torch.nn, torch.nn.functional
    DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, kernel_size=3)
            self.conv2 = nn.Conv2d(4, 8, kernel_size=3)
            self.conv2_drop = nn.Dropout2d(0.0)
            self.fc1 = nn.Linear(8 * 2 * 2, 16)
            self.fc2 = nn.Linear(16, 10)

        def forward(self, x):
            x = F.relu(F.max_pool2d(self.conv1(x), 2))
            x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
            x = x.view(-1, 32)
            x = F.relu(self.fc1(x))
            x = F.dropout(x, p=0.0, training=self.training)
            x = self.fc2(x)
            return F.log_softmax(x, dim=1)

    model = env.init(Net())
    model.share_memory()
    data = TensorDataset(env.randn(24, 1, 14, 14), env.randint(0, 10, (24,)))
    train_loader = DataLoader(data, batch_size=8, shuffle=False)
    test_loader = DataLoader(data, batch_size=12)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.5)

    def train_step(data, target):
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        return loss

    train_step = env.step(train_step)
    for epoch in range(2):
        model.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            loss = train_step(data, target)
            env.rec(f"loss {epoch} {batch_idx}", loss.item())
        model.eval()
        test_loss, correct = 0, 0
        with torch.no_grad():
            for data, target in test_loader:
                output = model(data)
                test_loss += F.nll_loss(output, target, reduction='sum').item()
                pred = output.max(1)[1]
                correct += pred.eq(target.view_as(pred)).sum().item()
        env.rec(f"test {epoch}", (test_loss / len(test_loader.dataset), correct))
    env.rec("state", dict(model.state_dict()))


def forward_forward(torch, env):
    """pytorch/examples mnist_forward_forward: each layer trained alone on its goodness."""
    nn = torch.nn

    class Layer(nn.Linear):
        def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
            super().__init__(in_features, out_features, bias, device, dtype)
            self.relu = torch.nn.ReLU()
            self.opt = torch.optim.Adam(self.parameters(), lr=0.03)
            self.threshold = 2.0
            self.num_epochs = 3

        def forward(self, x):
            x_direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
            return self.relu(torch.mm(x_direction, self.weight.T) + self.bias.unsqueeze(0))

        def train_step(self, x_pos, x_neg):
            g_pos = self.forward(x_pos).pow(2).mean(1)
            g_neg = self.forward(x_neg).pow(2).mean(1)
            loss = torch.log(1 + torch.exp(torch.cat([
                -g_pos + self.threshold, g_neg - self.threshold]))).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            return loss

        def train(self, x_pos, x_neg):
            step = env.step(self.train_step)
            for i in range(self.num_epochs):
                loss = step(x_pos, x_neg)
                env.rec(f"layer loss {i}", loss.item())
            return self.forward(x_pos).detach(), self.forward(x_neg).detach()

    class Net(torch.nn.Module):
        def __init__(self, dims):
            super().__init__()
            self.layers = [env.init(Layer(dims[d], dims[d + 1])) for d in range(len(dims) - 1)]

        def predict(self, x):
            goodness_per_label = []
            for label in range(4):
                h = overlay_y_on_x(x, label)
                goodness = []
                for layer in self.layers:
                    h = layer(h)
                    goodness += [h.pow(2).mean(1)]
                goodness_per_label += [sum(goodness).unsqueeze(1)]
            goodness_per_label = torch.cat(goodness_per_label, 1)
            return goodness_per_label.argmax(1)

        def train(self, x_pos, x_neg):
            h_pos, h_neg = x_pos, x_neg
            for i, layer in enumerate(self.layers):
                h_pos, h_neg = layer.train(h_pos, h_neg)

    def overlay_y_on_x(x, y):
        x_ = x.clone()
        x_[:, :4] *= 0.0
        x_[range(x.shape[0]), y] = x.max()
        return x_

    x, y = env.rand(16, 20), env.randint(0, 4, (16,))
    net = Net([20, 12, 12])
    x_pos = overlay_y_on_x(x, y)
    rnd = torch.tensor([int(i) for i in env.randint(0, 16, (16,))])
    x_neg = overlay_y_on_x(x, y[rnd])
    net.train(x_pos, x_neg)
    env.rec("train error", 1.0 - net.predict(x).eq(y).float().mean().item())
    env.rec("weights", [layer.weight for layer in net.layers])


def poly_regression(torch, env):
    """pytorch/examples regression: poly features, fc.zero_grad(), param.data.add_."""
    F = torch.nn.functional
    POLY_DEGREE = 4
    W_target = env.randn(POLY_DEGREE, 1) * 5
    b_target = env.randn(1) * 5

    def make_features(x):
        x = x.unsqueeze(1)
        return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)

    def f(x):
        return x.mm(W_target) + b_target.item()

    def get_batch(batch_size=16):
        random = env.randn(batch_size)
        x = make_features(random)
        y = f(x)
        return x, y

    fc = env.init(torch.nn.Linear(W_target.size(0), 1))

    def step(batch_x, batch_y):
        fc.zero_grad()
        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()
        output.backward()
        for param in fc.parameters():
            param.data.add_(-0.01 * param.grad)
        return loss

    step = env.step(step)
    for batch_idx in range(6):
        batch_x, batch_y = get_batch()
        loss = step(batch_x, batch_y)
        env.rec(f"loss {batch_idx}", loss)
    env.rec("weights", (fc.weight.view(-1), fc.bias))


def gru_scratch(torch, env):
    """d2l.ai 'GRU from scratch': parameter list, begin_state, grad_clipping by the global
    norm, manual sgd, state.detach_() between batches."""
    F = torch.nn.functional
    vocab_size, num_hiddens = 10, 16

    def three(i):
        return (env.randn(vocab_size, num_hiddens, scale=0.01).requires_grad_(),
                env.randn(num_hiddens, num_hiddens, scale=0.01).requires_grad_(),
                torch.zeros(num_hiddens, requires_grad=True))

    W_xz, W_hz, b_z = three(0)
    W_xr, W_hr, b_r = three(1)
    W_xh, W_hh, b_h = three(2)
    W_hq = env.randn(num_hiddens, vocab_size, scale=0.01).requires_grad_()
    b_q = torch.zeros(vocab_size, requires_grad=True)
    params = [W_xz, W_hz, b_z, W_xr, W_hr, b_r, W_xh, W_hh, b_h, W_hq, b_q]

    def gru(inputs, state, params):
        W_xz, W_hz, b_z, W_xr, W_hr, b_r, W_xh, W_hh, b_h, W_hq, b_q = params
        H, = state
        outputs = []
        for X in inputs:
            Z = torch.sigmoid((X @ W_xz) + (H @ W_hz) + b_z)
            R = torch.sigmoid((X @ W_xr) + (H @ W_hr) + b_r)
            H_tilda = torch.tanh((X @ W_xh) + ((R * H) @ W_hh) + b_h)
            H = Z * H + (1 - Z) * H_tilda
            Y = H @ W_hq + b_q
            outputs.append(Y)
        return torch.cat(outputs, dim=0), (H,)

    def grad_clipping(params, theta):
        norm = torch.sqrt(sum(torch.sum((p.grad ** 2)) for p in params))
        if norm > theta:
            for param in params:
                param.grad[:] *= theta / norm

    def sgd(params, lr, batch_size):
        with torch.no_grad():
            for param in params:
                param -= lr * param.grad / batch_size
                param.grad.zero_()

    def train_step(X, Y, state):
        for s in state:
            s.detach_()
        y = Y.T.reshape(-1)
        y_hat, state = gru(F.one_hot(X.T, vocab_size).type(torch.float32), state, params)
        l = F.cross_entropy(y_hat, y.long()).mean()
        l.backward()
        grad_clipping(params, 1)
        sgd(params, lr=1.0, batch_size=1)
        return l * y.numel(), state

    train_step = env.step(train_step)
    state = (torch.zeros((4, num_hiddens)),)
    corpus = env.randint(0, vocab_size, (6, 4, 6))
    for i in range(6):
        X, Y = corpus[i][:, :5], corpus[i][:, 1:]
        l, state = train_step(X, Y, state)
        env.rec(f"ppl {i}", math.exp(l.item() / Y.numel()))
    env.rec("params", params)


def batchnorm_scratch(torch, env):
    """d2l.ai 'Batch Normalization from scratch': moving stats rebound on the module,
    torch.is_grad_enabled() choosing the branch, LeNet with it, SGD, eval under no_grad."""
    nn = torch.nn

    def batch_norm(X, gamma, beta, moving_mean, moving_var, eps, momentum):
        if not torch.is_grad_enabled():
            X_hat = (X - moving_mean) / torch.sqrt(moving_var + eps)
        else:
            assert len(X.shape) in (2, 4)
            if len(X.shape) == 2:
                mean = X.mean(dim=0)
                var = ((X - mean) ** 2).mean(dim=0)
            else:
                mean = X.mean(dim=(0, 2, 3), keepdim=True)
                var = ((X - mean) ** 2).mean(dim=(0, 2, 3), keepdim=True)
            X_hat = (X - mean) / torch.sqrt(var + eps)
            moving_mean = (1.0 - momentum) * moving_mean + momentum * mean
            moving_var = (1.0 - momentum) * moving_var + momentum * var
        Y = gamma * X_hat + beta
        return Y, moving_mean.data, moving_var.data

    class BatchNorm(nn.Module):
        def __init__(self, num_features, num_dims):
            super().__init__()
            shape = (1, num_features) if num_dims == 2 else (1, num_features, 1, 1)
            self.gamma = nn.Parameter(torch.ones(shape))
            self.beta = nn.Parameter(torch.zeros(shape))
            self.moving_mean = torch.zeros(shape)
            self.moving_var = torch.ones(shape)

        def forward(self, X):
            if self.moving_mean.device != X.device:
                self.moving_mean = self.moving_mean.to(X.device)
                self.moving_var = self.moving_var.to(X.device)
            Y, self.moving_mean, self.moving_var = batch_norm(
                X, self.gamma, self.beta, self.moving_mean,
                self.moving_var, eps=1e-5, momentum=0.1)
            return Y

    net = env.init(nn.Sequential(
        nn.Conv2d(1, 4, kernel_size=5), BatchNorm(4, num_dims=4), nn.Sigmoid(),
        nn.AvgPool2d(kernel_size=2, stride=2),
        nn.Flatten(), nn.Linear(4 * 4 * 4, 12), BatchNorm(12, num_dims=2), nn.Sigmoid(),
        nn.Linear(12, 10)))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.5)   # (d2l's train_ch6)
    loss = nn.CrossEntropyLoss()

    def train_step(X, y):
        optimizer.zero_grad()
        y_hat = net(X)
        l = loss(y_hat, y)
        l.backward()
        optimizer.step()
        return l

    train_step = env.step(train_step)
    X, y = env.randn(8, 1, 12, 12), env.randint(0, 10, (8,))
    for i in range(4):
        env.rec(f"loss {i}", train_step(X, y).item())
        env.rec(f"moving {i}", (net[1].moving_mean, net[6].moving_mean))
    net.eval()
    with torch.no_grad():
        env.rec("eval", net(X))
    env.rec("moving", (net[1].moving_mean, net[1].moving_var, net[6].moving_var))


def densenet(torch, env):
    """d2l.ai DenseNet: conv_block / DenseBlock cat, transition_block, SGD with a
    StepLR, accuracy under torch.no_grad()."""
    nn = torch.nn

    def conv_block(num_channels):
        return nn.Sequential(nn.LazyBatchNorm2d(), nn.ReLU(),
                             nn.LazyConv2d(num_channels, kernel_size=3, padding=1))

    class DenseBlock(nn.Module):
        def __init__(self, num_convs, num_channels):
            super(DenseBlock, self).__init__()
            layer = []
            for i in range(num_convs):
                layer.append(conv_block(num_channels))
            self.net = nn.Sequential(*layer)

        def forward(self, X):
            for blk in self.net:
                Y = blk(X)
                X = torch.cat((X, Y), dim=1)
            return X

    def transition_block(num_channels):
        return nn.Sequential(
            nn.LazyBatchNorm2d(), nn.ReLU(),
            nn.LazyConv2d(num_channels, kernel_size=1),
            nn.AvgPool2d(kernel_size=2, stride=2))

    net = nn.Sequential(
        nn.Sequential(nn.LazyConv2d(8, kernel_size=3, padding=1), nn.LazyBatchNorm2d(),
                      nn.ReLU(), nn.MaxPool2d(kernel_size=3, stride=2, padding=1)),
        DenseBlock(2, 4), transition_block(8), DenseBlock(2, 4),
        nn.LazyBatchNorm2d(), nn.ReLU(), nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(),
        nn.LazyLinear(10))
    X, y = env.randn(6, 1, 16, 16), env.randint(0, 10, (6,))
    net(X)
    env.init(net)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    loss_fn = nn.CrossEntropyLoss()

    def train_step(X, y):
        optimizer.zero_grad()
        l = loss_fn(net(X), y)
        l.backward()
        optimizer.step()
        return l

    train_step = env.step(train_step)
    for epoch in range(4):
        net.train()
        env.rec(f"loss {epoch}", train_step(X, y).item())
        scheduler.step()
        net.eval()
        with torch.no_grad():
            acc = (net(X).argmax(1) == y).float().mean().item()
        env.rec(f"acc {epoch}", acc)
    env.rec("lr", scheduler.get_last_lr())
    env.rec("state", dict(net.state_dict()))
