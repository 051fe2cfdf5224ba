"""untuned_models_fourteenth.py's Tacotron 2 decoder, MobileNetV2 and E(n)-equivariant graph
network: each _name(lib, small) -> (model, optimizer, loss closure[, {"clip"/"data"}]), seeded
by build; tacotron_decoder(lib, hp, LinearNorm, ConvNorm) -> the Decoder class."""
import math

import numpy as np


def tacotron_decoder(lib, hp, LinearNorm, ConvNorm):
    # (NVIDIA/tacotron2's LocationLayer, Attention, Prenet and Decoder as written there, one
    # frame a step, without the inference path)
    nn, F = lib.nn, lib.nn.functional

    def get_mask_from_lengths(lengths):
        max_len = lib.max(lengths).item()
        ids = lib.arange(0, max_len)
        mask = (ids < lengths.unsqueeze(1)).bool()
        return mask

    class LocationLayer(nn.Module):
        def __init__(self, attention_n_filters, attention_kernel_size, attention_dim):
            super(LocationLayer, self).__init__()
            padding = int((attention_kernel_size - 1) / 2)
            self.location_conv = ConvNorm(2, attention_n_filters, kernel_size=attention_kernel_size,
                                          padding=padding, bias=False, stride=1, dilation=1)
            self.location_dense = LinearNorm(attention_n_filters, attention_dim, bias=False, w_init_gain='tanh')

        def forward(self, attention_weights_cat):
            processed_attention = self.location_conv(attention_weights_cat)
            processed_attention = processed_attention.transpose(1, 2)
            processed_attention = self.location_dense(processed_attention)
            return processed_attention

    class Attention(nn.Module):
        def __init__(self, attention_rnn_dim, embedding_dim, attention_dim,
                     attention_location_n_filters, attention_location_kernel_size):
            super(Attention, self).__init__()
            self.query_layer = LinearNorm(attention_rnn_dim, attention_dim, bias=False, w_init_gain='tanh')
            self.memory_layer = LinearNorm(embedding_dim, attention_dim, bias=False, w_init_gain='tanh')
            self.v = LinearNorm(attention_dim, 1, bias=False)
            self.location_layer = LocationLayer(attention_location_n_filters,
                                                attention_location_kernel_size, attention_dim)
            self.score_mask_value = -float("inf")

        def get_alignment_energies(self, query, processed_memory, attention_weights_cat):
            processed_query = self.query_layer(query.unsqueeze(1))
            processed_attention_weights = self.location_layer(attention_weights_cat)
            energies = self.v(lib.tanh(processed_query + processed_attention_weights + processed_memory))
            energies = energies.squeeze(-1)
            return energies

        def forward(self, attention_hidden_state, memory, processed_memory, attention_weights_cat, mask):
            alignment = self.get_alignment_energies(attention_hidden_state, processed_memory, attention_weights_cat)
            if mask is not None:
                alignment.data.masked_fill_(mask, self.score_mask_value)
            attention_weights = F.softmax(alignment, dim=1)
            attention_context = lib.bmm(attention_weights.unsqueeze(1), memory)
            attention_context = attention_context.squeeze(1)
            return attention_context, attention_weights

    class Prenet(nn.Module):
        def __init__(self, in_dim, sizes):
            super(Prenet, self).__init__()
            in_sizes = [in_dim] + sizes[:-1]
            self.layers = nn.ModuleList(
                [LinearNorm(in_size, out_size, bias=False) for (in_size, out_size) in zip(in_sizes, sizes)])

        def forward(self, x):
            for linear in self.layers:
                x = F.dropout(F.relu(linear(x)), p=0.5, training=True)
            return x

    class Decoder(nn.Module):
        def __init__(self):
            super(Decoder, self).__init__()
            self.n_mel_channels, self.n_frames_per_step = hp["mels"], 1
            self.encoder_embedding_dim = hp["emb"]
            self.attention_rnn_dim = self.decoder_rnn_dim = hp["rnn"]
            self.p_attention_dropout = self.p_decoder_dropout = 0.1
            self.prenet = Prenet(hp["mels"], [hp["prenet"], hp["prenet"]])
            self.attention_rnn = nn.LSTMCell(hp["prenet"] + hp["emb"], hp["rnn"])
            self.attention_layer = Attention(hp["rnn"], hp["emb"], hp["att"], hp["filters"], hp["kernel"])
            self.decoder_rnn = nn.LSTMCell(hp["rnn"] + hp["emb"], hp["rnn"], 1)
            self.linear_projection = LinearNorm(hp["rnn"] + hp["emb"], hp["mels"])
            self.gate_layer = LinearNorm(hp["rnn"] + hp["emb"], 1, bias=True, w_init_gain='sigmoid')

        def get_go_frame(self, memory):
            B = memory.size(0)
            return memory.data.new(B, self.n_mel_channels * self.n_frames_per_step).zero_()

        def initialize_decoder_states(self, memory, mask):
            B = memory.size(0)
            MAX_TIME = memory.size(1)
            self.attention_hidden = memory.data.new(B, self.attention_rnn_dim).zero_()
            self.attention_cell = memory.data.new(B, self.attention_rnn_dim).zero_()
            self.decoder_hidden = memory.data.new(B, self.decoder_rnn_dim).zero_()
            self.decoder_cell = memory.data.new(B, self.decoder_rnn_dim).zero_()
            self.attention_weights = memory.data.new(B, MAX_TIME).zero_()
            self.attention_weights_cum = memory.data.new(B, MAX_TIME).zero_()
            self.attention_context = memory.data.new(B, self.encoder_embedding_dim).zero_()
            self.memory = memory
            self.processed_memory = self.attention_layer.memory_layer(memory)
            self.mask = mask

        def parse_decoder_inputs(self, decoder_inputs):
            decoder_inputs = decoder_inputs.transpose(1, 2)
            decoder_inputs = decoder_inputs.view(
                decoder_inputs.size(0), int(decoder_inputs.size(1) / self.n_frames_per_step), -1)
            decoder_inputs = decoder_inputs.transpose(0, 1)
            return decoder_inputs

        def parse_decoder_outputs(self, mel_outputs, gate_outputs, alignments):
            alignments = lib.stack(alignments).transpose(0, 1)
            gate_outputs = lib.stack(gate_outputs).transpose(0, 1)
            gate_outputs = gate_outputs.contiguous()
            mel_outputs = lib.stack(mel_outputs).transpose(0, 1).contiguous()
            mel_outputs = mel_outputs.view(mel_outputs.size(0), -1, self.n_mel_channels)
            mel_outputs = mel_outputs.transpose(1, 2)
            return mel_outputs, gate_outputs, alignments

        def decode(self, decoder_input):
            cell_input = lib.cat((decoder_input, self.attention_context), -1)
            self.attention_hidden, self.attention_cell = self.attention_rnn(
                cell_input, (self.attention_hidden, self.attention_cell))
            self.attention_hidden = F.dropout(self.attention_hidden, self.p_attention_dropout, self.training)
            attention_weights_cat = lib.cat(
                (self.attention_weights.unsqueeze(1), self.attention_weights_cum.unsqueeze(1)), dim=1)
            self.attention_context, self.attention_weights = self.attention_layer(
                self.attention_hidden, self.memory, self.processed_memory, attention_weights_cat, self.mask)
            self.attention_weights_cum += self.attention_weights
            decoder_input = lib.cat((self.attention_hidden, self.attention_context), -1)
            self.decoder_hidden, self.decoder_cell = self.decoder_rnn(
                decoder_input, (self.decoder_hidden, self.decoder_cell))
            self.decoder_hidden = F.dropout(self.decoder_hidden, self.p_decoder_dropout, self.training)
            decoder_hidden_attention_context = lib.cat((self.decoder_hidden, self.attention_context), dim=1)
            decoder_output = self.linear_projection(decoder_hidden_attention_context)
            gate_prediction = self.gate_layer(decoder_hidden_attention_context)
            return decoder_output, gate_prediction, self.attention_weights

        def forward(self, memory, decoder_inputs, memory_lengths):
            decoder_input = self.get_go_frame(memory).unsqueeze(0)
            decoder_inputs = self.parse_decoder_inputs(decoder_inputs)
            decoder_inputs = lib.cat((decoder_input, decoder_inputs), dim=0)
            decoder_inputs = self.prenet(decoder_inputs)
            self.initialize_decoder_states(memory, mask=~get_mask_from_lengths(memory_lengths))
            mel_outputs, gate_outputs, alignments = [], [], []
            while len(mel_outputs) < decoder_inputs.size(0) - 1:
                decoder_input = decoder_inputs[len(mel_outputs)]
                mel_output, gate_output, attention_weights = self.decode(decoder_input)
                mel_outputs += [mel_output.squeeze(1)]
                gate_outputs += [gate_output.squeeze(1)]
                alignments += [attention_weights]
            return self.parse_decoder_outputs(mel_outputs, gate_outputs, alignments)
    return Decoder


def _mobilenetv2(lib, small):
    # (tonylins/pytorch-mobilenet-v2's MobileNetV2.py, its setting cut for 32x32 inputs; SGD
    # with momentum and weight decay 4e-5 as its ImageNet recipe)
    nn, F = lib.nn, lib.nn.functional
    batch, size, first, last, setting = (
        (2, 8, 8, 16, [[1, 8, 1, 1], [2, 8, 2, 1], [2, 16, 1, 2]]) if small else
        (16, 32, 32, 256, [[1, 16, 1, 1], [6, 24, 2, 1], [6, 32, 2, 2], [6, 64, 2, 2]]))

    def conv_bn(inp, oup, stride):
        return nn.Sequential(nn.Conv2d(inp, oup, 3, stride, 1, bias=False), nn.BatchNorm2d(oup),
                             nn.ReLU6(inplace=True))

    def conv_1x1_bn(inp, oup):
        return nn.Sequential(nn.Conv2d(inp, oup, 1, 1, 0, bias=False), nn.BatchNorm2d(oup),
                             nn.ReLU6(inplace=True))

    def make_divisible(x, divisible_by=8):
        return int(np.ceil(x * 1. / divisible_by) * divisible_by)

    class InvertedResidual(nn.Module):
        def __init__(self, inp, oup, stride, expand_ratio):
            super(InvertedResidual, self).__init__()
            self.stride = stride
            assert stride in [1, 2]
            hidden_dim = int(inp * expand_ratio)
            self.use_res_connect = self.stride == 1 and inp == oup
            if expand_ratio == 1:
                self.conv = nn.Sequential(
                    # dw
                    nn.Conv2d(hidden_dim, hidden_dim, 3, stride, 1, groups=hidden_dim, bias=False),
                    nn.BatchNorm2d(hidden_dim), nn.ReLU6(inplace=True),
                    # pw-linear
                    nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False), nn.BatchNorm2d(oup))
            else:
                self.conv = nn.Sequential(
                    # pw
                    nn.Conv2d(inp, hidden_dim, 1, 1, 0, bias=False), nn.BatchNorm2d(hidden_dim),
                    nn.ReLU6(inplace=True),
                    # dw
                    nn.Conv2d(hidden_dim, hidden_dim, 3, stride, 1, groups=hidden_dim, bias=False),
                    nn.BatchNorm2d(hidden_dim), nn.ReLU6(inplace=True),
                    # pw-linear
                    nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False), nn.BatchNorm2d(oup))

        def forward(self, x):
            if self.use_res_connect:
                return x + self.conv(x)
            else:
                return self.conv(x)

    class MobileNetV2(nn.Module):
        def __init__(self, n_class=10, width_mult=1.):
            super(MobileNetV2, self).__init__()
            input_channel = first
            self.last_channel = make_divisible(last * width_mult) if width_mult > 1.0 else last
            self.features = [conv_bn(3, input_channel, 1)]
            for t, c, n, s in setting:
                output_channel = make_divisible(c * width_mult) if t > 1 else c
                for i in range(n):
                    self.features.append(InvertedResidual(input_channel, output_channel,
                                                          s if i == 0 else 1, expand_ratio=t))
                    input_channel = output_channel
            self.features.append(conv_1x1_bn(input_channel, self.last_channel))
            self.features = nn.Sequential(*self.features)
            self.classifier = nn.Linear(self.last_channel, n_class)
            self._initialize_weights()

        def forward(self, x):
            x = self.features(x)
            x = x.mean(3).mean(2)
            x = self.classifier(x)
            return x

        def _initialize_weights(self):
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                    m.weight.data.normal_(0, math.sqrt(2. / n))
                    if m.bias is not None:
                        m.bias.data.zero_()
                elif isinstance(m, nn.BatchNorm2d):
                    m.weight.data.fill_(1)
                    m.bias.data.zero_()
                elif isinstance(m, nn.Linear):
                    m.weight.data.normal_(0, 0.01)
                    m.bias.data.zero_()

    model = MobileNetV2()
    optimizer = lib.optim.SGD(model.parameters(), lr=0.045, momentum=0.9, weight_decay=4e-5)
    criterion = nn.CrossEntropyLoss()
    images = lib.randn(batch, 3, size, size)
    labels = lib.randint(0, 10, (batch,))

    def loss():
        return criterion(model(images), labels)
    return model, optimizer, loss, {"data": (images, labels)}


def _egnn(lib, small):
    # (vgsatorras/egnn's models/gcl.py E_GCL, unsorted_segment_sum/mean and models/egnn_clean
    # EGNN as written there, with attention and normalize on; its n-body task: node features
    # the speed, edge attributes the charges' products, fully connected systems batched by
    # offsetting their edges; MSE of the predicted positions, Adam)
    nn, F = lib.nn, lib.nn.functional
    n_sys, n_nodes, hidden, n_layers = (2, 4, 8, 2) if small else (32, 5, 64, 4)

    def unsorted_segment_sum(data, segment_ids, num_segments):
        result_shape = (num_segments, data.size(1))
        result = data.new_full(result_shape, 0)  # Init empty result tensor.
        segment_ids = segment_ids.unsqueeze(-1).expand(-1, data.size(1))
        result.scatter_add_(0, segment_ids, data)
        return result

    def unsorted_segment_mean(data, segment_ids, num_segments):
        result_shape = (num_segments, data.size(1))
        segment_ids = segment_ids.unsqueeze(-1).expand(-1, data.size(1))
        result = data.new_full(result_shape, 0)  # Init empty result tensor.
        count = data.new_full(result_shape, 0)
        result.scatter_add_(0, segment_ids, data)
        count.scatter_add_(0, segment_ids, lib.ones_like(data))
        return result / count.clamp(min=1)

    class E_GCL(nn.Module):
        def __init__(self, input_nf, output_nf, hidden_nf, edges_in_d=0, act_fn=nn.SiLU(), residual=True,
                     attention=False, normalize=False, coords_agg='mean', tanh=False):
            super(E_GCL, self).__init__()
            input_edge = input_nf * 2
            self.residual, self.attention, self.normalize = residual, attention, normalize
            self.coords_agg, self.tanh = coords_agg, tanh
            self.epsilon = 1e-8
            edge_coords_nf = 1
            self.edge_mlp = nn.Sequential(nn.Linear(input_edge + edge_coords_nf + edges_in_d, hidden_nf),
                                          act_fn, nn.Linear(hidden_nf, hidden_nf), act_fn)
            self.node_mlp = nn.Sequential(nn.Linear(hidden_nf + input_nf, hidden_nf), act_fn,
                                          nn.Linear(hidden_nf, output_nf))
            layer = nn.Linear(hidden_nf, 1, bias=False)
            lib.nn.init.xavier_uniform_(layer.weight, gain=0.001)
            coord_mlp = [nn.Linear(hidden_nf, hidden_nf), act_fn, layer]
            if self.tanh:
                coord_mlp.append(nn.Tanh())
            self.coord_mlp = nn.Sequential(*coord_mlp)
            if self.attention:
                self.att_mlp = nn.Sequential(nn.Linear(hidden_nf, 1), nn.Sigmoid())

        def edge_model(self, source, target, radial, edge_attr):
            if edge_attr is None:  # Unused.
                out = lib.cat([source, target, radial], dim=1)
            else:
                out = lib.cat([source, target, radial, edge_attr], dim=1)
            out = self.edge_mlp(out)
            if self.attention:
                att_val = self.att_mlp(out)
                out = out * att_val
            return out

        def node_model(self, x, edge_index, edge_attr, node_attr):
            row, col = edge_index
            agg = unsorted_segment_sum(edge_attr, row, num_segments=x.size(0))
            if node_attr is not None:
                agg = lib.cat([x, agg, node_attr], dim=1)
            else:
                agg = lib.cat([x, agg], dim=1)
            out = self.node_mlp(agg)
            if self.residual:
                out = x + out
            return out, agg

        def coord_model(self, coord, edge_index, coord_diff, edge_feat):
            row, col = edge_index
            trans = coord_diff * self.coord_mlp(edge_feat)
            if self.coords_agg == 'sum':
                agg = unsorted_segment_sum(trans, row, num_segments=coord.size(0))
            elif self.coords_agg == 'mean':
                agg = unsorted_segment_mean(trans, row, num_segments=coord.size(0))
            else:
                raise Exception('Wrong coords_agg parameter' % self.coords_agg)
            coord = coord + agg
            return coord

        def coord2radial(self, edge_index, coord):
            row, col = edge_index
            coord_diff = coord[row] - coord[col]
            radial = lib.sum(coord_diff**2, 1).unsqueeze(1)
            if self.normalize:
                norm = lib.sqrt(radial).detach() + self.epsilon
                coord_diff = coord_diff / norm
            return radial, coord_diff

        def forward(self, h, edge_index, coord, edge_attr=None, node_attr=None):
            row, col = edge_index
            radial, coord_diff = self.coord2radial(edge_index, coord)
            edge_feat = self.edge_model(h[row], h[col], radial, edge_attr)
            coord = self.coord_model(coord, edge_index, coord_diff, edge_feat)
            h, agg = self.node_model(h, edge_index, edge_feat, node_attr)
            return h, coord, edge_attr

    class EGNN(nn.Module):
        def __init__(self, in_node_nf, hidden_nf, out_node_nf, in_edge_nf=0, act_fn=nn.SiLU(), n_layers=4,
                     residual=True, attention=False, normalize=False, tanh=False):
            super(EGNN, self).__init__()
            self.hidden_nf, self.n_layers = hidden_nf, n_layers
            self.embedding_in = nn.Linear(in_node_nf, self.hidden_nf)
            self.embedding_out = nn.Linear(self.hidden_nf, out_node_nf)
            for i in range(0, n_layers):
                self.add_module("gcl_%d" % i, E_GCL(self.hidden_nf, self.hidden_nf, self.hidden_nf,
                                                    edges_in_d=in_edge_nf, act_fn=act_fn, residual=residual,
                                                    attention=attention, normalize=normalize, tanh=tanh))

        def forward(self, h, x, edges, edge_attr):
            h = self.embedding_in(h)
            for i in range(0, self.n_layers):
                h, x, _ = self._modules["gcl_%d" % i](h, edges, x, edge_attr=edge_attr)
            h = self.embedding_out(h)
            return h, x

    model = EGNN(in_node_nf=1, hidden_nf=hidden, out_node_nf=1, in_edge_nf=1, n_layers=n_layers,
                 attention=True, normalize=True)
    optimizer = lib.optim.Adam(model.parameters(), lr=5e-4, weight_decay=1e-12)
    pairs = [(i, j) for i in range(n_nodes) for j in range(n_nodes) if i != j]
    rows = lib.tensor([s * n_nodes + i for s in range(n_sys) for i, _ in pairs])
    cols = lib.tensor([s * n_nodes + j for s in range(n_sys) for _, j in pairs])
    edges = [rows, cols]
    loc, vel = lib.randn(n_sys * n_nodes, 3), lib.randn(n_sys * n_nodes, 3)
    charges = lib.randint(0, 2, (n_sys * n_nodes, 1)).to(loc.dtype) * 2 - 1
    loc_end = loc + 0.1 * vel + 0.01 * lib.randn(n_sys * n_nodes, 3)
    nodes = lib.sqrt(lib.sum(vel ** 2, dim=1)).unsqueeze(1).detach()
    edge_attr = charges[rows] * charges[cols]
    loss_mse = nn.MSELoss()

    def loss():
        _, loc_pred = model(nodes, loc.detach(), edges, edge_attr)
        return loss_mse(loc_pred, loc_end)
    return model, optimizer, loss, {"data": (nodes, loc, rows, cols, edge_attr, loc_end)}
