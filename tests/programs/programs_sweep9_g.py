"""Tutorial programs on graphs, audio, factorisation and distillation, written as blog posts
write them (seeded with torch.manual_seed, modules built by their constructors; see
tutorial_harness.py): GIN graph classification over a batch of graphs (index_add_ sum
aggregation, a global mean pool from a batch vector), the M5 raw-waveform audio classifier
(strided Conv1d, BatchNorm1d, MaxPool1d, a global average pool, log_softmax + nll_loss),
non-negative matrix factorisation by gradient steps projected with clamp_(min=0), FitNets
distillation (a hint regressor on intermediate features, KL with log_target=True)."""


def gin_graph_classification(torch, env):
    """GIN (Xu et al.): h' = MLP((1 + eps) h + sum of neighbours) with the sum by
    index_add_, a learnable eps; two graphs batched as one disjoint graph with a batch
    vector; a global mean pool as index_add_ / bincount; graph labels by cross entropy."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    x = torch.randn(9, 4)
    edge_index = torch.tensor([[0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 6, 5],
                               [1, 0, 2, 1, 4, 3, 6, 5, 8, 7, 8, 7]])
    batch = torch.tensor([0, 0, 0, 0, 0, 1, 1, 1, 1])
    y = torch.tensor([0, 1])

    class GINConv(nn.Module):
        def __init__(self, d_in, d_out):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(d_in, d_out), nn.BatchNorm1d(d_out), nn.ReLU(),
                                     nn.Linear(d_out, d_out))
            self.eps = nn.Parameter(torch.zeros(1))

        def forward(self, h, edge_index):
            src, dst = edge_index
            agg = torch.zeros_like(h).index_add_(0, dst, h[src])
            return self.mlp((1 + self.eps) * h + agg)

    class GIN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = GINConv(4, 8), GINConv(8, 8)
            self.head = nn.Linear(16, 2)

        def forward(self, x, edge_index, batch):
            h1 = F.relu(self.conv1(x, edge_index))
            h2 = F.relu(self.conv2(h1, edge_index))
            n_graphs = int(batch.max()) + 1
            counts = torch.bincount(batch, minlength=n_graphs).clamp(min=1).unsqueeze(1)
            pooled = [torch.zeros(n_graphs, h.shape[1]).index_add_(0, batch, h) / counts
                      for h in (h1, h2)]
            return self.head(torch.cat(pooled, dim=1))

    model = GIN()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def train_step(x, edge_index, batch, y):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x, edge_index, batch), y)
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(x, edge_index, batch, y) for _ in range(5)])
    model.eval()
    with torch.no_grad():
        env.rec("eval", model(x, edge_index, batch))
    env.rec("state", list(model.state_dict().values()))


def m5_raw_audio(torch, env):
    """The M5 network of the torchaudio speech-command tutorial, small: Conv1d with a wide
    strided first kernel, BatchNorm1d, MaxPool1d, F.avg_pool1d over the remaining length,
    permute, log_softmax and F.nll_loss; Adam with weight decay and a StepLR."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class M5(nn.Module):
        def __init__(self, n_input=1, n_output=4, stride=4, n_channel=8):
            super().__init__()
            # (no bias before a batch norm: its gradient is rounding noise that Adam would
            # scale up to steps of lr)
            self.conv1 = nn.Conv1d(n_input, n_channel, kernel_size=20, stride=stride,
                                   bias=False)
            self.bn1 = nn.BatchNorm1d(n_channel)
            self.pool1 = nn.MaxPool1d(4)
            self.conv2 = nn.Conv1d(n_channel, n_channel, kernel_size=3, bias=False)
            self.bn2 = nn.BatchNorm1d(n_channel)
            self.pool2 = nn.MaxPool1d(4)
            self.fc1 = nn.Linear(n_channel, n_output)

        def forward(self, x):
            x = self.pool1(F.relu(self.bn1(self.conv1(x))))
            x = self.pool2(F.relu(self.bn2(self.conv2(x))))
            x = F.avg_pool1d(x, x.shape[-1])
            x = x.permute(0, 2, 1)
            return F.log_softmax(self.fc1(x), dim=2)

    model = M5()
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=0.0001)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
    t = torch.linspace(0, 1, 400)
    wave = torch.stack([torch.sin(2 * 3.14159 * f * t) for f in (5.0, 11.0, 23.0, 41.0)])
    data = (wave + 0.1 * torch.randn(4, 400)).unsqueeze(1)
    target = torch.tensor([0, 1, 2, 3])

    def train_step(data, target):
        model.train()
        output = model(data)
        loss = F.nll_loss(output.squeeze(), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    hist = []
    for epoch in range(3):
        hist += [step(data, target) for _ in range(2)]
        sched.step()
    env.rec("hist", hist)
    model.eval()
    with torch.no_grad():
        env.rec("pred", model(data).argmax(dim=-1).squeeze())
    env.rec("state", list(model.state_dict().values()))


def nmf_projected(torch, env):
    """Non-negative matrix factorisation V ~ W H by Adam on the Frobenius loss, W and H
    kept non-negative by clamp_(min=0) under no_grad after each step (projected gradient),
    with an L1 penalty on H."""
    torch.manual_seed(0)
    V = torch.rand(8, 6)
    W = torch.rand(8, 3).requires_grad_()
    H = torch.rand(3, 6).requires_grad_()
    opt = torch.optim.Adam([W, H], lr=0.05)

    def train_step(V):
        opt.zero_grad()
        loss = ((V - W @ H) ** 2).sum() + 1e-3 * H.abs().sum()
        loss.backward()
        opt.step()
        with torch.no_grad():
            W.clamp_(min=0)
            H.clamp_(min=0)
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(V) for _ in range(6)])
    env.rec("factors", (W, H))
    env.rec("nonneg", bool((W >= 0).all() and (H >= 0).all()))


def fitnets_hints(torch, env):
    """FitNets: a thin student learns a frozen teacher's intermediate features through a
    1x1-conv regressor (MSE hint loss), then its logits through KL(log_target=True) of
    temperature-softened log-probabilities times T^2, plus cross entropy; the teacher in
    eval() under no_grad."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(1, width, 3, padding=1), nn.ReLU(),
                                          nn.MaxPool2d(2))
            self.classifier = nn.Linear(width * 4 * 4, 3)

        def forward(self, x):
            f = self.features(x)
            return f, self.classifier(f.flatten(1))

    teacher, student = Net(8), Net(4)
    regressor = nn.Conv2d(4, 8, 1)
    teacher.eval()
    opt = torch.optim.SGD(list(student.parameters()) + list(regressor.parameters()), lr=0.05,
                          momentum=0.9)
    x, y = torch.randn(4, 1, 8, 8), torch.randint(0, 3, (4,))
    T = 4.0

    def train_step(x, y, stage):
        with torch.no_grad():
            t_feat, t_logits = teacher(x)
        s_feat, s_logits = student(x)
        if stage == "hint":
            loss = F.mse_loss(regressor(s_feat), t_feat)
        else:
            kd = F.kl_div(F.log_softmax(s_logits / T, dim=1), F.log_softmax(t_logits / T, dim=1),
                          reduction="batchmean", log_target=True) * T * T
            loss = 0.7 * kd + 0.3 * F.cross_entropy(s_logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step = env.step(train_step)
    env.rec("hist", [step(x, y, "hint" if i < 3 else "kd") for i in range(6)])
    env.rec("student", list(student.parameters()))
    env.rec("teacher grads", [p.grad for p in teacher.parameters()])
