"""untuned_models_sixth.py's Perceiver, PINN and triplet Siamese net (that file holds the other
three and build()): each _name(lib) -> (model, optimizer, loss closure[, {"clip"/"scheduler"}]),
seeded by build."""
import math
from collections import OrderedDict


def _perceiver(lib):
    # (krasserm/perceiver-io's first PyTorch version: nn.MultiheadAttention with kdim/vdim for
    # the cross-attention, Residual(module, dropout), the MNIST image input adapter with its
    # Fourier position encoding, a learned output query and a classification head)
    nn, F = lib.nn, lib.nn.functional

    class Sequential(nn.Sequential):
        def forward(self, *inputs):
            for module in self:
                if type(inputs) == tuple:
                    inputs = module(*inputs)
                else:
                    inputs = module(inputs)
            return inputs

    class Residual(nn.Module):
        def __init__(self, module, dropout):
            super().__init__()
            self.module = module
            self.dropout = nn.Dropout(p=dropout)

        def forward(self, *args, **kwargs):
            x = self.module(*args, **kwargs)
            return self.dropout(x) + args[0]

    class MultiHeadAttention(nn.Module):
        def __init__(self, num_q_channels, num_kv_channels, num_heads, dropout):
            super().__init__()
            self.attention = nn.MultiheadAttention(embed_dim=num_q_channels, num_heads=num_heads,
                                                   kdim=num_kv_channels, vdim=num_kv_channels,
                                                   dropout=dropout, batch_first=True)

        def forward(self, x_q, x_kv, pad_mask=None, attn_mask=None):
            return self.attention(x_q, x_kv, x_kv, key_padding_mask=pad_mask, attn_mask=attn_mask)[0]

    class CrossAttention(nn.Module):
        def __init__(self, num_q_channels, num_kv_channels, num_heads, dropout):
            super().__init__()
            self.q_norm = nn.LayerNorm(num_q_channels)
            self.kv_norm = nn.LayerNorm(num_kv_channels)
            self.attention = MultiHeadAttention(num_q_channels, num_kv_channels, num_heads, dropout)

        def forward(self, x_q, x_kv, pad_mask=None, attn_mask=None):
            x_q = self.q_norm(x_q)
            x_kv = self.kv_norm(x_kv)
            return self.attention(x_q, x_kv, pad_mask=pad_mask, attn_mask=attn_mask)

    class SelfAttention(nn.Module):
        def __init__(self, num_channels, num_heads, dropout):
            super().__init__()
            self.norm = nn.LayerNorm(num_channels)
            self.attention = MultiHeadAttention(num_channels, num_channels, num_heads, dropout)

        def forward(self, x, pad_mask=None, attn_mask=None):
            x = self.norm(x)
            return self.attention(x, x, pad_mask=pad_mask, attn_mask=attn_mask)

    def mlp(num_channels):
        return Sequential(nn.LayerNorm(num_channels), nn.Linear(num_channels, num_channels), nn.GELU(),
                          nn.Linear(num_channels, num_channels))

    def cross_attention_layer(num_q_channels, num_kv_channels, num_heads, dropout):
        return Sequential(Residual(CrossAttention(num_q_channels, num_kv_channels, num_heads, dropout), dropout),
                          Residual(mlp(num_q_channels), dropout))

    def self_attention_layer(num_channels, num_heads, dropout):
        return Sequential(Residual(SelfAttention(num_channels, num_heads, dropout), dropout),
                          Residual(mlp(num_channels), dropout))

    class ImageInputAdapter(nn.Module):
        def __init__(self, image_shape, num_frequency_bands):
            super().__init__()
            *self.spatial_shape, num_image_channels = image_shape
            self.num_frequency_bands = num_frequency_bands
            coords = [lib.linspace(-1.0, 1.0, steps=s) for s in self.spatial_shape]
            pos = lib.stack(lib.meshgrid(*coords, indexing="ij"), dim=len(self.spatial_shape))
            enc = self._position_encodings(pos)
            self.register_buffer("position_encoding", enc.reshape(-1, enc.shape[-1]))
            self._num_input_channels = num_image_channels + enc.shape[-1]

        def _position_encodings(self, p):
            encodings = [p]
            frequencies = [lib.linspace(1.0, max_freq / 2.0, self.num_frequency_bands)
                           for max_freq in self.spatial_shape]
            grids = [p[..., i:i + 1] * f[None, ...] for i, f in enumerate(frequencies)]
            encodings.extend([lib.sin(math.pi * g) for g in grids])
            encodings.extend([lib.cos(math.pi * g) for g in grids])
            return lib.cat(encodings, dim=-1)

        def forward(self, x):
            b, *d = x.shape
            x_enc = self.position_encoding.unsqueeze(0).expand(b, -1, -1)
            x = x.reshape(b, -1, d[-1])
            return lib.cat([x, x_enc], dim=-1)

    class PerceiverEncoder(nn.Module):
        def __init__(self, input_adapter, num_latents, num_latent_channels, num_layers=2,
                     num_cross_attention_heads=1, num_self_attention_heads=4, dropout=0.1):
            super().__init__()
            self.input_adapter = input_adapter
            self.cross_attention = cross_attention_layer(num_latent_channels, input_adapter._num_input_channels,
                                                         num_cross_attention_heads, dropout)
            self.self_attention = Sequential(*[self_attention_layer(num_latent_channels, num_self_attention_heads,
                                                                    dropout) for _ in range(num_layers)])
            self.latent = nn.Parameter(lib.empty(num_latents, num_latent_channels))
            with lib.no_grad():
                self.latent.normal_(0.0, 0.02).clamp_(-2.0, 2.0)

        def forward(self, x):
            b, *_ = x.shape
            x = self.input_adapter(x)
            x_latent = self.latent.unsqueeze(0).expand(b, -1, -1)
            x_latent = self.cross_attention(x_latent, x)
            return self.self_attention(x_latent)

    class PerceiverDecoder(nn.Module):
        def __init__(self, num_latent_channels, num_classes, dropout=0.1):
            super().__init__()
            self.output_query = nn.Parameter(lib.empty(1, num_latent_channels))
            self.cross_attention = cross_attention_layer(num_latent_channels, num_latent_channels, 1, dropout)
            self.linear = nn.Linear(num_latent_channels, num_classes)
            with lib.no_grad():
                self.output_query.normal_(0.0, 0.02).clamp_(-2.0, 2.0)

        def forward(self, x):
            b, *_ = x.shape
            q = self.output_query.unsqueeze(0).expand(b, -1, -1)
            return self.linear(self.cross_attention(q, x)).squeeze(dim=1)

    class PerceiverIO(Sequential):
        def __init__(self, encoder, decoder):
            super().__init__(encoder, decoder)

    enc = PerceiverEncoder(ImageInputAdapter((28, 28, 1), num_frequency_bands=16), 32, 64)
    m = PerceiverIO(enc, PerceiverDecoder(64, 10))
    opt = lib.optim.AdamW(m.parameters(), lr=1e-3)
    x, y = lib.rand(8, 28, 28, 1), lib.randint(0, 10, (8,))
    return m, opt, lambda: F.cross_entropy(m(x), y)


def _pinn(lib):
    # (maziarraissi/PINNs' Burgers' equation continuous-time inference as the PyTorch ports
    # write it: an OrderedDict of Linear/Tanh, net_u, net_f by autograd.grad with
    # create_graph; Adam in place of L-BFGS, 2000 collocation points)
    nn = lib.nn
    nu = 0.01 / math.pi

    class DNN(nn.Module):
        def __init__(self, layers):
            super(DNN, self).__init__()
            self.depth = len(layers) - 1
            self.activation = nn.Tanh
            layer_list = list()
            for i in range(self.depth - 1):
                layer_list.append(("layer_%d" % i, nn.Linear(layers[i], layers[i + 1])))
                layer_list.append(("activation_%d" % i, self.activation()))
            layer_list.append(("layer_%d" % (self.depth - 1), nn.Linear(layers[-2], layers[-1])))
            self.layers = nn.Sequential(OrderedDict(layer_list))

        def forward(self, x):
            return self.layers(x)

    dnn = DNN([2, 20, 20, 20, 20, 20, 20, 20, 20, 1])
    # the training data as the paper's: u(0, x) = -sin(pi x) and u(t, -1) = u(t, 1) = 0
    x_0, t_b = lib.rand(50, 1) * 2 - 1, lib.rand(50, 1)
    x_u = lib.cat([x_0, lib.where(lib.rand(50, 1) < 0.5, -1.0, 1.0)])
    t_u = lib.cat([lib.zeros(50, 1), t_b])
    u = lib.cat([-lib.sin(math.pi * x_0), lib.zeros(50, 1)])
    x_f = (lib.rand(2000, 1) * 2 - 1).requires_grad_(True)
    t_f = lib.rand(2000, 1).requires_grad_(True)

    def net_u(x, t):
        return dnn(lib.cat([x, t], dim=1))

    def net_f(x, t):
        u = net_u(x, t)
        u_t = lib.autograd.grad(u, t, grad_outputs=lib.ones_like(u), retain_graph=True, create_graph=True)[0]
        u_x = lib.autograd.grad(u, x, grad_outputs=lib.ones_like(u), retain_graph=True, create_graph=True)[0]
        u_xx = lib.autograd.grad(u_x, x, grad_outputs=lib.ones_like(u_x), retain_graph=True, create_graph=True)[0]
        return u_t + u * u_x - nu * u_xx

    def loss():
        u_pred = net_u(x_u, t_u)
        f_pred = net_f(x_f, t_f)
        return lib.mean((u - u_pred) ** 2) + lib.mean(f_pred ** 2)
    opt = lib.optim.Adam(dnn.parameters(), lr=1e-3)
    return dnn, opt, loss


def _siamese(lib):
    # (adambielski/siamese-triplet's EmbeddingNet and TripletNet on MNIST-sized images, with
    # nn.TripletMarginLoss for its TripletLoss)
    nn = lib.nn

    class EmbeddingNet(nn.Module):
        def __init__(self):
            super(EmbeddingNet, self).__init__()
            self.convnet = nn.Sequential(nn.Conv2d(1, 32, 5), nn.PReLU(), nn.MaxPool2d(2, stride=2),
                                         nn.Conv2d(32, 64, 5), nn.PReLU(), nn.MaxPool2d(2, stride=2))
            self.fc = nn.Sequential(nn.Linear(64 * 4 * 4, 256), nn.PReLU(), nn.Linear(256, 256), nn.PReLU(),
                                    nn.Linear(256, 2))

        def forward(self, x):
            output = self.convnet(x)
            output = output.view(output.size()[0], -1)
            output = self.fc(output)
            return output

    class TripletNet(nn.Module):
        def __init__(self, embedding_net):
            super(TripletNet, self).__init__()
            self.embedding_net = embedding_net

        def forward(self, x1, x2, x3):
            output1 = self.embedding_net(x1)
            output2 = self.embedding_net(x2)
            output3 = self.embedding_net(x3)
            return output1, output2, output3

    m = TripletNet(EmbeddingNet())
    opt = lib.optim.Adam(m.parameters(), lr=1e-3)
    criterion = nn.TripletMarginLoss(margin=1.0)
    a, p, n = lib.randn(32, 1, 28, 28), lib.randn(32, 1, 28, 28), lib.randn(32, 1, 28, 28)
    return m, opt, lambda: criterion(*m(a, p, n))
