"""Stop 78 (E), part 1: "Deep Learning with PyTorch" (Stevens, Antiga, Viehmann) and
Zero to Mastery PyTorch at toy sizes, nearly verbatim: the book's chapter 6 temperature
model as an OrderedDict Sequential with a shuffled train / validation split, chapter 8's
birds-vs-airplanes nets (NetDropout, NetBatchNorm, NetResDeep whose Sequential repeats one
ResBlock instance, the L2 penalty summed by hand); ZTM's 01 workflow (nn.Parameter
regression, inference_mode, a state_dict saved and loaded for inference), 02 classification
(BCEWithLogitsLoss, accuracy_fn, round(sigmoid)) and 08's ViT replication (PatchEmbedding
by Conv2d + Flatten, nn.MultiheadAttention(batch_first=True), a class token expanded over the
batch, nn.TransformerEncoderLayer(norm_first=True)). Synthetic data. Programs
`f(torch, env)`, see tutorial_harness.py."""
from collections import OrderedDict


def dlwpt_temperature_seq(torch, env):
    nn = torch.nn
    optim = torch.optim
    t_c = torch.tensor([0.5, 14.0, 15.0, 28.0, 11.0, 8.0, 3.0, -4.0, 6.0, 13.0, 21.0])
    t_u = torch.tensor([35.7, 55.9, 58.2, 81.9, 56.3, 48.9, 33.9, 21.8, 48.4, 60.4, 68.4])
    t_c = t_c.unsqueeze(1)
    t_u = t_u.unsqueeze(1)
    n_samples = t_u.shape[0]
    n_val = int(0.2 * n_samples)
    shuffled_indices = env.tensor([3, 9, 0, 5, 1, 7, 10, 2, 8, 4, 6])
    train_indices = shuffled_indices[:-n_val]
    val_indices = shuffled_indices[-n_val:]
    t_u_train, t_c_train = t_u[train_indices], t_c[train_indices]
    t_u_val, t_c_val = t_u[val_indices], t_c[val_indices]
    t_un_train = 0.1 * t_u_train
    t_un_val = 0.1 * t_u_val

    seq_model = nn.Sequential(OrderedDict([
        ("hidden_linear", nn.Linear(1, 8)),
        ("hidden_activation", nn.Tanh()),
        ("output_linear", nn.Linear(8, 1))]))
    env.init(seq_model)
    env.rec("repr", repr(seq_model))
    env.rec("named", [(name, tuple(param.shape)) for name, param in seq_model.named_parameters()])
    optimizer = optim.SGD(seq_model.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()

    def train_step(t_u_train, t_c_train):
        t_p_train = seq_model(t_u_train)
        loss_train = loss_fn(t_p_train, t_c_train)
        optimizer.zero_grad()
        loss_train.backward()
        optimizer.step()
        return loss_train

    train_step = env.step(train_step)
    for epoch in range(1, 31):
        loss_train = train_step(t_un_train, t_c_train)
        with torch.no_grad():
            t_p_val = seq_model(t_un_val)
            loss_val = loss_fn(t_p_val, t_c_val)
            assert loss_val.requires_grad is False
        if epoch == 1 or epoch % 10 == 0:
            env.rec(f"epoch {epoch}", f"Epoch {epoch}, Training loss {loss_train.item():.4f},"
                                      f" Validation loss {loss_val.item():.4f}")
    env.rec("output", seq_model(t_un_val))
    env.rec("grad", seq_model.hidden_linear.weight.grad)
    env.rec("bias", seq_model.output_linear.bias)


def dlwpt_birds_nets(torch, env):
    nn = torch.nn
    F = torch.nn.functional

    class NetDropout(nn.Module):
        def __init__(self, n_chans1=4):
            super().__init__()
            self.n_chans1 = n_chans1
            self.conv1 = nn.Conv2d(3, n_chans1, kernel_size=3, padding=1)
            self.conv1_dropout = nn.Dropout2d(p=0.4)
            self.conv2 = nn.Conv2d(n_chans1, n_chans1 // 2, kernel_size=3, padding=1)
            self.conv2_dropout = nn.Dropout2d(p=0.4)
            self.fc1 = nn.Linear(2 * 2 * n_chans1 // 2, 8)
            self.fc2 = nn.Linear(8, 2)

        def forward(self, x):
            out = F.max_pool2d(torch.tanh(self.conv1(x)), 2)
            out = self.conv1_dropout(out)
            out = F.max_pool2d(torch.tanh(self.conv2(out)), 2)
            out = self.conv2_dropout(out)
            out = out.view(-1, 2 * 2 * self.n_chans1 // 2)
            out = torch.tanh(self.fc1(out))
            return self.fc2(out)

    class NetBatchNorm(nn.Module):
        def __init__(self, n_chans1=4):
            super().__init__()
            self.n_chans1 = n_chans1
            self.conv1 = nn.Conv2d(3, n_chans1, kernel_size=3, padding=1)
            self.conv1_batchnorm = nn.BatchNorm2d(num_features=n_chans1)
            self.conv2 = nn.Conv2d(n_chans1, n_chans1 // 2, kernel_size=3, padding=1)
            self.conv2_batchnorm = nn.BatchNorm2d(num_features=n_chans1 // 2)
            self.fc1 = nn.Linear(2 * 2 * n_chans1 // 2, 8)
            self.fc2 = nn.Linear(8, 2)

        def forward(self, x):
            out = self.conv1_batchnorm(self.conv1(x))
            out = F.max_pool2d(torch.tanh(out), 2)
            out = self.conv2_batchnorm(self.conv2(out))
            out = F.max_pool2d(torch.tanh(out), 2)
            out = out.view(-1, 2 * 2 * self.n_chans1 // 2)
            out = torch.tanh(self.fc1(out))
            return self.fc2(out)

    class ResBlock(nn.Module):
        def __init__(self, n_chans):
            super().__init__()
            self.conv = nn.Conv2d(n_chans, n_chans, kernel_size=3, padding=1, bias=False)
            self.batch_norm = nn.BatchNorm2d(num_features=n_chans)
            torch.nn.init.kaiming_normal_(self.conv.weight, nonlinearity="relu")
            torch.nn.init.constant_(self.batch_norm.weight, 0.5)
            torch.nn.init.zeros_(self.batch_norm.bias)

        def forward(self, x):
            out = self.conv(x)
            out = self.batch_norm(out)
            out = torch.relu(out)
            return out + x

    class NetResDeep(nn.Module):
        def __init__(self, n_chans1=4, n_blocks=3):
            super().__init__()
            self.n_chans1 = n_chans1
            self.conv1 = nn.Conv2d(3, n_chans1, kernel_size=3, padding=1)
            # (the book's idiom: one ResBlock instance repeated n_blocks times)
            self.resblocks = nn.Sequential(*(n_blocks * [ResBlock(n_chans=n_chans1)]))
            self.fc1 = nn.Linear(2 * 2 * n_chans1, 8)
            self.fc2 = nn.Linear(8, 2)

        def forward(self, x):
            out = F.max_pool2d(torch.relu(self.conv1(x)), 2)
            out = self.resblocks(out)
            out = F.max_pool2d(out, 2)
            out = out.view(-1, 2 * 2 * self.n_chans1)
            out = torch.relu(self.fc1(out))
            return self.fc2(out)

    imgs = env.randn(6, 3, 8, 8)
    labels = env.randint(0, 2, (6,))
    loss_fn = nn.CrossEntropyLoss()
    for cls, l2 in ((NetDropout, False), (NetBatchNorm, False), (NetResDeep, True)):
        model = env.init(cls())
        name = cls.__name__
        env.rec(f"{name} params", [p.numel() for p in model.parameters()])
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)

        def train_step(imgs, labels):
            outputs = model(imgs)
            loss = loss_fn(outputs, labels)
            if l2:
                l2_lambda = 0.001
                l2_norm = sum(p.pow(2.0).sum() for p in model.parameters())
                loss = loss + l2_lambda * l2_norm
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss

        step = env.step(train_step)
        model.train()
        for epoch in range(3):
            loss = step(imgs, labels)
            env.rec(f"{name} {epoch}", loss, cross=cls is not NetDropout)
        model.eval()
        with torch.no_grad():
            _, predicted = torch.max(model(imgs), dim=1)
            correct = int((predicted == labels).sum())
        env.rec(f"{name} eval", model(imgs), cross=cls is not NetDropout)
        env.rec(f"{name} correct", correct, cross=cls is not NetDropout)
        env.rec(f"{name} state", dict(model.state_dict()), cross=cls is not NetDropout)


def ztm_workflow(torch, env):
    nn = torch.nn

    class LinearRegressionModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.weights = nn.Parameter(torch.randn(1, dtype=torch.float), requires_grad=True)
            self.bias = nn.Parameter(torch.randn(1, dtype=torch.float), requires_grad=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.weights * x + self.bias

    weight, bias = 0.7, 0.3
    X = torch.arange(0, 1, 0.02).unsqueeze(dim=1)
    y = weight * X + bias
    train_split = int(0.8 * len(X))
    X_train, y_train = X[:train_split], y[:train_split]
    X_test, y_test = X[train_split:], y[train_split:]
    torch.manual_seed(42)
    model_0 = env.init(LinearRegressionModel())
    env.rec("params", list(model_0.parameters()))
    with torch.inference_mode():
        y_preds = model_0(X_test)
    env.rec("preds requires_grad", y_preds.requires_grad)
    loss_fn = nn.L1Loss()
    optimizer = torch.optim.SGD(params=model_0.parameters(), lr=0.01)

    def train_step(X_train, y_train):
        model_0.train()
        y_pred = model_0(X_train)
        loss = loss_fn(y_pred, y_train)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    train_step = env.step(train_step)
    epoch_count, train_loss_values, test_loss_values = [], [], []
    for epoch in range(40):
        loss = train_step(X_train, y_train)
        model_0.eval()
        with torch.inference_mode():
            test_pred = model_0(X_test)
            test_loss = loss_fn(test_pred, y_test.type(torch.float))
            if epoch % 10 == 0:
                epoch_count.append(epoch)
                train_loss_values.append(loss.detach().numpy())
                test_loss_values.append(test_loss.detach().numpy())
                env.rec(f"epoch {epoch}", f"Epoch: {epoch} | MAE Train Loss: {loss} | "
                                          f"MAE Test Loss: {test_loss} ")
    env.rec("losses", (train_loss_values, test_loss_values))
    env.rec("state_dict", dict(model_0.state_dict()))
    path = env.path("01_pytorch_workflow_model_0.pth")
    torch.save(obj=model_0.state_dict(), f=path)
    loaded_model_0 = LinearRegressionModel()
    loaded_model_0.load_state_dict(torch.load(f=path))
    loaded_model_0.eval()
    with torch.inference_mode():
        loaded_model_preds = loaded_model_0(X_test)
        model_0.eval()
        y_preds = model_0(X_test)
    env.rec("same", bool((y_preds == loaded_model_preds).all()))

    class LinearRegressionModelV2(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear_layer = nn.Linear(in_features=1, out_features=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear_layer(x)

    model_1 = env.init(LinearRegressionModelV2())
    env.rec("v2 params", dict(model_1.state_dict()))
    env.rec("device", str(next(model_1.parameters()).device))


def ztm_classification(torch, env):
    nn = torch.nn

    def accuracy_fn(y_true, y_pred):
        correct = torch.eq(y_true, y_pred).sum().item()
        acc = (correct / len(y_pred)) * 100
        return acc

    class CircleModelV2(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer_1 = nn.Linear(in_features=2, out_features=10)
            self.layer_2 = nn.Linear(in_features=10, out_features=10)
            self.layer_3 = nn.Linear(in_features=10, out_features=1)
            self.relu = nn.ReLU()

        def forward(self, x):
            return self.layer_3(self.relu(self.layer_2(self.relu(self.layer_1(x)))))

    X = env.randn(40, 2)
    y = (X.pow(2).sum(dim=1) > 1.0).type(torch.float)
    X_train, X_test, y_train, y_test = X[:32], X[32:], y[:32], y[32:]
    torch.manual_seed(42)
    model_3 = env.init(CircleModelV2())
    loss_fn = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.SGD(model_3.parameters(), lr=0.1)

    def train_step(X_train, y_train):
        model_3.train()
        y_logits = model_3(X_train).squeeze()
        y_pred = torch.round(torch.sigmoid(y_logits))
        loss = loss_fn(y_logits, y_train)
        acc = accuracy_fn(y_true=y_train, y_pred=y_pred)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss, acc

    train_step = env.step(train_step)
    for epoch in range(30):
        loss, acc = train_step(X_train, y_train)
        model_3.eval()
        with torch.inference_mode():
            test_logits = model_3(X_test).squeeze()
            test_pred = torch.round(torch.sigmoid(test_logits))
            test_loss = loss_fn(test_logits, y_test)
            test_acc = accuracy_fn(y_true=y_test, y_pred=test_pred)
        if epoch % 10 == 0:
            env.rec(f"epoch {epoch}", f"Epoch: {epoch} | Loss: {loss:.5f}, Accuracy: {acc:.2f}% "
                                      f"| Test Loss: {test_loss:.5f}, Test Accuracy: "
                                      f"{test_acc:.2f}%")

    # (the multi-class part: softmax over logits, argmax to labels)
    class BlobModel(nn.Module):
        def __init__(self, input_features, output_features, hidden_units=8):
            super().__init__()
            self.linear_layer_stack = nn.Sequential(
                nn.Linear(in_features=input_features, out_features=hidden_units),
                nn.Linear(in_features=hidden_units, out_features=hidden_units),
                nn.Linear(in_features=hidden_units, out_features=output_features))

        def forward(self, x):
            return self.linear_layer_stack(x)

    X_blob = env.randn(24, 2)
    y_blob = env.randint(0, 4, (24,))
    model_4 = env.init(BlobModel(input_features=2, output_features=4))
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model_4.parameters(), lr=0.1)

    def blob_step(X_blob_train, y_blob_train):
        model_4.train()
        y_logits = model_4(X_blob_train)
        y_pred = torch.softmax(y_logits, dim=1).argmax(dim=1)
        loss = loss_fn(y_logits, y_blob_train)
        acc = accuracy_fn(y_true=y_blob_train, y_pred=y_pred)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss, acc

    blob_step = env.step(blob_step)
    for epoch in range(12):
        loss, acc = blob_step(X_blob, y_blob)
        env.rec(f"blob {epoch}", (loss, acc))
    model_4.eval()
    with torch.inference_mode():
        y_logits = model_4(X_blob)
    y_pred_probs = torch.softmax(y_logits, dim=1)
    env.rec("blob probs", y_pred_probs[:5])
    env.rec("blob preds", y_pred_probs.argmax(dim=1))
