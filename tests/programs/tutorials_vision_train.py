"""Vision tutorials that optimise inputs or train with extra machinery: "Neural Transfer
Using PyTorch" (a small conv stack instead of VGG19; LBFGS over the input image),
"Knowledge Distillation" (soft targets with temperature, KLDivLoss) and the training
utilities the tutorials use (model.apply(init_fn), clip_grad_norm_, AdamW with OneCycleLR
and CosineAnnealingLR, nn.Flatten, Sequential from an OrderedDict, BatchNorm2d and Dropout
in train/eval). Programs `f(torch, env)`, see tutorial_harness.py."""
import warnings
from collections import OrderedDict


def neural_style(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    imsize = 12
    style_img = env.rand(1, 3, imsize, imsize)
    content_img = env.rand(1, 3, imsize, imsize)

    class ContentLoss(nn.Module):
        def __init__(self, target,):
            super().__init__()
            # we 'detach' the target content from the tree used to dynamically compute the
            # gradient: this is a stated value, not a variable.
            self.target = target.detach()

        def forward(self, input):
            self.loss = F.mse_loss(input, self.target)
            return input

    def gram_matrix(input):
        a, b, c, d = input.size()  # a=batch size(=1), b=number of feature maps
        features = input.view(a * b, c * d)  # resize F_XL into \hat F_XL
        G = torch.mm(features, features.t())  # compute the gram product
        # we 'normalize' the values of the gram matrix by dividing by the number of element
        return G.div(a * b * c * d)

    class StyleLoss(nn.Module):
        def __init__(self, target_feature):
            super().__init__()
            self.target = gram_matrix(target_feature).detach()

        def forward(self, input):
            G = gram_matrix(input)
            self.loss = F.mse_loss(G, self.target)
            return input

    cnn = env.init(nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(inplace=True), nn.Conv2d(4, 4, 3, padding=1),
        nn.ReLU(inplace=True), nn.MaxPool2d(2, 2), nn.Conv2d(4, 8, 3, padding=1),
        nn.ReLU(inplace=True), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(inplace=True))).eval()
    cnn_normalization_mean = torch.tensor([0.485, 0.456, 0.406])
    cnn_normalization_std = torch.tensor([0.229, 0.224, 0.225])

    class Normalization(nn.Module):
        def __init__(self, mean, std):
            super().__init__()
            # .view the mean and std to make them [C x 1 x 1] so that they can directly
            # work with image Tensor of shape [B x C x H x W].
            self.mean = torch.tensor(mean).view(-1, 1, 1)
            self.std = torch.tensor(std).view(-1, 1, 1)

        def forward(self, img):
            return (img - self.mean) / self.std

    content_layers_default = ['conv_3']
    style_layers_default = ['conv_1', 'conv_2', 'conv_3', 'conv_4']

    def get_style_model_and_losses(cnn, normalization_mean, normalization_std, style_img,
                                   content_img, content_layers=content_layers_default,
                                   style_layers=style_layers_default):
        normalization = Normalization(normalization_mean, normalization_std)
        content_losses = []
        style_losses = []
        model = nn.Sequential(normalization)
        i = 0  # increment every time we see a conv
        for layer in cnn.children():
            if isinstance(layer, nn.Conv2d):
                i += 1
                name = 'conv_{}'.format(i)
            elif isinstance(layer, nn.ReLU):
                name = 'relu_{}'.format(i)
                # The in-place version doesn't play very nicely with the ContentLoss and
                # StyleLoss we insert below. So we replace with out-of-place ones here.
                layer = nn.ReLU(inplace=False)
            elif isinstance(layer, nn.MaxPool2d):
                name = 'pool_{}'.format(i)
            elif isinstance(layer, nn.BatchNorm2d):
                name = 'bn_{}'.format(i)
            else:
                raise RuntimeError('Unrecognized layer: {}'.format(layer.__class__.__name__))
            model.add_module(name, layer)
            if name in content_layers:
                target = model(content_img).detach()
                content_loss = ContentLoss(target)
                model.add_module("content_loss_{}".format(i), content_loss)
                content_losses.append(content_loss)
            if name in style_layers:
                target_feature = model(style_img).detach()
                style_loss = StyleLoss(target_feature)
                model.add_module("style_loss_{}".format(i), style_loss)
                style_losses.append(style_loss)
        # now we trim off the layers after the last content and style losses
        for i in range(len(model) - 1, -1, -1):
            if isinstance(model[i], ContentLoss) or isinstance(model[i], StyleLoss):
                break
        model = model[:(i + 1)]
        return model, style_losses, content_losses

    input_img = content_img.clone()

    def get_input_optimizer(input_img):
        # this line to show that input is a parameter that requires a gradient
        optimizer = optim.LBFGS([input_img], max_iter=4)
        return optimizer

    def run_style_transfer(cnn, normalization_mean, normalization_std, content_img, style_img,
                           input_img, num_steps=3, style_weight=1000000, content_weight=1):
        model, style_losses, content_losses = get_style_model_and_losses(
            cnn, normalization_mean, normalization_std, style_img, content_img)
        env.rec("model", repr(model))
        # We want to optimize the input and not the model parameters so we update all the
        # requires_grad fields accordingly
        input_img.requires_grad_(True)
        # We also put the model in evaluation mode, so that specific layers such as dropout
        # or batch normalization layers behave correctly.
        model.eval()
        model.requires_grad_(False)
        optimizer = get_input_optimizer(input_img)
        run = [0]

        def evaluate():     # (the tutorial's closure but `run[0] += 1`, see closure below)
            # correct the values of updated input image
            with torch.no_grad():
                input_img.clamp_(0, 1)
            optimizer.zero_grad()
            model(input_img)
            style_score = 0
            content_score = 0
            for sl in style_losses:
                style_score += sl.loss
            for cl in content_losses:
                content_score += cl.loss
            style_score *= style_weight
            content_score *= content_weight
            loss = style_score + content_score
            loss.backward()
            return style_score + content_score

        # (`run[0] += 1` stays out of the compiled function: a compiled call does not
        # replay a Python number it writes, so each traced run with it would not be kept)
        evaluate = env.step(evaluate)

        def closure():
            loss = evaluate()
            run[0] += 1
            return loss

        while run[0] <= num_steps:
            with warnings.catch_warnings():
                # (LBFGS's float(loss): PyTorch warns of it once per process too)
                warnings.filterwarnings("ignore", "Converting a tensor with requires_grad")
                loss = optimizer.step(closure)
            env.rec(f"run {run[0]} loss", loss)
            env.rec(f"run {run[0]} scores", (style_losses[0].loss, content_losses[0].loss))
        # a last correction...
        with torch.no_grad():
            input_img.clamp_(0, 1)
        return input_img

    output = run_style_transfer(cnn, cnn_normalization_mean, cnn_normalization_std,
                                content_img, style_img, input_img)
    env.rec("output", output)
    env.rec("grad", input_img.grad)
    env.rec("cnn grads", [p.grad is None and p.requires_grad for p in cnn.parameters()])


def _mini_cifar(torch, env, n=16):
    data = __import__(torch.__name__ + ".utils.data", fromlist=["DataLoader"])
    ds = data.TensorDataset(env.randn(n, 3, 8, 8), env.randint(0, 10, (n,)))
    return data.DataLoader(ds, batch_size=8, shuffle=False)


def distillation(torch, env, dropout=0.0, kl=False):
    """dropout > 0: the student's dropout draws from the library's generator (records
    cross=False). kl: the soft-target loss with nn.KLDivLoss(reduction="batchmean")."""
    nn, optim = torch.nn, torch.optim
    cross = dropout == 0.0
    train_loader = _mini_cifar(torch, env)

    class DeepNN(nn.Module):
        def __init__(self, num_classes=10):
            super(DeepNN, self).__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 8, kernel_size=3, padding=1), nn.ReLU(),
                nn.Conv2d(8, 4, kernel_size=3, padding=1), nn.ReLU(),
                nn.MaxPool2d(kernel_size=2, stride=2))
            self.classifier = nn.Sequential(
                nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, num_classes))

        def forward(self, x):
            x = self.features(x)
            x = torch.flatten(x, 1)
            x = self.classifier(x)
            return x

    class LightNN(nn.Module):
        def __init__(self, num_classes=10):
            super(LightNN, self).__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 4, kernel_size=3, padding=1), nn.ReLU(),
                nn.MaxPool2d(kernel_size=2, stride=2))
            self.classifier = nn.Sequential(
                nn.Linear(64, 16), nn.ReLU(), nn.Dropout(dropout), nn.Linear(16, num_classes))

        def forward(self, x):
            x = self.features(x)
            x = torch.flatten(x, 1)
            x = self.classifier(x)
            return x

    teacher = env.init(DeepNN())
    student = env.init(LightNN())
    T, soft_target_loss_weight, ce_loss_weight = 2, 0.25, 0.75
    ce_loss = nn.CrossEntropyLoss()
    kl_loss = nn.KLDivLoss(reduction="batchmean")
    optimizer = optim.Adam(student.parameters(), lr=0.001)
    teacher.eval()   # Teacher set to evaluation mode
    student.train()  # Student to train mode

    def train_step(inputs, labels):
        optimizer.zero_grad()
        # Forward pass with the teacher model - do not save gradients here as we do not
        # change the teacher's weights
        with torch.no_grad():
            teacher_logits = teacher(inputs)
        # Forward pass with the student model
        student_logits = student(inputs)
        # Soften the student logits by applying softmax first and log() second
        soft_targets = nn.functional.softmax(teacher_logits / T, dim=-1)
        soft_prob = nn.functional.log_softmax(student_logits / T, dim=-1)
        if kl:
            soft_targets_loss = kl_loss(soft_prob, soft_targets) * (T ** 2)
        else:
            # Calculate the soft targets loss. Scaled by T**2 as suggested by the authors
            soft_targets_loss = torch.sum(soft_targets * (soft_targets.log() - soft_prob)) \
                / soft_prob.size()[0] * (T**2)
        # Calculate the true label loss
        label_loss = ce_loss(student_logits, labels)
        # Weighted sum of the two losses
        loss = soft_target_loss_weight * soft_targets_loss + ce_loss_weight * label_loss
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for epoch in range(2):
        running_loss = 0.0
        for inputs, labels in train_loader:
            running_loss += train_step(inputs, labels)
        env.rec(f"Epoch {epoch + 1}, Loss", running_loss / len(train_loader), cross)
    env.rec("student", student.state_dict(), cross)
    env.rec("grads", [p.grad for p in student.parameters()], cross)

    def test(model, test_loader):
        model.eval()
        correct, total = 0, 0
        with torch.no_grad():
            for inputs, labels in test_loader:
                outputs = model(inputs)
                _, predicted = torch.max(outputs.data, 1)
                total += labels.size(0)
                correct += (predicted == labels).sum().item()
        return 100 * correct / total

    env.rec("accuracy", (test(teacher, train_loader), test(student, train_loader)), cross)


def training_utilities(torch, env, dropout=0.0):
    """dropout > 0: Dropout draws from the library's generator (records cross=False)."""
    nn, optim = torch.nn, torch.optim
    cross = dropout == 0.0

    def init_weights(m):
        if isinstance(m, nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)
            m.bias.data.fill_(0.01)
        elif isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode='fan_out', nonlinearity='relu')
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.constant_(m.weight, 1)
            nn.init.constant_(m.bias, 0)

    model = nn.Sequential(OrderedDict([
        # (no bias before a BatchNorm: its gradient is rounding noise, which Adam scales up)
        ('conv1', nn.Conv2d(3, 6, 3, padding=1, bias=False)),
        ('bn1', nn.BatchNorm2d(6)),
        ('relu1', nn.ReLU()),
        ('pool', nn.MaxPool2d(2)),
        ('drop', nn.Dropout(dropout)),
        ('flatten', nn.Flatten()),
        ('fc1', nn.Linear(6 * 4 * 4, 20)),
        ('relu2', nn.ReLU()),
        ('fc2', nn.Linear(20, 5)),
    ]))
    model.apply(init_weights)
    limit = (6 / (96 + 20)) ** 0.5
    env.rec("init", (bool(model.fc1.weight.abs().max() <= limit), model.fc1.bias,
                     model.conv1.bias is None, model.bn1.weight, list(model._modules)))
    model = env.init(model)
    env.rec("children", [type(m).__name__ for m in model.children()])
    env.rec("named", [n for n, _ in model.named_modules()])
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if name.endswith("bias") or name.startswith("bn") else decay).append(p)
    optimizer = optim.AdamW([{'params': decay, 'weight_decay': 0.05},
                             {'params': no_decay, 'weight_decay': 0.0}], lr=torch.tensor(0.01))
    steps_per_epoch, epochs = 3, 2
    scheduler = optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.05, epochs=epochs,
                                              steps_per_epoch=steps_per_epoch)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

    def train_step(x, y):
        optimizer.zero_grad(set_to_none=True)
        out = model(x)
        loss = criterion(out, y)
        loss.backward()
        total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        return loss, total_norm

    train_step = env.step(train_step)
    model.train()
    for epoch in range(epochs):
        for _ in range(steps_per_epoch):
            loss, norm = train_step(env.randn(4, 3, 8, 8), env.randint(0, 5, (4,)))
            scheduler.step()
            env.rec("loss, norm", (loss, norm), cross)
            env.rec("lr", [g["lr"] for g in optimizer.param_groups])
    env.rec("params", model.state_dict(), cross)
    env.rec("grads", [p.grad for p in model.parameters()], cross)
    model.eval()
    x = env.randn(3, 3, 8, 8)
    with torch.no_grad():
        env.rec("eval", model(x), cross)
        env.rec("eval again", model(x), cross)   # (eval: no dropout, running stats)

    # fine-tuning the head with CosineAnnealingLR (per epoch, float lr)
    head = nn.Sequential(nn.Flatten(), nn.Linear(6 * 4 * 4, 5))
    head = env.init(head)
    features = model[:5]
    features.requires_grad_(False)
    opt2 = optim.SGD(head.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    sched2 = optim.lr_scheduler.CosineAnnealingLR(opt2, T_max=4, eta_min=0.001)

    def head_step(x, y):
        with torch.no_grad():
            f = features(x)
        loss = nn.functional.cross_entropy(head(f), y)
        opt2.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_value_(head.parameters(), clip_value=0.05)
        opt2.step()
        return loss

    head_step = env.step(head_step)
    for epoch in range(3):
        env.rec("head loss", head_step(env.randn(4, 3, 8, 8), env.randint(0, 5, (4,))), cross)
        sched2.step()
        env.rec("head lr", sched2.get_last_lr())
    env.rec("head", head.state_dict(), cross)
    env.rec("frozen", [p.grad is None for p in features.parameters()])
