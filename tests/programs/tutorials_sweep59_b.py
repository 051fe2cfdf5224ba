"""Sweep 59 (H1, b): more first-month PyTorch programs: a bag-of-embeddings text classifier
with mean pooling under a padding mask and top-k accuracy; a 1-D CNN over sequences
(Conv1d, AdaptiveMaxPool1d) with MultiStepLR and a confusion matrix; a convolutional
autoencoder (ConvTranspose2d) under `torch.compile(model)`; pytorch/examples' MNIST
train/test functions with their log line; an imbalanced data set drawn by a
WeightedRandomSampler from a random_split. Synthetic data. Programs `f(torch, env)`, see
tutorial_harness.py."""
import contextlib
import io


def text_mean_pool_topk(torch, env):
    nn = torch.nn
    data = torch.utils.data
    torch.manual_seed(5)
    V, T, C, PAD = 30, 9, 5, 0
    n = 22
    lengths = env.randint(2, T + 1, (n,))
    tokens = env.randint(1, V, (n, T))
    positions = torch.arange(T).unsqueeze(0).expand(n, T)
    tokens = tokens.masked_fill(positions >= lengths.unsqueeze(1), PAD)
    labels = tokens[:, 0] % C

    class BagOfEmbeddings(nn.Module):
        def __init__(self, vocab_size, embed_dim, num_class):
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD)
            self.fc = nn.Linear(embed_dim, num_class)
            self.init_weights()

        def init_weights(self):
            initrange = 0.5
            self.embedding.weight.data.uniform_(-initrange, initrange)
            self.fc.weight.data.uniform_(-initrange, initrange)
            self.fc.bias.data.zero_()

        def forward(self, text):
            mask = (text != PAD).unsqueeze(-1).float()
            summed = (self.embedding(text) * mask).sum(dim=1)
            mean = summed / mask.sum(dim=1).clamp(min=1.0)
            return self.fc(mean)

    model = BagOfEmbeddings(V, 10, C)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=2.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.5)
    loader = data.DataLoader(data.TensorDataset(tokens, labels), batch_size=8, shuffle=True)

    def train_step(text, label):
        optimizer.zero_grad()
        predicted_label = model(text)
        loss = criterion(predicted_label, label)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        optimizer.step()
        return loss.item(), (predicted_label.argmax(1) == label).sum().item()

    step = env.step(train_step)
    for epoch in range(3):
        model.train()
        total_acc, total_count = 0, 0
        for text, label in loader:                  # (8, 8, 6)
            loss, correct = step(text, label)
            total_acc += correct
            total_count += label.size(0)
            env.rec(f"e{epoch} loss", loss)
        scheduler.step()
        env.rec(f"e{epoch} acc", total_acc / total_count)
    model.eval()
    with torch.no_grad():
        logits = model(tokens)
        _, top3 = logits.topk(3, dim=1)
        top3_acc = (top3 == labels.unsqueeze(1)).any(dim=1).float().mean().item()
    env.rec("top3", (top3, top3_acc, dict(model.state_dict())))


def cnn1d_sequences(torch, env):
    nn = torch.nn
    F = torch.nn.functional
    torch.manual_seed(6)
    n, L, C = 26, 20, 3
    t = torch.linspace(0, 1, L)
    y = env.randint(0, C, (n,))
    freq = (y.float() + 1.0).unsqueeze(1) * 6.0
    X = torch.sin(freq * t) + 0.3 * env.randn(n, L)
    X = X.unsqueeze(1)                              # (N, 1, L)

    class Conv1dNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv1d(1, 8, kernel_size=5, padding=2, bias=False)
            self.bn1 = nn.BatchNorm1d(8)
            self.conv2 = nn.Conv1d(8, 12, kernel_size=3, stride=2)
            self.pool = nn.AdaptiveMaxPool1d(1)
            self.fc = nn.Linear(12, C)

        def forward(self, x):
            x = F.relu(self.bn1(self.conv1(x)))
            x = F.relu(self.conv2(x))
            x = self.pool(x).squeeze(-1)
            return self.fc(x)

    model = Conv1dNet()
    optimizer = torch.optim.RMSprop(model.parameters(), lr=0.005)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2, 3], gamma=0.3)
    criterion = nn.CrossEntropyLoss()

    def train_step(xb, yb):
        optimizer.zero_grad()
        out = model(xb)
        loss = criterion(out, yb)
        loss.backward()
        optimizer.step()
        return loss

    step = env.step(train_step)
    batch_size = 10
    for epoch in range(4):
        model.train()
        perm = torch.randperm(n)
        for i in range(0, n, batch_size):           # (10, 10, 6)
            idx = perm[i:i + batch_size]
            env.rec(f"e{epoch} i{i}", step(X[idx], y[idx]))
        scheduler.step()
    model.eval()
    with torch.no_grad():
        pred = model(X).argmax(dim=1)
    confusion = torch.zeros(C, C, dtype=torch.long)
    for t_, p_ in zip(y.tolist(), pred.tolist()):
        confusion[t_, p_] += 1
    env.rec("confusion", confusion)
    env.rec("per class", (confusion.diag().float() / confusion.sum(1).clamp(min=1)).tolist())
    env.rec("state", dict(model.state_dict()))


def conv_autoencoder_compiled_model(torch, env):
    nn = torch.nn
    torch.manual_seed(7)
    images = env.rand(18, 1, 8, 8)

    class Autoencoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(
                nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.ReLU(),     # 4x4
                nn.Conv2d(4, 8, 3, stride=2, padding=1), nn.ReLU())     # 2x2
            self.decoder = nn.Sequential(
                nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1), nn.ReLU(),
                nn.ConvTranspose2d(4, 1, 3, stride=2, padding=1, output_padding=1),
                nn.Sigmoid())

        def forward(self, x):
            return self.decoder(self.encoder(x))

    model = Autoencoder()
    opt_model = env.step(model)         # (torch.compile(model), read as llgrad.compile)
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-5)
    loader = torch.utils.data.DataLoader(images, batch_size=8, shuffle=True)
    outputs = []
    for epoch in range(3):
        for img in loader:                          # (8, 8, 2)
            recon = opt_model(img)
            loss = criterion(recon, img)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        env.rec(f"epoch {epoch}", f"Epoch:{epoch + 1}, Loss:{loss.item():.4f}")
        env.rec(f"loss {epoch}", loss)
        outputs.append((epoch, img, recon.detach()))
    env.rec("last recon", outputs[-1][2])
    opt_model.eval()
    with torch.no_grad():
        env.rec("eval recon", criterion(opt_model(images), images))
    with torch.no_grad():
        codes = model.encoder(images)
    env.rec("codes", codes.flatten(1).numpy())
    env.rec("params", list(model.parameters()))


def mnist_example(torch, env):
    nn = torch.nn
    F = torch.nn.functional
    torch.manual_seed(1)
    train_x, train_y = env.rand(21, 1, 12, 12), env.randint(0, 4, (21,))
    test_x, test_y = env.rand(9, 1, 12, 12), env.randint(0, 4, (9,))
    data = torch.utils.data
    train_loader = data.DataLoader(data.TensorDataset(train_x, train_y), batch_size=8,
                                   shuffle=True)
    test_loader = data.DataLoader(data.TensorDataset(test_x, test_y), batch_size=5)

    class Net(nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, 1)
            self.conv2 = nn.Conv2d(4, 8, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(8 * 4 * 4, 16)
            self.fc2 = nn.Linear(16, 4)

        def forward(self, x):
            x = self.conv1(x)
            x = F.relu(x)
            x = self.conv2(x)
            x = F.relu(x)
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = self.fc1(x)
            x = F.relu(x)
            x = self.dropout2(x)
            x = self.fc2(x)
            output = F.log_softmax(x, dim=1)
            return output

    model = Net()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    log = io.StringIO()

    def train_batch(epoch, batch_idx, data, target):
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % 2 == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))
        return loss.detach()

    def test_batch(data, target):
        output = model(data)
        loss = F.nll_loss(output, target, reduction='sum').item()
        pred = output.argmax(dim=1, keepdim=True)
        return loss, pred.eq(target.view_as(pred)).sum().item()

    train_batch, test_batch = env.step(train_batch), env.step(test_batch)
    with contextlib.redirect_stdout(log):
        for epoch in range(1, 4):
            model.train()
            for batch_idx, (x, t) in enumerate(train_loader):     # (8, 8, 5)
                env.rec(f"e{epoch} b{batch_idx}", train_batch(epoch, batch_idx, x, t))
            model.eval()
            test_loss, correct = 0, 0
            with torch.no_grad():
                for x, t in test_loader:                            # (5, 4)
                    l, c = test_batch(x, t)
                    test_loss += l
                    correct += c
            test_loss /= len(test_loader.dataset)
            print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'.format(
                test_loss, correct, len(test_loader.dataset),
                100. * correct / len(test_loader.dataset)))
            scheduler.step()
    env.rec("log", log.getvalue().splitlines())
    env.rec("state", dict(model.state_dict()))


def weighted_sampler_split(torch, env):
    nn = torch.nn
    data = torch.utils.data
    torch.manual_seed(8)
    n = 40
    X = env.randn(n, 3)
    y = (X[:, 0] > 0.9).long()                      # (few positives)
    full = data.TensorDataset(X, y)
    train_set, val_set = data.random_split(full, [30, 10],
                                           generator=torch.Generator().manual_seed(42))
    train_labels = torch.stack([train_set[i][1] for i in range(len(train_set))])
    class_count = torch.bincount(train_labels, minlength=2)
    sample_weights = (1.0 / class_count.float())[train_labels]
    sampler = data.WeightedRandomSampler(sample_weights, num_samples=len(sample_weights),
                                         replacement=True)
    train_loader = data.DataLoader(train_set, batch_size=7, sampler=sampler)  # (7 x4, 2)
    val_loader = data.DataLoader(val_set, batch_size=10)

    model = nn.Sequential(nn.Linear(3, 16), nn.LeakyReLU(0.1), nn.Linear(16, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    criterion = nn.CrossEntropyLoss()

    def train_step(xb, yb):
        optimizer.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()
        optimizer.step()
        return loss.item(), yb.float().mean().item()

    @torch.no_grad()
    def evaluate(xb, yb):
        logits = model(xb)
        pred = logits.argmax(1)
        tp = ((pred == 1) & (yb == 1)).sum()
        recall = tp.float() / (yb == 1).sum().clamp(min=1)
        return torch.nn.functional.cross_entropy(logits, yb).item(), recall.item()

    step, evaluate = env.step(train_step), env.step(evaluate)
    for epoch in range(3):
        for xb, yb in train_loader:
            env.rec(f"e{epoch}", step(xb, yb))
        for xb, yb in val_loader:
            env.rec(f"val {epoch}", evaluate(xb, yb))
    env.rec("split", (train_set.indices, val_set.indices, class_count))
    env.rec("params", [p.detach().clone() for p in model.parameters()])
