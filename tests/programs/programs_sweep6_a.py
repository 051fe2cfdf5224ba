"""The classic convolutional networks of Dive into Deep Learning, small: LeNet (sigmoids and
average pooling, d2l's Accumulator and accuracy helpers, the layer-by-layer shape walk);
AlexNet (LocalResponseNorm, overlapping max pooling, dropout); VGG blocks and NiN blocks (1x1
convolutions, a global average pool); a GoogLeNet Inception block; DenseNet (dense blocks
concatenating channels, transition blocks, batch norm in train and eval); a MobileNet-style
network (depthwise separable convolutions, squeeze-and-excitation, channel shuffle, ReLU6,
Hardswish). Programs `f(torch, env)`, see tutorial_harness.py."""


class Accumulator:
    """d2l's: sums n quantities."""

    def __init__(self, n):
        self.data = [0.0] * n

    def add(self, *args):
        self.data = [a + float(b) for a, b in zip(self.data, args)]

    def __getitem__(self, idx):
        return self.data[idx]


def accuracy(y_hat, y):
    """d2l's: the number of correct predictions."""
    if len(y_hat.shape) > 1 and y_hat.shape[1] > 1:
        y_hat = y_hat.argmax(axis=1)
    cmp = y_hat.type(y.dtype) == y
    return float(cmp.type(y.dtype).sum())


def evaluate_accuracy(torch, net, data_iter):
    if isinstance(net, torch.nn.Module):
        net.eval()
        device = next(iter(net.parameters())).device
    metric = Accumulator(2)
    with torch.no_grad():
        for X, y in data_iter:
            X, y = X.to(device), y.to(device)
            metric.add(accuracy(net(X), y), y.numel())
    return metric[0] / metric[1]


def _train_ch6(torch, env, net, batches, test_batches, lr, epochs, optimizer=None):
    """d2l's train_ch6, with the batch step compiled."""
    nn = torch.nn

    def init_weights(m):
        if type(m) == nn.Linear or type(m) == nn.Conv2d:
            nn.init.xavier_uniform_(m.weight)

    net.apply(init_weights)
    env.init(net)
    optimizer = optimizer or torch.optim.SGD(net.parameters(), lr=lr)
    loss = nn.CrossEntropyLoss()

    def train_batch(X, y):
        optimizer.zero_grad()
        y_hat = net(X)
        l = loss(y_hat, y)
        l.backward()
        optimizer.step()
        with torch.no_grad():
            return l * X.shape[0], accuracy(y_hat, y), X.shape[0]

    train_batch = env.step(train_batch)
    for epoch in range(epochs):
        metric = Accumulator(3)
        net.train()
        for X, y in batches:
            metric.add(*train_batch(X, y))
        env.rec(f"epoch {epoch}", (metric[0] / metric[2], metric[1] / metric[2]))
        env.rec(f"test acc {epoch}", evaluate_accuracy(torch, net, test_batches))
    return net


def _image_batches(env, n, shape, classes):
    return [(env.randn(4, *shape), env.randint(0, classes, (4,))) for _ in range(n)]


def lenet(torch, env):
    nn = torch.nn
    net = nn.Sequential(
        nn.Conv2d(1, 6, kernel_size=5, padding=2), nn.Sigmoid(),
        nn.AvgPool2d(kernel_size=2, stride=2),
        nn.Conv2d(6, 16, kernel_size=5), nn.Sigmoid(),
        nn.AvgPool2d(kernel_size=2, stride=2),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120), nn.Sigmoid(),
        nn.Linear(120, 84), nn.Sigmoid(),
        nn.Linear(84, 10))
    X = torch.rand(size=(1, 1, 28, 28), dtype=torch.float32)
    shapes = []
    for layer in net:
        X = layer(X)
        shapes.append((layer.__class__.__name__, tuple(X.shape)))
    env.rec("shapes", shapes)
    batches = _image_batches(env, 3, (1, 28, 28), 10)
    _train_ch6(torch, env, net, batches, batches[:2], lr=0.9, epochs=2)
    env.rec("weights", [p for p in net.parameters()])


def alexnet(torch, env):
    nn = torch.nn
    net = nn.Sequential(
        nn.Conv2d(1, 8, kernel_size=5, stride=2, padding=1), nn.ReLU(),
        nn.LocalResponseNorm(size=3, alpha=1e-3, beta=0.75, k=2.0),
        nn.MaxPool2d(kernel_size=3, stride=2),
        nn.Conv2d(8, 16, kernel_size=3, padding=2), nn.ReLU(),
        nn.MaxPool2d(kernel_size=3, stride=2),
        nn.Conv2d(16, 16, kernel_size=3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 12, kernel_size=3, padding=1), nn.ReLU(),
        nn.MaxPool2d(kernel_size=3, stride=2), nn.Flatten(),
        nn.Linear(12 * 2 * 2, 32), nn.ReLU(), nn.Dropout(p=0.5),
        nn.Linear(32, 10))
    env.init(net)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    X, y = env.randn(6, 1, 40, 40), env.randint(0, 10, (6,))
    net.eval()
    with torch.no_grad():
        env.rec("eval before", net(X))
    net.train()

    def step(X, y):
        optimizer.zero_grad()
        l = loss_fn(net(X), y)
        l.backward()
        optimizer.step()
        return l.item()

    step = env.step(step)
    env.rec("train losses", [step(X, y) for _ in range(3)], cross=False)
    net.eval()
    with torch.no_grad():
        env.rec("eval after", net(X), cross=False)
        # (LocalResponseNorm alone, against torch)
        lrn = nn.LocalResponseNorm(2)
        env.rec("lrn", lrn(X[:, :, :4, :4].repeat(1, 5, 1, 1) * 3))
        env.rec("lrn 3d", lrn(X[:2, 0, :5, :6]))


def vgg_nin(torch, env):
    nn = torch.nn

    def vgg_block(num_convs, in_channels, out_channels):
        layers = []
        for _ in range(num_convs):
            layers.append(nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1))
            layers.append(nn.ReLU())
            in_channels = out_channels
        layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
        return nn.Sequential(*layers)

    def vgg(conv_arch):
        conv_blks = []
        in_channels = 1
        for (num_convs, out_channels) in conv_arch:
            conv_blks.append(vgg_block(num_convs, in_channels, out_channels))
            in_channels = out_channels
        return nn.Sequential(*conv_blks, nn.Flatten(),
                             nn.Linear(out_channels * 4 * 4, 32), nn.ReLU(),
                             nn.Linear(32, 10))

    def nin_block(in_channels, out_channels, kernel_size, strides, padding):
        return nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size, strides, padding), nn.ReLU(),
            nn.Conv2d(out_channels, out_channels, kernel_size=1), nn.ReLU(),
            nn.Conv2d(out_channels, out_channels, kernel_size=1), nn.ReLU())

    nin = nn.Sequential(
        nin_block(1, 8, kernel_size=5, strides=2, padding=2),
        nn.MaxPool2d(3, stride=2),
        nin_block(8, 16, kernel_size=3, strides=1, padding=1),
        nn.MaxPool2d(3, stride=2),
        nin_block(16, 10, kernel_size=3, strides=1, padding=1),
        nn.AdaptiveAvgPool2d((1, 1)),
        nn.Flatten())
    batches = _image_batches(env, 2, (1, 16, 16), 10)
    net = vgg(((1, 8), (2, 16)))
    _train_ch6(torch, env, net, batches, batches, lr=0.05, epochs=2,
               optimizer=torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9,
                                         weight_decay=5e-4))
    _train_ch6(torch, env, nin, batches, batches, lr=0.1, epochs=2)
    env.rec("nin out", nin(batches[0][0]))


def googlenet(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class Inception(nn.Module):
        def __init__(self, in_channels, c1, c2, c3, c4, **kwargs):
            super(Inception, self).__init__(**kwargs)
            self.p1_1 = nn.Conv2d(in_channels, c1, kernel_size=1)
            self.p2_1 = nn.Conv2d(in_channels, c2[0], kernel_size=1)
            self.p2_2 = nn.Conv2d(c2[0], c2[1], kernel_size=3, padding=1)
            self.p3_1 = nn.Conv2d(in_channels, c3[0], kernel_size=1)
            self.p3_2 = nn.Conv2d(c3[0], c3[1], kernel_size=5, padding=2)
            self.p4_1 = nn.MaxPool2d(kernel_size=3, stride=1, padding=1)
            self.p4_2 = nn.Conv2d(in_channels, c4, kernel_size=1)

        def forward(self, x):
            p1 = F.relu(self.p1_1(x))
            p2 = F.relu(self.p2_2(F.relu(self.p2_1(x))))
            p3 = F.relu(self.p3_2(F.relu(self.p3_1(x))))
            p4 = F.relu(self.p4_2(self.p4_1(x)))
            return torch.cat((p1, p2, p3, p4), dim=1)

    b1 = nn.Sequential(nn.Conv2d(1, 8, kernel_size=7, stride=2, padding=3), nn.ReLU(),
                       nn.MaxPool2d(kernel_size=3, stride=2, padding=1))
    b2 = nn.Sequential(Inception(8, 4, (4, 8), (2, 4), 4),
                       Inception(20, 8, (4, 8), (2, 4), 4),
                       nn.MaxPool2d(kernel_size=3, stride=2, padding=1))
    net = nn.Sequential(b1, b2, nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(24, 10))
    batches = _image_batches(env, 2, (1, 24, 24), 10)
    net = _train_ch6(torch, env, net, batches, batches, lr=0.0, epochs=2,
                     optimizer=torch.optim.Adam(net.parameters(), lr=1e-2))
    env.rec("grads", [p.grad for p in net.parameters()])


def densenet(torch, env):
    nn = torch.nn

    def conv_block(input_channels, num_channels):
        return nn.Sequential(nn.BatchNorm2d(input_channels), nn.ReLU(),
                             nn.Conv2d(input_channels, num_channels, kernel_size=3, padding=1))

    class DenseBlock(nn.Module):
        def __init__(self, num_convs, input_channels, num_channels):
            super(DenseBlock, self).__init__()
            layer = []
            for i in range(num_convs):
                layer.append(conv_block(num_channels * i + input_channels, num_channels))
            self.net = nn.Sequential(*layer)

        def forward(self, X):
            for blk in self.net:
                Y = blk(X)
                X = torch.cat((X, Y), dim=1)
            return X

    def transition_block(input_channels, num_channels):
        return nn.Sequential(nn.BatchNorm2d(input_channels), nn.ReLU(),
                             nn.Conv2d(input_channels, num_channels, kernel_size=1),
                             nn.AvgPool2d(kernel_size=2, stride=2))

    blk = DenseBlock(2, 3, 10)
    X = env.randn(4, 3, 8, 8)
    env.rec("block shape", tuple(blk(X).shape))
    b1 = nn.Sequential(nn.Conv2d(1, 8, kernel_size=3, stride=1, padding=1),
                       nn.BatchNorm2d(8), nn.ReLU(),
                       nn.MaxPool2d(kernel_size=3, stride=2, padding=1))
    num_channels, growth_rate = 8, 4
    blks = []
    for i, num_convs in enumerate([2, 2]):
        blks.append(DenseBlock(num_convs, num_channels, growth_rate))
        num_channels += num_convs * growth_rate
        if i != 1:
            blks.append(transition_block(num_channels, num_channels // 2))
            num_channels = num_channels // 2
    net = nn.Sequential(b1, *blks, nn.BatchNorm2d(num_channels), nn.ReLU(),
                        nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(),
                        nn.Linear(num_channels, 10))
    batches = _image_batches(env, 3, (1, 16, 16), 10)
    _train_ch6(torch, env, net, batches, batches[:1], lr=0.1, epochs=2)
    env.rec("running stats", [b for name, b in net.named_buffers()])
    X = batches[0][0]
    net.eval()
    with torch.no_grad():
        ev = net(X)
    net.train()
    with torch.no_grad():
        tr = net(X)
    env.rec("eval vs train", (ev, tr, (ev - tr).abs().max() > 0))


def mobilenet(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class SqueezeExcitation(nn.Module):
        def __init__(self, channels, squeeze):
            super().__init__()
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc1 = nn.Conv2d(channels, squeeze, 1)
            self.fc2 = nn.Conv2d(squeeze, channels, 1)

        def forward(self, x):
            scale = self.avgpool(x)
            scale = self.fc2(F.relu(self.fc1(scale), inplace=True))
            return x * F.hardsigmoid(scale, inplace=True)

    class InvertedResidual(nn.Module):
        def __init__(self, inp, hidden, out, stride):
            super().__init__()
            self.use_res_connect = stride == 1 and inp == out
            self.block = nn.Sequential(
                nn.Conv2d(inp, hidden, 1, bias=False), nn.BatchNorm2d(hidden),
                nn.Hardswish(inplace=True),
                nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
                nn.BatchNorm2d(hidden), nn.ReLU6(inplace=True),
                SqueezeExcitation(hidden, max(hidden // 4, 2)),
                nn.ChannelShuffle(2),
                nn.Conv2d(hidden, out, 1, bias=False), nn.BatchNorm2d(out))

        def forward(self, x):
            if self.use_res_connect:
                return x + self.block(x)
            return self.block(x)

    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8, momentum=None),
        nn.Hardswish(),
        InvertedResidual(8, 16, 8, 1), InvertedResidual(8, 24, 12, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Dropout(0.0), nn.Linear(12, 5))
    env.init(net)
    optimizer = torch.optim.RMSprop(net.parameters(), lr=1e-3, alpha=0.9, eps=1e-3,
                                    momentum=0.9, weight_decay=1e-5)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

    def step(x, y):
        optimizer.zero_grad(set_to_none=True)
        out = net(x)
        loss = criterion(out, y)
        loss.backward()
        optimizer.step()
        return loss.item(), (out.argmax(1) == y).sum().item()

    step = env.step(step)
    x, y = env.randn(6, 3, 16, 16), env.randint(0, 5, (6,))
    for i in range(3):
        env.rec(f"step {i}", step(x, y))
    env.rec("bn0", (net[1].running_mean, net[1].running_var, net[1].num_batches_tracked))
    net.eval()
    with torch.no_grad():
        env.rec("eval", F.softmax(net(x), dim=1))
    env.rec("shuffle", nn.ChannelShuffle(3)(torch.arange(24.0).reshape(1, 6, 2, 2)))
