"""untuned_models_thirteenth.py's Neural Turing Machine and SE-ResNeXt: each _name(lib, small)
-> (model, optimizer, loss closure[, {"clip"/"clip_value"/"data"}]), seeded by build."""
import numpy as np


def _ntm(lib, small):
    # (loudinthecloud/pytorch-ntm's NTM, NTMMemory, read/write heads and LSTMController as
    # written there, on its copy task: train_batch's loops, y_out[i] written into zeros, BCELoss;
    # RMSprop(momentum=0.9, alpha=0.95, lr=1e-4), gradients clipped to [-10, 10])
    nn, F = lib.nn, lib.nn.functional
    batch, seq_len, width, N, M, ctrl = (2, 3, 4, 6, 5, 8) if small else (4, 8, 8, 32, 16, 64)

    def _convolve(w, s):
        """Circular convolution implementation."""
        assert s.size(0) == 3
        t = lib.cat([w[-1:], w, w[:1]])
        return F.conv1d(t.view(1, 1, -1), s.view(1, 1, -1)).view(-1)

    class NTMMemory(nn.Module):
        def __init__(self, N, M):
            super(NTMMemory, self).__init__()
            self.N, self.M = N, M
            self.register_buffer('mem_bias', lib.Tensor(N, M))
            stdev = 1 / (np.sqrt(N + M))
            nn.init.uniform_(self.mem_bias, -stdev, stdev)

        def reset(self, batch_size):
            self.batch_size = batch_size
            self.memory = self.mem_bias.clone().repeat(batch_size, 1, 1)

        def read(self, w):
            return lib.matmul(w.unsqueeze(1), self.memory).squeeze(1)

        def write(self, w, e, a):
            self.prev_mem = self.memory
            erase = lib.matmul(w.unsqueeze(-1), e.unsqueeze(1))
            add = lib.matmul(w.unsqueeze(-1), a.unsqueeze(1))
            self.memory = self.prev_mem * (1 - erase) + add

        def address(self, k, β, g, s, γ, w_prev):
            wc = self._similarity(k, β)
            wg = g * wc + (1 - g) * w_prev
            return self._sharpen(self._shift(wg, s), γ)

        def _similarity(self, k, β):
            k = k.view(self.batch_size, 1, -1)
            return F.softmax(β * F.cosine_similarity(self.memory + 1e-16, k + 1e-16, dim=-1), dim=1)

        def _shift(self, wg, s):
            result = lib.zeros(wg.size())
            for b in range(self.batch_size):
                result[b] = _convolve(wg[b], s[b])
            return result

        def _sharpen(self, ŵ, γ):
            w = ŵ ** γ
            return lib.div(w, lib.sum(w, dim=1).view(-1, 1) + 1e-16)

    def _split_cols(mat, lengths):
        l = np.cumsum([0] + lengths)
        return [mat[:, s:e] for s, e in zip(l[:-1], l[1:])]

    class NTMHead(nn.Module):
        def __init__(self, memory, controller_size, lengths):
            super().__init__()
            self.memory, self.lengths = memory, lengths
            self.fc = nn.Linear(controller_size, sum(lengths))
            nn.init.xavier_uniform_(self.fc.weight, gain=1.4)
            nn.init.normal_(self.fc.bias, std=0.01)

        def _address_memory(self, k, β, g, s, γ, w_prev):
            k = k.clone()
            β, g = F.softplus(β), F.sigmoid(g)
            s, γ = F.softmax(s, dim=1), 1 + F.softplus(γ)
            return self.memory.address(k, β, g, s, γ, w_prev)

    class NTMReadHead(NTMHead):
        def __init__(self, memory, controller_size):
            super().__init__(memory, controller_size, [M, 1, 1, 3, 1])

        def forward(self, embeddings, w_prev):
            k, β, g, s, γ = _split_cols(self.fc(embeddings), self.lengths)
            w = self._address_memory(k, β, g, s, γ, w_prev)
            return self.memory.read(w), w

    class NTMWriteHead(NTMHead):
        def __init__(self, memory, controller_size):
            super().__init__(memory, controller_size, [M, 1, 1, 3, 1, M, M])

        def forward(self, embeddings, w_prev):
            k, β, g, s, γ, e, a = _split_cols(self.fc(embeddings), self.lengths)
            e = F.sigmoid(e)
            w = self._address_memory(k, β, g, s, γ, w_prev)
            self.memory.write(w, e, a)
            return w

    class LSTMController(nn.Module):
        def __init__(self, num_inputs, num_outputs):
            super(LSTMController, self).__init__()
            self.lstm = nn.LSTM(input_size=num_inputs, hidden_size=num_outputs, num_layers=1)
            self.lstm_h_bias = nn.Parameter(lib.randn(1, 1, num_outputs) * 0.05)
            self.lstm_c_bias = nn.Parameter(lib.randn(1, 1, num_outputs) * 0.05)
            for p in self.lstm.parameters():
                if p.dim() == 1:
                    nn.init.constant_(p, 0)
                else:
                    stdev = 5 / (np.sqrt(num_inputs + num_outputs))
                    nn.init.uniform_(p, -stdev, stdev)

        def create_new_state(self, batch_size):
            return (self.lstm_h_bias.clone().repeat(1, batch_size, 1),
                    self.lstm_c_bias.clone().repeat(1, batch_size, 1))

        def forward(self, x, prev_state):
            outp, state = self.lstm(x.unsqueeze(0), prev_state)
            return outp.squeeze(0), state

    class EncapsulatedNTM(nn.Module):
        def __init__(self, num_inputs, num_outputs):
            super().__init__()
            self.num_inputs = num_inputs
            self.memory = NTMMemory(N, M)
            self.controller = LSTMController(num_inputs + M, ctrl)
            self.heads = nn.ModuleList([NTMReadHead(self.memory, ctrl), NTMWriteHead(self.memory, ctrl)])
            self.init_r = []
            for i, head in enumerate(self.heads):
                if isinstance(head, NTMReadHead):
                    init_r_bias = lib.randn(1, M) * 0.01
                    self.register_buffer("read{}_bias".format(i), init_r_bias.data)
                    self.init_r += [init_r_bias]
            self.fc = nn.Linear(ctrl + M, num_outputs)
            nn.init.xavier_uniform_(self.fc.weight, gain=1)
            nn.init.normal_(self.fc.bias, std=0.01)

        def init_sequence(self, batch_size):
            self.batch_size = batch_size
            self.memory.reset(batch_size)
            reads = [r.clone().repeat(batch_size, 1) for r in self.init_r]
            heads = [lib.zeros(batch_size, N) for _ in self.heads]
            self.previous_state = (reads, self.controller.create_new_state(batch_size), heads)

        def forward(self, x=None):
            if x is None:
                x = lib.zeros(self.batch_size, self.num_inputs)
            prev_reads, prev_controller_state, prev_heads_states = self.previous_state
            inp = lib.cat([x] + prev_reads, dim=1)
            controller_outp, controller_state = self.controller(inp, prev_controller_state)
            reads, heads_states = [], []
            for head, prev_head_state in zip(self.heads, prev_heads_states):
                if isinstance(head, NTMReadHead):
                    r, head_state = head(controller_outp, prev_head_state)
                    reads += [r]
                else:
                    head_state = head(controller_outp, prev_head_state)
                heads_states += [head_state]
            o = F.sigmoid(self.fc(lib.cat([controller_outp] + reads, dim=1)))
            self.previous_state = (reads, controller_state, heads_states)
            return o, self.previous_state

    net = EncapsulatedNTM(width + 1, width)
    optimizer = lib.optim.RMSprop(net.parameters(), momentum=0.9, alpha=0.95, lr=1e-4)
    criterion = nn.BCELoss()
    seq = (lib.rand(seq_len, batch, width) > 0.5).to(lib.get_default_dtype())
    X = lib.zeros(seq_len + 1, batch, width + 1)
    X[:seq_len, :, :width] = seq
    X[seq_len, :, width] = 1.0        # (the delimiter)
    Y = seq.clone()

    def loss():
        inp_seq_len = X.size(0)
        outp_seq_len, batch_size, _ = Y.size()
        net.init_sequence(batch_size)
        for i in range(inp_seq_len):
            net(X[i])
        y_out = lib.zeros(Y.size())
        for i in range(outp_seq_len):
            y_out[i], _ = net()
        return criterion(y_out, Y)
    return net, optimizer, loss, {"clip_value": 10.0, "data": (X, Y)}


def _resnext(lib, small):
    # (prlz77/ResNeXt.pytorch's ResNeXtBottleneck and CifarResNeXt with moskomule/senet.pytorch's
    # SELayer on the bottleneck's output; SGD, Nesterov momentum 0.9, weight decay 5e-4)
    nn, F = lib.nn, lib.nn.functional
    batch, size, widths, card, base = ((2, 8, (8, 16, 32), 2, 8) if small else
                                       (16, 32, (32, 64, 128), 8, 4))

    class SELayer(nn.Module):
        def __init__(self, channel, reduction=16):
            super(SELayer, self).__init__()
            self.avg_pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Sequential(nn.Linear(channel, channel // reduction, bias=False),
                                    nn.ReLU(inplace=True),
                                    nn.Linear(channel // reduction, channel, bias=False),
                                    nn.Sigmoid())

        def forward(self, x):
            b, c, _, _ = x.size()
            y = self.avg_pool(x).view(b, c)
            y = self.fc(y).view(b, c, 1, 1)
            return x * y.expand_as(x)

    class ResNeXtBottleneck(nn.Module):
        def __init__(self, in_channels, out_channels, stride, cardinality, base_width, widen_factor):
            super(ResNeXtBottleneck, self).__init__()
            width_ratio = out_channels / (widen_factor * 64.)
            D = cardinality * int(base_width * width_ratio)
            self.conv_reduce = nn.Conv2d(in_channels, D, kernel_size=1, stride=1, padding=0, bias=False)
            self.bn_reduce = nn.BatchNorm2d(D)
            self.conv_conv = nn.Conv2d(D, D, kernel_size=3, stride=stride, padding=1,
                                       groups=cardinality, bias=False)
            self.bn = nn.BatchNorm2d(D)
            self.conv_expand = nn.Conv2d(D, out_channels, kernel_size=1, stride=1, padding=0, bias=False)
            self.bn_expand = nn.BatchNorm2d(out_channels)
            self.se = SELayer(out_channels, reduction=4 if out_channels < 64 else 16)
            self.shortcut = nn.Sequential()
            if in_channels != out_channels:
                self.shortcut.add_module('shortcut_conv', nn.Conv2d(in_channels, out_channels, kernel_size=1,
                                                                    stride=stride, padding=0, bias=False))
                self.shortcut.add_module('shortcut_bn', nn.BatchNorm2d(out_channels))

        def forward(self, x):
            bottleneck = self.conv_reduce.forward(x)
            bottleneck = F.relu(self.bn_reduce.forward(bottleneck), inplace=True)
            bottleneck = self.conv_conv.forward(bottleneck)
            bottleneck = F.relu(self.bn.forward(bottleneck), inplace=True)
            bottleneck = self.conv_expand.forward(bottleneck)
            bottleneck = self.bn_expand.forward(bottleneck)
            residual = self.shortcut.forward(x)
            return F.relu(residual + self.se(bottleneck), inplace=True)

    class CifarResNeXt(nn.Module):
        def __init__(self, cardinality, base_width, nlabels, widen_factor=1):
            super(CifarResNeXt, self).__init__()
            self.stages = [16, widths[0], widths[1], widths[2]]
            self.conv_1_3x3 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
            self.bn_1 = nn.BatchNorm2d(16)
            self.stage_1 = ResNeXtBottleneck(16, widths[0], 1, cardinality, base_width, widen_factor)
            self.stage_2 = ResNeXtBottleneck(widths[0], widths[1], 2, cardinality, base_width, widen_factor)
            self.stage_3 = ResNeXtBottleneck(widths[1], widths[2], 2, cardinality, base_width, widen_factor)
            self.classifier = nn.Linear(self.stages[3], nlabels)
            nn.init.kaiming_normal_(self.classifier.weight)
            for key in self.state_dict():
                if key.split('.')[-1] == 'weight':
                    if 'conv' in key:
                        nn.init.kaiming_normal_(self.state_dict()[key], mode='fan_out')
                    if 'bn' in key:
                        self.state_dict()[key][...] = 1
                elif key.split('.')[-1] == 'bias':
                    self.state_dict()[key][...] = 0

        def forward(self, x):
            x = self.conv_1_3x3.forward(x)
            x = F.relu(self.bn_1.forward(x), inplace=True)
            x = self.stage_3.forward(self.stage_2.forward(self.stage_1.forward(x)))
            x = F.avg_pool2d(x, x.size(-1), 1)
            return self.classifier(x.view(-1, self.stages[3]))

    model = CifarResNeXt(card, base, 10)
    optimizer = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4, nesterov=True)
    images = lib.randn(batch, 3, size, size)
    labels = lib.randint(0, 10, (batch,))

    def loss():
        return F.cross_entropy(model(images), labels)
    return model, optimizer, loss, {"data": (images, labels)}
