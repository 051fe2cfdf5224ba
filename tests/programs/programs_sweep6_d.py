"""Generative and from-scratch programs: a conditional VAE (one-hot labels concatenated to the
encoder's and decoder's inputs, BCE + KL, sampling per class); a conditional DCGAN on 16x16
(label embeddings as extra channels, ConvTranspose2d, BCEWithLogits, two optimisers); a
SegNet-style autoencoder (MaxPool2d(return_indices=True) and MaxUnpool2d); a CycleGAN-style
residual generator (ReflectionPad2d, InstanceNorm2d, LSGAN's MSE, an identity loss); d2l's
convolution by hand (corr2d, learning an edge kernel) and im2col convolution with F.unfold /
F.fold; d2l's batch normalisation from scratch (moving averages updated in the module,
torch.is_grad_enabled picks the branch); softmax regression from scratch (the
y_hat[range(n), y] cross entropy, d2l's updater); linear regression by minibatch SGD checked
against torch.linalg.lstsq. Programs `f(torch, env)`, see tutorial_harness.py."""
import itertools


def conditional_vae(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    x_dim, n_cls, z_dim = 16, 3, 2

    class CVAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(x_dim + n_cls, 24)
            self.fc21 = nn.Linear(24, z_dim)
            self.fc22 = nn.Linear(24, z_dim)
            self.fc3 = nn.Linear(z_dim + n_cls, 24)
            self.fc4 = nn.Linear(24, x_dim)

        def encode(self, x, c):
            h1 = F.relu(self.fc1(torch.cat([x, c], 1)))
            return self.fc21(h1), self.fc22(h1)

        def reparameterize(self, mu, logvar, eps):
            std = torch.exp(0.5 * logvar)
            return mu + eps * std

        def decode(self, z, c):
            h3 = F.relu(self.fc3(torch.cat([z, c], 1)))
            return torch.sigmoid(self.fc4(h3))

        def forward(self, x, c, eps):
            mu, logvar = self.encode(x.view(-1, x_dim), c)
            z = self.reparameterize(mu, logvar, eps)
            return self.decode(z, c), mu, logvar

    def loss_function(recon_x, x, mu, logvar):
        BCE = F.binary_cross_entropy(recon_x, x.view(-1, x_dim), reduction="sum")
        KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return BCE + KLD, BCE, KLD

    model = env.init(CVAE())
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    x = (env.rand(8, 4, 4) > 0.5).float()
    labels = env.randint(0, n_cls, (8,))
    c = F.one_hot(labels, n_cls).float()

    def train_step(x, c, eps):
        model.train()
        optimizer.zero_grad()
        recon, mu, logvar = model(x, c, eps)
        loss, bce, kld = loss_function(recon, x, mu, logvar)
        loss.backward()
        optimizer.step()
        return loss.item() / len(x), bce.item(), kld.item()

    train_step = env.step(train_step)
    for epoch in range(4):
        env.rec(f"epoch {epoch}", train_step(x, c, env.randn(8, z_dim)))
    model.eval()
    with torch.no_grad():
        z = env.randn(n_cls, z_dim)
        sample = model.decode(z, torch.eye(n_cls))
        env.rec("samples", sample.view(n_cls, 1, 4, 4))


def conditional_dcgan(torch, env):
    nn, optim = torch.nn, torch.optim
    nz, n_cls, ngf, ndf = 6, 3, 8, 8

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.label_emb = nn.Embedding(n_cls, n_cls)
            self.main = nn.Sequential(
                nn.ConvTranspose2d(nz + n_cls, ngf * 2, 4, 1, 0, bias=False),
                nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ngf), nn.ReLU(True),
                nn.ConvTranspose2d(ngf, 1, 4, 2, 1, bias=False), nn.Tanh())

        def forward(self, noise, labels):
            c = self.label_emb(labels)[:, :, None, None]
            return self.main(torch.cat([noise, c], 1))

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.label_emb = nn.Embedding(n_cls, 16 * 16)
            self.main = nn.Sequential(
                nn.Conv2d(2, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False))

        def forward(self, img, labels):
            c = self.label_emb(labels).view(-1, 1, 16, 16)
            return self.main(torch.cat([img, c], 1)).view(-1)

    netG, netD = env.init(Generator()), env.init(Discriminator())
    criterion = nn.BCEWithLogitsLoss()
    optimizerD = optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real_label, fake_label = 1.0, 0.0

    def train_step(real, labels, noise):
        b = real.size(0)
        netD.zero_grad()
        label = torch.full((b,), real_label, dtype=torch.float)
        errD_real = criterion(netD(real, labels), label)
        errD_real.backward()
        fake = netG(noise, labels)
        label.fill_(fake_label)
        output = netD(fake.detach(), labels)
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = torch.sigmoid(output).mean().item()
        optimizerD.step()
        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake, labels)
        errG = criterion(output, label)
        errG.backward()
        optimizerG.step()
        return (errD_real + errD_fake).item(), errG.item(), D_G_z1

    train_step = env.step(train_step)
    real = env.rand(4, 1, 16, 16) * 2 - 1
    labels = env.randint(0, n_cls, (4,))
    for it in range(3):
        env.rec(f"it {it}", train_step(real, labels, env.randn(4, nz, 1, 1)))
    netG.eval()
    with torch.no_grad():
        env.rec("fixed", netG(env.randn(3, nz, 1, 1), torch.arange(n_cls)))


def segnet_unpool(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class SegNetLite(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.BatchNorm2d(6),
                                     nn.ReLU())
            self.pool = nn.MaxPool2d(2, stride=2, return_indices=True)
            self.unpool = nn.MaxUnpool2d(2, stride=2)
            self.dec = nn.Conv2d(6, 3, 3, padding=1)

        def forward(self, x):
            h = self.enc(x)
            size = h.size()
            p, idx = self.pool(h)
            u = self.unpool(p, idx, output_size=size)
            return self.dec(u), idx

    model = env.init(SegNetLite())
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    x, mask = env.randn(3, 1, 8, 8), env.randint(0, 3, (3, 8, 8))

    def train_step(x, mask):
        optimizer.zero_grad()
        logits, idx = model(x)
        loss = F.cross_entropy(logits, mask)
        loss.backward()
        optimizer.step()
        pred = logits.argmax(1)
        inter = ((pred == 1) & (mask == 1)).sum()
        union = ((pred == 1) | (mask == 1)).sum()
        return loss.item(), (inter.float() / union.clamp(min=1)).item(), idx

    train_step = env.step(train_step)
    for it in range(3):
        env.rec(f"it {it}", train_step(x, mask))
    t = env.randn(1, 2, 5, 5)
    p, i = F.max_pool2d(t, 2, return_indices=True)
    env.rec("unpool", (F.max_unpool2d(p, i, 2), F.max_unpool2d(p, i, 2, output_size=(5, 5))))
    env.rec("unpool 1d", nn.MaxUnpool1d(2)(*nn.MaxPool1d(2, return_indices=True)(t[0])))


def cyclegan_generator(torch, env):
    nn, optim = torch.nn, torch.optim

    class ResidualBlock(nn.Module):
        def __init__(self, in_features):
            super().__init__()
            self.block = nn.Sequential(
                nn.ReflectionPad2d(1), nn.Conv2d(in_features, in_features, 3),
                nn.InstanceNorm2d(in_features), nn.ReLU(inplace=True),
                nn.ReflectionPad2d(1), nn.Conv2d(in_features, in_features, 3),
                nn.InstanceNorm2d(in_features))

        def forward(self, x):
            return x + self.block(x)

    class GeneratorResNet(nn.Module):
        def __init__(self, channels=3, features=8, n_res=2):
            super().__init__()
            model = [nn.ReflectionPad2d(2), nn.Conv2d(channels, features, 5),
                     nn.InstanceNorm2d(features, affine=True), nn.ReLU(inplace=True),
                     nn.Conv2d(features, features * 2, 3, stride=2, padding=1),
                     nn.InstanceNorm2d(features * 2), nn.ReLU(inplace=True)]
            model += [ResidualBlock(features * 2) for _ in range(n_res)]
            model += [nn.Upsample(scale_factor=2), nn.Conv2d(features * 2, features, 3,
                                                             padding=1, padding_mode="reflect"),
                      nn.InstanceNorm2d(features), nn.ReLU(inplace=True),
                      nn.ReplicationPad2d(1), nn.Conv2d(features, channels, 3), nn.Tanh()]
            self.model = nn.Sequential(*model)

        def forward(self, x):
            return self.model(x)

    G_AB, G_BA = env.init(GeneratorResNet()), env.init(GeneratorResNet())
    D_B = env.init(nn.Sequential(nn.Conv2d(3, 8, 4, 2, 1), nn.LeakyReLU(0.2),
                                 nn.ZeroPad2d((1, 0, 1, 0)), nn.Conv2d(8, 1, 4, padding=1)))
    criterion_GAN, criterion_cycle, criterion_identity = nn.MSELoss(), nn.L1Loss(), nn.L1Loss()
    optimizer_G = optim.Adam(itertools.chain(G_AB.parameters(), G_BA.parameters()), lr=2e-4,
                             betas=(0.5, 0.999))
    optimizer_D = optim.Adam(D_B.parameters(), lr=2e-4, betas=(0.5, 0.999))
    lr_lambda = lambda epoch: 1.0 - max(0, epoch - 1) / 3
    sched_G = optim.lr_scheduler.LambdaLR(optimizer_G, lr_lambda=lr_lambda)

    def train_step(real_A, real_B):
        G_AB.train()
        G_BA.train()
        optimizer_G.zero_grad()
        loss_identity = criterion_identity(G_AB(real_B), real_B)
        fake_B = G_AB(real_A)
        pred = D_B(fake_B)
        loss_GAN = criterion_GAN(pred, torch.ones_like(pred))
        loss_cycle = criterion_cycle(G_BA(fake_B), real_A)
        loss_G = loss_GAN + 10.0 * loss_cycle + 5.0 * loss_identity
        loss_G.backward()
        optimizer_G.step()
        optimizer_D.zero_grad()
        pred_real, pred_fake = D_B(real_B), D_B(fake_B.detach())
        loss_D = (criterion_GAN(pred_real, torch.ones_like(pred_real)) +
                  criterion_GAN(pred_fake, torch.zeros_like(pred_fake))) / 2
        loss_D.backward()
        optimizer_D.step()
        return loss_G.item(), loss_D.item(), loss_cycle.item()

    train_step = env.step(train_step)
    real_A, real_B = env.rand(2, 3, 8, 8) * 2 - 1, env.rand(2, 3, 8, 8) * 2 - 1
    for epoch in range(3):
        env.rec(f"epoch {epoch}", (train_step(real_A, real_B), sched_G.get_last_lr()))
        sched_G.step()
    with torch.no_grad():
        env.rec("fake", G_AB(real_A))
    env.rec("pads", (nn.ReflectionPad2d((1, 2, 0, 1))(real_A[:1, :1, :3, :3]),
                     nn.ReplicationPad1d(2)(real_A[0, :, 0])))


def conv_by_hand(torch, env):
    nn, F = torch.nn, torch.nn.functional

    def corr2d(X, K):
        h, w = K.shape
        Y = torch.zeros((X.shape[0] - h + 1, X.shape[1] - w + 1))
        for i in range(Y.shape[0]):
            for j in range(Y.shape[1]):
                Y[i, j] = (X[i:i + h, j:j + w] * K).sum()
        return Y

    X = torch.ones((6, 8))
    X[:, 2:6] = 0
    K = torch.tensor([[1.0, -1.0]])
    Y = corr2d(X, K)
    env.rec("edges", (Y, corr2d(X.t(), K)))

    conv2d = nn.Conv2d(1, 1, kernel_size=(1, 2), bias=False)
    env.init(conv2d)
    X4, Y4 = X.reshape((1, 1, 6, 8)), Y.reshape((1, 1, 6, 7))
    lr = 3e-2

    def step(X, Y):
        Y_hat = conv2d(X)
        l = (Y_hat - Y) ** 2
        conv2d.zero_grad()
        l.sum().backward()
        conv2d.weight.data[:] -= lr * conv2d.weight.grad
        return l.sum().item()

    step = env.step(step)
    env.rec("learn kernel", [step(X4, Y4) for _ in range(6)])
    env.rec("kernel", conv2d.weight.data.reshape((1, 2)))

    # im2col: a convolution as unfold + matmul (+ fold back, the transposed direction)
    x = env.randn(2, 3, 6, 6, scale=1.0).requires_grad_()
    w = env.randn(4, 3, 3, 3).requires_grad_()

    def im2col_conv(x, w):
        cols = F.unfold(x, kernel_size=3, padding=1, stride=2)         # (N, C*9, L)
        out = (w.view(4, -1) @ cols).view(x.size(0), 4, 3, 3)
        ref = F.conv2d(x, w, padding=1, stride=2)
        folded = F.fold(cols, output_size=(6, 6), kernel_size=3, padding=1, stride=2)
        loss = out.pow(2).sum() + folded.mean()
        loss.backward()
        return out.detach(), ref.detach(), folded.detach()

    im2col_conv = env.step(im2col_conv)
    out, ref, folded = im2col_conv(x, w)
    env.rec("im2col", (out, (out - ref).abs().max() < 1e-4, folded, x.grad, w.grad))
    env.rec("modules", (nn.Unfold(2, dilation=2)(x.detach()).shape,
                        nn.Fold((4, 5), (2, 2))(env.randn(1, 8, 12))))


def batchnorm_scratch(torch, env):
    nn, F = torch.nn, torch.nn.functional

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
                X, self.gamma, self.beta, self.moving_mean, self.moving_var, eps=1e-5,
                momentum=0.1)
            return Y

    net = nn.Sequential(nn.Conv2d(1, 4, kernel_size=3), BatchNorm(4, num_dims=4),
                        nn.Sigmoid(), nn.AvgPool2d(kernel_size=2, stride=2), nn.Flatten(),
                        nn.Linear(4 * 3 * 3, 8), BatchNorm(8, num_dims=2), nn.Sigmoid(),
                        nn.Linear(8, 3))
    env.init(net)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.5)
    X, y = env.randn(5, 1, 8, 8), env.randint(0, 3, (5,))

    def step(X, y):
        optimizer.zero_grad()
        l = F.cross_entropy(net(X), y)
        l.backward()
        optimizer.step()
        return l.item()

    step = env.step(step)
    env.rec("losses", [step(X, y) for _ in range(3)])
    env.rec("moving", (net[1].moving_mean, net[1].moving_var, net[6].moving_mean))
    with torch.no_grad():
        env.rec("inference", net(X))
    env.rec("gamma", (net[1].gamma.reshape((-1,)), net[1].beta.reshape((-1,))))


def softmax_regression_scratch(torch, env):
    num_inputs, num_outputs, lr, batch_size = 12, 4, 0.1, 6
    W = torch.normal(0, 0.01, size=(num_inputs, num_outputs), requires_grad=True)
    with torch.no_grad():
        W.copy_(env.randn(num_inputs, num_outputs) * 0.01)
    b = torch.zeros(num_outputs, requires_grad=True)

    def softmax(X):
        X_exp = torch.exp(X)
        partition = X_exp.sum(1, keepdim=True)
        return X_exp / partition

    def net(X):
        return softmax(torch.matmul(X.reshape((-1, W.shape[0])), W) + b)

    def cross_entropy(y_hat, y):
        return - torch.log(y_hat[range(len(y_hat)), y])

    def sgd(params, lr, batch_size):
        with torch.no_grad():
            for param in params:
                param -= lr * param.grad / batch_size
                param.grad.zero_()

    def updater(batch_size):
        return sgd([W, b], lr, batch_size)

    def train_batch(X, y):
        y_hat = net(X)
        l = cross_entropy(y_hat, y)
        l.sum().backward()
        updater(X.shape[0])
        cmp = y_hat.argmax(axis=1).type(y.dtype) == y
        return float(l.sum()), float(cmp.type(y.dtype).sum()), y.numel()

    train_batch = env.step(train_batch)
    data = [(env.randn(batch_size, 3, 2, 2), env.randint(0, num_outputs, (batch_size,)))
            for _ in range(3)]
    for epoch in range(2):
        metric = [0.0, 0.0, 0]
        for X, y in data:
            l, acc, n = train_batch(X, y)
            metric = [metric[0] + l, metric[1] + acc, metric[2] + n]
        env.rec(f"epoch {epoch}", (metric[0] / metric[2], metric[1] / metric[2]))
    env.rec("params", (W, b))
    y = torch.tensor([0, 2])
    y_hat = torch.tensor([[0.1, 0.3, 0.6], [0.3, 0.2, 0.5]])
    env.rec("indexing", (y_hat[[0, 1], y], cross_entropy(y_hat, y)))


def linear_regression_scratch(torch, env):
    true_w, true_b = torch.tensor([2, -3.4]), 4.2

    def synthetic_data(w, b, num_examples):
        X = env.randn(num_examples, len(w))
        y = torch.matmul(X, w) + b
        y += env.randn(*y.shape) * 0.01
        return X, y.reshape((-1, 1))

    features, labels = synthetic_data(true_w, true_b, 30)

    def data_iter(batch_size, features, labels):
        num_examples = len(features)
        indices = list(range(num_examples))
        order = env.np.permutation(num_examples)
        indices = [indices[i] for i in order]
        for i in range(0, num_examples, batch_size):
            batch_indices = torch.tensor(indices[i: min(i + batch_size, num_examples)])
            yield features[batch_indices], labels[batch_indices]

    w = torch.zeros((2, 1), requires_grad=True)
    with torch.no_grad():
        w += env.randn(2, 1) * 0.01
    b = torch.zeros(1, requires_grad=True)

    def linreg(X, w, b):
        return torch.matmul(X, w) + b

    def squared_loss(y_hat, y):
        return (y_hat - y.reshape(y_hat.shape)) ** 2 / 2

    def sgd(params, lr, batch_size):
        with torch.no_grad():
            for param in params:
                param -= lr * param.grad / batch_size
                param.grad.zero_()

    def step(X, y):
        l = squared_loss(linreg(X, w, b), y)
        l.sum().backward()
        sgd([w, b], 0.03, 10)

    step = env.step(step)
    for epoch in range(3):
        for X, y in data_iter(10, features, labels):
            step(X, y)
        with torch.no_grad():
            train_l = squared_loss(linreg(features, w, b), labels)
            env.rec(f"epoch {epoch}", float(train_l.mean()))
    A = torch.cat([features, torch.ones(len(features), 1)], 1)
    sol = torch.linalg.lstsq(A, labels).solution
    env.rec("lstsq", (sol, (sol[:2, 0] - true_w).abs().max() < 0.05))
    env.rec("estimate", (true_w - w.reshape(true_w.shape), true_b - b))
