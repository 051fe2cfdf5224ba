"""Sweep 24 (H2, E): more courses at toy sizes, nearly verbatim: d2l's TextCNN (a trainable
and a frozen "constant" embedding concatenated, Conv1d branches, AdaptiveAvgPool1d,
xavier_uniform_ on Linear and Conv1d by net.apply); Zero to Mastery PyTorch's TinyVGG with
its train_step / test_step functions (argmax of softmax, inference_mode, a results dict);
CS231n's network visualisation assignment (a fooling image by normalised gradient ascent
on .data until the model is fooled, class visualisation with roll jitter, L2
regularisation, clamping into the image range and a periodic blur by a Gaussian conv);
d2l's ResNeXt blocks (grouped 3x3 convolutions, LazyConv2d / LazyBatchNorm2d) fine-tuned
with a ten-times learning rate for the new output layer's parameter group. Synthetic data.
Programs `f(torch, env)`, see tutorial_harness.py."""


def d2l_textcnn(torch, env):
    nn = torch.nn

    class TextCNN(nn.Module):
        def __init__(self, vocab_size, embed_size, kernel_sizes, num_channels, **kwargs):
            super(TextCNN, self).__init__(**kwargs)
            self.embedding = nn.Embedding(vocab_size, embed_size)
            self.constant_embedding = nn.Embedding(vocab_size, embed_size)
            self.dropout = nn.Dropout(0.5)
            self.decoder = nn.Linear(sum(num_channels), 2)
            self.pool = nn.AdaptiveAvgPool1d(1)
            self.relu = nn.ReLU()
            self.convs = nn.ModuleList()
            for c, k in zip(num_channels, kernel_sizes):
                self.convs.append(nn.Conv1d(2 * embed_size, c, k))

        def forward(self, inputs):
            embeddings = torch.cat((self.embedding(inputs),
                                    self.constant_embedding(inputs)), dim=2)
            embeddings = embeddings.permute(0, 2, 1)
            encoding = torch.cat([torch.squeeze(self.relu(self.pool(conv(embeddings))), dim=-1)
                                  for conv in self.convs], dim=1)
            outputs = self.decoder(self.dropout(encoding))
            return outputs

    torch.manual_seed(0)
    embed_size, kernel_sizes, nums_channels = 6, [3, 4, 5], [5, 5, 5]
    vocab_size = 30
    net = TextCNN(vocab_size, embed_size, kernel_sizes, nums_channels)

    def init_weights(module):
        if type(module) in (nn.Linear, nn.Conv1d):
            nn.init.xavier_uniform_(module.weight)

    net.apply(init_weights)
    env.rec("init", dict(net.state_dict()))
    embeds = env.randn(vocab_size, embed_size)
    net.embedding.weight.data.copy_(embeds)
    net.constant_embedding.weight.data.copy_(embeds)
    net.constant_embedding.weight.requires_grad = False
    trainer = torch.optim.Adam(net.parameters(), lr=0.001)
    loss = nn.CrossEntropyLoss(reduction="none")

    def train_batch(net, X, y, loss, trainer):
        net.train()
        trainer.zero_grad()
        pred = net(X)
        l = loss(pred, y)
        l.sum().backward()
        trainer.step()
        return l.sum(), (pred.argmax(dim=1) == y).sum()

    step = env.step(train_batch)
    X = env.randint(0, vocab_size, (6, 10))
    y = env.randint(0, 2, (6,))
    for epoch in range(4):
        env.rec(f"epoch {epoch}", step(net, X, y, loss, trainer))
    env.rec("params", dict(net.state_dict()))
    net.eval()
    env.rec("eval", net(X))


def ztm_tinyvgg(torch, env, compile_model=False):
    """compile_model: the course's PyTorch 2.0 chapter, `compiled_model = torch.compile(model)`
    trained by the same loop (the backward and the optimiser step outside the compiled
    forward); else the loop's body is the compiled step."""
    nn = torch.nn

    class TinyVGG(nn.Module):
        def __init__(self, input_shape: int, hidden_units: int, output_shape: int) -> None:
            super().__init__()
            self.conv_block_1 = nn.Sequential(
                nn.Conv2d(in_channels=input_shape, out_channels=hidden_units, kernel_size=3,
                          stride=1, padding=1),
                nn.ReLU(),
                nn.Conv2d(in_channels=hidden_units, out_channels=hidden_units, kernel_size=3,
                          stride=1, padding=1),
                nn.ReLU(),
                nn.MaxPool2d(kernel_size=2, stride=2))
            self.conv_block_2 = nn.Sequential(
                nn.Conv2d(hidden_units, hidden_units, kernel_size=3, padding=1),
                nn.ReLU(),
                nn.Conv2d(hidden_units, hidden_units, kernel_size=3, padding=1),
                nn.ReLU(),
                nn.MaxPool2d(2))
            self.classifier = nn.Sequential(
                nn.Flatten(),
                nn.Linear(in_features=hidden_units * 4 * 4, out_features=output_shape))

        def forward(self, x: torch.Tensor):
            return self.classifier(self.conv_block_2(self.conv_block_1(x)))

    torch.manual_seed(42)
    model_0 = TinyVGG(input_shape=3, hidden_units=6, output_shape=3)
    env.rec("init", dict(model_0.state_dict()))
    train_data = torch.utils.data.TensorDataset(env.rand(12, 3, 16, 16), env.randint(0, 3, (12,)))
    test_data = torch.utils.data.TensorDataset(env.rand(6, 3, 16, 16), env.randint(0, 3, (6,)))
    train_dataloader = torch.utils.data.DataLoader(train_data, batch_size=4, shuffle=True)
    test_dataloader = torch.utils.data.DataLoader(test_data, batch_size=3, shuffle=False)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(params=model_0.parameters(), lr=0.001)
    device = "cpu"

    def batch_step(model, X, y, loss_fn, optimizer):
        y_pred = model(X)
        loss = loss_fn(y_pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        y_pred_class = torch.argmax(torch.softmax(y_pred, dim=1), dim=1)
        return loss.item(), (y_pred_class == y).sum().item() / len(y_pred)

    if compile_model:
        model_0 = env.step(model_0)
    else:
        batch_step = env.step(batch_step)

    def train_step(model, dataloader, loss_fn, optimizer):
        model.train()
        train_loss, train_acc = 0, 0
        for batch, (X, y) in enumerate(dataloader):
            X, y = X.to(device), y.to(device)
            loss, acc = batch_step(model, X, y, loss_fn, optimizer)
            train_loss += loss
            train_acc += acc
        train_loss = train_loss / len(dataloader)
        train_acc = train_acc / len(dataloader)
        return train_loss, train_acc

    def test_step(model, dataloader, loss_fn):
        model.eval()
        test_loss, test_acc = 0, 0
        with torch.inference_mode():
            for batch, (X, y) in enumerate(dataloader):
                X, y = X.to(device), y.to(device)
                test_pred_logits = model(X)
                loss = loss_fn(test_pred_logits, y)
                test_loss += loss.item()
                test_pred_labels = test_pred_logits.argmax(dim=1)
                test_acc += ((test_pred_labels == y).sum().item() / len(test_pred_labels))
        test_loss = test_loss / len(dataloader)
        test_acc = test_acc / len(dataloader)
        return test_loss, test_acc

    def train(model, train_dataloader, test_dataloader, optimizer, loss_fn, epochs=5):
        results = {"train_loss": [], "train_acc": [], "test_loss": [], "test_acc": []}
        for epoch in range(epochs):
            train_loss, train_acc = train_step(model, train_dataloader, loss_fn, optimizer)
            test_loss, test_acc = test_step(model, test_dataloader, loss_fn)
            results["train_loss"].append(train_loss)
            results["train_acc"].append(train_acc)
            results["test_loss"].append(test_loss)
            results["test_acc"].append(test_acc)
        return results

    env.rec("results", train(model_0, train_dataloader, test_dataloader, optimizer, loss_fn,
                             epochs=3))
    env.rec("params", dict(model_0.state_dict()))


def ztm_tinyvgg_compiled_model(torch, env):
    ztm_tinyvgg(torch, env, compile_model=True)


def cs231n_visualization(torch, env):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(6, 8, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))
    env.rec("init", dict(model.state_dict()))
    for param in model.parameters():
        param.requires_grad = False
    model.eval()

    def compute_saliency_maps(X, y, model):
        X.requires_grad_()
        saliency = None
        scores = model(X)
        scores = scores.gather(1, y.view(-1, 1)).squeeze()
        scores.backward(torch.ones(scores.shape))
        saliency, _ = torch.max(X.grad.abs(), dim=1)
        return saliency

    X = env.randn(3, 3, 12, 12)
    y = torch.tensor([0, 3, 1])
    env.rec("saliency", env.step(compute_saliency_maps)(X.clone(), y, model))

    def fooling_step(X_fooling, target_y, learning_rate):
        scores = model(X_fooling)
        target_score = scores[0, target_y]
        target_score.backward()
        g = X_fooling.grad
        dX = learning_rate * g / g.norm()
        X_fooling.data += dX
        X_fooling.grad.zero_()
        return scores.data.max(1)[1][0].item()

    fooling_step = env.step(fooling_step)

    def make_fooling_image(X, target_y, model):
        X_fooling = X.clone()
        X_fooling = X_fooling.requires_grad_()
        learning_rate = 1
        for it in range(100):
            if fooling_step(X_fooling, target_y, learning_rate) == target_y:
                break
        return X_fooling, it

    with torch.no_grad():
        current = model(X[:1]).argmax(1).item()
    target_y = (current + 2) % 5
    X_fooling, iters = make_fooling_image(X[:1], target_y, model)
    env.rec("fooling", (X_fooling, iters, model(X_fooling).argmax(1)))

    def jitter(X, ox, oy):
        if ox != 0:
            left = X[:, :, :, :-ox]
            right = X[:, :, :, -ox:]
            X = torch.cat([right, left], dim=3)
        if oy != 0:
            top = X[:, :, :-oy]
            bottom = X[:, :, -oy:]
            X = torch.cat([bottom, top], dim=2)
        return X

    def blur_image(X, sigma=1):
        k = torch.arange(-2, 3, dtype=torch.float32)
        g = torch.exp(-k ** 2 / (2 * sigma ** 2))
        g = g / g.sum()
        kernel = (g[:, None] * g[None, :]).expand(3, 1, 5, 5)
        X.copy_(F.conv2d(X, kernel, padding=2, groups=3))
        return X

    def class_vis_step(img, target_y, l2_reg, learning_rate):
        score = model(img)[0, target_y] - l2_reg * img.norm() ** 2
        score.backward()
        with torch.no_grad():
            img += learning_rate * img.grad / img.grad.norm()
            img.grad.zero_()

    class_vis_step = env.step(class_vis_step)

    def create_class_visualization(target_y, model, l2_reg=1e-3, learning_rate=25,
                                   num_iterations=8, blur_every=3, max_jitter=2):
        img = (env.randn(1, 3, 12, 12) * 1.0).requires_grad_()
        for t in range(num_iterations):
            ox, oy = env.choice(max_jitter + 1), env.choice(max_jitter + 1)
            img.data.copy_(jitter(img.data, ox, oy))
            class_vis_step(img, target_y, l2_reg, learning_rate)
            img.data.copy_(jitter(img.data, -ox, -oy))
            for c in range(3):
                lo = float(-0.5 / 0.25)
                hi = float((1.0 - 0.5) / 0.25)
                img.data[:, c].clamp_(min=lo, max=hi)
            if t % blur_every == 0:
                blur_image(img.data, sigma=0.5)
        return img

    img = create_class_visualization(2, model)
    env.rec("class visualization", (img, model(img)[0]))


def resnext_finetune(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class ResNeXtBlock(nn.Module):
        def __init__(self, num_channels, groups, bot_mul, use_1x1conv=False, strides=1):
            super().__init__()
            bot_channels = int(round(num_channels * bot_mul))
            self.conv1 = nn.LazyConv2d(bot_channels, kernel_size=1, stride=1)
            self.conv2 = nn.LazyConv2d(bot_channels, kernel_size=3, stride=strides,
                                       padding=1, groups=bot_channels // groups)
            self.conv3 = nn.LazyConv2d(num_channels, kernel_size=1, stride=1)
            self.bn1 = nn.LazyBatchNorm2d()
            self.bn2 = nn.LazyBatchNorm2d()
            self.bn3 = nn.LazyBatchNorm2d()
            if use_1x1conv:
                self.conv4 = nn.LazyConv2d(num_channels, kernel_size=1, stride=strides)
                self.bn4 = nn.LazyBatchNorm2d()
            else:
                self.conv4 = None

        def forward(self, X):
            Y = F.relu(self.bn1(self.conv1(X)))
            Y = F.relu(self.bn2(self.conv2(Y)))
            Y = self.bn3(self.conv3(Y))
            if self.conv4:
                X = self.bn4(self.conv4(X))
            return F.relu(Y + X)

    torch.manual_seed(0)
    pretrained_net = nn.Sequential(
        nn.LazyConv2d(8, kernel_size=3, padding=1), nn.LazyBatchNorm2d(), nn.ReLU(),
        ResNeXtBlock(8, 4, 1), ResNeXtBlock(16, 4, 1, use_1x1conv=True, strides=2),
        nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.LazyLinear(10))
    X = env.randn(4, 3, 8, 8)
    env.rec("shape", pretrained_net(X).shape)
    env.init(pretrained_net)
    finetune_net = pretrained_net
    finetune_net[-1] = nn.Linear(16, 2)
    nn.init.xavier_uniform_(finetune_net[-1].weight)
    env.rec("new head", dict(finetune_net[-1].state_dict()))

    def train_fine_tuning(net, learning_rate, param_group=True):
        loss = nn.CrossEntropyLoss(reduction="none")
        if param_group:
            params_1x = [param for name, param in net.named_parameters()
                         if name not in ["7.weight", "7.bias"]]
            trainer = torch.optim.SGD([{'params': params_1x},
                                       {'params': net[-1].parameters(),
                                        'lr': learning_rate * 10}],
                                      lr=learning_rate, weight_decay=0.001)
        else:
            trainer = torch.optim.SGD(net.parameters(), lr=learning_rate, weight_decay=0.001)
        return loss, trainer

    loss, trainer = train_fine_tuning(finetune_net, 5e-3)

    def train_batch(net, X, y, loss, trainer):
        net.train()
        trainer.zero_grad()
        pred = net(X)
        l = loss(pred, y)
        l.sum().backward()
        trainer.step()
        return l.sum(), (pred.argmax(dim=1) == y).sum()

    step = env.step(train_batch)
    y = env.randint(0, 2, (4,))
    for epoch in range(4):
        env.rec(f"epoch {epoch}", step(finetune_net, X, y, loss, trainer))
    env.rec("params", dict(finetune_net.state_dict()))
    finetune_net.eval()
    env.rec("eval", finetune_net(X))
