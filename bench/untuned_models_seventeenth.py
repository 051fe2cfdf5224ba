"""Five more training steps, written as their reference code writes them and run before llgrad
was tuned on any of them (2026-12-06): DGCNN (WangYueBin/dgcnn's model.py: EdgeConv by a
k-nearest-neighbour graph rebuilt in each layer from pairwise distances by topk, neighbours
fetched by a flattened index, max over the neighbours, adaptive max and mean pooling, the
label-smoothed loss by scatter; SGD with momentum and CosineAnnealingLR), a prototypical
network (orobix's prototypical-networks-for-few-shot-learning: a Conv-4 encoder, the loss
finding classes by torch.unique and their shots by eq().nonzero(), prototypes by mean, squared
euclidean distances by expand, gather of the log-probabilities; an N-way K-shot episode drawn
by randperm in the step; Adam with StepLR), Glow (rosinality/glow-pytorch: squeeze by
view/permute, ActNorm initialised from the first batch under a `.item()` test,
InvConv2dLU's LU-parametrised 1x1 convolution, affine coupling with a ZeroConv2d, a learned
prior per split, dequantisation noise drawn in the step; Adam: in
untuned_models_seventeenth_c.py), and in untuned_models_seventeenth_b.py ArcFace
(ronghuaiyang/arcface-pytorch: resnet_face18's IRBlocks with SE and PReLU, ArcMarginProduct's cos(theta + m) by sqrt and where, the one-hot by
scatter_, FocalLoss; SGD over two param groups with StepLR) and T5 (transformers'
modeling_t5 condensed: RMS T5LayerNorm, relative position buckets by log, long casts and
where, cross-attention, the decoder input by _shift_right, cross entropy ignoring -100, a
tied head scaled by d_model**-0.5; torch.optim.Adafactor).

    python bench/untuned_models_seventeenth.py [name,...] [--torch-compile]

Per model: torch eager, torch.compile (with --torch-compile), llgrad eager and llgrad compiled,
1 thread each (no jax versions in this set); the checks, the timing and its printout are
untuned_models_eleventh.py's (main there). build(lib, name, small=True) makes the tests'
smaller versions."""
import os
import sys
import types

import numpy as np

import untuned_models_seventeenth_b
import untuned_models_seventeenth_c
from untuned_models_fifth import training_step

NAMES = ("dgcnn", "protonet", "glow", "arcface", "t5")


def _maker(name):
    for module in (untuned_models_seventeenth_b, untuned_models_seventeenth_c):
        if hasattr(module, "_" + name):
            return getattr(module, "_" + name)
    return globals()["_" + name]


def build(lib, name, small=False):
    np.random.seed(0)       # (Glow's InvConv2dLU draws its start by NumPy, as there)
    return training_step(lib, lambda lib: _maker(name)(lib, small))


def _dgcnn(lib, small):
    # (dgcnn/pytorch/model.py's knn, get_graph_feature and DGCNN, util.py's cal_loss; main.py's
    # SGD at lr 0.1 * 100 is its use_sgd default, here 0.1 as the learning rate it anneals from)
    nn, F = lib.nn, lib.nn.functional
    batch, points, k, emb, classes = (4, 24, 4, 32, 5) if small else (8, 256, 16, 256, 40)

    def knn(x, k):
        inner = -2 * lib.matmul(x.transpose(2, 1), x)
        xx = lib.sum(x ** 2, dim=1, keepdim=True)
        pairwise_distance = -xx - inner - xx.transpose(2, 1)
        idx = pairwise_distance.topk(k=k, dim=-1)[1]   # (batch_size, num_points, k)
        return idx

    def get_graph_feature(x, k=20, idx=None):
        batch_size = x.size(0)
        num_points = x.size(2)
        x = x.view(batch_size, -1, num_points)
        if idx is None:
            idx = knn(x, k=k)   # (batch_size, num_points, k)
        idx_base = lib.arange(0, batch_size).view(-1, 1, 1) * num_points
        idx = idx + idx_base
        idx = idx.view(-1)
        _, num_dims, _ = x.size()
        x = x.transpose(2, 1).contiguous()
        feature = x.view(batch_size * num_points, -1)[idx, :]
        feature = feature.view(batch_size, num_points, k, num_dims)
        x = x.view(batch_size, num_points, 1, num_dims).repeat(1, 1, k, 1)
        feature = lib.cat((feature - x, x), dim=3).permute(0, 3, 1, 2).contiguous()
        return feature

    class DGCNN(nn.Module):
        def __init__(self, output_channels=40):
            super(DGCNN, self).__init__()
            self.k = k
            self.bn1 = nn.BatchNorm2d(64)
            self.bn2 = nn.BatchNorm2d(64)
            self.bn3 = nn.BatchNorm2d(128)
            self.bn4 = nn.BatchNorm2d(256)
            self.bn5 = nn.BatchNorm1d(emb)
            self.conv1 = nn.Sequential(nn.Conv2d(6, 64, kernel_size=1, bias=False), self.bn1,
                                       nn.LeakyReLU(negative_slope=0.2))
            self.conv2 = nn.Sequential(nn.Conv2d(64 * 2, 64, kernel_size=1, bias=False), self.bn2,
                                       nn.LeakyReLU(negative_slope=0.2))
            self.conv3 = nn.Sequential(nn.Conv2d(64 * 2, 128, kernel_size=1, bias=False), self.bn3,
                                       nn.LeakyReLU(negative_slope=0.2))
            self.conv4 = nn.Sequential(nn.Conv2d(128 * 2, 256, kernel_size=1, bias=False), self.bn4,
                                       nn.LeakyReLU(negative_slope=0.2))
            self.conv5 = nn.Sequential(nn.Conv1d(512, emb, kernel_size=1, bias=False), self.bn5,
                                       nn.LeakyReLU(negative_slope=0.2))
            self.linear1 = nn.Linear(emb * 2, 512, bias=False)
            self.bn6 = nn.BatchNorm1d(512)
            self.dp1 = nn.Dropout(p=0.5)
            self.linear2 = nn.Linear(512, 256)
            self.bn7 = nn.BatchNorm1d(256)
            self.dp2 = nn.Dropout(p=0.5)
            self.linear3 = nn.Linear(256, output_channels)

        def forward(self, x):
            batch_size = x.size(0)
            x = get_graph_feature(x, k=self.k)
            x = self.conv1(x)
            x1 = x.max(dim=-1, keepdim=False)[0]
            x = get_graph_feature(x1, k=self.k)
            x = self.conv2(x)
            x2 = x.max(dim=-1, keepdim=False)[0]
            x = get_graph_feature(x2, k=self.k)
            x = self.conv3(x)
            x3 = x.max(dim=-1, keepdim=False)[0]
            x = get_graph_feature(x3, k=self.k)
            x = self.conv4(x)
            x4 = x.max(dim=-1, keepdim=False)[0]
            x = lib.cat((x1, x2, x3, x4), dim=1)
            x = self.conv5(x)
            x1 = F.adaptive_max_pool1d(x, 1).view(batch_size, -1)
            x2 = F.adaptive_avg_pool1d(x, 1).view(batch_size, -1)
            x = lib.cat((x1, x2), 1)
            x = F.leaky_relu(self.bn6(self.linear1(x)), negative_slope=0.2)
            x = self.dp1(x)
            x = F.leaky_relu(self.bn7(self.linear2(x)), negative_slope=0.2)
            x = self.dp2(x)
            x = self.linear3(x)
            return x

    def cal_loss(pred, gold, smoothing=True):
        gold = gold.contiguous().view(-1)
        eps = 0.2
        n_class = pred.size(1)
        one_hot = lib.zeros_like(pred).scatter(1, gold.view(-1, 1), 1)
        one_hot = one_hot * (1 - eps) + (1 - one_hot) * eps / (n_class - 1)
        log_prb = F.log_softmax(pred, dim=1)
        return -(one_hot * log_prb).sum(dim=1).mean()

    model = DGCNN(output_channels=classes)
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    scheduler = lib.optim.lr_scheduler.CosineAnnealingLR(opt, 250, eta_min=1e-3)
    data = lib.rand(batch, points, 3) * 2 - 1
    label = lib.randint(0, classes, (batch, 1))
    data, label = data.permute(0, 2, 1), label.squeeze()    # (main.py's train loop)
    return model, opt, lambda: cal_loss(model(data), label), {"scheduler": scheduler}


def _protonet(lib, small):
    # (protonet.py, prototypical_loss.py as written there; the episode the batch sampler makes,
    # drawn by randperm from a fixed set of Omniglot-sized images: n_way classes of
    # n_support + n_query shots)
    nn, F = lib.nn, lib.nn.functional
    n_classes, per_class, n_way, n_support, n_query, size, hid = (
        (6, 6, 3, 2, 2, 16, 8) if small else (40, 20, 20, 5, 5, 28, 64))

    def conv_block(in_channels, out_channels):
        return nn.Sequential(nn.Conv2d(in_channels, out_channels, 3, padding=1),
                             nn.BatchNorm2d(out_channels), nn.ReLU(), nn.MaxPool2d(2))

    class ProtoNet(nn.Module):
        def __init__(self, x_dim=1, hid_dim=64, z_dim=64):
            super(ProtoNet, self).__init__()
            self.encoder = nn.Sequential(conv_block(x_dim, hid_dim), conv_block(hid_dim, hid_dim),
                                         conv_block(hid_dim, hid_dim), conv_block(hid_dim, z_dim))

        def forward(self, x):
            x = self.encoder(x)
            return x.view(x.size(0), -1)

    def euclidean_dist(x, y):
        n = x.size(0)
        m = y.size(0)
        d = x.size(1)
        if d != y.size(1):
            raise Exception
        x = x.unsqueeze(1).expand(n, m, d)
        y = y.unsqueeze(0).expand(n, m, d)
        return lib.pow(x - y, 2).sum(2)

    def prototypical_loss(input, target, n_support):
        target_cpu = target.to('cpu')
        input_cpu = input.to('cpu')

        def supp_idxs(c):
            return target_cpu.eq(c).nonzero()[:n_support].squeeze(1)
        classes = lib.unique(target_cpu)
        n_classes = len(classes)
        n_query = target_cpu.eq(classes[0].item()).sum().item() - n_support
        support_idxs = list(map(supp_idxs, classes))
        prototypes = lib.stack([input_cpu[idx_list].mean(0) for idx_list in support_idxs])
        query_idxs = lib.stack(list(map(lambda c: target_cpu.eq(c).nonzero()[n_support:], classes))).view(-1)
        query_samples = input.to('cpu')[query_idxs]
        dists = euclidean_dist(query_samples, prototypes)
        log_p_y = F.log_softmax(-dists, dim=1).view(n_classes, n_query, -1)
        target_inds = lib.arange(0, n_classes)
        target_inds = target_inds.view(n_classes, 1, 1)
        target_inds = target_inds.expand(n_classes, n_query, 1).long()
        loss_val = -log_p_y.gather(2, target_inds).squeeze().view(-1).mean()
        _, y_hat = log_p_y.max(2)
        acc_val = y_hat.eq(target_inds.squeeze()).float().mean()
        return loss_val, acc_val

    model = ProtoNet(hid_dim=hid, z_dim=hid)
    opt = lib.optim.Adam(params=model.parameters(), lr=0.001)
    scheduler = lib.optim.lr_scheduler.StepLR(optimizer=opt, gamma=0.5, step_size=20)
    images = lib.rand(n_classes, per_class, 1, size, size)

    def loss():
        classes = lib.randperm(n_classes)[:n_way]
        shots = lib.stack([lib.randperm(per_class)[:n_support + n_query] for _ in range(n_way)])
        x = images[classes[:, None], shots].view(-1, 1, size, size)
        y = classes[:, None].expand(n_way, n_support + n_query).reshape(-1)
        perm = lib.randperm(len(y))     # (the sampler shuffles the episode's images)
        model_output = model(x[perm])
        loss, acc = prototypical_loss(model_output, target=y[perm], n_support=n_support)
        return loss
    return model, opt, loss, {"scheduler": scheduler}


if __name__ == "__main__":
    import untuned_models_eleventh
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    chosen = args[0].split(",") if args else list(NAMES)
    if "-h" in sys.argv or "--help" in sys.argv or set(chosen) - set(NAMES):
        sys.exit(__doc__ + f"\n\nmodels: {', '.join(NAMES)}")
    os.environ.setdefault("LLGRAD_COMPILE", "sync")     # (read when llgrad is imported)
    os.environ.setdefault("LLGRAD_NUM_THREADS", "1")
    untuned_models_eleventh.main(chosen, "--torch-compile" in sys.argv, build=build,
                                 raw=None, jax_models=types.SimpleNamespace(NAMES=()))
