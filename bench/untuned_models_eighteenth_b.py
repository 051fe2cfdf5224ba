"""untuned_models_eighteenth.py's HyperNetwork ResNet, stacked hourglass and Gumbel-softmax
VAE: _name(lib, small) -> (model, optimiser, loss closure) as the fifth set's training_step
takes them."""
import numpy as np


def _hypernet(lib, small):
    # (g1910/HyperNetworks: hypernetwork_modules.py's HyperNetwork and Embedding,
    # resnet_blocks.py's ResNetBlock, primary_net.py's PrimaryNetwork with its zs_size and
    # filter_size lists cut to 2 blocks a stage; train.py's Adam with weight decay)
    nn, F = lib.nn, lib.nn.functional
    Parameter = nn.Parameter
    batch, size, per_stage, z_dim = (2, 8, 1, 8) if small else (32, 32, 2, 64)

    class HyperNetwork(nn.Module):
        def __init__(self, f_size=3, z_dim=64, out_size=16, in_size=16):
            super(HyperNetwork, self).__init__()
            self.z_dim = z_dim
            self.f_size = f_size
            self.out_size = out_size
            self.in_size = in_size
            self.w1 = Parameter(lib.fmod(lib.randn((self.z_dim, self.out_size * self.f_size * self.f_size)), 2))
            self.b1 = Parameter(lib.fmod(lib.randn((self.out_size * self.f_size * self.f_size)), 2))
            self.w2 = Parameter(lib.fmod(lib.randn((self.z_dim, self.in_size * self.z_dim)), 2))
            self.b2 = Parameter(lib.fmod(lib.randn((self.in_size * self.z_dim)), 2))

        def forward(self, z):
            h_in = lib.matmul(z, self.w2) + self.b2
            h_in = h_in.view(self.in_size, self.z_dim)
            h_final = lib.matmul(h_in, self.w1) + self.b1
            kernel = h_final.view(self.out_size, self.in_size, self.f_size, self.f_size)
            return kernel

    class Embedding(nn.Module):
        def __init__(self, z_num, z_dim):
            super(Embedding, self).__init__()
            self.z_list = nn.ParameterList()
            self.z_num = z_num
            self.z_dim = z_dim
            h, k = self.z_num
            for i in range(h):
                for j in range(k):
                    self.z_list.append(Parameter(lib.fmod(lib.randn(self.z_dim), 2)))

        def forward(self, hyper_net):
            ww = []
            h, k = self.z_num
            for i in range(h):
                w = []
                for j in range(k):
                    w.append(hyper_net(self.z_list[i * k + j]))
                ww.append(lib.cat(w, dim=1))
            return lib.cat(ww, dim=0)

    class IdentityLayer(nn.Module):
        def forward(self, x):
            return x

    class ResNetBlock(nn.Module):
        def __init__(self, in_size=16, out_size=16, downsample=False):
            super(ResNetBlock, self).__init__()
            self.out_size = out_size
            self.in_size = in_size
            if downsample:
                self.stride1 = 2
                self.reslayer = nn.Conv2d(in_channels=self.in_size, out_channels=self.out_size,
                                          stride=2, kernel_size=1)
            else:
                self.stride1 = 1
                self.reslayer = IdentityLayer()
            self.bn1 = nn.BatchNorm2d(out_size)
            self.bn2 = nn.BatchNorm2d(out_size)

        def forward(self, x, conv1_w, conv2_w):
            residual = self.reslayer(x)
            out = F.relu(self.bn1(F.conv2d(x, conv1_w, stride=self.stride1, padding=1)), inplace=True)
            out = self.bn2(F.conv2d(out, conv2_w, padding=1))
            out += residual
            out = F.relu(out)
            return out

    class PrimaryNetwork(nn.Module):
        def __init__(self, z_dim=64):
            super(PrimaryNetwork, self).__init__()
            self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(16)
            self.z_dim = z_dim
            self.hope = HyperNetwork(z_dim=self.z_dim)
            self.filter_size = []
            for stage in range(3):
                for i in range(per_stage):
                    cin = 16 * 2 ** max(stage - (i == 0), 0)
                    self.filter_size.append([cin, 16 * 2 ** stage])
            self.zs_size = []
            for cin, cout in self.filter_size:
                self.zs_size += [[cout // 16, cin // 16], [cout // 16, cout // 16]]
            self.res_net = nn.ModuleList()
            for i in range(len(self.filter_size)):
                down_sample = False
                if i > per_stage - 1 and i % per_stage == 0:
                    down_sample = True
                self.res_net.append(ResNetBlock(self.filter_size[i][0], self.filter_size[i][1],
                                                downsample=down_sample))
            self.zs = nn.ModuleList()
            for i in range(len(self.zs_size)):
                self.zs.append(Embedding(self.zs_size[i], self.z_dim))
            self.global_pool = nn.AvgPool2d(size // 4)
            self.final = nn.Linear(64, 10)

        def forward(self, x):
            x = F.relu(self.bn1(self.conv1(x)))
            for i in range(len(self.res_net)):
                w1 = self.zs[2 * i](self.hope)
                w2 = self.zs[2 * i + 1](self.hope)
                x = self.res_net[i](x, w1, w2)
            x = self.global_pool(x)
            x = self.final(x.view(-1, 64))
            return x

    net = PrimaryNetwork(z_dim=z_dim)
    criterion = nn.CrossEntropyLoss()
    opt = lib.optim.Adam(net.parameters(), lr=0.002, weight_decay=0.0005)
    images, labels = lib.randn(batch, 3, size, size), lib.randint(0, 10, (batch,))
    return net, opt, lambda: criterion(net(images), labels)


def _hourglass(lib, small):
    # (pytorch_stacked_hourglass/models/layers.py's Conv, Residual, Hourglass, posenet.py's
    # PoseNet and HeatmapLoss; 2 stacks of depth-3 hourglasses at width 64 on 64x64 images)
    nn = lib.nn
    batch, size, inp_dim, depth, oup_dim = (2, 32, 8, 2, 4) if small else (8, 64, 64, 3, 16)

    class Conv(nn.Module):
        def __init__(self, inp_dim, out_dim, kernel_size=3, stride=1, bn=False, relu=True):
            super(Conv, self).__init__()
            self.inp_dim = inp_dim
            self.conv = nn.Conv2d(inp_dim, out_dim, kernel_size, stride,
                                  padding=(kernel_size - 1) // 2, bias=True)
            self.relu = None
            self.bn = None
            if relu:
                self.relu = nn.ReLU()
            if bn:
                self.bn = nn.BatchNorm2d(out_dim)

        def forward(self, x):
            assert x.size()[1] == self.inp_dim, "{} {}".format(x.size()[1], self.inp_dim)
            x = self.conv(x)
            if self.bn is not None:
                x = self.bn(x)
            if self.relu is not None:
                x = self.relu(x)
            return x

    class Residual(nn.Module):
        def __init__(self, inp_dim, out_dim):
            super(Residual, self).__init__()
            self.relu = nn.ReLU()
            self.bn1 = nn.BatchNorm2d(inp_dim)
            self.conv1 = Conv(inp_dim, int(out_dim / 2), 1, relu=False)
            self.bn2 = nn.BatchNorm2d(int(out_dim / 2))
            self.conv2 = Conv(int(out_dim / 2), int(out_dim / 2), 3, relu=False)
            self.bn3 = nn.BatchNorm2d(int(out_dim / 2))
            self.conv3 = Conv(int(out_dim / 2), out_dim, 1, relu=False)
            self.skip_layer = Conv(inp_dim, out_dim, 1, relu=False)
            self.need_skip = inp_dim != out_dim

        def forward(self, x):
            if self.need_skip:
                residual = self.skip_layer(x)
            else:
                residual = x
            out = self.bn1(x)
            out = self.relu(out)
            out = self.conv1(out)
            out = self.bn2(out)
            out = self.relu(out)
            out = self.conv2(out)
            out = self.bn3(out)
            out = self.relu(out)
            out = self.conv3(out)
            out += residual
            return out

    class Pool(nn.Module):
        def __init__(self, kernel_size, stride):
            super().__init__()
            self.pool = nn.MaxPool2d(kernel_size, stride)

        def forward(self, x):
            return self.pool(x)

    class Hourglass(nn.Module):
        def __init__(self, n, f, bn=None, increase=0):
            super(Hourglass, self).__init__()
            nf = f + increase
            self.up1 = Residual(f, f)
            self.pool1 = Pool(2, 2)
            self.low1 = Residual(f, nf)
            self.n = n
            if self.n > 1:
                self.low2 = Hourglass(n - 1, nf, bn=bn)
            else:
                self.low2 = Residual(nf, nf)
            self.low3 = Residual(nf, f)
            self.up2 = nn.Upsample(scale_factor=2, mode='nearest')

        def forward(self, x):
            up1 = self.up1(x)
            pool1 = self.pool1(x)
            low1 = self.low1(pool1)
            low2 = self.low2(low1)
            low3 = self.low3(low2)
            up2 = self.up2(low3)
            return up1 + up2

    class Merge(nn.Module):
        def __init__(self, x_dim, y_dim):
            super(Merge, self).__init__()
            self.conv = Conv(x_dim, y_dim, 1, relu=False, bn=False)

        def forward(self, x):
            return self.conv(x)

    class HeatmapLoss(nn.Module):
        def forward(self, pred, gt):
            l = ((pred - gt) ** 2)
            l = l.mean(dim=3).mean(dim=2).mean(dim=1)
            return l

    class PoseNet(nn.Module):
        def __init__(self, nstack, inp_dim, oup_dim, bn=False, increase=0):
            super(PoseNet, self).__init__()
            self.nstack = nstack
            self.pre = nn.Sequential(Conv(3, 32, 7, 2, bn=True, relu=True), Residual(32, 64),
                                     Pool(2, 2), Residual(64, 64), Residual(64, inp_dim))
            self.hgs = nn.ModuleList([nn.Sequential(Hourglass(depth, inp_dim, bn, increase))
                                      for i in range(nstack)])
            self.features = nn.ModuleList([nn.Sequential(
                Residual(inp_dim, inp_dim), Conv(inp_dim, inp_dim, 1, bn=True, relu=True))
                for i in range(nstack)])
            self.outs = nn.ModuleList([Conv(inp_dim, oup_dim, 1, relu=False, bn=False)
                                       for i in range(nstack)])
            self.merge_features = nn.ModuleList([Merge(inp_dim, inp_dim) for i in range(nstack - 1)])
            self.merge_preds = nn.ModuleList([Merge(oup_dim, inp_dim) for i in range(nstack - 1)])
            self.heatmapLoss = HeatmapLoss()

        def forward(self, imgs):
            x = imgs.permute(0, 3, 1, 2)
            x = self.pre(x)
            combined_hm_preds = []
            for i in range(self.nstack):
                hg = self.hgs[i](x)
                feature = self.features[i](hg)
                preds = self.outs[i](feature)
                combined_hm_preds.append(preds)
                if i < self.nstack - 1:
                    x = x + self.merge_preds[i](preds) + self.merge_features[i](feature)
            return lib.stack(combined_hm_preds, 1)

        def calc_loss(self, combined_hm_preds, heatmaps):
            combined_loss = []
            for i in range(self.nstack):
                combined_loss.append(self.heatmapLoss(combined_hm_preds[:, i], heatmaps))
            combined_loss = lib.stack(combined_loss, dim=1)
            return combined_loss

    model = PoseNet(2, inp_dim, oup_dim)
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    imgs = lib.rand(batch, size, size, 3)       # (channels last, as the repo's loader gives)
    ys, xs = np.mgrid[0:size // 4, 0:size // 4]
    rng = np.random.RandomState(1)
    centres = rng.uniform(0, size // 4, (batch, oup_dim, 2))
    hm = np.exp(-((ys - centres[..., 0, None, None]) ** 2 + (xs - centres[..., 1, None, None]) ** 2) / 2)
    heatmaps = lib.tensor(hm.astype(np.float32))

    def loss():
        combined_loss = model.calc_loss(model(imgs), heatmaps)
        return lib.mean(combined_loss)
    return model, opt, loss


def _gumbelvae(lib, small):
    # (Gumbel_Softmax_VAE/gumbel_softmax_vae.py: sample_gumbel, gumbel_softmax_sample,
    # gumbel_softmax with hard False (its default), VAE_gumbel, loss_function with the
    # size_average=False of its day as reduction='sum'; temperature 1.0, Adam lr 1e-3)
    nn, F = lib.nn, lib.nn.functional
    batch, pixels, latent_dim, categorical_dim, h1, h2 = (
        (4, 64, 3, 4, 16, 8) if small else (100, 784, 30, 10, 512, 256))
    temp, hard = 1.0, False

    def sample_gumbel(shape, eps=1e-20):
        U = lib.rand(shape)
        return -lib.log(-lib.log(U + eps) + eps)

    def gumbel_softmax_sample(logits, temperature):
        y = logits + sample_gumbel(logits.size())
        return F.softmax(y / temperature, dim=-1)

    def gumbel_softmax(logits, temperature, hard=False):
        y = gumbel_softmax_sample(logits, temperature)
        if not hard:
            return y.view(-1, latent_dim * categorical_dim)
        shape = y.size()
        _, ind = y.max(dim=-1)
        y_hard = lib.zeros_like(y).view(-1, shape[-1])
        y_hard.scatter_(1, ind.view(-1, 1), 1)
        y_hard = y_hard.view(*shape)
        y_hard = (y_hard - y).detach() + y
        return y_hard.view(-1, latent_dim * categorical_dim)

    class VAE_gumbel(nn.Module):
        def __init__(self, temp):
            super(VAE_gumbel, self).__init__()
            self.fc1 = nn.Linear(pixels, h1)
            self.fc2 = nn.Linear(h1, h2)
            self.fc3 = nn.Linear(h2, latent_dim * categorical_dim)
            self.fc4 = nn.Linear(latent_dim * categorical_dim, h2)
            self.fc5 = nn.Linear(h2, h1)
            self.fc6 = nn.Linear(h1, pixels)
            self.relu = nn.ReLU()
            self.sigmoid = nn.Sigmoid()

        def encode(self, x):
            h1 = self.relu(self.fc1(x))
            h2 = self.relu(self.fc2(h1))
            return self.relu(self.fc3(h2))

        def decode(self, z):
            h4 = self.relu(self.fc4(z))
            h5 = self.relu(self.fc5(h4))
            return self.sigmoid(self.fc6(h5))

        def forward(self, x, temp, hard):
            q = self.encode(x.view(-1, pixels))
            q_y = q.view(q.size(0), latent_dim, categorical_dim)
            z = gumbel_softmax(q_y, temp, hard)
            return self.decode(z), F.softmax(q_y, dim=-1).reshape(*q.size())

    def loss_function(recon_x, x, qy):
        BCE = F.binary_cross_entropy(recon_x, x.view(-1, pixels), reduction='sum') / x.shape[0]
        log_ratio = lib.log(qy * categorical_dim + 1e-20)
        KLD = lib.sum(qy * log_ratio, dim=-1).mean()
        return BCE + KLD

    model = VAE_gumbel(temp)
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    data = (lib.rand(batch, 1, pixels) > 0.7).float()      # (binarised MNIST-like pixels)

    def loss():
        recon_batch, qy = model(data, temp, hard)
        return loss_function(recon_batch, data, qy)
    return model, opt, loss
