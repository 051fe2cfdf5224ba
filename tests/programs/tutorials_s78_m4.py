"""Stop 78 (M), part 4: Karpathy's makemore part 3 (a hand-written BatchNorm with
bnmean_running / bnstd_running rebound under no_grad, Kaiming gains by hand, update-to-data
ratios), the first part of PyTorch's "Visualizing Gradients" tutorial (retain_grad on
intermediates, is_leaf / retains_grad, grad_fn.next_functions) and Patrick Loeber's PyTorch
course (gradient descent with autograd by hand, logistic regression). Toy sizes, synthetic
data. Programs `f(torch, env)`, see tutorial_harness.py."""


def makemore_part3_batchnorm(torch, env):
    F = torch.nn.functional
    vocab_size, block_size, n_embd, n_hidden = 8, 3, 4, 16
    Xtr = env.randint(0, vocab_size, (64, block_size))
    Ytr = env.randint(0, vocab_size, (64,))
    g = torch.Generator().manual_seed(2147483647)
    C = torch.randn((vocab_size, n_embd), generator=g)
    W1 = torch.randn((n_embd * block_size, n_hidden), generator=g) \
        * (5 / 3) / ((n_embd * block_size) ** 0.5)
    W2 = torch.randn((n_hidden, vocab_size), generator=g) * 0.01
    b2 = torch.randn(vocab_size, generator=g) * 0
    bngain = torch.ones((1, n_hidden))
    bnbias = torch.zeros((1, n_hidden))
    bnmean_running = torch.zeros((1, n_hidden))
    bnstd_running = torch.ones((1, n_hidden))
    # (the torch run's generator stream is not llgrad's: its draws are replaced by env's)
    with torch.no_grad():
        C.copy_(env.randn(vocab_size, n_embd))
        W1.copy_(env.randn(n_embd * block_size, n_hidden) * (5 / 3)
                 / ((n_embd * block_size) ** 0.5))
        W2.copy_(env.randn(n_hidden, vocab_size) * 0.01)
    parameters = [C, W1, W2, b2, bngain, bnbias]
    env.rec("n params", sum(p.nelement() for p in parameters))
    for p in parameters:
        p.requires_grad = True

    def train_step(Xb, Yb, lr):
        nonlocal bnmean_running, bnstd_running
        emb = C[Xb]
        embcat = emb.view(emb.shape[0], -1)
        hpreact = embcat @ W1
        bnmeani = hpreact.mean(0, keepdim=True)
        bnstdi = hpreact.std(0, keepdim=True)
        hpreact = bngain * (hpreact - bnmeani) / bnstdi + bnbias
        with torch.no_grad():
            bnmean_running = 0.999 * bnmean_running + 0.001 * bnmeani
            bnstd_running = 0.999 * bnstd_running + 0.001 * bnstdi
        h = torch.tanh(hpreact)
        logits = h @ W2 + b2
        loss = F.cross_entropy(logits, Yb)
        for p in parameters:
            p.grad = None
        loss.backward()
        for p in parameters:
            p.data += -lr * p.grad
        return loss

    train_step = env.step(train_step)
    lossi = []
    ud = []
    batch_size = 16
    for i in range(12):
        ix = env.randint(0, Xtr.shape[0], (batch_size,))
        Xb, Yb = Xtr[ix], Ytr[ix]
        lr = 0.1 if i < 8 else 0.01
        loss = train_step(Xb, Yb, lr)
        if i % 4 == 0:
            env.rec(f"step {i}", f"{i:7d}/{12:7d}: {loss.item():.4f}")
        lossi.append(loss.log10().item())
        with torch.no_grad():
            ud.append([((lr * p.grad).std() / p.data.std()).log10().item() for p in parameters])
    env.rec("lossi", lossi)
    env.rec("ud", ud)
    env.rec("bnmean_running", bnmean_running)
    env.rec("bnstd_running", bnstd_running)

    @torch.no_grad()
    def split_loss():
        emb = C[Xtr]
        embcat = emb.view(emb.shape[0], -1)
        hpreact = embcat @ W1
        hpreact = bngain * (hpreact - bnmean_running) / bnstd_running + bnbias
        h = torch.tanh(hpreact)
        logits = h @ W2 + b2
        return F.cross_entropy(logits, Ytr)
    env.rec("train loss", split_loss())
    env.rec("params", parameters)


def visualizing_gradients_retain(torch, env):
    """The tutorial's first part: retain_grad on intermediates, is_leaf / retains_grad, the
    graph by grad_fn.next_functions, then the same step compiled."""
    a = torch.tensor([2.0, 3.0], requires_grad=True)
    b = torch.tensor([4.0, 5.0], requires_grad=True)
    c = a * b
    c.retain_grad()
    d = c.sum()
    d.retain_grad()
    e = d * 2
    e.retain_grad()
    e.backward(retain_graph=True)
    for name, t in (("a", a), ("b", b), ("c", c), ("d", d), ("e", e)):
        env.rec(f"{name}", f"{name}: is_leaf={t.is_leaf}, requires_grad={t.requires_grad}, "
                           f"retains_grad={t.retains_grad}")
        env.rec(f"{name} grad", t.grad)
    env.rec("e.grad_fn", type(e.grad_fn).__name__)
    env.rec("next", [type(f).__name__ if f is not None else None
                     for f, _ in e.grad_fn.next_functions])
    env.rec("next of d", [type(f).__name__ for f, _ in d.grad_fn.next_functions])

    def step(a, b):
        c = a * b
        c.retain_grad()
        d = c.sum()
        d.retain_grad()
        e = d * 2
        e.backward()
        return c, d

    step = env.step(step)
    for i in range(3):
        a.grad = None
        c, d = step(a, b)
        env.rec(f"step {i}", (a.grad, b.grad, c.grad, d.grad, c.retains_grad, c.is_leaf))


def loeber_course(torch, env):
    nn = torch.nn
    # 05: gradient descent with autograd
    X = torch.tensor([1, 2, 3, 4], dtype=torch.float32)
    Y = torch.tensor([2, 4, 6, 8], dtype=torch.float32)
    w = torch.tensor(0.0, dtype=torch.float32, requires_grad=True)

    def forward(x):
        return w * x

    def loss(y, y_pred):
        return ((y_pred - y) ** 2).mean()

    env.rec("before", f'Prediction before training: f(5) = {forward(5).item():.3f}')
    learning_rate = 0.01
    n_iters = 20

    def gd(X, Y):
        nonlocal w
        y_pred = forward(X)
        l = loss(Y, y_pred)
        l.backward()
        with torch.no_grad():
            w -= learning_rate * w.grad
        w.grad.zero_()
        return l

    gd = env.step(gd)
    for epoch in range(n_iters):
        l = gd(X, Y)
        if epoch % 4 == 0:
            env.rec(f"gd {epoch}", f'epoch {epoch + 1}: w = {w.item():.3f}, loss = {l:.8f}')
    env.rec("after", f'Prediction after training: f(5) = {forward(5).item():.3f}')

    # 08: logistic regression
    X_train = env.randn(32, 5)
    y_train = (X_train[:, :1] + X_train[:, 1:2] > 0).float()
    X_test = env.randn(8, 5)
    y_test = (X_test[:, :1] + X_test[:, 1:2] > 0).float()

    class Model(nn.Module):
        def __init__(self, n_input_features):
            super(Model, self).__init__()
            self.linear = nn.Linear(n_input_features, 1)

        def forward(self, x):
            y_pred = torch.sigmoid(self.linear(x))
            return y_pred

    model = env.init(Model(5))
    num_epochs = 30
    criterion = nn.BCELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_step(X_train, y_train):
        y_pred = model(X_train)
        loss = criterion(y_pred, y_train)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    train_step = env.step(train_step)
    for epoch in range(num_epochs):
        loss = train_step(X_train, y_train)
        if (epoch + 1) % 10 == 0:
            env.rec(f"logreg {epoch}", f'epoch: {epoch + 1}, loss = {loss.item():.4f}')
    with torch.no_grad():
        y_predicted = model(X_test)
        y_predicted_cls = y_predicted.round()
        acc = y_predicted_cls.eq(y_test).sum() / float(y_test.shape[0])
        env.rec("accuracy", f'accuracy: {acc.item():.4f}')
