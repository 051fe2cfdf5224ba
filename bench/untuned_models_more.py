"""Three more training steps for bench/untuned_models.py, of kinds tutorials train and llgrad
was not tuned on before they were added (2026-12-03): a ConvNeXt-style net (7x7 depthwise
convolutions, LayerNorm on channels-last, GELU MLPs, layer scale; AdamW), an EfficientNet-style
net (MBConv: 1x1 expand, depthwise 3x3, squeeze-excitation, SiLU, BatchNorm; SGD with momentum
and weight decay, label smoothing, dropout) and a DCGAN step (ConvTranspose2d generator,
LeakyReLU discriminator, BCELoss, two Adams). build(lib, name) -> (model, step) as there."""


def build(lib, name):
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(0)
    if name == "convnext":
        class Block(nn.Module):
            def __init__(s, d):
                super().__init__()
                s.dw = nn.Conv2d(d, d, 7, padding=3, groups=d); s.norm = nn.LayerNorm(d)
                s.pw1, s.pw2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
                s.gamma = nn.Parameter(1e-6 * lib.ones(d))
            def forward(s, x):
                y = s.pw2(F.gelu(s.pw1(s.norm(s.dw(x).permute(0, 2, 3, 1)))))
                return x + (s.gamma * y).permute(0, 3, 1, 2)
        m = nn.Sequential(nn.Conv2d(3, 48, 4, 4), Block(48), Block(48), nn.Conv2d(48, 96, 2, 2),
                          Block(96), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(96, 10))
        opt = lib.optim.AdamW(m.parameters(), 1e-3)
        x, y = lib.randn(16, 3, 64, 64), lib.randint(0, 10, (16,))
        loss = lambda out: F.cross_entropy(out, y)                      # noqa: E731
    elif name == "effnet":
        class MBConv(nn.Module):
            def __init__(s, cin, cout, e, stride):
                super().__init__()
                h = cin * e
                s.expand = nn.Sequential(nn.Conv2d(cin, h, 1, bias=False), nn.BatchNorm2d(h), nn.SiLU())
                s.dw = nn.Sequential(nn.Conv2d(h, h, 3, stride, 1, groups=h, bias=False),
                                     nn.BatchNorm2d(h), nn.SiLU())
                s.se1, s.se2 = nn.Conv2d(h, max(1, cin // 4), 1), nn.Conv2d(max(1, cin // 4), h, 1)
                s.proj = nn.Sequential(nn.Conv2d(h, cout, 1, bias=False), nn.BatchNorm2d(cout))
                s.res = stride == 1 and cin == cout
            def forward(s, x):
                y = s.dw(s.expand(x))
                y = s.proj(y * lib.sigmoid(s.se2(F.silu(s.se1(F.adaptive_avg_pool2d(y, 1))))))
                return x + y if s.res else y
        m = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.SiLU(),
                          MBConv(16, 16, 1, 1), MBConv(16, 24, 4, 2), MBConv(24, 24, 4, 1),
                          MBConv(24, 40, 4, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Dropout(0.2), nn.Linear(40, 10))
        opt = lib.optim.SGD(m.parameters(), 0.05, momentum=0.9, weight_decay=1e-4)
        x, y = lib.randn(16, 3, 64, 64), lib.randint(0, 10, (16,))
        loss = lambda out: F.cross_entropy(out, y, label_smoothing=0.1)  # noqa: E731
    elif name == "dcgan":
        return _dcgan(lib)
    else:
        raise KeyError(name)

    def step():
        opt.zero_grad()
        out = loss(m(x))
        out.backward()
        opt.step()
        return out
    return m, step


def _dcgan(lib):
    nn = lib.nn
    g = nn.Sequential(nn.ConvTranspose2d(64, 128, 4, 1, 0, bias=False), nn.BatchNorm2d(128), nn.ReLU(True),
                      nn.ConvTranspose2d(128, 64, 4, 2, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(True),
                      nn.ConvTranspose2d(64, 32, 4, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(True),
                      nn.ConvTranspose2d(32, 1, 4, 2, 1, bias=False), nn.Tanh())
    d = nn.Sequential(nn.Conv2d(1, 32, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True),
                      nn.Conv2d(32, 64, 4, 2, 1, bias=False), nn.BatchNorm2d(64), nn.LeakyReLU(0.2, True),
                      nn.Conv2d(64, 128, 4, 2, 1, bias=False), nn.BatchNorm2d(128), nn.LeakyReLU(0.2, True),
                      nn.Conv2d(128, 1, 4, 1, 0, bias=False), nn.Sigmoid())
    opt_g = lib.optim.Adam(g.parameters(), 2e-4, betas=(0.5, 0.999))
    opt_d = lib.optim.Adam(d.parameters(), 2e-4, betas=(0.5, 0.999))
    crit = nn.BCELoss()
    real, z = lib.rand(32, 1, 32, 32) * 2 - 1, lib.randn(32, 64, 1, 1)
    ones, zeros = lib.ones(32), lib.zeros(32)

    def step():
        opt_d.zero_grad()
        fake = g(z)
        loss_d = crit(d(real).view(-1), ones) + crit(d(fake.detach()).view(-1), zeros)
        loss_d.backward()
        opt_d.step()
        opt_g.zero_grad()
        loss_g = crit(d(fake).view(-1), ones)
        loss_g.backward()
        opt_g.step()
        return loss_g
    return nn.ModuleList([g, d]), step
