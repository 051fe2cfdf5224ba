"""untuned_models_twelfth.py's SIREN, MemN2N and highway peephole-LSTM: each _name(lib, small)
-> (model, optimizer, loss closure[, {"clip"/"data"}]), seeded by build."""
import math


def _siren(lib, small):
    # (vsitzmann/siren's explore_siren.ipynb: SineLayer with its initialisation, Siren with
    # outermost_linear, coordinates cloned with requires_grad, the Poisson fit: the gradient of
    # the output by the coordinates against the image's; an analytic image sin(3x) cos(2y))
    nn, autograd = lib.nn, lib.autograd
    sidelen, hidden, layers = (6, 16, 1) if small else (32, 64, 3)

    class SineLayer(nn.Module):
        def __init__(self, in_features, out_features, bias=True, is_first=False, omega_0=30):
            super().__init__()
            self.omega_0 = omega_0
            self.is_first = is_first
            self.in_features = in_features
            self.linear = nn.Linear(in_features, out_features, bias=bias)
            self.init_weights()

        def init_weights(self):
            with lib.no_grad():
                if self.is_first:
                    self.linear.weight.uniform_(-1 / self.in_features, 1 / self.in_features)
                else:
                    self.linear.weight.uniform_(-math.sqrt(6 / self.in_features) / self.omega_0,
                                                math.sqrt(6 / self.in_features) / self.omega_0)

        def forward(self, input):
            return lib.sin(self.omega_0 * self.linear(input))

    class Siren(nn.Module):
        def __init__(self, in_features, hidden_features, hidden_layers, out_features,
                     first_omega_0=30, hidden_omega_0=30.):
            super().__init__()
            self.net = [SineLayer(in_features, hidden_features, is_first=True, omega_0=first_omega_0)]
            for i in range(hidden_layers):
                self.net.append(SineLayer(hidden_features, hidden_features, is_first=False,
                                          omega_0=hidden_omega_0))
            final_linear = nn.Linear(hidden_features, out_features)
            with lib.no_grad():
                final_linear.weight.uniform_(-math.sqrt(6 / hidden_features) / hidden_omega_0,
                                             math.sqrt(6 / hidden_features) / hidden_omega_0)
            self.net.append(final_linear)
            self.net = nn.Sequential(*self.net)

        def forward(self, coords):
            coords = coords.clone().detach().requires_grad_(True)  # allows to take derivative w.r.t. input
            output = self.net(coords)
            return output, coords

    def gradient(y, x, grad_outputs=None):
        if grad_outputs is None:
            grad_outputs = lib.ones_like(y)
        return autograd.grad(y, [x], grad_outputs=grad_outputs, create_graph=True)[0]

    def get_mgrid(sidelen, dim=2):
        tensors = tuple(dim * [lib.linspace(-1, 1, steps=sidelen)])
        mgrid = lib.stack(lib.meshgrid(*tensors, indexing="ij"), dim=-1)
        return mgrid.reshape(-1, dim)

    coords = get_mgrid(sidelen).unsqueeze(0)
    x, y = coords[..., :1], coords[..., 1:]
    gt_grads = lib.cat([3 * lib.cos(3 * x) * lib.cos(2 * y), -2 * lib.sin(3 * x) * lib.sin(2 * y)], -1)
    model = Siren(2, hidden, layers, 1)
    optimizer = lib.optim.Adam(lr=1e-4, params=model.parameters())

    def loss():
        model_output, model_coords = model(coords)
        grads = gradient(model_output, model_coords)
        return ((grads - gt_grads) ** 2).sum(-1).mean()
    return model, optimizer, loss, {"data": (coords, gt_grads)}


def _memn2n(lib, small):
    # (Sukhbaatar et al.'s end-to-end memory network as the PyTorch ports write it for bAbI:
    # adjacent weight tying (A_{k+1} = C_k, the answer matrix the last C), position encoding,
    # temporal encoding, padding index 0; SGD at lr 0.01 with the gradient norm clipped at 40)
    nn, F = lib.nn, lib.nn.functional
    batch, vocab, embed, hops, mem, sent = ((2, 11, 8, 2, 4, 3) if small else
                                            (32, 200, 64, 3, 50, 10))

    def position_encoding(sentence_size, embedding_dim):
        encoding = [[(1 - j / sentence_size) - (k / embedding_dim) * (1 - 2 * j / sentence_size)
                     for k in range(1, embedding_dim + 1)] for j in range(1, sentence_size + 1)]
        return lib.tensor(encoding)

    class MemN2N(nn.Module):
        def __init__(self):
            super().__init__()
            self.C = nn.ModuleList([nn.Embedding(vocab, embed, padding_idx=0) for _ in range(hops + 1)])
            for emb in self.C:
                emb.weight.data.normal_(0, 0.1)
                emb.weight.data[0].zero_()
            self.TA = nn.Parameter(lib.randn(mem, embed) * 0.1)
            self.TC = nn.Parameter(lib.randn(mem, embed) * 0.1)
            self.register_buffer("encoding", position_encoding(sent, embed))

        def forward(self, story, query):
            b, m, s = story.size()
            u = (self.C[0](query) * self.encoding).sum(1)
            for hop in range(hops):
                flat = story.view(b, m * s)
                m_a = (self.C[hop](flat).view(b, m, s, -1) * self.encoding).sum(2) + self.TA
                m_c = (self.C[hop + 1](flat).view(b, m, s, -1) * self.encoding).sum(2) + self.TC
                prob = F.softmax(lib.bmm(m_a, u.unsqueeze(2)).squeeze(2), dim=-1)
                o = lib.bmm(prob.unsqueeze(1), m_c).squeeze(1)
                u = u + o
            return u @ self.C[hops].weight.transpose(0, 1)

    model = MemN2N()
    optimizer = lib.optim.SGD(model.parameters(), lr=0.01)
    story = lib.randint(1, vocab, (batch, mem, sent))
    story = story * (lib.rand(batch, mem, sent) > 0.3).long()      # (padding: index 0)
    query = lib.randint(0, vocab, (batch, sent))
    answer = lib.randint(1, vocab, (batch,))

    def loss():
        return F.cross_entropy(model(story, query), answer)
    return model, optimizer, loss, {"clip": 40.0, "data": (story, query, answer)}


def _hwlstm(lib, small):
    # (a character LM on a hand-written LSTM cell with peephole connections (Gers & Schmidhuber:
    # the input and forget gates see c_{t-1}, the output gate c_t) and kefirski/pytorch_Highway's
    # Highway layers over its outputs; RMSprop, the norm clipped at 5)
    nn, F = lib.nn, lib.nn.functional
    batch, seq, vocab, emb, hidden, n_highway = ((2, 5, 11, 6, 8, 1) if small else
                                                 (32, 32, 64, 32, 128, 2))

    class PeepholeLSTMCell(nn.Module):
        def __init__(self, input_size, hidden_size):
            super().__init__()
            self.hidden_size = hidden_size
            self.W = nn.Linear(input_size, 4 * hidden_size)
            self.U = nn.Linear(hidden_size, 4 * hidden_size, bias=False)
            self.w_ci = nn.Parameter(lib.empty(hidden_size))
            self.w_cf = nn.Parameter(lib.empty(hidden_size))
            self.w_co = nn.Parameter(lib.empty(hidden_size))
            stdv = 1.0 / math.sqrt(hidden_size)
            for p in self.parameters():
                nn.init.uniform_(p, -stdv, stdv)

        def forward(self, x, state):
            h, c = state
            gates = self.W(x) + self.U(h)
            i, f, g, o = gates.chunk(4, 1)
            i = lib.sigmoid(i + self.w_ci * c)
            f = lib.sigmoid(f + self.w_cf * c)
            c = f * c + i * lib.tanh(g)
            o = lib.sigmoid(o + self.w_co * c)
            h = o * lib.tanh(c)
            return h, c

    class Highway(nn.Module):
        def __init__(self, size, num_layers, f):
            super(Highway, self).__init__()
            self.num_layers = num_layers
            self.nonlinear = nn.ModuleList([nn.Linear(size, size) for _ in range(num_layers)])
            self.linear = nn.ModuleList([nn.Linear(size, size) for _ in range(num_layers)])
            self.gate = nn.ModuleList([nn.Linear(size, size) for _ in range(num_layers)])
            self.f = f

        def forward(self, x):
            for layer in range(self.num_layers):
                gate = F.sigmoid(self.gate[layer](x))
                nonlinear = self.f(self.nonlinear[layer](x))
                linear = self.linear[layer](x)
                x = gate * nonlinear + (1 - gate) * linear
            return x

    class CharLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, emb)
            self.cell = PeepholeLSTMCell(emb, hidden)
            self.highway = Highway(hidden, n_highway, F.relu)
            self.out = nn.Linear(hidden, vocab)

        def forward(self, x):
            b, t = x.shape
            e = self.embed(x)
            h = lib.zeros(b, hidden)
            c = lib.zeros(b, hidden)
            outputs = []
            for step in range(t):
                h, c = self.cell(e[:, step], (h, c))
                outputs.append(h)
            out = lib.stack(outputs, 1)
            return self.out(self.highway(out))

    model = CharLM()
    optimizer = lib.optim.RMSprop(model.parameters(), lr=2e-3)
    text = lib.randint(0, vocab, (batch, seq + 1))
    inp, target = text[:, :-1], text[:, 1:]

    def loss():
        logits = model(inp)
        return F.cross_entropy(logits.reshape(-1, vocab), target.reshape(-1))
    return model, optimizer, loss, {"clip": 5.0, "data": (inp, target)}
