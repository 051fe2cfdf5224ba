"""Vision tutorials: "Training a Classifier" (CIFAR-10-shaped data), "Transfer Learning for
Computer Vision" (a small pretrained-like backbone instead of resnet18: fixed feature
extractor and fine-tuning), "Adversarial Example Generation" (FGSM) and "Fusing Convolution
and Batch Norm" (the fused weights computed by hand). Programs `f(torch, env)`, see
tutorial_harness.py."""
import copy


def _data(torch):
    return __import__(torch.__name__ + ".utils.data", fromlist=["DataLoader"])


def cifar_classifier(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    data = _data(torch)
    classes = ('plane', 'car', 'bird', 'cat', 'deer', 'dog', 'frog', 'horse', 'ship', 'truck')
    batch_size = 4
    trainset = data.TensorDataset(env.rand(8, 3, 32, 32) * 2 - 1, env.randint(0, 10, (8,)))
    testset = data.TensorDataset(env.rand(8, 3, 32, 32) * 2 - 1, env.randint(0, 10, (8,)))
    trainloader = data.DataLoader(trainset, batch_size=batch_size, shuffle=False)
    testloader = data.DataLoader(testset, batch_size=batch_size, shuffle=False)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 6, 5)
            self.pool = nn.MaxPool2d(2, 2)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.fc1 = nn.Linear(16 * 5 * 5, 120)
            self.fc2 = nn.Linear(120, 84)
            self.fc3 = nn.Linear(84, 10)

        def forward(self, x):
            x = self.pool(F.relu(self.conv1(x)))
            x = self.pool(F.relu(self.conv2(x)))
            x = torch.flatten(x, 1)  # flatten all dimensions except batch
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            x = self.fc3(x)
            return x

    net = env.init(Net())
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    def train_step(inputs, labels):
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        return loss

    train_step = env.step(train_step)
    for epoch in range(2):  # loop over the dataset multiple times
        running_loss = 0.0
        for i, data_ in enumerate(trainloader, 0):
            inputs, labels = data_
            loss = train_step(inputs, labels)
            running_loss += loss.item()
            if i % 2 == 1:
                env.rec(f'[{epoch + 1}, {i + 1:5d}] loss', running_loss / 2)
                running_loss = 0.0
    PATH = env.path('cifar_net.pth')
    torch.save(net.state_dict(), PATH)
    net = Net()
    net.load_state_dict(torch.load(PATH, weights_only=True))
    env.rec("state", net.state_dict())

    dataiter = iter(testloader)
    images, labels = next(dataiter)
    outputs = net(images)
    env.rec("outputs", outputs)
    _, predicted = torch.max(outputs, 1)
    env.rec("Predicted", ' '.join(f'{classes[predicted[j]]:5s}' for j in range(4)))

    def evaluate(images, labels):
        outputs = net(images)
        # the class with the highest energy is what we choose as prediction
        _, predicted = torch.max(outputs.data, 1)
        return labels.size(0), (predicted == labels).sum().item(), predicted

    evaluate = env.step(evaluate)
    correct, total = 0, 0
    correct_pred = {classname: 0 for classname in classes}
    total_pred = {classname: 0 for classname in classes}
    with torch.no_grad():
        for data_ in testloader:
            images, labels = data_
            n, c, predictions = evaluate(images, labels)
            total += n
            correct += c
            for label, prediction in zip(labels, predictions):
                if label == prediction:
                    correct_pred[classes[label]] += 1
                total_pred[classes[label]] += 1
    env.rec("accuracy", 100 * correct // total)
    env.rec("per class", {k: (correct_pred[k], total_pred[k]) for k in classes})
    with torch.no_grad():
        env.rec("argmax", net(images).argmax(dim=1))


def _backbone(torch, env):
    """A "pretrained" resnet-like model: conv/bn/relu/maxpool, a residual block, global
    average pooling and an `fc` head (its weights from env.init)."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)

        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += identity
            return self.relu(out)

    class TinyResNet(nn.Module):
        def __init__(self, num_classes=10):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.layer1 = Block(8)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(8, num_classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer1(x)
            x = torch.flatten(self.avgpool(x), 1)
            return self.fc(x)

    return env.init(TinyResNet())


def _train_model(torch, env, model, criterion, optimizer, scheduler, dataloaders, num_epochs):
    dataset_sizes = {x: len(dataloaders[x].dataset) for x in ['train', 'val']}

    def run_batch(model, inputs, labels, phase):
        # zero the parameter gradients
        optimizer.zero_grad()
        # forward; track history if only in train
        with torch.set_grad_enabled(phase == 'train'):
            outputs = model(inputs)
            _, preds = torch.max(outputs, 1)
            loss = criterion(outputs, labels)
            # backward + optimize only if in training phase
            if phase == 'train':
                loss.backward()
                optimizer.step()
        return loss.item() * inputs.size(0), torch.sum(preds == labels.data)

    # (one compiled function per phase: phase x lr x .grad None exceed the recompile limit)
    steps = {phase: env.step(run_batch) for phase in ['train', 'val']}
    best_model_wts = copy.deepcopy(model.state_dict())
    best_acc = 0.0
    for epoch in range(num_epochs):
        for phase in ['train', 'val']:
            if phase == 'train':
                model.train()  # Set model to training mode
            else:
                model.eval()   # Set model to evaluate mode
            running_loss = 0.0
            running_corrects = 0
            for inputs, labels in dataloaders[phase]:
                loss, corrects = steps[phase](model, inputs, labels, phase)
                running_loss += loss
                running_corrects += corrects
            if phase == 'train':
                scheduler.step()
            epoch_loss = running_loss / dataset_sizes[phase]
            epoch_acc = running_corrects.double() / dataset_sizes[phase]
            env.rec(f'{epoch} {phase} Loss/Acc', (epoch_loss, epoch_acc))
            # deep copy the model
            if phase == 'val' and epoch_acc > best_acc:
                best_acc = epoch_acc
                best_model_wts = copy.deepcopy(model.state_dict())
    env.rec("best acc", best_acc)
    env.rec("lr", scheduler.get_last_lr())
    model.load_state_dict(best_model_wts)
    return model


def _loaders(torch, env):
    data = _data(torch)
    sets = {'train': data.TensorDataset(env.randn(8, 3, 16, 16), env.randint(0, 2, (8,))),
            'val': data.TensorDataset(env.randn(8, 3, 16, 16), env.randint(0, 2, (8,)))}
    return {x: data.DataLoader(sets[x], batch_size=4, shuffle=False) for x in ['train', 'val']}


def transfer_fixed_feature(torch, env):
    nn, optim, lr_scheduler = torch.nn, torch.optim, torch.optim.lr_scheduler
    dataloaders = _loaders(torch, env)
    model_conv = _backbone(torch, env)
    for param in model_conv.parameters():
        param.requires_grad = False
    num_ftrs = model_conv.fc.in_features
    model_conv.fc = env.init(nn.Linear(num_ftrs, 2))
    criterion = nn.CrossEntropyLoss()
    # only parameters of the final layer are being optimized
    optimizer_conv = optim.SGD(model_conv.fc.parameters(), lr=0.01, momentum=0.9)
    exp_lr_scheduler = lr_scheduler.StepLR(optimizer_conv, step_size=2, gamma=0.1)
    model_conv = _train_model(torch, env, model_conv, criterion, optimizer_conv,
                              exp_lr_scheduler, dataloaders, num_epochs=3)
    env.rec("state", model_conv.state_dict())
    env.rec("frozen grads", [p.grad is None for p in model_conv.parameters()])


def transfer_finetune(torch, env):
    nn, optim, lr_scheduler = torch.nn, torch.optim, torch.optim.lr_scheduler
    dataloaders = _loaders(torch, env)
    model_ft = _backbone(torch, env)
    model_ft.conv1.requires_grad_(False)
    model_ft.bn1.requires_grad_(False)
    num_ftrs = model_ft.fc.in_features
    model_ft.fc = env.init(nn.Linear(num_ftrs, 2))
    criterion = nn.CrossEntropyLoss()
    params_to_update = filter(lambda p: p.requires_grad, model_ft.parameters())
    optimizer_ft = optim.SGD(params_to_update, lr=0.01, momentum=0.9, weight_decay=1e-3)
    exp_lr_scheduler = lr_scheduler.StepLR(optimizer_ft, step_size=1, gamma=0.5)
    model_ft = _train_model(torch, env, model_ft, criterion, optimizer_ft, exp_lr_scheduler,
                            dataloaders, num_epochs=2)
    env.rec("state", model_ft.state_dict())
    env.rec("grads", [p.grad for p in model_ft.parameters() if p.requires_grad])
    model_ft.eval()
    with torch.no_grad():
        inputs, _ = next(iter(dataloaders['val']))
        _, preds = torch.max(model_ft(inputs), 1)
        env.rec("preds", preds)


def fgsm(torch, env):
    nn, F = torch.nn, torch.nn.functional
    data = _data(torch)
    epsilons = [0, .05, .1, .3]

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, 1)
            self.conv2 = nn.Conv2d(4, 8, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(8 * 5 * 5, 16)
            self.fc2 = nn.Linear(16, 10)

        def forward(self, x):
            x = F.relu(self.conv1(x))
            x = F.relu(self.conv2(x))
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = F.relu(self.fc1(x))
            x = self.dropout2(x)
            x = self.fc2(x)
            return F.log_softmax(x, dim=1)

    model = env.init(Net())
    model.eval()   # (the model is in evaluation mode: dropout off)
    images = env.rand(6, 1, 14, 14)
    with torch.no_grad():
        targets = model((images - 0.1307) / 0.3081).argmax(1)
    targets[1] = (targets[1] + 1) % 10      # (one wrong initial prediction: skipped)
    test_loader = data.DataLoader(data.TensorDataset((images - 0.1307) / 0.3081, targets),
                                  batch_size=1, shuffle=False)

    def fgsm_attack(image, epsilon, data_grad):
        sign_data_grad = data_grad.sign()
        perturbed_image = image + epsilon * sign_data_grad
        perturbed_image = torch.clamp(perturbed_image, 0, 1)
        return perturbed_image

    def denorm(batch, mean=[0.1307], std=[0.3081]):
        if isinstance(mean, list):
            mean = torch.tensor(mean)
        if isinstance(std, list):
            std = torch.tensor(std)
        return batch * std.view(1, -1, 1, 1) + mean.view(1, -1, 1, 1)

    def attack(model, data, target, epsilon):
        data.requires_grad = True
        output = model(data)
        init_pred = output.max(1, keepdim=True)[1]
        # (the tutorial's `if init_pred.item() != target.item()` is below: a value guard)
        loss = F.nll_loss(output, target)
        model.zero_grad()
        loss.backward()
        data_grad = data.grad.data
        data_denorm = denorm(data)
        perturbed_data = fgsm_attack(data_denorm, epsilon, data_grad)
        perturbed_data_normalized = (perturbed_data - 0.1307) / 0.3081
        output = model(perturbed_data_normalized)
        final_pred = output.max(1, keepdim=True)[1]
        # (detached: compile cannot return a result with a graph the step's backward left)
        return final_pred, init_pred, perturbed_data.detach(), loss, data_grad

    attack = env.step(attack)
    accuracies, examples = [], []
    for eps in epsilons:
        correct, adv_examples = 0, []
        for data_, target in test_loader:
            final_pred, init_pred, perturbed_data, loss, data_grad = \
                attack(model, data_, target, eps)
            if init_pred.item() != target.item():
                continue
            env.rec(f"eps {eps} loss", loss)
            env.rec(f"eps {eps} grad", data_grad)
            if final_pred.item() == target.item():
                correct += 1
                if eps == 0 and len(adv_examples) < 5:
                    adv_ex = perturbed_data.squeeze().detach().cpu().numpy()
                    adv_examples.append((init_pred.item(), final_pred.item(), adv_ex))
            elif len(adv_examples) < 5:
                adv_ex = perturbed_data.squeeze().detach().cpu().numpy()
                adv_examples.append((init_pred.item(), final_pred.item(), adv_ex))
        final_acc = correct / float(len(test_loader))
        accuracies.append(final_acc)
        examples.append(adv_examples)
    env.rec("accuracies", accuracies)
    env.rec("examples", [[(a, b, c) for a, b, c in ex] for ex in examples])
    env.rec("params grads", [p.grad for p in model.parameters()])


def fuse_conv_bn(torch, env):
    nn = torch.nn

    def fuse_conv_bn_eval(conv, bn):
        assert (not (conv.training or bn.training)), "Fusion only for eval!"
        fused_conv = copy.deepcopy(conv)
        fused_conv.weight, fused_conv.bias = fuse_conv_bn_weights(
            fused_conv.weight, fused_conv.bias,
            bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
        return fused_conv

    def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
        if conv_b is None:
            conv_b = torch.zeros_like(bn_rm)
        if bn_w is None:
            bn_w = torch.ones_like(bn_rm)
        if bn_b is None:
            bn_b = torch.zeros_like(bn_rm)
        bn_var_rsqrt = torch.rsqrt(bn_rv + bn_eps)
        conv_w = conv_w * (bn_w * bn_var_rsqrt).reshape([-1] + [1] * (len(conv_w.shape) - 1))
        conv_b = (conv_b - bn_rm) * bn_var_rsqrt * bn_w + bn_b
        return torch.nn.Parameter(conv_w), torch.nn.Parameter(conv_b)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(4)
            self.conv2 = nn.Conv2d(4, 4, 3)
            self.bn2 = nn.BatchNorm2d(4, affine=False)

        def forward(self, x):
            return self.bn2(self.conv2(torch.relu(self.bn(self.conv(x)))))

    model = env.init(M())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_step(x):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    train_step = env.step(train_step)
    model.train()
    for _ in range(3):
        env.rec("train loss", train_step(env.randn(2, 3, 8, 8)))
    model.eval()
    fused = copy.deepcopy(model)
    fused.conv = fuse_conv_bn_eval(fused.conv, fused.bn)
    fused.bn = nn.Identity()
    fused.conv2 = fuse_conv_bn_eval(fused.conv2, fused.bn2)
    fused.bn2 = nn.Identity()
    inp = env.randn(2, 3, 8, 8)

    def infer(m, x):
        with torch.no_grad():
            return m(x)

    infer = env.step(infer)
    a, b = infer(model, inp), infer(fused, inp)
    env.rec("unfused", a)
    env.rec("fused", b)
    env.rec("close", torch.allclose(a, b, atol=1e-5))
    lib = torch.nn.utils.fusion.fuse_conv_bn_eval(model.conv, model.bn)
    env.rec("library fuse", (lib.weight, lib.bias, fused.conv.weight, fused.conv.bias))
    env.rec("fused types", (type(fused.conv.weight).__name__, fused.conv.weight.requires_grad))
