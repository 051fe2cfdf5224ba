"""Stop 78 (W), part 3: d2l.ai's from-scratch chapters as the book writes them: "Linear
regression implementation from scratch" (data_iter with random.shuffle, sgd under
torch.no_grad with param -= lr * param.grad / batch_size), "Dropout" (dropout_layer with
(torch.rand(X.shape) > dropout).float()), "GRU from scratch" (get_params, init_gru_state,
the gated loop, grad_clipping by the global norm), "Batch normalization from scratch"
(moving_mean / moving_var carried through .data) and "Attention scoring functions"
(masked_softmax with valid_lens through repeat_interleave, AdditiveAttention). Toy sizes,
synthetic data. Programs `f(torch, env)`, see tutorial_harness.py."""
import math
import random


def d2l_linreg_scratch(torch, env):
    def synthetic_data(w, b, num_examples):
        X = env.randn(num_examples, len(w))
        y = torch.matmul(X, w) + b
        y += env.randn(*y.shape, scale=0.01)
        return X, y.reshape((-1, 1))

    true_w = torch.tensor([2, -3.4])
    true_b = 4.2
    features, labels = synthetic_data(true_w, true_b, 40)
    rnd = random.Random(0)

    def data_iter(batch_size, features, labels):
        num_examples = len(features)
        indices = list(range(num_examples))
        rnd.shuffle(indices)
        for i in range(0, num_examples, batch_size):
            batch_indices = torch.tensor(indices[i: min(i + batch_size, num_examples)])
            yield features[batch_indices], labels[batch_indices]

    w = env.randn(2, 1, scale=0.01).requires_grad_(True)     # (torch.normal(0, 0.01, ...))
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

    lr, num_epochs, batch_size = 0.03, 3, 10
    net, loss = linreg, squared_loss

    def step(X, y):
        l = loss(net(X, w, b), y)  # noqa: E741
        l.sum().backward()
        sgd([w, b], lr, batch_size)
    step = env.step(step)

    for epoch in range(num_epochs):
        for X, y in data_iter(batch_size, features, labels):
            step(X, y)
        with torch.no_grad():
            train_l = loss(net(features, w, b), labels)
            env.rec("print", f"epoch {epoch + 1}, loss {float(train_l.mean()):f}")
    env.rec("err", (true_w - w.reshape(true_w.shape), true_b - b))


def d2l_dropout_scratch(torch, env):
    nn = torch.nn

    def dropout_layer(X, dropout):
        assert 0 <= dropout <= 1
        if dropout == 1:
            return torch.zeros_like(X)
        if dropout == 0:
            return X
        mask = (torch.rand(X.shape) > dropout).float()
        return mask * X / (1.0 - dropout)

    X = torch.arange(16, dtype=torch.float32).reshape((2, 8))
    env.rec("p0", dropout_layer(X, 0.))
    env.rec("p1", dropout_layer(X, 1.))
    env.rec("p05", dropout_layer(X, 0.5), cross=False)
    num_inputs, num_outputs, num_hiddens1, num_hiddens2 = 20, 10, 32, 32
    dropout1, dropout2 = 0.2, 0.5

    class Net(nn.Module):
        def __init__(self, num_inputs, num_outputs, num_hiddens1, num_hiddens2,
                     is_training=True):
            super(Net, self).__init__()
            self.num_inputs = num_inputs
            self.training = is_training
            self.lin1 = nn.Linear(num_inputs, num_hiddens1)
            self.lin2 = nn.Linear(num_hiddens1, num_hiddens2)
            self.lin3 = nn.Linear(num_hiddens2, num_outputs)
            self.relu = nn.ReLU()

        def forward(self, X):
            H1 = self.relu(self.lin1(X.reshape((-1, self.num_inputs))))
            if self.training:
                H1 = dropout_layer(H1, dropout1)
            H2 = self.relu(self.lin2(H1))
            if self.training:
                H2 = dropout_layer(H2, dropout2)
            out = self.lin3(H2)
            return out

    net = env.init(Net(num_inputs, num_outputs, num_hiddens1, num_hiddens2))
    loss = nn.CrossEntropyLoss(reduction="none")
    trainer = torch.optim.SGD(net.parameters(), lr=0.5)
    features, labels = env.randn(24, 20), env.randint(0, 10, (24,))

    def train_batch(X, y):
        y_hat = net(X)
        l = loss(y_hat, y)  # noqa: E741
        trainer.zero_grad()
        l.mean().backward()
        trainer.step()
        return l.sum(), (y_hat.argmax(axis=1).type(y.dtype) == y).float().sum()
    train_batch = env.step(train_batch)

    for epoch in range(2):
        for i in range(0, 24, 8):
            l, acc = train_batch(features[i:i + 8], labels[i:i + 8])
            env.rec("metrics", (l, acc), cross=False)   # (torch.rand: llgrad's stream)
    net.training = False
    with torch.no_grad():
        env.rec("eval", net(features), cross=False)


def d2l_gru_scratch(torch, env):
    vocab_size, num_hiddens = 12, 16

    def get_params(vocab_size, num_hiddens):
        num_inputs = num_outputs = vocab_size

        def normal(shape):
            return env.randn(*shape, scale=0.01)

        def three():
            return (normal((num_inputs, num_hiddens)), normal((num_hiddens, num_hiddens)),
                    torch.zeros(num_hiddens))

        W_xz, W_hz, b_z = three()  # Update gate parameters
        W_xr, W_hr, b_r = three()  # Reset gate parameters
        W_xh, W_hh, b_h = three()  # Candidate hidden state parameters
        W_hq = normal((num_hiddens, num_outputs))
        b_q = torch.zeros(num_outputs)
        params = [W_xz, W_hz, b_z, W_xr, W_hr, b_r, W_xh, W_hh, b_h, W_hq, b_q]
        for param in params:
            param.requires_grad_(True)
        return params

    def init_gru_state(batch_size, num_hiddens):
        return (torch.zeros((batch_size, num_hiddens)), )

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

    class RNNModelScratch:
        def __init__(self, vocab_size, num_hiddens, get_params, init_state, forward_fn):
            self.vocab_size, self.num_hiddens = vocab_size, num_hiddens
            self.params = get_params(vocab_size, num_hiddens)
            self.init_state, self.forward_fn = init_state, forward_fn

        def __call__(self, X, state):
            X = torch.nn.functional.one_hot(X.T, self.vocab_size).type(torch.float32)
            return self.forward_fn(X, state, self.params)

        def begin_state(self, batch_size):
            return self.init_state(batch_size, self.num_hiddens)

    def grad_clipping(net, theta):
        params = net.params
        norm = torch.sqrt(sum(torch.sum((p.grad ** 2)) for p in params))
        if norm > theta:
            for param in params:
                param.grad[:] *= theta / norm

    def sgd(params, lr, batch_size):
        with torch.no_grad():
            for param in params:
                param -= lr * param.grad / batch_size
                param.grad.zero_()

    net = RNNModelScratch(vocab_size, num_hiddens, get_params, init_gru_state, gru)
    loss = torch.nn.CrossEntropyLoss()

    def train_step(X, Y, state):
        for s in state:
            s.detach_()
        y = Y.T.reshape(-1)
        y_hat, state = net(X, state)
        l = loss(y_hat, y.long()).mean()  # noqa: E741
        l.backward()
        grad_clipping(net, 1)
        sgd(net.params, 1.0, batch_size=1)
        return l * y.numel(), y.numel(), state
    train_step = env.step(train_step)

    corpus = env.randint(0, vocab_size, (2 * 5 * 4 + 1,))
    state = None
    for epoch in range(2):
        metric = [0.0, 0]
        for i in range(4):
            off = 5 * i
            X = torch.stack([corpus[off:off + 5], corpus[off + 20:off + 25]])
            Y = torch.stack([corpus[off + 1:off + 6], corpus[off + 21:off + 26]])
            if state is None:
                state = net.begin_state(batch_size=X.shape[0])
            l, n, state = train_step(X, Y, state)
            metric[0] += l.item()
            metric[1] += n
        env.rec("ppl", f"perplexity {math.exp(metric[0] / metric[1]):.1f}")
    env.rec("params", net.params)


def d2l_batchnorm_scratch(torch, env):
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
        Y = gamma * X_hat + beta  # Scale and shift
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

    net = nn.Sequential(
        nn.Conv2d(1, 4, kernel_size=3), BatchNorm(4, num_dims=4), nn.Sigmoid(),
        nn.AvgPool2d(kernel_size=2, stride=2), nn.Flatten(),
        nn.Linear(4 * 3 * 3, 10), BatchNorm(10, num_dims=2), nn.Sigmoid(),
        nn.Linear(10, 3))
    net = env.init(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.9)
    loss = nn.CrossEntropyLoss()

    def step(X, y):
        opt.zero_grad()
        l = loss(net(X), y)  # noqa: E741
        l.backward()
        opt.step()
        return l
    step = env.step(step)

    X_all, y_all = env.randn(12, 1, 8, 8), env.randint(0, 3, (12,))
    for epoch in range(2):
        for i in range(0, 12, 4):
            env.rec("loss", step(X_all[i:i + 4], y_all[i:i + 4]))
    env.rec("moving", (net[1].moving_mean, net[1].moving_var, net[6].moving_mean,
                       net[6].moving_var))
    with torch.no_grad():
        env.rec("eval", net(X_all))
    env.rec("gamma", net[1].gamma.reshape((-1,)))
    env.rec("params", dict(net.state_dict()))


def d2l_attention_scoring(torch, env):
    nn = torch.nn

    def sequence_mask(X, valid_len, value=0):
        maxlen = X.size(1)
        mask = torch.arange((maxlen), dtype=torch.float32)[None, :] < valid_len[:, None]
        X[~mask] = value
        return X

    def masked_softmax(X, valid_lens):
        if valid_lens is None:
            return nn.functional.softmax(X, dim=-1)
        else:
            shape = X.shape
            if valid_lens.dim() == 1:
                valid_lens = torch.repeat_interleave(valid_lens, shape[1])
            else:
                valid_lens = valid_lens.reshape(-1)
            X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
            return nn.functional.softmax(X.reshape(shape), dim=-1)

    env.rec("ms1", masked_softmax(env.rand(2, 2, 4), torch.tensor([2, 3])))
    env.rec("ms2", masked_softmax(env.rand(2, 2, 4), torch.tensor([[1, 3], [2, 4]])))

    class AdditiveAttention(nn.Module):
        def __init__(self, num_hiddens, dropout, **kwargs):
            super().__init__(**kwargs)
            self.W_k = nn.Linear(2, num_hiddens, bias=False)    # (d2l: LazyLinear)
            self.W_q = nn.Linear(20, num_hiddens, bias=False)
            self.w_v = nn.Linear(num_hiddens, 1, bias=False)
            self.dropout = nn.Dropout(dropout)

        def forward(self, queries, keys, values, valid_lens):
            queries, keys = self.W_q(queries), self.W_k(keys)
            features = queries.unsqueeze(2) + keys.unsqueeze(1)
            features = torch.tanh(features)
            scores = self.w_v(features).squeeze(-1)
            self.attention_weights = masked_softmax(scores, valid_lens)
            return torch.bmm(self.dropout(self.attention_weights), values)

    class DotProductAttention(nn.Module):
        def __init__(self, dropout):
            super().__init__()
            self.dropout = nn.Dropout(dropout)

        def forward(self, queries, keys, values, valid_lens=None):
            d = queries.shape[-1]
            scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
            self.attention_weights = masked_softmax(scores, valid_lens)
            return torch.bmm(self.dropout(self.attention_weights), values)

    queries, keys = env.randn(2, 1, 20), torch.ones((2, 10, 2))
    values = torch.arange(40, dtype=torch.float32).reshape(1, 10, 4).repeat(2, 1, 1)
    valid_lens = torch.tensor([2, 6])
    attention = env.init(AdditiveAttention(num_hiddens=8, dropout=0.1))
    attention.eval()
    env.rec("additive", attention(queries, keys, values, valid_lens))
    dot = DotProductAttention(dropout=0.5)
    dot.eval()
    env.rec("dot", dot(env.randn(2, 1, 2), keys, values, valid_lens))
    attention.train()
    attention.dropout.p = 0.0
    opt = torch.optim.SGD(attention.parameters(), lr=0.1)

    def step(q, k, v, vl, target):
        opt.zero_grad()
        out = attention(q, k, v, vl)
        l = ((out - target) ** 2).mean()  # noqa: E741
        l.backward()
        opt.step()
        return l, attention.attention_weights
    step = env.step(step)

    keys2 = env.randn(2, 10, 2)
    target = env.randn(2, 1, 4)
    for i in range(3):
        env.rec("step", step(queries, keys2, values, valid_lens, target))
    env.rec("params", dict(attention.state_dict()))
