"""Vision programs of common kinds: a small U-Net (ConvTranspose2d, skip connections with
torch.cat, BCEWithLogits + dice loss), a convolutional autoencoder and a denoising one, and
a stack of ResNet basic blocks with BatchNorm. Programs `f(torch, env)`, see
tutorial_harness.py."""


def unet(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                             nn.BatchNorm2d(cout),
                             nn.ReLU(inplace=True), nn.Conv2d(cout, cout, 3, padding=1),
                             nn.ReLU(inplace=True))

    class UNet(nn.Module):
        def __init__(self, c=4):
            super().__init__()
            self.enc1 = block(1, c)
            self.enc2 = block(c, 2 * c)
            self.pool = nn.MaxPool2d(2)
            self.bottleneck = block(2 * c, 4 * c)
            self.up2 = nn.ConvTranspose2d(4 * c, 2 * c, kernel_size=2, stride=2)
            self.dec2 = block(4 * c, 2 * c)
            self.up1 = nn.ConvTranspose2d(2 * c, c, kernel_size=2, stride=2)
            self.dec1 = block(2 * c, c)
            self.head = nn.Conv2d(c, 1, kernel_size=1)

        def forward(self, x):
            e1 = self.enc1(x)
            e2 = self.enc2(self.pool(e1))
            b = self.bottleneck(self.pool(e2))
            d2 = self.dec2(torch.cat([self.up2(b), e2], dim=1))
            d1 = self.dec1(torch.cat((self.up1(d2), e1), 1))
            return self.head(d1)

    def dice_loss(logits, target, eps=1.0):
        prob = torch.sigmoid(logits)
        inter = (prob * target).sum(dim=(1, 2, 3))
        union = prob.sum(dim=(1, 2, 3)) + target.sum(dim=(1, 2, 3))
        return 1 - ((2 * inter + eps) / (union + eps)).mean()

    model = env.init(UNet())
    bce = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([2.0]))
    optimizer = optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, mask):
        model.train()
        optimizer.zero_grad()
        logits = model(x)
        loss = bce(logits, mask) + dice_loss(logits, mask)
        loss.backward()
        optimizer.step()
        return loss.detach()

    train_step = env.step(train_step)
    imgs = env.randn(3, 1, 8, 8)
    masks = (imgs > 0.3).float()
    for i in range(3):
        env.rec(f"loss {i}", train_step(imgs, masks))
    env.rec("state", model.state_dict())
    model.eval()
    with torch.no_grad():
        pred = torch.sigmoid(model(imgs)) > 0.5
        iou = (pred & masks.bool()).sum().float() / (pred | masks.bool()).sum().clamp(min=1)
    env.rec("iou", iou)


def _autoencoder(torch):
    nn = torch.nn

    class ConvAutoencoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(
                nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.ReLU(),
                nn.Conv2d(4, 8, 3, stride=2, padding=1), nn.ReLU(),
                nn.Flatten(), nn.Linear(8 * 3 * 3, 6))
            self.decoder = nn.Sequential(
                nn.Linear(6, 8 * 3 * 3), nn.ReLU(), nn.Unflatten(1, (8, 3, 3)),
                nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=0),
                nn.ReLU(),
                nn.ConvTranspose2d(4, 1, 3, stride=2, padding=1, output_padding=1),
                nn.Sigmoid())

        def forward(self, x):
            return self.decoder(self.encoder(x))

    return ConvAutoencoder()


def conv_autoencoder(torch, env):
    nn, optim = torch.nn, torch.optim
    model = env.init(_autoencoder(torch))
    criterion = nn.MSELoss()
    optimizer = optim.Adam(model.parameters(), lr=5e-3, weight_decay=1e-5)
    data = env.rand(8, 1, 10, 10)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data), batch_size=4)

    def train_step(img):
        recon = model(img)
        loss = criterion(recon, img)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for epoch in range(2):
        for i, (img,) in enumerate(loader):
            env.rec(f"loss {epoch} {i}", train_step(img))
    with torch.no_grad():
        code = model.encoder(data[:2])
        env.rec("code", code)
        env.rec("recon", model(data[:2]))


def denoising_autoencoder(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    model = env.init(_autoencoder(torch))
    optimizer = optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    noise_factor = 0.3

    def train_step(clean, noise):
        noisy = torch.clamp(clean + noise_factor * noise, 0., 1.)
        optimizer.zero_grad()
        out = model(noisy)
        loss = F.binary_cross_entropy(out, clean)
        loss.backward()
        optimizer.step()
        return loss, F.mse_loss(out.detach(), clean)

    train_step = env.step(train_step)
    clean = env.rand(6, 1, 10, 10).round()
    for i in range(3):
        env.rec(f"losses {i}", train_step(clean, env.randn(6, 1, 10, 10)))

    # noise drawn from the library's own stream: llgrad eager vs compiled only
    def train_step_rand(clean):
        noisy = (clean + noise_factor * torch.randn_like(clean)).clamp(0, 1)
        optimizer.zero_grad()
        loss = F.binary_cross_entropy(model(noisy), clean)
        loss.backward()
        optimizer.step()
        return loss

    train_step_rand = env.step(train_step_rand)
    for i in range(2):
        env.rec(f"rand loss {i}", train_step_rand(clean), cross=False)
    env.rec("state", model.state_dict(), cross=False)


def resnet_blocks(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, in_planes, planes, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.shortcut = nn.Sequential()
            if stride != 1 or in_planes != planes:
                self.shortcut = nn.Sequential(
                    nn.Conv2d(in_planes, planes, kernel_size=1, stride=stride, bias=False),
                    nn.BatchNorm2d(planes))

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += self.shortcut(x)
            return F.relu(out)

    class ResNet(nn.Module):
        def __init__(self, num_blocks=(2, 1), num_classes=5):
            super().__init__()
            self.in_planes = 4
            self.conv1 = nn.Conv2d(3, 4, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(4)
            self.layer1 = self._make_layer(4, num_blocks[0], 1)
            self.layer2 = self._make_layer(8, num_blocks[1], 2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(8, num_classes)

        def _make_layer(self, planes, n, stride):
            layers = []
            for s in [stride] + [1] * (n - 1):
                layers.append(BasicBlock(self.in_planes, planes, s))
                self.in_planes = planes
            return nn.Sequential(*layers)

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.layer2(self.layer1(out))
            return self.fc(torch.flatten(self.avgpool(out), 1))

    model = env.init(ResNet())
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=4)

    def train_step(x, y):
        model.train()
        optimizer.zero_grad()
        out = model(x)
        loss = criterion(out, y)
        loss.backward()
        optimizer.step()
        return loss.item(), (out.argmax(1) == y).sum().item()

    train_step = env.step(train_step)
    x, y = env.randn(4, 3, 8, 8), env.randint(0, 5, (4,))
    for i in range(3):
        env.rec(f"step {i}", train_step(x, y))
        scheduler.step()
    env.rec("state", model.state_dict())
    model.eval()
    with torch.no_grad():
        env.rec("eval", model(x))
