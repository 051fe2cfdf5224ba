"""untuned_models_eighth.py's CTC speech model, neural ODE and YOLO-style detector (that file
holds the other three, build() and the runner): each _name(lib) -> (model, optimizer, loss
closure[, {"clip"/"clip_value"/"scheduler"/"after"}]), seeded by build."""
import math


def _ctc(lib):
    # (SeanNaren/deepspeech.pytorch's DeepSpeech: MaskConv zeroing the frames past each
    # length, get_seq_lens, BatchRNN's SequenceWise BatchNorm1d, a packed bidirectional GRU
    # whose directions are summed, the fc head, log_softmax, nn.CTCLoss(reduction="sum",
    # zero_infinity=True) divided by the batch size, AdamW and clip_grad_norm_(400). The
    # convolutions are smaller than its (41, 11) / (21, 11) for a 40-mel input.)
    nn, F = lib.nn, lib.nn.functional
    batch, n_mels, frames, hidden, n_class = 8, 40, 100, 64, 29

    class SequenceWise(nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

        def forward(self, x):
            t, n = x.size(0), x.size(1)
            x = x.view(t * n, -1)
            x = self.module(x)
            return x.view(t, n, -1)

    class MaskConv(nn.Module):
        def __init__(self, seq_module):
            super().__init__()
            self.seq_module = seq_module

        def forward(self, x, lengths):
            for module in self.seq_module:
                x = module(x)
                mask = lib.BoolTensor(x.size()).fill_(0)
                for i, length in enumerate(lengths):
                    length = length.item()
                    if (mask[i].size(2) - length) > 0:
                        mask[i].narrow(2, length, mask[i].size(2) - length).fill_(1)
                x = x.masked_fill(mask, 0)
            return x, lengths

    class BatchRNN(nn.Module):
        def __init__(self, input_size, hidden_size, batch_norm=True):
            super().__init__()
            self.hidden_size = hidden_size
            self.batch_norm = SequenceWise(nn.BatchNorm1d(input_size)) if batch_norm else None
            self.rnn = nn.GRU(input_size=input_size, hidden_size=hidden_size, bidirectional=True, bias=True)

        def forward(self, x, output_lengths, h=None):
            if self.batch_norm is not None:
                x = self.batch_norm(x)
            x = nn.utils.rnn.pack_padded_sequence(x, output_lengths)
            x, h = self.rnn(x, h)
            x, _ = nn.utils.rnn.pad_packed_sequence(x)
            x = x.view(x.size(0), x.size(1), 2, -1).sum(2).view(x.size(0), x.size(1), -1)
            return x

    class DeepSpeech(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = MaskConv(nn.Sequential(
                nn.Conv2d(1, 16, kernel_size=(11, 11), stride=(2, 2), padding=(5, 5)),
                nn.BatchNorm2d(16), nn.Hardtanh(0, 20, inplace=True),
                nn.Conv2d(16, 16, kernel_size=(11, 5), stride=(2, 1), padding=(5, 2)),
                nn.BatchNorm2d(16), nn.Hardtanh(0, 20, inplace=True)))
            rnn_input_size = int(math.floor((n_mels + 2 * 5 - 11) / 2 + 1))
            rnn_input_size = int(math.floor(rnn_input_size + 2 * 5 - 11) / 2 + 1)
            rnn_input_size *= 16
            self.rnns = nn.Sequential(BatchRNN(rnn_input_size, hidden, batch_norm=False),
                                      BatchRNN(hidden, hidden))
            fully_connected = nn.Sequential(nn.BatchNorm1d(hidden), nn.Linear(hidden, n_class, bias=False))
            self.fc = nn.Sequential(SequenceWise(fully_connected))

        def get_seq_lens(self, input_length):
            seq_len = input_length
            for m in self.conv.modules():
                if type(m) == nn.modules.conv.Conv2d:
                    seq_len = ((seq_len + 2 * m.padding[1] - m.dilation[1] * (m.kernel_size[1] - 1) - 1)
                               // m.stride[1] + 1)
            return seq_len.int()

        def forward(self, x, lengths):
            lengths = lengths.cpu().int()
            output_lengths = self.get_seq_lens(lengths)
            x, _ = self.conv(x, output_lengths)
            sizes = x.size()
            x = x.view(sizes[0], sizes[1] * sizes[2], sizes[3])
            x = x.transpose(1, 2).transpose(0, 1).contiguous()
            for rnn in self.rnns:
                x = rnn(x, output_lengths)
            x = self.fc(x)
            x = x.transpose(0, 1)
            return x.log_softmax(-1), output_lengths

    m = DeepSpeech()
    opt = lib.optim.AdamW(m.parameters(), lr=3e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-5)
    criterion = nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)
    input_sizes = lib.sort(lib.randint(frames // 2, frames + 1, (batch,)), descending=True).values
    input_sizes[0] = frames
    inputs = lib.randn(batch, 1, n_mels, frames)
    inputs = inputs * (lib.arange(frames) < input_sizes[:, None, None, None])
    target_sizes = lib.randint(5, 16, (batch,))
    targets = lib.randint(1, n_class, (int(target_sizes.sum()),))

    def loss():
        out, output_sizes = m(inputs, input_sizes)
        out = out.transpose(0, 1)
        return criterion(out, targets, output_sizes, target_sizes) / batch
    return m, opt, loss, {"clip": 400}


def _node(lib):
    # (rtqichen/torchdiffeq's examples/ode_demo.py with odeint(method="rk4") as torchdiffeq's
    # FixedGridODESolver runs it: the time grid by arange and step_size, rk4_alt_step_func's
    # 3/8 rule, the solution written into an empty tensor by linear interpolation while
    # t1 >= t[j]; get_batch's random starts, the mean absolute error, RMSprop)
    nn = lib.nn
    data_size, batch_time, batch_size, step_size = 300, 10, 20, 0.05
    _one_third, _two_thirds = 1 / 3, 2 / 3

    def rk4_alt_step_func(func, t0, dt, t1, y0, f0=None):
        k1 = f0
        if k1 is None:
            k1 = func(t0, y0)
        k2 = func(t0 + dt * _one_third, y0 + dt * k1 * _one_third)
        k3 = func(t0 + dt * _two_thirds, y0 + dt * (k2 - k1 * _one_third))
        k4 = func(t1, y0 + dt * (k1 - k2 + k3))
        return (k1 + 3 * (k2 + k3) + k4) * dt * 0.125

    def _linear_interp(t0, t1, y0, y1, t):
        if t == t0:
            return y0
        if t == t1:
            return y1
        slope = (t - t0) / (t1 - t0)
        return y0 + slope * (y1 - y0)

    def odeint(func, y0, t):
        start_time, end_time = t[0], t[-1]
        niters = lib.ceil((end_time - start_time) / step_size + 1).item()
        time_grid = lib.arange(0, niters, dtype=t.dtype) * step_size + start_time
        time_grid[-1] = t[-1]
        solution = lib.empty(len(t), *y0.shape, dtype=y0.dtype)
        solution[0] = y0
        j = 1
        for t0, t1 in zip(time_grid[:-1], time_grid[1:]):
            dt = t1 - t0
            dy = rk4_alt_step_func(func, t0, dt, t1, y0)
            y1 = y0 + dy
            while j < len(t) and t1 >= t[j]:
                solution[j] = _linear_interp(t0, t1, y0, y1, t[j])
                j += 1
            y0 = y1
        return solution

    true_y0 = lib.tensor([[2., 0.]])
    t = lib.linspace(0., 25., data_size)
    true_A = lib.tensor([[-0.1, 2.0], [-2.0, -0.1]])

    class Lambda(nn.Module):
        def forward(self, t, y):
            return lib.mm(y ** 3, true_A)

    with lib.no_grad():
        true_y = odeint(Lambda(), true_y0, t)

    class ODEFunc(nn.Module):
        def __init__(self):
            super(ODEFunc, self).__init__()
            self.net = nn.Sequential(nn.Linear(2, 50), nn.Tanh(), nn.Linear(50, 2))
            for m in self.net.modules():
                if isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, mean=0, std=0.1)
                    nn.init.constant_(m.bias, val=0)

        def forward(self, t, y):
            return self.net(y ** 3)

    def get_batch():
        s = lib.randperm(data_size - batch_time)[:batch_size]
        batch_y0 = true_y[s]
        batch_t = t[:batch_time]
        batch_y = lib.stack([true_y[s + i] for i in range(batch_time)], dim=0)
        return batch_y0, batch_t, batch_y

    func = ODEFunc()
    optimizer = lib.optim.RMSprop(func.parameters(), lr=1e-3)

    def loss():
        batch_y0, batch_t, batch_y = get_batch()
        pred_y = odeint(func, batch_y0, batch_t)
        return lib.mean(lib.abs(pred_y - batch_y))
    return func, optimizer, loss


def _yolo(lib):
    # (ultralytics/yolov5's Conv, Bottleneck, C3, SPPF, Detect with _initialize_biases,
    # ComputeLoss.build_targets (anchor ratio filter, the neighbouring-cell offsets) and
    # __call__ (CIoU by bbox_iou, the objectness target iou.detach().clamp(0) written by
    # tobj[b, a, gj, gi], BCEWithLogits on objectness and classes), one detection level at
    # stride 8; the box size decoded as the earlier ultralytics/yolov3 did, by
    # exp().clamp(max=1e3) * anchors; smart_optimizer's three SGD parameter groups)
    nn = lib.nn
    nc, na, stride, img, batch = 4, 3, 8, 64, 16
    hyp = {"box": 0.05, "obj": 1.0, "cls": 0.5, "anchor_t": 4.0}

    class Conv(nn.Module):
        def __init__(self, c1, c2, k=1, s=1, p=None):
            super().__init__()
            self.conv = nn.Conv2d(c1, c2, k, s, k // 2 if p is None else p, bias=False)
            self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)
            self.act = nn.SiLU()

        def forward(self, x):
            return self.act(self.bn(self.conv(x)))

    class Bottleneck(nn.Module):
        def __init__(self, c1, c2, shortcut=True, e=1.0):
            super().__init__()
            c_ = int(c2 * e)
            self.cv1, self.cv2 = Conv(c1, c_, 1, 1), Conv(c_, c2, 3, 1)
            self.add = shortcut and c1 == c2

        def forward(self, x):
            return x + self.cv2(self.cv1(x)) if self.add else self.cv2(self.cv1(x))

    class C3(nn.Module):
        def __init__(self, c1, c2, n=1, shortcut=True, e=0.5):
            super().__init__()
            c_ = int(c2 * e)
            self.cv1, self.cv2, self.cv3 = Conv(c1, c_, 1, 1), Conv(c1, c_, 1, 1), Conv(2 * c_, c2, 1)
            self.m = nn.Sequential(*(Bottleneck(c_, c_, shortcut, e=1.0) for _ in range(n)))

        def forward(self, x):
            return self.cv3(lib.cat((self.m(self.cv1(x)), self.cv2(x)), 1))

    class SPPF(nn.Module):
        def __init__(self, c1, c2, k=5):
            super().__init__()
            c_ = c1 // 2
            self.cv1, self.cv2 = Conv(c1, c_, 1, 1), Conv(c_ * 4, c2, 1, 1)
            self.m = nn.MaxPool2d(kernel_size=k, stride=1, padding=k // 2)

        def forward(self, x):
            x = self.cv1(x)
            y1 = self.m(x)
            y2 = self.m(y1)
            return self.cv2(lib.cat((x, y1, y2, self.m(y2)), 1))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(Conv(3, 16, 6, 2, 2), Conv(16, 32, 3, 2), C3(32, 32),
                                          Conv(32, 64, 3, 2), C3(64, 64), SPPF(64, 64))
            self.no = nc + 5
            self.m = nn.Conv2d(64, self.no * na, 1)
            self.register_buffer("anchors", lib.tensor([[10., 13.], [16., 30.], [33., 23.]]) / stride)
            b = self.m.bias.view(na, -1)
            b.data[:, 4] += math.log(8 / (640 / stride) ** 2)
            b.data[:, 5:5 + nc] += math.log(0.6 / (nc - 0.99999))

        def forward(self, x):
            x = self.m(self.backbone(x))
            bs, _, ny, nx = x.shape
            return [x.view(bs, na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()]

    def bbox_iou(box1, box2, eps=1e-7):
        (x1, y1, w1, h1), (x2, y2, w2, h2) = box1.chunk(4, -1), box2.chunk(4, -1)
        w1_, h1_, w2_, h2_ = w1 / 2, h1 / 2, w2 / 2, h2 / 2
        b1_x1, b1_x2, b1_y1, b1_y2 = x1 - w1_, x1 + w1_, y1 - h1_, y1 + h1_
        b2_x1, b2_x2, b2_y1, b2_y2 = x2 - w2_, x2 + w2_, y2 - h2_, y2 + h2_
        inter = ((b1_x2.minimum(b2_x2) - b1_x1.maximum(b2_x1)).clamp(0) *
                 (b1_y2.minimum(b2_y2) - b1_y1.maximum(b2_y1)).clamp(0))
        union = w1 * h1 + w2 * h2 - inter + eps
        iou = inter / union
        cw = b1_x2.maximum(b2_x2) - b1_x1.minimum(b2_x1)
        ch = b1_y2.maximum(b2_y2) - b1_y1.minimum(b2_y1)
        c2 = cw ** 2 + ch ** 2 + eps
        rho2 = ((b2_x1 + b2_x2 - b1_x1 - b1_x2) ** 2 + (b2_y1 + b2_y2 - b1_y1 - b1_y2) ** 2) / 4
        v = (4 / math.pi ** 2) * (lib.atan(w2 / h2) - lib.atan(w1 / h1)).pow(2)
        with lib.no_grad():
            alpha = v / (v - iou + (1 + eps))
        return iou - (rho2 / c2 + v * alpha)

    class ComputeLoss:
        def __init__(self, model):
            self.BCEcls = nn.BCEWithLogitsLoss(pos_weight=lib.tensor([1.0]))
            self.BCEobj = nn.BCEWithLogitsLoss(pos_weight=lib.tensor([1.0]))
            self.cp, self.cn = 1.0, 0.0
            self.balance, self.nl, self.na, self.nc = [1.0], 1, na, nc
            self.anchors = model.anchors[None]

        def __call__(self, p, targets):
            lcls, lbox, lobj = lib.zeros(1), lib.zeros(1), lib.zeros(1)
            tcls, tbox, indices, anchors = self.build_targets(p, targets)
            for i, pi in enumerate(p):
                b, a, gj, gi = indices[i]
                tobj = lib.zeros(pi.shape[:4], dtype=pi.dtype)
                n = b.shape[0]
                if n:
                    pxy, pwh, _, pcls = pi[b, a, gj, gi].split((2, 2, 1, self.nc), 1)
                    pxy = pxy.sigmoid() * 2 - 0.5
                    pwh = lib.exp(pwh).clamp(max=1e3) * anchors[i]
                    pbox = lib.cat((pxy, pwh), 1)
                    iou = bbox_iou(pbox, tbox[i]).squeeze()
                    lbox += (1.0 - iou).mean()
                    iou = iou.detach().clamp(0).type(tobj.dtype)
                    j = iou.argsort()
                    b, a, gj, gi, iou = b[j], a[j], gj[j], gi[j], iou[j]
                    tobj[b, a, gj, gi] = iou
                    if self.nc > 1:
                        t = lib.full_like(pcls, self.cn)
                        t[range(n), tcls[i]] = self.cp
                        lcls += self.BCEcls(pcls, t)
                obji = self.BCEobj(pi[..., 4], tobj)
                lobj += obji * self.balance[i]
            lbox *= hyp["box"]
            lobj *= hyp["obj"]
            lcls *= hyp["cls"]
            bs = tobj.shape[0]
            return (lbox + lobj + lcls) * bs

        def build_targets(self, p, targets):
            na, nt = self.na, targets.shape[0]
            tcls, tbox, indices, anch = [], [], [], []
            gain = lib.ones(7)
            ai = lib.arange(na).float().view(na, 1).repeat(1, nt)
            targets = lib.cat((targets.repeat(na, 1, 1), ai[..., None]), 2)
            g = 0.5
            off = lib.tensor([[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1]]).float() * g
            for i in range(self.nl):
                anchors, shape = self.anchors[i], p[i].shape
                gain[2:6] = lib.tensor(shape)[[3, 2, 3, 2]]
                t = targets * gain
                r = t[..., 4:6] / anchors[:, None]
                j = lib.max(r, 1 / r).max(2)[0] < hyp["anchor_t"]
                t = t[j]
                gxy = t[:, 2:4]
                gxi = gain[[2, 3]] - gxy
                j, k = ((gxy % 1 < g) & (gxy > 1)).T
                l, m = ((gxi % 1 < g) & (gxi > 1)).T
                j = lib.stack((lib.ones_like(j), j, k, l, m))
                t = t.repeat((5, 1, 1))[j]
                offsets = (lib.zeros_like(gxy)[None] + off[:, None])[j]
                bc, gxy, gwh, a = t.chunk(4, 1)
                a, (b, c) = a.long().view(-1), bc.long().T
                gij = (gxy - offsets).long()
                gi, gj = gij.T
                indices.append((b, a, gj.clamp_(0, shape[2] - 1), gi.clamp_(0, shape[3] - 1)))
                tbox.append(lib.cat((gxy - gij, gwh), 1))
                anch.append(anchors[a])
                tcls.append(c)
            return tcls, tbox, indices, anch

    m = Model()
    g = [], [], []
    bn = tuple(v for k, v in vars(nn).items() if "Norm" in k)
    for v in m.modules():
        for p_name, p in v.named_parameters(recurse=0):
            if p_name == "bias":
                g[2].append(p)
            elif p_name == "weight" and isinstance(v, bn):
                g[1].append(p)
            else:
                g[0].append(p)
    opt = lib.optim.SGD(g[2], lr=0.01, momentum=0.937, nesterov=True)
    opt.add_param_group({"params": g[0], "weight_decay": 5e-4})
    opt.add_param_group({"params": g[1], "weight_decay": 0.0})
    compute_loss = ComputeLoss(m)
    images = lib.rand(batch, 3, img, img)
    n_per = lib.randint(1, 4, (batch,))
    image_idx = lib.repeat_interleave(lib.arange(batch), n_per).float()
    n = image_idx.shape[0]
    cls = lib.randint(0, nc, (n,)).float()
    xy = lib.rand(n, 2) * 0.8 + 0.1
    wh = lib.rand(n, 2) * 0.35 + 0.05
    targets = lib.cat((image_idx[:, None], cls[:, None], xy, wh), 1)
    return m, opt, lambda: compute_loss(m(images), targets)
