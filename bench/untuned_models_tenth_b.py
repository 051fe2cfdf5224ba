"""untuned_models_tenth.py's TabNet, word2vec skip-gram and ESPCN (that file holds the other
two, build() and the runner): each _name(lib, small) -> (model, optimizer, loss closure[,
{"clip"/"scheduler"/...}]), seeded by build."""
import math


def _tabnet(lib, small):
    # (dreamquark-ai/tabnet's tab_network.py TabNetNoEmbeddings at its defaults: n_d = n_a = 8,
    # 3 steps, gamma 1.3, 2 shared and 2 independent GLU layers, virtual batch 128, on
    # forest-cover-shaped rows (54 features, 7 classes); its sparsemax is an autograd.Function
    # with a hand-written backward, written here with the ops its forward uses)
    nn, F = lib.nn, lib.nn.functional
    batch, vbs, input_dim = (32, 16, 12) if small else (1024, 128, 54)
    n_d = n_a = 8
    n_steps, gamma, n_shared, n_independent, lambda_sparse = 3, 1.3, 2, 2, 1e-3

    class Sparsemax(nn.Module):
        def __init__(self, dim=-1):
            super(Sparsemax, self).__init__()
            self.dim = dim

        def forward(self, input):
            dim = self.dim
            number_of_logits = input.size(dim)
            input = input - lib.max(input, dim=dim, keepdim=True)[0].expand_as(input)
            zs = lib.sort(input=input, dim=dim, descending=True)[0]
            rng = lib.arange(start=1, end=number_of_logits + 1, step=1, dtype=input.dtype).view(1, -1)
            rng = rng.expand_as(zs)
            bound = 1 + rng * zs
            cumulative_sum_zs = lib.cumsum(zs, dim)
            is_gt = lib.gt(bound, cumulative_sum_zs).type(input.type())
            k = lib.max(is_gt * rng, dim, keepdim=True)[0]
            zs_sparse = is_gt * zs
            taus = (lib.sum(zs_sparse, dim, keepdim=True) - 1) / k
            taus = taus.expand_as(input)
            return lib.max(lib.zeros_like(input), input - taus)

    class GBN(nn.Module):
        def __init__(self, input_dim, virtual_batch_size=128, momentum=0.01):
            super(GBN, self).__init__()
            self.input_dim = input_dim
            self.virtual_batch_size = virtual_batch_size
            self.bn = nn.BatchNorm1d(self.input_dim, momentum=momentum)

        def forward(self, x):
            chunks = x.chunk(int(math.ceil(x.shape[0] / self.virtual_batch_size)), 0)
            res = [self.bn(x_) for x_ in chunks]
            return lib.cat(res, dim=0)

    class GLU_Layer(nn.Module):
        def __init__(self, input_dim, output_dim, fc=None, virtual_batch_size=128, momentum=0.02):
            super(GLU_Layer, self).__init__()
            self.output_dim = output_dim
            self.fc = fc if fc else nn.Linear(input_dim, 2 * output_dim, bias=False)
            self.bn = GBN(2 * output_dim, virtual_batch_size=virtual_batch_size, momentum=momentum)

        def forward(self, x):
            x = self.fc(x)
            x = self.bn(x)
            out = lib.mul(x[:, : self.output_dim], lib.sigmoid(x[:, self.output_dim:]))
            return out

    class GLU_Block(nn.Module):
        def __init__(self, input_dim, output_dim, n_glu=2, first=False, shared_layers=None,
                     virtual_batch_size=128, momentum=0.02):
            super(GLU_Block, self).__init__()
            self.first, self.shared_layers, self.n_glu = first, shared_layers, n_glu
            self.glu_layers = nn.ModuleList()
            params = {"virtual_batch_size": virtual_batch_size, "momentum": momentum}
            fc = shared_layers[0] if shared_layers else None
            self.glu_layers.append(GLU_Layer(input_dim, output_dim, fc=fc, **params))
            for glu_id in range(1, self.n_glu):
                fc = shared_layers[glu_id] if shared_layers else None
                self.glu_layers.append(GLU_Layer(output_dim, output_dim, fc=fc, **params))

        def forward(self, x):
            scale = lib.sqrt(lib.FloatTensor([0.5]))
            if self.first:  # the first layer of the block has no scale multiplication
                x = self.glu_layers[0](x)
                layers_left = range(1, self.n_glu)
            else:
                layers_left = range(self.n_glu)
            for glu_id in layers_left:
                x = lib.add(x, self.glu_layers[glu_id](x))
                x = x * scale
            return x

    class FeatTransformer(nn.Module):
        def __init__(self, input_dim, output_dim, shared_layers, n_glu_independent,
                     virtual_batch_size=128, momentum=0.02):
            super(FeatTransformer, self).__init__()
            params = {"n_glu": n_glu_independent, "virtual_batch_size": virtual_batch_size,
                      "momentum": momentum}
            self.shared = GLU_Block(input_dim, output_dim, first=True, shared_layers=shared_layers,
                                    n_glu=len(shared_layers), virtual_batch_size=virtual_batch_size,
                                    momentum=momentum)
            self.specifics = GLU_Block(output_dim, output_dim, first=False, **params)

        def forward(self, x):
            x = self.shared(x)
            x = self.specifics(x)
            return x

    class AttentiveTransformer(nn.Module):
        def __init__(self, input_dim, group_dim, virtual_batch_size=128, momentum=0.02):
            super(AttentiveTransformer, self).__init__()
            self.fc = nn.Linear(input_dim, group_dim, bias=False)
            self.bn = GBN(group_dim, virtual_batch_size=virtual_batch_size, momentum=momentum)
            self.selector = Sparsemax(dim=-1)

        def forward(self, priors, processed_feat):
            x = self.fc(processed_feat)
            x = self.bn(x)
            x = lib.mul(x, priors)
            x = self.selector(x)
            return x

    class TabNet(nn.Module):
        def __init__(self, input_dim, output_dim):
            super(TabNet, self).__init__()
            self.epsilon = 1e-15
            self.initial_bn = nn.BatchNorm1d(input_dim, momentum=0.01)
            shared_feat_transform = nn.ModuleList()
            for i in range(n_shared):
                shared_feat_transform.append(nn.Linear(input_dim if i == 0 else n_d + n_a,
                                                       2 * (n_d + n_a), bias=False))
            self.initial_splitter = FeatTransformer(input_dim, n_d + n_a, shared_feat_transform,
                                                    n_independent, vbs, 0.02)
            self.feat_transformers = nn.ModuleList()
            self.att_transformers = nn.ModuleList()
            for step in range(n_steps):
                self.feat_transformers.append(FeatTransformer(
                    input_dim, n_d + n_a, shared_feat_transform, n_independent, vbs, 0.02))
                self.att_transformers.append(AttentiveTransformer(n_a, input_dim, vbs, 0.02))
            self.final_mapping = nn.Linear(n_d, output_dim, bias=False)

        def forward(self, x):
            x = self.initial_bn(x)
            prior = lib.ones(x.shape)
            M_loss = 0
            att = self.initial_splitter(x)[:, n_d:]
            steps_output = []
            for step in range(n_steps):
                M = self.att_transformers[step](prior, att)
                M_loss += lib.mean(lib.sum(lib.mul(M, lib.log(M + self.epsilon)), dim=1))
                prior = lib.mul(gamma - M, prior)
                masked_x = lib.mul(M, x)
                out = self.feat_transformers[step](masked_x)
                d = nn.ReLU()(out[:, :n_d])
                steps_output.append(d)
                att = out[:, n_d:]
            M_loss /= n_steps
            res = lib.sum(lib.stack(steps_output, dim=0), dim=0)
            return self.final_mapping(res), M_loss

    network = TabNet(input_dim, 7)
    optimizer = lib.optim.Adam(network.parameters(), lr=2e-2)
    scheduler = lib.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.9)
    X = lib.randn(batch, input_dim)
    y = lib.randint(0, 7, (batch,))
    loss_fn = nn.functional.cross_entropy

    def loss():
        output, M_loss = network(X)
        return loss_fn(output, y) - lambda_sparse * M_loss
    return network, optimizer, loss, {"scheduler": scheduler}


def _sgns(lib, small):
    # (Adoni5/word2vec's model.py SkipGramModel on a 10,000-word vocabulary, 100-d, 5 negative
    # samples a pair; its Embeddings are sparse=True with SparseAdam, dense here with Adam:
    # llgrad has no sparse gradients)
    nn, F, init = lib.nn, lib.nn.functional, lib.nn.init
    batch, vocab, dim, n_neg = (16, 50, 8, 5) if small else (1024, 10000, 100, 5)

    class SkipGramModel(nn.Module):
        def __init__(self, emb_size, emb_dimension):
            super(SkipGramModel, self).__init__()
            self.emb_size = emb_size
            self.emb_dimension = emb_dimension
            self.u_embeddings = nn.Embedding(emb_size, emb_dimension)
            self.v_embeddings = nn.Embedding(emb_size, emb_dimension)

            initrange = 1.0 / self.emb_dimension
            init.uniform_(self.u_embeddings.weight.data, -initrange, initrange)
            init.constant_(self.v_embeddings.weight.data, 0)

        def forward(self, pos_u, pos_v, neg_v):
            emb_u = self.u_embeddings(pos_u)
            emb_v = self.v_embeddings(pos_v)
            emb_neg_v = self.v_embeddings(neg_v)

            score = lib.sum(lib.mul(emb_u, emb_v), dim=1)
            score = lib.clamp(score, max=10, min=-10)
            score = -F.logsigmoid(score)

            neg_score = lib.bmm(emb_neg_v, emb_u.unsqueeze(2)).squeeze()
            neg_score = lib.clamp(neg_score, max=10, min=-10)
            neg_score = -lib.sum(F.logsigmoid(-neg_score), dim=1)

            return lib.mean(score + neg_score)

    model = SkipGramModel(vocab, dim)
    optimizer = lib.optim.Adam(list(model.parameters()), lr=0.001)
    pos_u = lib.randint(0, vocab, (batch,))
    pos_v = lib.randint(0, vocab, (batch,))
    neg_v = lib.randint(0, vocab, (batch, n_neg))
    return model, optimizer, lambda: model(pos_u, pos_v, neg_v)


def _espcn(lib, small):
    # (pytorch/examples' super_resolution model.py Net at upscale factor 3, its main.py's
    # MSELoss and Adam(lr=0.01), on 32x32 Y-channel crops)
    nn, init = lib.nn, lib.nn.init
    batch, size, upscale_factor = (2, 8, 3) if small else (16, 32, 3)

    class Net(nn.Module):
        def __init__(self, upscale_factor):
            super(Net, self).__init__()

            self.relu = nn.ReLU()
            self.conv1 = nn.Conv2d(1, 64, (5, 5), (1, 1), (2, 2))
            self.conv2 = nn.Conv2d(64, 64, (3, 3), (1, 1), (1, 1))
            self.conv3 = nn.Conv2d(64, 32, (3, 3), (1, 1), (1, 1))
            self.conv4 = nn.Conv2d(32, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
            self.pixel_shuffle = nn.PixelShuffle(upscale_factor)

            self._initialize_weights()

        def forward(self, x):
            x = self.relu(self.conv1(x))
            x = self.relu(self.conv2(x))
            x = self.relu(self.conv3(x))
            x = self.pixel_shuffle(self.conv4(x))
            return x

        def _initialize_weights(self):
            init.orthogonal_(self.conv1.weight, init.calculate_gain('relu'))
            init.orthogonal_(self.conv2.weight, init.calculate_gain('relu'))
            init.orthogonal_(self.conv3.weight, init.calculate_gain('relu'))
            init.orthogonal_(self.conv4.weight)

    model = Net(upscale_factor=upscale_factor)
    criterion = nn.MSELoss()
    optimizer = lib.optim.Adam(model.parameters(), lr=0.01)
    target = lib.rand(batch, 1, size * upscale_factor, size * upscale_factor)
    input = lib.nn.functional.avg_pool2d(target, upscale_factor)
    return model, optimizer, lambda: criterion(model(input), target)
