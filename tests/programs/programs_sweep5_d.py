"""Programs of common kinds: activation checkpointing (torch.utils.checkpoint.checkpoint and
checkpoint_sequential, non-reentrant, inside the compiled step); Grad-CAM (a forward hook
keeps the last conv's activations, a tensor hook its gradient; the map upsampled by
F.interpolate); a YOLO-style detection loss (box IoU from corner coordinates, masks of the
responsible cells, sqrt width/height, objectness BCE); a neural cellular automaton (fixed
Sobel perception filters as a grouped conv, a stochastic update mask, alive masking by
max-pool). Programs `f(torch, env)`, see tutorial_harness.py."""


def activation_checkpointing(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    checkpoint = torch.utils.checkpoint.checkpoint
    checkpoint_sequential = torch.utils.checkpoint.checkpoint_sequential

    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

        def forward(self, x):
            return x + self.ff(self.norm(x))

    class Net(nn.Module):
        def __init__(self, use_checkpoint):
            super().__init__()
            self.use_checkpoint = use_checkpoint
            self.blocks = nn.ModuleList([Block(12) for _ in range(3)])
            self.tail = nn.Sequential(Block(12), Block(12), nn.Linear(12, 3))

        def forward(self, x):
            for block in self.blocks:
                if self.use_checkpoint and self.training:
                    x = checkpoint(block, x, use_reentrant=False)
                else:
                    x = block(x)
            if self.use_checkpoint and self.training:
                return checkpoint_sequential(self.tail, 2, x, use_reentrant=False)
            return self.tail(x)

    plain = env.init(Net(False))
    ckpt = Net(True)
    ckpt.load_state_dict(plain.state_dict())
    x, y = env.randn(10, 12), env.randint(0, 3, (10,))
    for name, model in [("plain", plain), ("checkpointed", ckpt)]:
        optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def train_step(x, y):
            model.train()
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            grad_norm = torch.stack([p.grad.norm() for p in model.parameters()]).norm()
            optimizer.step()
            return loss.item(), grad_norm

        train_step = env.step(train_step)
        for it in range(4):
            env.rec(f"{name} {it}", train_step(x, y))
    # (the two trainings are the same numbers)
    env.rec("same weights", all(torch.allclose(a, b, atol=1e-6) for a, b in
                                zip(plain.parameters(), ckpt.parameters())))
    # a checkpointed function with a tensor and a non-tensor argument, gradients of both
    w = env.randn(4, 4).requires_grad_()
    z = env.randn(3, 4).requires_grad_()
    out = checkpoint(lambda a, scale: torch.tanh(a @ w) * scale, z, 2.0, use_reentrant=False)
    out.sum().backward()
    env.rec("fn grads", (out, w.grad, z.grad))


def grad_cam(torch, env, tensor_hook=False, compile_explain=False):
    """tensor_hook: the forward hook registers a hook on its output for the gradient (as
    many Grad-CAM implementations do), in place of a full backward hook on the module.
    compile_explain: the explanation (forward, backward of a class score, the map) runs
    under env.step too."""
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.ReLU(),
                                          nn.MaxPool2d(2), nn.Conv2d(6, 8, 3, padding=1),
                                          nn.ReLU())
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(8, 3)

        def forward(self, x):
            return self.fc(self.pool(self.features(x)).flatten(1))

    model = env.init(CNN())
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    images, labels = env.rand(6, 1, 8, 8), env.randint(0, 3, (6,))

    def train_step(x, y):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for it in range(3):
        env.rec(f"train {it}", train_step(images, labels))

    store = {}

    def save_activation(module, inputs, output):
        store["activation"] = output
        if tensor_hook:
            output.register_hook(lambda grad: store.__setitem__("gradient", grad))

    def save_gradient(module, grad_input, grad_output):
        store["gradient"] = grad_output[0]

    layer = model.features[-1]
    handles = [layer.register_forward_hook(save_activation)]
    if not tensor_hook:
        handles.append(layer.register_full_backward_hook(save_gradient))

    def explain(x, cls):
        model.eval()
        model.zero_grad()
        scores = model(x)
        scores.gather(1, cls[:, None]).sum().backward()
        acts, grads = store["activation"], store["gradient"]
        weights = grads.mean(dim=(2, 3), keepdim=True)
        cam = F.relu((weights * acts).sum(1, keepdim=True))
        cam = F.interpolate(cam, size=x.shape[-2:], mode="bilinear", align_corners=False)
        flat = cam.flatten(1)
        lo, hi = flat.min(1, keepdim=True)[0], flat.max(1, keepdim=True)[0]
        cam = ((flat - lo) / (hi - lo + 1e-8)).view_as(cam)
        return cam.detach(), scores.detach()

    if compile_explain:
        explain = env.step(explain)
    for it in range(2):
        cam, scores = explain(images, scores_cls := labels.roll(it))
        env.rec(f"cam {it}", (cam, scores, scores_cls))
    env.rec("fc grad", model.fc.weight.grad)
    for handle in handles:
        handle.remove()
    env.rec("hooks left", (len(layer._forward_hooks), len(layer._backward_hooks)))


def yolo_loss(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    S, C = 4, 2
    l_coord, l_noobj = 5.0, 0.5

    def box_iou(a, b):
        """IoU of boxes (cx, cy, w, h), elementwise over the leading dims."""
        a1, a2 = a[..., :2] - a[..., 2:] / 2, a[..., :2] + a[..., 2:] / 2
        b1, b2 = b[..., :2] - b[..., 2:] / 2, b[..., :2] + b[..., 2:] / 2
        inter = (torch.min(a2, b2) - torch.max(a1, b1)).clamp(min=0).prod(-1)
        union = a[..., 2:].prod(-1) + b[..., 2:].prod(-1) - inter
        return inter / union.clamp(min=1e-6)

    class Detector(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.LeakyReLU(0.1),
                                      nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1),
                                      nn.LeakyReLU(0.1), nn.MaxPool2d(2),
                                      nn.Conv2d(16, 5 + C, 1))

        def forward(self, x):
            out = self.body(x).permute(0, 2, 3, 1)          # (B, S, S, 5 + C)
            xy, wh = out[..., :2].sigmoid(), out[..., 2:4].sigmoid()
            return torch.cat([xy, wh, out[..., 4:]], dim=-1)

    def criterion(pred, target):
        obj = target[..., 4] > 0
        noobj = ~obj
        iou = box_iou(pred[..., :4], target[..., :4]).detach()
        xy_loss = F.mse_loss(pred[obj][:, :2], target[obj][:, :2], reduction="sum")
        wh_loss = F.mse_loss(pred[obj][:, 2:4].sqrt(), target[obj][:, 2:4].sqrt(),
                             reduction="sum")
        obj_loss = F.binary_cross_entropy_with_logits(pred[..., 4][obj], iou[obj],
                                                      reduction="sum")
        noobj_loss = F.binary_cross_entropy_with_logits(
            pred[..., 4][noobj], torch.zeros_like(pred[..., 4][noobj]), reduction="sum")
        cls_loss = F.cross_entropy(pred[obj][:, 5:], target[obj][:, 5].long(),
                                   reduction="sum")
        n = pred.size(0)
        return (l_coord * (xy_loss + wh_loss) + obj_loss + l_noobj * noobj_loss
                + cls_loss) / n, iou[obj].mean()

    model = env.init(Detector())
    optimizer = optim.SGD(model.parameters(), lr=1e-2, momentum=0.9, weight_decay=5e-4)
    images = env.rand(4, 3, 16, 16)
    target = torch.zeros(4, S, S, 6)
    cells = env.randint(0, S, (4, 3, 2))
    for b in range(4):
        for k in range(2 + b % 2):
            i, j = cells[b, k].tolist()
            target[b, i, j, :4] = 0.2 + 0.6 * env.rand(4)
            target[b, i, j, 4] = 1.0
            target[b, i, j, 5] = float(env.choice(C))

    def train_step(x, target):
        optimizer.zero_grad()
        loss, mean_iou = criterion(model(x), target)
        loss.backward()
        optimizer.step()
        return loss.item(), mean_iou

    train_step = env.step(train_step)
    for it in range(5):
        env.rec(f"step {it}", train_step(images, target))
    with torch.no_grad():
        pred = model(images)
        conf = pred[..., 4].sigmoid()
        keep = conf > conf.flatten(1).max(1)[0][:, None, None] * 0.9
        env.rec("detections", (keep.nonzero(), pred[keep][:, :4], pred[keep][:, 5:].argmax(-1)))


def neural_ca(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    CH, SIZE = 8, 10

    class CA(nn.Module):
        def __init__(self):
            super().__init__()
            sobel = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]]) / 8
            ident = torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
            kernel = torch.stack([ident, sobel, sobel.t()])[:, None].repeat(CH, 1, 1, 1)
            self.register_buffer("kernel", kernel)
            self.update = nn.Sequential(nn.Conv2d(3 * CH, 32, 1), nn.ReLU(),
                                        nn.Conv2d(32, CH, 1, bias=False))
            with torch.no_grad():
                self.update[2].weight.zero_()

        def alive(self, x):
            return F.max_pool2d(x[:, 3:4], 3, stride=1, padding=1) > 0.1

        def forward(self, x, fire):
            pre = self.alive(x)
            y = F.conv2d(F.pad(x, (1, 1, 1, 1), mode="circular"), self.kernel, groups=CH)
            x = x + self.update(y) * fire
            post = self.alive(x)
            return x * (pre & post).float()

    model = env.init(CA())
    optimizer = optim.Adam(model.parameters(), lr=2e-3)
    scheduler = optim.lr_scheduler.MultiStepLR(optimizer, [3], 0.3)
    seed = torch.zeros(2, CH, SIZE, SIZE)
    seed[:, 3:, SIZE // 2, SIZE // 2] = 1.0
    target = torch.zeros(4, SIZE, SIZE)
    target[:, 3:7, 3:7] = env.rand(4, 4, 4)

    def train_step(x, fires):
        optimizer.zero_grad()
        for fire in fires:
            x = model(x, fire)
        loss = F.mse_loss(x[:, :4], target.expand(2, -1, -1, -1))
        loss.backward()
        for p in model.parameters():    # per-parameter gradient normalisation
            p.grad.data.div_(p.grad.data.norm() + 1e-8)
        optimizer.step()
        return loss.item(), x.detach()

    train_step = env.step(train_step)
    for it in range(5):
        fires = [(env.rand(2, 1, SIZE, SIZE) < 0.5).float() for _ in range(4)]
        env.rec(f"step {it}", train_step(seed, fires))
        scheduler.step()
