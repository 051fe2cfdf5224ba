"""untuned_models_nineteenth.py's DARTS search network and Pointer Network (SchNet in _c.py):
_name(lib, small) -> (model, optimiser, loss closure[, extras]) as the fifth set's training_step
takes them."""
import numpy as np


def _darts(lib, small):
    # (darts/cnn/operations.py's OPS, ReLUConvBN, DilConv, SepConv, Zero, FactorizedReduce;
    # model_search.py's MixedOp, Cell, Network; train_search.py's step with the first-order
    # Architect (unrolled=False): the alphas' Adam step on a validation batch, then the
    # weights' SGD on the training batch, gradients clipped at 5)
    nn, F = lib.nn, lib.nn.functional
    batch, size, C, layers, steps = (2, 8, 4, 2, 1) if small else (8, 16, 8, 3, 1)
    PRIMITIVES = ['none', 'max_pool_3x3', 'avg_pool_3x3', 'skip_connect', 'sep_conv_3x3',
                  'sep_conv_5x5', 'dil_conv_3x3', 'dil_conv_5x5']

    class ReLUConvBN(nn.Module):
        def __init__(self, C_in, C_out, kernel_size, stride, padding, affine=True):
            super(ReLUConvBN, self).__init__()
            self.op = nn.Sequential(
                nn.ReLU(inplace=False),
                nn.Conv2d(C_in, C_out, kernel_size, stride=stride, padding=padding, bias=False),
                nn.BatchNorm2d(C_out, affine=affine))

        def forward(self, x):
            return self.op(x)

    class DilConv(nn.Module):
        def __init__(self, C_in, C_out, kernel_size, stride, padding, dilation, affine=True):
            super(DilConv, self).__init__()
            self.op = nn.Sequential(
                nn.ReLU(inplace=False),
                nn.Conv2d(C_in, C_in, kernel_size=kernel_size, stride=stride, padding=padding,
                          dilation=dilation, groups=C_in, bias=False),
                nn.Conv2d(C_in, C_out, kernel_size=1, padding=0, bias=False),
                nn.BatchNorm2d(C_out, affine=affine))

        def forward(self, x):
            return self.op(x)

    class SepConv(nn.Module):
        def __init__(self, C_in, C_out, kernel_size, stride, padding, affine=True):
            super(SepConv, self).__init__()
            self.op = nn.Sequential(
                nn.ReLU(inplace=False),
                nn.Conv2d(C_in, C_in, kernel_size=kernel_size, stride=stride, padding=padding,
                          groups=C_in, bias=False),
                nn.Conv2d(C_in, C_in, kernel_size=1, padding=0, bias=False),
                nn.BatchNorm2d(C_in, affine=affine),
                nn.ReLU(inplace=False),
                nn.Conv2d(C_in, C_in, kernel_size=kernel_size, stride=1, padding=padding,
                          groups=C_in, bias=False),
                nn.Conv2d(C_in, C_out, kernel_size=1, padding=0, bias=False),
                nn.BatchNorm2d(C_out, affine=affine))

        def forward(self, x):
            return self.op(x)

    class Identity(nn.Module):
        def forward(self, x):
            return x

    class Zero(nn.Module):
        def __init__(self, stride):
            super(Zero, self).__init__()
            self.stride = stride

        def forward(self, x):
            if self.stride == 1:
                return x.mul(0.)
            return x[:, :, ::self.stride, ::self.stride].mul(0.)

    class FactorizedReduce(nn.Module):
        def __init__(self, C_in, C_out, affine=True):
            super(FactorizedReduce, self).__init__()
            self.relu = nn.ReLU(inplace=False)
            self.conv_1 = nn.Conv2d(C_in, C_out // 2, 1, stride=2, padding=0, bias=False)
            self.conv_2 = nn.Conv2d(C_in, C_out // 2, 1, stride=2, padding=0, bias=False)
            self.bn = nn.BatchNorm2d(C_out, affine=affine)

        def forward(self, x):
            x = self.relu(x)
            out = lib.cat([self.conv_1(x), self.conv_2(x[:, :, 1:, 1:])], dim=1)
            return self.bn(out)

    OPS = {
        'none': lambda C, stride, affine: Zero(stride),
        'avg_pool_3x3': lambda C, stride, affine: nn.AvgPool2d(3, stride=stride, padding=1,
                                                               count_include_pad=False),
        'max_pool_3x3': lambda C, stride, affine: nn.MaxPool2d(3, stride=stride, padding=1),
        'skip_connect': lambda C, stride, affine: Identity() if stride == 1 else
        FactorizedReduce(C, C, affine=affine),
        'sep_conv_3x3': lambda C, stride, affine: SepConv(C, C, 3, stride, 1, affine=affine),
        'sep_conv_5x5': lambda C, stride, affine: SepConv(C, C, 5, stride, 2, affine=affine),
        'dil_conv_3x3': lambda C, stride, affine: DilConv(C, C, 3, stride, 2, 2, affine=affine),
        'dil_conv_5x5': lambda C, stride, affine: DilConv(C, C, 5, stride, 4, 2, affine=affine),
    }

    class MixedOp(nn.Module):
        def __init__(self, C, stride):
            super(MixedOp, self).__init__()
            self._ops = nn.ModuleList()
            for primitive in PRIMITIVES:
                op = OPS[primitive](C, stride, False)
                if 'pool' in primitive:
                    op = nn.Sequential(op, nn.BatchNorm2d(C, affine=False))
                self._ops.append(op)

        def forward(self, x, weights):
            return sum(w * op(x) for w, op in zip(weights, self._ops))

    class Cell(nn.Module):
        def __init__(self, steps, multiplier, C_prev_prev, C_prev, C, reduction,
                     reduction_prev):
            super(Cell, self).__init__()
            self.reduction = reduction
            if reduction_prev:
                self.preprocess0 = FactorizedReduce(C_prev_prev, C, affine=False)
            else:
                self.preprocess0 = ReLUConvBN(C_prev_prev, C, 1, 1, 0, affine=False)
            self.preprocess1 = ReLUConvBN(C_prev, C, 1, 1, 0, affine=False)
            self._steps = steps
            self._multiplier = multiplier
            self._ops = nn.ModuleList()
            for i in range(self._steps):
                for j in range(2 + i):
                    stride = 2 if reduction and j < 2 else 1
                    self._ops.append(MixedOp(C, stride))

        def forward(self, s0, s1, weights):
            s0 = self.preprocess0(s0)
            s1 = self.preprocess1(s1)
            states = [s0, s1]
            offset = 0
            for i in range(self._steps):
                s = sum(self._ops[offset + j](h, weights[offset + j]) for j, h in enumerate(states))
                offset += len(states)
                states.append(s)
            return lib.cat(states[-self._multiplier:], dim=1)

    class Network(nn.Module):
        def __init__(self, C, num_classes, layers, criterion, steps=4, multiplier=4,
                     stem_multiplier=3):
            super(Network, self).__init__()
            self._C, self._num_classes, self._layers = C, num_classes, layers
            self._criterion = criterion
            self._steps, self._multiplier = steps, multiplier
            C_curr = stem_multiplier * C
            self.stem = nn.Sequential(nn.Conv2d(3, C_curr, 3, padding=1, bias=False),
                                      nn.BatchNorm2d(C_curr))
            C_prev_prev, C_prev, C_curr = C_curr, C_curr, C
            self.cells = nn.ModuleList()
            reduction_prev = False
            for i in range(layers):
                if i in [layers // 3, 2 * layers // 3]:
                    C_curr *= 2
                    reduction = True
                else:
                    reduction = False
                cell = Cell(steps, multiplier, C_prev_prev, C_prev, C_curr, reduction,
                            reduction_prev)
                reduction_prev = reduction
                self.cells += [cell]
                C_prev_prev, C_prev = C_prev, multiplier * C_curr
            self.global_pooling = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Linear(C_prev, num_classes)
            self._initialize_alphas()

        def forward(self, input):
            s0 = s1 = self.stem(input)
            for i, cell in enumerate(self.cells):
                if cell.reduction:
                    weights = F.softmax(self.alphas_reduce, dim=-1)
                else:
                    weights = F.softmax(self.alphas_normal, dim=-1)
                s0, s1 = s1, cell(s0, s1, weights)
            out = self.global_pooling(s1)
            return self.classifier(out.view(out.size(0), -1))

        def _loss(self, input, target):
            return self._criterion(self(input), target)

        def _initialize_alphas(self):
            k = sum(1 for i in range(self._steps) for n in range(2 + i))
            num_ops = len(PRIMITIVES)
            self.alphas_normal = (1e-3 * lib.randn(k, num_ops)).requires_grad_(True)
            self.alphas_reduce = (1e-3 * lib.randn(k, num_ops)).requires_grad_(True)
            self._arch_parameters = [self.alphas_normal, self.alphas_reduce]

        def arch_parameters(self):
            return self._arch_parameters

    criterion = nn.CrossEntropyLoss()
    model = Network(C, 10, layers, criterion, steps=steps, multiplier=steps)
    opt = lib.optim.SGD(model.parameters(), 0.025, momentum=0.9, weight_decay=3e-4)
    arch_opt = lib.optim.Adam(model.arch_parameters(), lr=3e-4, betas=(0.5, 0.999),
                              weight_decay=1e-3)
    x, y = lib.randn(batch, 3, size, size), lib.randint(0, 10, (batch,))
    xv, yv = lib.randn(batch, 3, size, size), lib.randint(0, 10, (batch,))

    def loss():
        arch_opt.zero_grad()        # (Architect.step, unrolled=False: _backward_step)
        model._loss(xv, yv).backward()
        arch_opt.step()
        opt.zero_grad()
        logits = model(x)
        return criterion(logits, y)
    return model, opt, loss, {"clip": 5.0}


def _ptrnet(lib, small):
    # (PointerNet/PointerNet.py's Encoder, Attention, Decoder and PointerNet, bidirectional,
    # uint8 masks as bool, nn.Softmax given dim=1; Train.py's Adam and CrossEntropyLoss over
    # the attention probabilities; the task: point at 2-D points in order of their x)
    nn, F = lib.nn, lib.nn.functional
    Parameter = nn.Parameter
    batch, n, emb, hidden, lstm_layers = (2, 4, 8, 8, 1) if small else (64, 8, 64, 64, 2)

    class Encoder(nn.Module):
        def __init__(self, embedding_dim, hidden_dim, n_layers, dropout, bidir):
            super(Encoder, self).__init__()
            self.hidden_dim = hidden_dim // 2 if bidir else hidden_dim
            self.n_layers = n_layers * 2 if bidir else n_layers
            self.bidir = bidir
            self.lstm = nn.LSTM(embedding_dim, self.hidden_dim, n_layers, dropout=dropout,
                                bidirectional=bidir)
            self.h0 = Parameter(lib.zeros(1), requires_grad=False)
            self.c0 = Parameter(lib.zeros(1), requires_grad=False)

        def forward(self, embedded_inputs, hidden):
            embedded_inputs = embedded_inputs.permute(1, 0, 2)
            outputs, hidden = self.lstm(embedded_inputs, hidden)
            return outputs.permute(1, 0, 2), hidden

        def init_hidden(self, embedded_inputs):
            batch_size = embedded_inputs.size(0)
            h0 = self.h0.unsqueeze(0).unsqueeze(0).repeat(self.n_layers, batch_size,
                                                          self.hidden_dim)
            c0 = self.h0.unsqueeze(0).unsqueeze(0).repeat(self.n_layers, batch_size,
                                                          self.hidden_dim)
            return h0, c0

    class Attention(nn.Module):
        def __init__(self, input_dim, hidden_dim):
            super(Attention, self).__init__()
            self.input_dim, self.hidden_dim = input_dim, hidden_dim
            self.input_linear = nn.Linear(input_dim, hidden_dim)
            self.context_linear = nn.Conv1d(input_dim, hidden_dim, 1, 1)
            self.V = Parameter(lib.empty(hidden_dim), requires_grad=True)
            self._inf = Parameter(lib.FloatTensor([float('-inf')]), requires_grad=False)
            self.tanh = nn.Tanh()
            self.softmax = nn.Softmax(dim=1)
            nn.init.uniform_(self.V, -1, 1)

        def forward(self, input, context, mask):
            inp = self.input_linear(input).unsqueeze(2).expand(-1, -1, context.size(1))
            context = context.permute(0, 2, 1)
            ctx = self.context_linear(context)
            V = self.V.unsqueeze(0).expand(context.size(0), -1).unsqueeze(1)
            att = lib.bmm(V, self.tanh(inp + ctx)).squeeze(1)
            if len(att[mask]) > 0:
                att[mask] = self.inf[mask]
            alpha = self.softmax(att)
            hidden_state = lib.bmm(ctx, alpha.unsqueeze(2)).squeeze(2)
            return hidden_state, alpha

        def init_inf(self, mask_size):
            self.inf = self._inf.unsqueeze(1).expand(*mask_size)

    class Decoder(nn.Module):
        def __init__(self, embedding_dim, hidden_dim):
            super(Decoder, self).__init__()
            self.embedding_dim, self.hidden_dim = embedding_dim, hidden_dim
            self.input_to_hidden = nn.Linear(embedding_dim, 4 * hidden_dim)
            self.hidden_to_hidden = nn.Linear(hidden_dim, 4 * hidden_dim)
            self.hidden_out = nn.Linear(hidden_dim * 2, hidden_dim)
            self.att = Attention(hidden_dim, hidden_dim)
            self.mask = Parameter(lib.ones(1), requires_grad=False)
            self.runner = Parameter(lib.zeros(1), requires_grad=False)

        def forward(self, embedded_inputs, decoder_input, hidden, context):
            batch_size = embedded_inputs.size(0)
            input_length = embedded_inputs.size(1)
            mask = self.mask.repeat(input_length).unsqueeze(0).repeat(batch_size, 1)
            self.att.init_inf(mask.size())
            runner = self.runner.repeat(input_length)
            for i in range(input_length):
                runner.data[i] = i
            runner = runner.unsqueeze(0).expand(batch_size, -1).long()
            outputs, pointers = [], []

            def step(x, hidden):
                h, c = hidden
                gates = self.input_to_hidden(x) + self.hidden_to_hidden(h)
                input, forget, cell, out = gates.chunk(4, 1)
                input, forget = lib.sigmoid(input), lib.sigmoid(forget)
                cell, out = lib.tanh(cell), lib.sigmoid(out)
                c_t = (forget * c) + (input * cell)
                h_t = out * lib.tanh(c_t)
                hidden_t, output = self.att(h_t, context, lib.eq(mask, 0))
                hidden_t = lib.tanh(self.hidden_out(lib.cat((hidden_t, h_t), 1)))
                return hidden_t, c_t, output

            for _ in range(input_length):
                h_t, c_t, outs = step(decoder_input, hidden)
                hidden = (h_t, c_t)
                masked_outs = outs * mask
                max_probs, indices = masked_outs.max(1)
                one_hot_pointers = (runner == indices.unsqueeze(1).expand(
                    -1, outs.size()[1])).float()
                mask = mask * (1 - one_hot_pointers)
                embedding_mask = one_hot_pointers.unsqueeze(2).expand(
                    -1, -1, self.embedding_dim).bool()
                decoder_input = embedded_inputs[embedding_mask.data].view(batch_size,
                                                                          self.embedding_dim)
                outputs.append(outs.unsqueeze(0))
                pointers.append(indices.unsqueeze(1))
            outputs = lib.cat(outputs).permute(1, 0, 2)
            pointers = lib.cat(pointers, 1)
            return (outputs, pointers), hidden

    class PointerNet(nn.Module):
        def __init__(self, embedding_dim, hidden_dim, lstm_layers, dropout, bidir=False):
            super(PointerNet, self).__init__()
            self.embedding_dim, self.bidir = embedding_dim, bidir
            self.embedding = nn.Linear(2, embedding_dim)
            self.encoder = Encoder(embedding_dim, hidden_dim, lstm_layers, dropout, bidir)
            self.decoder = Decoder(embedding_dim, hidden_dim)
            self.decoder_input0 = Parameter(lib.empty(embedding_dim), requires_grad=False)
            nn.init.uniform_(self.decoder_input0, -1, 1)

        def forward(self, inputs):
            batch_size = inputs.size(0)
            input_length = inputs.size(1)
            decoder_input0 = self.decoder_input0.unsqueeze(0).expand(batch_size, -1)
            inputs = inputs.view(batch_size * input_length, -1)
            embedded_inputs = self.embedding(inputs).view(batch_size, input_length, -1)
            encoder_hidden0 = self.encoder.init_hidden(embedded_inputs)
            encoder_outputs, encoder_hidden = self.encoder(embedded_inputs, encoder_hidden0)
            if self.bidir:
                decoder_hidden0 = (lib.cat(tuple(encoder_hidden[0][-2:]), dim=-1),
                                   lib.cat(tuple(encoder_hidden[1][-2:]), dim=-1))
            else:
                decoder_hidden0 = (encoder_hidden[0][-1], encoder_hidden[1][-1])
            (outputs, pointers), decoder_hidden = self.decoder(
                embedded_inputs, decoder_input0, decoder_hidden0, encoder_outputs)
            return outputs, pointers

    model = PointerNet(emb, hidden, lstm_layers, 0., True)
    opt = lib.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=1e-4)
    CCE = nn.CrossEntropyLoss()
    rng = np.random.RandomState(1)
    pts = rng.rand(batch, n, 2).astype(np.float32)
    train_batch, target_batch = lib.tensor(pts), lib.tensor(np.argsort(pts[:, :, 0], 1))

    def loss():
        o, p = model(train_batch)
        o = o.contiguous().view(-1, o.size()[-1])
        return CCE(o, target_batch.view(-1))
    return model, opt, loss
