"""Five more training steps, written as their reference code writes them and run before llgrad
was tuned on any of them (2026-12-06): a Tacotron 2 (NVIDIA/tacotron2's model.py cut to one
encoder convolution and a two-layer postnet: a bidirectional LSTM over pack_padded_sequence
with lengths from .cpu().numpy(), a location-sensitive attention decoder loop of LSTMCells
whose energies are masked through alignment.data.masked_fill_, prenet dropout always on,
attention_weights_cum += in the loop; MSE + BCE-with-logits), a Performer LM (lucidrains/
performer-pytorch: FAVOR+ softmax kernels on orthogonal random features drawn with
torch.linalg.qr, causal linear attention by cumsum over 128 chunks of the sequence, the
ProjectionUpdater's redraw counter a buffer compared with the interval in Python), an FNet
classifier (rishikksh20/FNet-pytorch: token mixing by torch.fft.fft twice, .real), and in
untuned_models_fourteenth_b.py a MobileNetV2 (tonylins/pytorch-mobilenet-v2: inverted
residuals, depthwise convolutions, ReLU6, linear bottlenecks) and an E(n)-equivariant graph
network (vgsatorras/egnn: messages summed by scatter_add_, coordinate updates averaged, edge
attention, normalised coordinate differences with a detached norm) on an n-body task.

    python bench/untuned_models_fourteenth.py [name,...] [--torch-compile]

Per model: torch eager, torch.compile (with --torch-compile), jax.jit (where written, in
untuned_models_fourteenth_jax.py), llgrad eager and llgrad compiled, 1 thread each; the checks,
the timing and its printout are untuned_models_eleventh.py's (main there).
build(lib, name, small=True) makes the tests' smaller versions."""
import math
import os
import sys

import untuned_models_fourteenth_b
from untuned_models_fifth import training_step

NAMES = ("tacotron", "performer", "fnet", "mobilenetv2", "egnn")


def _maker(name):
    return getattr(untuned_models_fourteenth_b, "_" + name, None) or globals()["_" + name]


def build(lib, name, small=False):
    return training_step(lib, lambda lib: _maker(name)(lib, small))


def raw(lib, name, small=False):
    """(model, optimizer, loss, extras) of the maker itself (the jax versions start from it)."""
    return _maker(name)(lib, small)


def _tacotron(lib, small):
    from untuned_models_fourteenth_b import tacotron_decoder
    nn, F = lib.nn, lib.nn.functional
    hp = dict(batch=2, text=5, symbols=11, emb=8, mels=3, frames=4, rnn=8, prenet=4, att=6,
              filters=2, kernel=3, post=4) if small else dict(
        batch=8, text=32, symbols=40, emb=64, mels=20, frames=32, rnn=64, prenet=32, att=32,
        filters=8, kernel=15, post=32)

    class LinearNorm(nn.Module):
        def __init__(self, in_dim, out_dim, bias=True, w_init_gain='linear'):
            super(LinearNorm, self).__init__()
            self.linear_layer = nn.Linear(in_dim, out_dim, bias=bias)
            nn.init.xavier_uniform_(self.linear_layer.weight, gain=nn.init.calculate_gain(w_init_gain))

        def forward(self, x):
            return self.linear_layer(x)

    class ConvNorm(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size=1, stride=1, padding=None,
                     dilation=1, bias=True, w_init_gain='linear'):
            super(ConvNorm, self).__init__()
            if padding is None:
                assert (kernel_size % 2 == 1)
                padding = int(dilation * (kernel_size - 1) / 2)
            self.conv = nn.Conv1d(in_channels, out_channels, kernel_size=kernel_size, stride=stride,
                                  padding=padding, dilation=dilation, bias=bias)
            nn.init.xavier_uniform_(self.conv.weight, gain=nn.init.calculate_gain(w_init_gain))

        def forward(self, signal):
            return self.conv(signal)

    class Encoder(nn.Module):
        def __init__(self):
            super(Encoder, self).__init__()
            self.convolutions = nn.ModuleList([nn.Sequential(
                ConvNorm(hp["emb"], hp["emb"], kernel_size=5, stride=1, padding=2, dilation=1,
                         w_init_gain='relu'), nn.BatchNorm1d(hp["emb"]))])
            self.lstm = nn.LSTM(hp["emb"], int(hp["emb"] / 2), 1, batch_first=True, bidirectional=True)

        def forward(self, x, input_lengths):
            for conv in self.convolutions:
                x = F.dropout(F.relu(conv(x)), 0.5, self.training)
            x = x.transpose(1, 2)
            input_lengths = input_lengths.cpu().numpy()
            x = nn.utils.rnn.pack_padded_sequence(x, input_lengths, batch_first=True)
            self.lstm.flatten_parameters()
            outputs, _ = self.lstm(x)
            outputs, _ = nn.utils.rnn.pad_packed_sequence(outputs, batch_first=True)
            return outputs

    class Postnet(nn.Module):
        def __init__(self):
            super(Postnet, self).__init__()
            self.convolutions = nn.ModuleList([
                nn.Sequential(ConvNorm(hp["mels"], hp["post"], kernel_size=5, w_init_gain='tanh'),
                              nn.BatchNorm1d(hp["post"])),
                nn.Sequential(ConvNorm(hp["post"], hp["mels"], kernel_size=5), nn.BatchNorm1d(hp["mels"]))])

        def forward(self, x):
            for i in range(len(self.convolutions) - 1):
                x = F.dropout(lib.tanh(self.convolutions[i](x)), 0.5, self.training)
            return F.dropout(self.convolutions[-1](x), 0.5, self.training)

    Decoder = tacotron_decoder(lib, hp, LinearNorm, ConvNorm)

    class Tacotron2(nn.Module):
        def __init__(self):
            super(Tacotron2, self).__init__()
            self.embedding = nn.Embedding(hp["symbols"], hp["emb"])
            std = math.sqrt(2.0 / (hp["symbols"] + hp["emb"]))
            val = math.sqrt(3.0) * std  # uniform bounds for std
            self.embedding.weight.data.uniform_(-val, val)
            self.encoder, self.decoder, self.postnet = Encoder(), Decoder(), Postnet()

        def forward(self, inputs):
            text_inputs, text_lengths, mels = inputs
            embedded_inputs = self.embedding(text_inputs).transpose(1, 2)
            encoder_outputs = self.encoder(embedded_inputs, text_lengths)
            mel_outputs, gate_outputs, alignments = self.decoder(
                encoder_outputs, mels, memory_lengths=text_lengths)
            mel_outputs_postnet = self.postnet(mel_outputs)
            mel_outputs_postnet = mel_outputs + mel_outputs_postnet
            return mel_outputs, mel_outputs_postnet, gate_outputs, alignments

    def tacotron2_loss(model_output, targets):
        mel_target, gate_target = targets[0], targets[1]
        mel_target.requires_grad = False
        gate_target.requires_grad = False
        gate_target = gate_target.view(-1, 1)
        mel_out, mel_out_postnet, gate_out, _ = model_output
        gate_out = gate_out.view(-1, 1)
        mel_loss = nn.MSELoss()(mel_out, mel_target) + nn.MSELoss()(mel_out_postnet, mel_target)
        gate_loss = nn.BCEWithLogitsLoss()(gate_out, gate_target)
        return mel_loss + gate_loss

    model = Tacotron2()
    optimizer = lib.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-6)
    b, n = hp["batch"], hp["text"]
    text = lib.randint(1, hp["symbols"], (b, n))
    lengths = lib.sort(lib.randint(n // 2, n + 1, (b,)), descending=True)[0]
    lengths[0] = n
    text = text * (lib.arange(n)[None, :] < lengths[:, None]).long()     # (padding symbol 0)
    mels = lib.randn(b, hp["mels"], hp["frames"])
    gate = lib.zeros(b, hp["frames"])
    gate[:, -1] = 1.0

    def loss():
        return tacotron2_loss(model((text, lengths, mels)), (mels, gate))
    return model, optimizer, loss, {"clip": 1.0, "data": (text, lengths, mels, gate)}


def _performer(lib, small):
    # (performer_pytorch.py's PerformerLM with absolute position embeddings, causal, on CPU:
    # its non-CUDA causal_linear_attention_noncuda, whose chunk_size is torch.chunk's count)
    nn, F = lib.nn, lib.nn.functional
    batch, seq, dim, heads, dim_head, depth, vocab = ((2, 6, 8, 2, 4, 1, 11) if small else
                                                      (8, 64, 64, 4, 16, 2, 128))

    def orthogonal_matrix_chunk(cols, device=None):
        unstructured_block = lib.randn((cols, cols), device=device)
        q, r = lib.linalg.qr(unstructured_block.cpu(), mode='reduced')
        q, r = map(lambda t: t.to(device), (q, r))
        return q.t()

    def gaussian_orthogonal_random_matrix(nb_rows, nb_columns, scaling=0, device=None):
        nb_full_blocks = int(nb_rows / nb_columns)
        block_list = []
        for _ in range(nb_full_blocks):
            block_list.append(orthogonal_matrix_chunk(nb_columns, device=device))
        remaining_rows = nb_rows - nb_full_blocks * nb_columns
        if remaining_rows > 0:
            q = orthogonal_matrix_chunk(nb_columns, device=device)
            block_list.append(q[:remaining_rows])
        final_matrix = lib.cat(block_list)
        multiplier = lib.randn((nb_rows, nb_columns), device=device).norm(dim=1)
        return lib.diag(multiplier) @ final_matrix

    def softmax_kernel(data, *, projection_matrix, is_query, normalize_data=True, eps=1e-4, device=None):
        b, h, *_ = data.shape
        data_normalizer = (data.shape[-1] ** -0.25) if normalize_data else 1.
        ratio = (projection_matrix.shape[0] ** -0.5)
        projection = projection_matrix[None, None].expand(b, h, *projection_matrix.shape)  # (einops repeat)
        projection = projection.type_as(data)
        data_dash = lib.einsum('...id,...jd->...ij', (data_normalizer * data), projection)
        diag_data = data ** 2
        diag_data = lib.sum(diag_data, dim=-1)
        diag_data = (diag_data / 2.0) * (data_normalizer ** 2)
        diag_data = diag_data.unsqueeze(dim=-1)
        if is_query:
            data_dash = ratio * (lib.exp(data_dash - diag_data - lib.amax(data_dash, dim=-1, keepdim=True).detach()) + eps)
        else:
            data_dash = ratio * (lib.exp(data_dash - diag_data - lib.amax(data_dash, dim=(-1, -2), keepdim=True).detach()) + eps)
        return data_dash.type_as(data)

    def causal_linear_attention_noncuda(q, k, v, chunk_size=128, eps=1e-6):
        last_k_cumsum = 0
        last_context_cumsum = 0
        outs = []
        for q, k, v in zip(*map(lambda t: t.chunk(chunk_size, dim=-2), (q, k, v))):
            k_cumsum = last_k_cumsum + k.cumsum(dim=-2)
            D_inv = 1. / lib.einsum('...nd,...nd->...n', q, k_cumsum.type_as(q) + eps)
            context = lib.einsum('...nd,...ne->...nde', k, v)
            context_cumsum = last_context_cumsum + context.cumsum(dim=-3)
            out = lib.einsum('...nde,...nd,...n->...ne', context_cumsum, q, D_inv)
            last_k_cumsum = k_cumsum[:, :, -1:]
            last_context_cumsum = context_cumsum[:, :, -1:]
            outs.append(out)
        return lib.cat(outs, dim=-2)

    class FastAttention(nn.Module):
        def __init__(self, dim_heads, nb_features=None):
            super().__init__()
            self.nb_features = nb_features or int(dim_heads * math.log(dim_heads))
            self.dim_heads = dim_heads
            self.register_buffer('projection_matrix', gaussian_orthogonal_random_matrix(
                self.nb_features, dim_heads))

        @lib.no_grad()
        def redraw_projection_matrix(self, device):
            self.projection_matrix.copy_(gaussian_orthogonal_random_matrix(self.nb_features, self.dim_heads))

        def forward(self, q, k, v):
            q = softmax_kernel(q, projection_matrix=self.projection_matrix, is_query=True)
            k = softmax_kernel(k, projection_matrix=self.projection_matrix, is_query=False)
            return causal_linear_attention_noncuda(q, k, v)

    class ProjectionUpdater(nn.Module):
        def __init__(self, instance, feature_redraw_interval):
            super().__init__()
            self.instance = instance
            self.feature_redraw_interval = feature_redraw_interval
            self.register_buffer('calls_since_last_redraw', lib.tensor(0))

        def redraw_projections(self):
            model = self.instance
            if not self.training:
                return
            if self.feature_redraw_interval is not None and self.calls_since_last_redraw >= self.feature_redraw_interval:
                for fast_attention in [m for m in model.modules() if isinstance(m, FastAttention)]:
                    fast_attention.redraw_projection_matrix(None)
                self.calls_since_last_redraw.zero_()
                return
            self.calls_since_last_redraw += 1

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            inner_dim = dim_head * heads
            self.fast_attention = FastAttention(dim_head)
            self.to_q = nn.Linear(dim, inner_dim, bias=False)
            self.to_k = nn.Linear(dim, inner_dim, bias=False)
            self.to_v = nn.Linear(dim, inner_dim, bias=False)
            self.to_out = nn.Linear(inner_dim, dim)

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.to_q(x), self.to_k(x), self.to_v(x)
            q, k, v = map(lambda t: t.view(b, n, heads, -1).permute(0, 2, 1, 3), (q, k, v))  # (rearrange)
            out = self.fast_attention(q, k, v)
            out = out.permute(0, 2, 1, 3).reshape(b, n, -1)
            return self.to_out(out)

    class PreNorm(nn.Module):
        def __init__(self, fn):
            super().__init__()
            self.norm, self.fn = nn.LayerNorm(dim), fn

        def forward(self, x):
            return self.fn(self.norm(x))

    class Performer(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.ModuleList([
                PreNorm(SelfAttention()),
                PreNorm(nn.Sequential(nn.Linear(dim, dim * 4), nn.GELU(), nn.Dropout(0.), nn.Linear(dim * 4, dim)))])
                for _ in range(depth)])
            self.proj_updater = ProjectionUpdater(self.layers, 1000)

        def forward(self, x):
            self.proj_updater.redraw_projections()
            for f, g in self.layers:
                x = x + f(x)
                x = x + g(x)
            return x

    class PerformerLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.token_emb = nn.Embedding(vocab, dim)
            self.pos_emb = nn.Embedding(seq, dim)
            self.performer = Performer()
            self.norm = nn.LayerNorm(dim)
            self.to_out = nn.Linear(dim, vocab)

        def forward(self, x):
            x = self.token_emb(x)
            x += self.pos_emb(lib.arange(x.shape[1], device=x.device))
            x = self.performer(x)
            return self.to_out(self.norm(x))

    model = PerformerLM()
    optimizer = lib.optim.Adam(model.parameters(), lr=1e-4)
    text = lib.randint(0, vocab, (batch, seq + 1))
    inp, target = text[:, :-1], text[:, 1:]

    def loss():
        logits = model(inp)
        return F.cross_entropy(logits.transpose(1, 2), target)
    return model, optimizer, loss, {"clip": 0.5, "data": (inp, target)}


def _fnet(lib, small):
    nn, F = lib.nn, lib.nn.functional
    batch, seq, dim, depth, mlp, vocab, classes = ((2, 6, 8, 1, 16, 11, 3) if small else
                                                   (16, 64, 64, 2, 128, 128, 4))

    class FeedForward(nn.Module):
        def __init__(self, dim, hidden_dim, dropout=0.):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(dim, hidden_dim), nn.GELU(), nn.Dropout(dropout),
                                     nn.Linear(hidden_dim, dim), nn.Dropout(dropout))

        def forward(self, x):
            return self.net(x)

    class PreNorm(nn.Module):
        def __init__(self, dim, fn):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.fn = fn

        def forward(self, x, **kwargs):
            return self.fn(self.norm(x), **kwargs)

    class FNetBlock(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, x):
            x = lib.fft.fft(lib.fft.fft(x, dim=-1), dim=-2).real
            return x

    class FNet(nn.Module):
        def __init__(self, dim, depth, mlp_dim, dropout=0.):
            super().__init__()
            self.layers = nn.ModuleList([])
            for _ in range(depth):
                self.layers.append(nn.ModuleList([
                    PreNorm(dim, FNetBlock()),
                    PreNorm(dim, FeedForward(dim, mlp_dim, dropout=dropout))]))

        def forward(self, x):
            for attn, ff in self.layers:
                x = attn(x) + x
                x = ff(x) + x
            return x

    class FNetClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.pos = nn.Parameter(lib.randn(1, seq, dim) * 0.02)
            self.drop = nn.Dropout(0.1)
            self.fnet = FNet(dim, depth, mlp, dropout=0.1)
            self.head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, classes))

        def forward(self, tokens):
            x = self.drop(self.emb(tokens) + self.pos)
            return self.head(self.fnet(x).mean(dim=1))

    model = FNetClassifier()
    optimizer = lib.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = lib.randint(0, vocab, (batch, seq))
    labels = lib.randint(0, classes, (batch,))

    def loss():
        return F.cross_entropy(model(tokens), labels)
    return model, optimizer, loss, {"data": (tokens, labels)}


if __name__ == "__main__":
    import untuned_models_eleventh
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    chosen = args[0].split(",") if args else list(NAMES)
    if "-h" in sys.argv or "--help" in sys.argv or set(chosen) - set(NAMES):
        sys.exit(__doc__ + f"\n\nmodels: {', '.join(NAMES)}")
    os.environ.setdefault("LLGRAD_COMPILE", "sync")     # (read when llgrad is imported)
    os.environ.setdefault("LLGRAD_NUM_THREADS", "1")
    os.environ["PJRT_NPROC"] = "1"                      # (read when jax starts)
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_cpu_multi_thread_eigen=false").strip()
    import untuned_models_fourteenth_jax
    untuned_models_eleventh.main(chosen, "--torch-compile" in sys.argv, build=build,
                                 raw=raw, jax_models=untuned_models_fourteenth_jax)
