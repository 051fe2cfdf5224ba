"""Tutorial programs on vision models and interpretability (see tutorial_harness.py):
guided backpropagation with full backward hooks on the ReLUs after compiled training,
DeepDream-style input optimisation with roll jitter and a forward hook, Tent test-time
adaptation of BatchNorm affine parameters only, EfficientNet MBConv blocks, VoxelMorph-like
image registration with grid_sample, and SmoothGrad saliency averaged under a loop."""


def guided_backprop_hooks(torch, env):
    """A small CNN trained with a compiled step; then guided backpropagation as the blogs
    write it: register_full_backward_hook on every nn.ReLU returning
    (torch.clamp(grad_in[0], min=0.0),), the input's gradient of the top class's logit, the
    hooks removed with handle.remove() and a plain saliency map compared."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(8, 1, 8, 8), torch.randint(0, 3, (8,))

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(4)])
    model.eval()
    handles = [m.register_full_backward_hook(
        lambda mod, gin, gout: (torch.clamp(gin[0], min=0.0),))
        for m in model.modules() if isinstance(m, nn.ReLU)]
    img = x[:2].clone().requires_grad_(True)
    out = model(img)
    out.gather(1, out.argmax(1, keepdim=True)).sum().backward()
    env.rec("guided", img.grad)
    for h in handles:
        h.remove()
    img.grad = None
    out = model(img)
    out.gather(1, out.argmax(1, keepdim=True)).sum().backward()
    env.rec("plain", img.grad.abs().amax(1))


def deepdream_roll_jitter(torch, env):
    """Feature visualisation: a trained net frozen with requires_grad_(False), an input
    image nn.Parameter optimised by Adam to maximise a channel captured by a forward hook,
    random jitter with torch.roll(shifts=(dx, dy), dims=(2, 3)) (shifts passed as ints,
    one value per call), a total-variation penalty, and clamp_ to [-2, 2] under no_grad."""
    nn = torch.nn
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(),
                        nn.Conv2d(6, 6, 3, padding=1), nn.ReLU())
    net.requires_grad_(False).eval()
    acts = {}
    net[2].register_forward_hook(lambda m, i, o: acts.__setitem__("conv2", o))
    img = nn.Parameter(torch.randn(1, 3, 10, 10) * 0.1)
    opt = torch.optim.Adam([img], lr=0.05)

    def dream_step(dx, dy):
        opt.zero_grad()
        jittered = torch.roll(img, shifts=(dx, dy), dims=(2, 3))
        net(jittered)
        act = acts["conv2"][:, 2].mean()
        tv = (img[..., 1:, :] - img[..., :-1, :]).abs().mean() + \
            (img[..., :, 1:] - img[..., :, :-1]).abs().mean()
        loss = -act + 0.1 * tv
        loss.backward()
        opt.step()
        with torch.no_grad():
            img.clamp_(-2, 2)
        return act.detach()

    step = env.step(dream_step)
    shifts = [(env.choice(3) - 1, env.choice(3) - 1) for _ in range(6)]
    env.rec("acts", [step(dx, dy).item() for dx, dy in shifts])
    env.rec("img", img)
    env.rec("net frozen", all(p.grad is None for p in net.parameters()))


def tent_bn_adaptation(torch, env):
    """Tent (Wang et al.): a classifier trained on clean data, then adapted at test time
    on shifted data by minimising the prediction entropy, with model.requires_grad_(False)
    and only the BatchNorm2d weight / bias re-enabled, the BatchNorms in train mode with
    track_running_stats=False and running_mean / running_var set to None."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 6, 3), nn.BatchNorm2d(6), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(12, 2, 6, 6), torch.randint(0, 3, (12,))

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(4)])
    model.train()
    model.requires_grad_(False)
    bn_params = []
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.requires_grad_(True)
            m.track_running_stats = False
            m.running_mean, m.running_var = None, None
            bn_params += [m.weight, m.bias]
    tent_opt = torch.optim.SGD(bn_params, lr=0.01, momentum=0.9)
    shifted = x * 1.5 + 0.5

    def tent_step(x):
        logits = model(x)
        ent = -(logits.softmax(1) * logits.log_softmax(1)).sum(1).mean()
        ent.backward()
        tent_opt.step()
        tent_opt.zero_grad()
        return logits.detach(), ent.detach()

    adapt = env.step(tent_step)
    ents = []
    for _ in range(4):
        logits, ent = adapt(shifted)
        ents.append(ent.item())
    env.rec("entropies", ents)
    env.rec("logits", logits)
    env.rec("grads", [p.grad is None for p in model.parameters()])
    env.rec("params", list(model.parameters()))


def mbconv_efficientnet(torch, env):
    """EfficientNet's MBConv: 1x1 expansion, depthwise 3x3 (groups=channels), a
    squeeze-excitation with SiLU and sigmoid gating via adaptive_avg_pool2d, a 1x1
    projection with BatchNorm, the residual when shapes match; RMSprop(eps=1e-3,
    momentum=0.9) as in the paper with an ExponentialLR."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class MBConv(nn.Module):
        def __init__(self, cin, cout, expand, stride):
            super().__init__()
            mid = cin * expand
            self.use_res = stride == 1 and cin == cout
            self.expand = nn.Sequential(nn.Conv2d(cin, mid, 1, bias=False),
                                        nn.BatchNorm2d(mid), nn.SiLU())
            self.dw = nn.Sequential(nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False),
                                    nn.BatchNorm2d(mid), nn.SiLU())
            self.se_reduce = nn.Conv2d(mid, max(1, cin // 4), 1)
            self.se_expand = nn.Conv2d(max(1, cin // 4), mid, 1)
            self.project = nn.Sequential(nn.Conv2d(mid, cout, 1, bias=False),
                                         nn.BatchNorm2d(cout))

        def forward(self, x):
            h = self.dw(self.expand(x))
            s = F.adaptive_avg_pool2d(h, 1)
            s = torch.sigmoid(self.se_expand(F.silu(self.se_reduce(s))))
            h = self.project(h * s)
            return x + h if self.use_res else h

    model = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.SiLU(),
                          MBConv(8, 8, 4, 1), MBConv(8, 12, 4, 2), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(12, 4))
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3, alpha=0.9, eps=1e-3,
                              momentum=0.9, weight_decay=1e-5)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.97)
    x, y = torch.randn(6, 3, 12, 12), torch.randint(0, 4, (6,))

    def train_step(x, y):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    hist = []
    for _ in range(4):
        hist.append(step(x, y).item())
        sched.step()
    env.rec("hist", hist)
    model.eval()
    with torch.no_grad():
        env.rec("eval", model(x))
    env.rec("params", list(model.parameters()))
    env.rec("buffers", list(model.buffers()))


def grid_sample_registration(torch, env):
    """VoxelMorph in 2D: a conv net predicts a displacement field from the moving and
    fixed images (torch.cat on channels), the identity grid from F.affine_grid(eye,
    align_corners=True) plus the displacement permuted to [B, H, W, 2], the moving image
    warped with F.grid_sample(padding_mode="border"), an MSE similarity plus a smoothness
    penalty on the field's finite differences."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(2, 8, 3, padding=1), nn.LeakyReLU(0.2),
                        nn.Conv2d(8, 2, 3, padding=1))
    with torch.no_grad():
        net[2].weight.mul_(0.1)
        net[2].bias.zero_()
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    fixed = torch.rand(3, 1, 9, 9)
    moving = torch.roll(fixed, shifts=1, dims=3)

    def train_step(moving, fixed):
        opt.zero_grad()
        flow = net(torch.cat([moving, fixed], 1))
        theta = torch.eye(2, 3).unsqueeze(0).expand(moving.shape[0], 2, 3)
        grid = F.affine_grid(theta, list(moving.shape), align_corners=True)
        warped = F.grid_sample(moving, grid + flow.permute(0, 2, 3, 1), mode="bilinear",
                               padding_mode="border", align_corners=True)
        dy = flow[:, :, 1:, :] - flow[:, :, :-1, :]
        dx = flow[:, :, :, 1:] - flow[:, :, :, :-1]
        loss = F.mse_loss(warped, fixed) + 0.01 * (dx.pow(2).mean() + dy.pow(2).mean())
        loss.backward()
        opt.step()
        return loss, warped.detach()

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        loss, warped = step(moving, fixed)
        hist.append(loss.item())
    env.rec("hist", hist)
    env.rec("warped", warped)
    env.rec("params", list(net.parameters()))


def smoothgrad_saliency(torch, env):
    """SmoothGrad: the trained classifier's input gradients averaged over noisy copies
    (x + sigma * noise, noise given), each copy a leaf with requires_grad_(); computed with
    torch.autograd.grad inside a compiled function, then squared and normalised by the
    per-sample max."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 12), nn.Softplus(), nn.Linear(12, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    x, y = torch.randn(10, 6), torch.randint(0, 3, (10,))

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def smoothgrad(x, noise, target):
        total = torch.zeros_like(x)
        for n in noise:
            xn = (x + 0.2 * n).requires_grad_()
            score = model(xn).gather(1, target.unsqueeze(1)).sum()
            (g,) = torch.autograd.grad(score, xn)
            total = total + g
        sal = (total / len(noise)) ** 2
        return sal / sal.amax(1, keepdim=True)

    step, sg = env.step(train_step), env.step(smoothgrad)
    env.rec("hist", [step(x, y).item() for _ in range(4)])
    noise = env.randn(5, 4, 6)
    env.rec("saliency", sg(x[:4], noise, y[:4]))
    env.rec("no grads leaked", [p.grad is not None for p in model.parameters()])
