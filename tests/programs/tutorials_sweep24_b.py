"""Sweep 24 (H2, B): Dive into Deep Learning's computer-vision chapters at toy sizes, nearly
verbatim: the fully convolutional network (a backbone's children sliced off, a 1x1
convolution, a ConvTranspose2d initialised with bilinear_kernel through weight.data.copy_,
the per-pixel loss reduced by .mean(1).mean(1)) and neural style transfer with the
image as a module's parameter (SynthesizedImage, Gram matrices, total variation loss,
Adam with StepLR); TinySSD is in tutorials_sweep24_b2.py. Synthetic data. Programs
`f(torch, env)`, see tutorial_harness.py."""


def fcn_bilinear(torch, env):
    nn, F = torch.nn, torch.nn.functional

    def bilinear_kernel(in_channels, out_channels, kernel_size):
        factor = (kernel_size + 1) // 2
        if kernel_size % 2 == 1:
            center = factor - 1
        else:
            center = factor - 0.5
        og = (torch.arange(kernel_size).reshape(-1, 1),
              torch.arange(kernel_size).reshape(1, -1))
        filt = (1 - torch.abs(og[0] - center) / factor) * \
               (1 - torch.abs(og[1] - center) / factor)
        weight = torch.zeros((in_channels, out_channels, kernel_size, kernel_size))
        weight[range(in_channels), range(out_channels), :, :] = filt
        return weight

    torch.manual_seed(0)
    # a small "pretrained" backbone standing in for resnet18 (downsampling by 4)
    pretrained_net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d((1, 1)), nn.Linear(16, 10))
    net = nn.Sequential(*list(pretrained_net.children())[:-2])
    X = env.randn(1, 3, 16, 16)
    env.rec("backbone out", net(X).shape)
    num_classes = 5
    net.add_module('final_conv', nn.Conv2d(16, num_classes, kernel_size=1))
    net.add_module('transpose_conv', nn.ConvTranspose2d(num_classes, num_classes,
                                                        kernel_size=8, padding=2, stride=4))

    conv_trans = nn.ConvTranspose2d(3, 3, kernel_size=4, padding=1, stride=2, bias=False)
    conv_trans.weight.data.copy_(bilinear_kernel(3, 3, 4))
    img = env.rand(1, 3, 6, 6)
    env.rec("upsampled", conv_trans(img))
    W = bilinear_kernel(num_classes, num_classes, 8)
    net.transpose_conv.weight.data.copy_(W)
    env.rec("init", dict(net.state_dict()))

    def loss(inputs, targets):
        return F.cross_entropy(inputs, targets, reduction='none').mean(1).mean(1)

    trainer = torch.optim.SGD(net.parameters(), lr=0.1, weight_decay=1e-3)

    def train_batch(net, X, y, loss, trainer):
        net.train()
        trainer.zero_grad()
        pred = net(X)
        l = loss(pred, y)
        l.sum().backward()
        trainer.step()
        train_loss_sum = l.sum()
        train_acc_sum = (pred.argmax(dim=1) == y).sum()
        return train_loss_sum, train_acc_sum

    step = env.step(train_batch)
    Xb = env.randn(2, 3, 16, 16)
    yb = env.randint(0, num_classes, (2, 16, 16))
    for epoch in range(4):
        env.rec(f"epoch {epoch}", step(net, Xb, yb, loss, trainer))
    env.rec("params", dict(net.state_dict()))

    def predict(img):
        X = img.unsqueeze(0)
        pred = net(X).argmax(dim=1)
        return pred.reshape(pred.shape[1], pred.shape[2])

    net.eval()
    env.rec("predict", predict(Xb[1]))


def style_transfer(torch, env):
    """d2l 14.12: a small conv feature extractor (standing in for VGG) with style and content
    layers picked by index, SynthesizedImage holding the image as its weight, Gram
    matrices, content / style / TV losses weighted, Adam with StepLR; the compiled step
    is the chapter's inner loop body."""
    nn = torch.nn
    torch.manual_seed(0)
    rgb_mean = torch.tensor([0.485, 0.456, 0.406])
    rgb_std = torch.tensor([0.229, 0.224, 0.225])

    def preprocess(img):
        return ((img - rgb_mean.reshape(3, 1, 1)) / rgb_std.reshape(3, 1, 1)).unsqueeze(0)

    def postprocess(img):
        img = img[0]
        img = torch.clamp(img.permute(1, 2, 0) * rgb_std + rgb_mean, 0, 1)
        return img.permute(2, 0, 1)

    pretrained_net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
    style_layers, content_layers = [0, 5, 10], [8]
    net = nn.Sequential(*[pretrained_net[i] for i in
                          range(max(content_layers + style_layers) + 1)])

    def extract_features(X, content_layers, style_layers):
        contents = []
        styles = []
        for i in range(len(net)):
            X = net[i](X)
            if i in style_layers:
                styles.append(X)
            if i in content_layers:
                contents.append(X)
        return contents, styles

    content_img, style_img = env.rand(3, 12, 16), env.rand(3, 12, 16)

    def get_contents():
        content_X = preprocess(content_img)
        contents_Y, _ = extract_features(content_X, content_layers, style_layers)
        return content_X, contents_Y

    def get_styles():
        style_X = preprocess(style_img)
        _, styles_Y = extract_features(style_X, content_layers, style_layers)
        return style_X, styles_Y

    def content_loss(Y_hat, Y):
        return torch.square(Y_hat - Y.detach()).mean()

    def gram(X):
        num_channels, n = X.shape[1], X.numel() // X.shape[1]
        X = X.reshape((num_channels, n))
        return torch.matmul(X, X.T) / (num_channels * n)

    def style_loss(Y_hat, gram_Y):
        return torch.square(gram(Y_hat) - gram_Y.detach()).mean()

    def tv_loss(Y_hat):
        return 0.5 * (torch.abs(Y_hat[:, :, 1:, :] - Y_hat[:, :, :-1, :]).mean() +
                      torch.abs(Y_hat[:, :, :, 1:] - Y_hat[:, :, :, :-1]).mean())

    content_weight, style_weight, tv_weight = 1, 1e3, 10

    def compute_loss(X, contents_Y_hat, styles_Y_hat, contents_Y, styles_Y_gram):
        contents_l = [content_loss(Y_hat, Y) * content_weight for Y_hat, Y in zip(
            contents_Y_hat, contents_Y)]
        styles_l = [style_loss(Y_hat, Y) * style_weight for Y_hat, Y in zip(
            styles_Y_hat, styles_Y_gram)]
        tv_l = tv_loss(X) * tv_weight
        l = sum(styles_l + contents_l + [tv_l])
        return contents_l, styles_l, tv_l, l

    class SynthesizedImage(nn.Module):
        def __init__(self, img_shape, **kwargs):
            super(SynthesizedImage, self).__init__(**kwargs)
            self.weight = nn.Parameter(torch.rand(*img_shape))

        def forward(self):
            return self.weight

    def get_inits(X, lr, styles_Y):
        gen_img = SynthesizedImage(X.shape)
        gen_img.weight.data.copy_(X.data)
        trainer = torch.optim.Adam(gen_img.parameters(), lr=lr)
        styles_Y_gram = [gram(Y) for Y in styles_Y]
        return gen_img(), styles_Y_gram, trainer

    for p in net.parameters():
        p.requires_grad_(False)
    content_X, contents_Y = get_contents()
    _, styles_Y = get_styles()
    X, styles_Y_gram, trainer = get_inits(content_X, 0.3, styles_Y)
    scheduler = torch.optim.lr_scheduler.StepLR(trainer, 3, 0.8)

    def epoch_step(X):
        trainer.zero_grad()
        contents_Y_hat, styles_Y_hat = extract_features(X, content_layers, style_layers)
        contents_l, styles_l, tv_l, l = compute_loss(X, contents_Y_hat, styles_Y_hat,
                                                     contents_Y, styles_Y_gram)
        l.backward()
        trainer.step()
        scheduler.step()
        return sum(contents_l), sum(styles_l), tv_l

    epoch_step = env.step(epoch_step)
    for epoch in range(7):
        env.rec(f"epoch {epoch}", epoch_step(X))
        env.rec(f"lr {epoch}", scheduler.get_last_lr())
    env.rec("image", postprocess(X))
