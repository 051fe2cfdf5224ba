"""untuned_models_fourth.py's PointNet, RealNVP flow and GAT (that file holds the other
three and build()): each _name(lib) -> (model, optimizer, loss closure), seeded by build."""
import math

def _pointnet(lib):
    nn, F = lib.nn, lib.nn.functional

    class TNet(nn.Module):
        def __init__(self, k=3):
            super().__init__()
            self.k = k
            self.conv1, self.conv2, self.conv3 = nn.Conv1d(k, 64, 1), nn.Conv1d(64, 128, 1), nn.Conv1d(128, 256, 1)
            self.fc1, self.fc2, self.fc3 = nn.Linear(256, 128), nn.Linear(128, 64), nn.Linear(64, k * k)
            self.bn1, self.bn2, self.bn3 = nn.BatchNorm1d(64), nn.BatchNorm1d(128), nn.BatchNorm1d(256)
            self.bn4, self.bn5 = nn.BatchNorm1d(128), nn.BatchNorm1d(64)

        def forward(self, x):
            batchsize = x.size()[0]
            x = F.relu(self.bn1(self.conv1(x)))
            x = F.relu(self.bn2(self.conv2(x)))
            x = F.relu(self.bn3(self.conv3(x)))
            x = lib.max(x, 2, keepdim=True)[0]
            x = x.view(-1, 256)
            x = F.relu(self.bn4(self.fc1(x)))
            x = F.relu(self.bn5(self.fc2(x)))
            x = self.fc3(x)
            iden = lib.eye(self.k).flatten().view(1, self.k * self.k).repeat(batchsize, 1)
            return (x + iden).view(-1, self.k, self.k)

    class PointNetCls(nn.Module):
        def __init__(self, classes=10):
            super().__init__()
            self.stn, self.fstn = TNet(3), TNet(64)
            self.conv1, self.conv2, self.conv3 = nn.Conv1d(3, 64, 1), nn.Conv1d(64, 128, 1), nn.Conv1d(128, 256, 1)
            self.bn1, self.bn2, self.bn3 = nn.BatchNorm1d(64), nn.BatchNorm1d(128), nn.BatchNorm1d(256)
            self.fc1, self.fc2, self.fc3 = nn.Linear(256, 128), nn.Linear(128, 64), nn.Linear(64, classes)
            self.bn4, self.bn5 = nn.BatchNorm1d(128), nn.BatchNorm1d(64)
            self.dropout = nn.Dropout(p=0.3)

        def forward(self, x):
            trans = self.stn(x)
            x = lib.bmm(x.transpose(2, 1), trans).transpose(2, 1)
            x = F.relu(self.bn1(self.conv1(x)))
            trans_feat = self.fstn(x)
            x = lib.bmm(x.transpose(2, 1), trans_feat).transpose(2, 1)
            x = F.relu(self.bn2(self.conv2(x)))
            x = self.bn3(self.conv3(x))
            x = lib.max(x, 2, keepdim=True)[0].view(-1, 256)
            x = F.relu(self.bn4(self.fc1(x)))
            x = F.relu(self.bn5(self.dropout(self.fc2(x))))
            return F.log_softmax(self.fc3(x), dim=1), trans_feat

    def feature_transform_regularizer(trans):
        d = trans.size()[1]
        I = lib.eye(d)[None, :, :]
        return lib.mean(lib.norm(lib.bmm(trans, trans.transpose(2, 1)) - I, dim=(1, 2)))

    m = PointNetCls()
    opt = lib.optim.Adam(m.parameters(), lr=0.001, betas=(0.9, 0.999))
    points, target = lib.randn(8, 3, 128), lib.randint(0, 10, (8,))

    def loss():
        pred, trans_feat = m(points)
        return F.nll_loss(pred, target) + feature_transform_regularizer(trans_feat) * 0.001
    return m, opt, loss


def _flow(lib):
    nn = lib.nn

    def checkerboard(h, w, parity):
        return ((lib.arange(h).view(-1, 1) + lib.arange(w)) % 2 == parity).float().view(1, 1, h, w)

    def st_net(cin, cout, hidden=32):
        return nn.Sequential(nn.Conv2d(cin, hidden, 3, padding=1), nn.ReLU(),
                             nn.Conv2d(hidden, hidden, 3, padding=1), nn.ReLU(),
                             nn.Conv2d(hidden, 2 * cout, 3, padding=1))

    class CheckerboardCoupling(nn.Module):
        def __init__(self, c, h, w, parity):
            super().__init__()
            self.register_buffer("mask", checkerboard(h, w, parity))
            self.net = st_net(c, c)
            self.scale = nn.Parameter(lib.ones(1, c, 1, 1))

        def forward(self, x):
            x_id = x * self.mask
            s, t = self.net(x_id).chunk(2, dim=1)
            s = self.scale * lib.tanh(s) * (1 - self.mask)
            t = t * (1 - self.mask)
            y = x_id + (1 - self.mask) * (x * lib.exp(s) + t)
            return y, s.sum(dim=(1, 2, 3))

    class ChannelCoupling(nn.Module):
        def __init__(self, c, flip):
            super().__init__()
            self.flip = flip
            self.net = st_net(c // 2, c // 2)
            self.scale = nn.Parameter(lib.ones(1, c // 2, 1, 1))

        def forward(self, x):
            x_a, x_b = x.chunk(2, dim=1)
            if self.flip:
                x_a, x_b = x_b, x_a
            s, t = self.net(x_a).chunk(2, dim=1)
            s = self.scale * lib.tanh(s)
            y_b = x_b * lib.exp(s) + t
            y = lib.cat([y_b, x_a], dim=1) if self.flip else lib.cat([x_a, y_b], dim=1)
            return y, s.sum(dim=(1, 2, 3))

    def squeeze(x):
        B, C, H, W = x.shape
        x = x.view(B, C, H // 2, 2, W // 2, 2).permute(0, 1, 3, 5, 2, 4)
        return x.reshape(B, C * 4, H // 2, W // 2)

    class RealNVP(nn.Module):
        def __init__(self):
            super().__init__()
            self.checker = nn.ModuleList([CheckerboardCoupling(1, 16, 16, i % 2) for i in range(3)])
            self.channel = nn.ModuleList([ChannelCoupling(4, i % 2 == 1) for i in range(3)])

        def forward(self, x):
            log_det = lib.zeros(x.shape[0])
            for layer in self.checker:
                x, ld = layer(x)
                log_det = log_det + ld
            x = squeeze(x)
            for layer in self.channel:
                x, ld = layer(x)
                log_det = log_det + ld
            return x, log_det

        def log_prob(self, x):
            z, log_det = self(x)
            prior = -0.5 * (z ** 2 + math.log(2 * math.pi)).sum(dim=(1, 2, 3))
            return prior + log_det

    m = RealNVP()
    opt = lib.optim.Adam(m.parameters(), 1e-3)
    # dequantised 5-bit images, logit-free: scaled to [0, 1) as the simple tutorials do
    x = (lib.randint(0, 32, (16, 1, 16, 16)).float() + lib.rand(16, 1, 16, 16)) / 32
    return m, opt, lambda: -m.log_prob(x).mean()


def _gat(lib):
    nn, F = lib.nn, lib.nn.functional

    class GATLayer(nn.Module):
        def __init__(self, in_features, out_features, heads, concat=True, dropout=0.0):
            super().__init__()
            self.heads, self.out_features, self.concat, self.dropout = heads, out_features, concat, dropout
            self.W = nn.Linear(in_features, heads * out_features, bias=False)
            self.att_src = nn.Parameter(lib.empty(1, heads, out_features))
            self.att_dst = nn.Parameter(lib.empty(1, heads, out_features))
            self.bias = nn.Parameter(lib.zeros(heads * out_features if concat else out_features))
            nn.init.xavier_uniform_(self.W.weight)
            nn.init.xavier_uniform_(self.att_src)
            nn.init.xavier_uniform_(self.att_dst)

        def forward(self, x, edge_index):
            N, H, C = x.size(0), self.heads, self.out_features
            h = self.W(x).view(N, H, C)
            src, dst = edge_index[0], edge_index[1]
            alpha_src = (h * self.att_src).sum(dim=-1)
            alpha_dst = (h * self.att_dst).sum(dim=-1)
            e = F.leaky_relu(alpha_src[src] + alpha_dst[dst], 0.2)             # (E, H)
            # softmax over the edges into each node
            e_max = lib.zeros(N, H).scatter_reduce(0, dst.unsqueeze(-1).expand_as(e), e,
                                                   reduce="amax", include_self=False)
            e = lib.exp(e - e_max[dst])
            denom = lib.zeros(N, H).index_add_(0, dst, e)
            alpha = e / (denom[dst] + 1e-16)
            alpha = F.dropout(alpha, p=self.dropout, training=self.training)
            out = lib.zeros(N, H, C).index_add_(0, dst, h[src] * alpha.unsqueeze(-1))
            out = out.view(N, H * C) if self.concat else out.mean(dim=1)
            return out + self.bias

    class GAT(nn.Module):
        def __init__(self, in_features, hidden, classes, heads=8):
            super().__init__()
            self.conv1 = GATLayer(in_features, hidden, heads)
            self.conv2 = GATLayer(hidden * heads, classes, 1, concat=False)

        def forward(self, x, edge_index):
            x = F.elu(self.conv1(x, edge_index))
            return self.conv2(x, edge_index)

    N, E = 1000, 8000
    edge_index = lib.randint(0, N, (2, E))
    loops = lib.arange(N)
    edge_index = lib.cat([edge_index, lib.stack([loops, loops])], dim=1)
    x, y = lib.randn(N, 64), lib.randint(0, 7, (N,))
    train_mask = lib.rand(N) < 0.2
    m = GAT(64, 8, 7)
    opt = lib.optim.Adam(m.parameters(), lr=0.005, weight_decay=5e-4)
    return m, opt, lambda: F.cross_entropy(m(x, edge_index)[train_mask], y[train_mask])
