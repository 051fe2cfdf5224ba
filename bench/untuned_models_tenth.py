"""Five more training steps beside bench/untuned_models.py's, written as their reference code
writes them and run before llgrad was tuned on any of them (2026-12-06): a fast neural style
transfer net (pytorch/examples' fast_neural_style TransformerNet: ReflectionPad2d convolutions,
InstanceNorm2d(affine=True), residual blocks, nearest-upsampling convolutions; its perceptual
loss by a frozen convolutional loss network, content MSE plus the Gram matrices' style MSE;
Adam), a Set Transformer (juho-lee/set_transformer's MAB, ISAB with inducing points, PMA and
SAB, heads split by cat(split) along the batch, LayerNorm; max regression with L1Loss; Adam),
and in untuned_models_tenth_b.py a TabNet (dreamquark-ai/tabnet's encoder: ghost batch norm
by chunk, the shared and step-specific GLU blocks, the attentive transformer's prior-scaled
sparsemax written with sort, cumsum and max, the mask entropy loss; Adam, StepLR), a word2vec
skip-gram with negative sampling (Embedding pairs, bmm, clamp, logsigmoid) and an ESPCN
super-resolution net (pytorch/examples' super_resolution: orthogonal init, PixelShuffle;
MSELoss, Adam).

Two of them show differences from torch that are not llgrad's: the style net's convolution
biases before InstanceNorm (and its residual blocks' second InstanceNorm biases) have
gradients that are rounding noise, which Adam steps by their sign; TabNet at full size
amplifies rounding (its sparsemax supports change): torch itself, with every parameter
moved by one float32 ulp, differs by 5e-4 in the loss at step 4.

    python bench/untuned_models_tenth.py [name,...] [--torch-compile]

Per model: torch eager, torch.compile (with --torch-compile), llgrad eager and llgrad compiled
(LLGRAD_COMPILE=sync, warm), 1 thread each, seeded alike, as untuned_models_seventh.py's
runner does (6 steps checked against torch, then blocks of 3 steps interleaved, medians of
7). build(lib, name, small=True) makes the tests' smaller versions."""
import math
import os
import sys

import untuned_models_seventh
import untuned_models_tenth_b
from untuned_models_fifth import training_step

NAMES = ("style", "settf", "tabnet", "sgns", "espcn")


def build(lib, name, small=False):
    make = getattr(untuned_models_tenth_b, "_" + name, None) or globals()["_" + name]
    return training_step(lib, lambda lib: make(lib, small))


def _style(lib, small):
    # (pytorch/examples' fast_neural_style/neural_style: transformer_net.py at half width on
    # 64x64 images; its VGG16 loss network is a small frozen random conv net here)
    nn, F = lib.nn, lib.nn.functional
    batch, size, c1, n_res = (2, 16, 4, 2) if small else (4, 64, 16, 5)
    content_weight, style_weight = 1e5, 1e10

    class ConvLayer(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, stride):
            super(ConvLayer, self).__init__()
            reflection_padding = kernel_size // 2
            self.reflection_pad = nn.ReflectionPad2d(reflection_padding)
            self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)

        def forward(self, x):
            out = self.reflection_pad(x)
            out = self.conv2d(out)
            return out

    class ResidualBlock(nn.Module):
        def __init__(self, channels):
            super(ResidualBlock, self).__init__()
            self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
            self.in1 = nn.InstanceNorm2d(channels, affine=True)
            self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
            self.in2 = nn.InstanceNorm2d(channels, affine=True)
            self.relu = nn.ReLU()

        def forward(self, x):
            residual = x
            out = self.relu(self.in1(self.conv1(x)))
            out = self.in2(self.conv2(out))
            out = out + residual
            return out

    class UpsampleConvLayer(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
            super(UpsampleConvLayer, self).__init__()
            self.upsample = upsample
            reflection_padding = kernel_size // 2
            self.reflection_pad = nn.ReflectionPad2d(reflection_padding)
            self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)

        def forward(self, x):
            x_in = x
            if self.upsample:
                x_in = F.interpolate(x_in, mode='nearest', scale_factor=self.upsample)
            out = self.reflection_pad(x_in)
            out = self.conv2d(out)
            return out

    class TransformerNet(nn.Module):
        def __init__(self):
            super(TransformerNet, self).__init__()
            self.conv1 = ConvLayer(3, c1, kernel_size=9, stride=1)
            self.in1 = nn.InstanceNorm2d(c1, affine=True)
            self.conv2 = ConvLayer(c1, 2 * c1, kernel_size=3, stride=2)
            self.in2 = nn.InstanceNorm2d(2 * c1, affine=True)
            self.conv3 = ConvLayer(2 * c1, 4 * c1, kernel_size=3, stride=2)
            self.in3 = nn.InstanceNorm2d(4 * c1, affine=True)
            self.res = nn.Sequential(*[ResidualBlock(4 * c1) for _ in range(n_res)])
            self.deconv1 = UpsampleConvLayer(4 * c1, 2 * c1, kernel_size=3, stride=1, upsample=2)
            self.in4 = nn.InstanceNorm2d(2 * c1, affine=True)
            self.deconv2 = UpsampleConvLayer(2 * c1, c1, kernel_size=3, stride=1, upsample=2)
            self.in5 = nn.InstanceNorm2d(c1, affine=True)
            self.deconv3 = ConvLayer(c1, 3, kernel_size=9, stride=1)
            self.relu = nn.ReLU()

        def forward(self, X):
            y = self.relu(self.in1(self.conv1(X)))
            y = self.relu(self.in2(self.conv2(y)))
            y = self.relu(self.in3(self.conv3(y)))
            y = self.res(y)
            y = self.relu(self.in4(self.deconv1(y)))
            y = self.relu(self.in5(self.deconv2(y)))
            y = self.deconv3(y)
            return y

    class LossNet(nn.Module):
        # (VGG16's relu1_2 .. relu3_3 stages, shallower and narrower)
        def __init__(self, requires_grad=False):
            super(LossNet, self).__init__()
            self.slice1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True))
            self.slice2 = nn.Sequential(nn.MaxPool2d(2, 2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(inplace=True))
            self.slice3 = nn.Sequential(nn.MaxPool2d(2, 2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(inplace=True))
            if not requires_grad:
                for param in self.parameters():
                    param.requires_grad = False

        def forward(self, X):
            h1 = self.slice1(X)
            h2 = self.slice2(h1)
            h3 = self.slice3(h2)
            return h1, h2, h3

    def gram_matrix(y):
        (b, ch, h, w) = y.size()
        features = y.view(b, ch, w * h)
        features_t = features.transpose(1, 2)
        gram = features.bmm(features_t) / (ch * h * w)
        return gram

    def normalize_batch(batch):
        # normalize using imagenet mean and std
        mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
        std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
        batch = batch.div_(255.0)
        return (batch - mean) / std

    transformer = TransformerNet()
    optimizer = lib.optim.Adam(transformer.parameters(), 1e-3)
    mse_loss = nn.MSELoss()
    vgg = LossNet(requires_grad=False)
    style = lib.rand(1, 3, size, size) * 255
    features_style = vgg(normalize_batch(style.repeat(batch, 1, 1, 1)))
    gram_style = [gram_matrix(y).detach() for y in features_style]
    x = lib.rand(batch, 3, size, size) * 255

    def loss():
        n_batch = len(x)
        y = transformer(x)
        y = normalize_batch(y)
        x_n = normalize_batch(x.clone())
        features_y = vgg(y)
        features_x = vgg(x_n)
        content_loss = content_weight * mse_loss(features_y[1], features_x[1])
        style_loss = 0.
        for ft_y, gm_s in zip(features_y, gram_style):
            gm_y = gram_matrix(ft_y)
            style_loss += mse_loss(gm_y, gm_s[:n_batch, :, :])
        style_loss *= style_weight
        return content_loss + style_loss
    return transformer, optimizer, loss


def _settf(lib, small):
    # (juho-lee/set_transformer's modules.py and models.py SetTransformer, ln=True, trained on
    # its max_regression_demo's task: the largest of a set of numbers)
    nn, F = lib.nn, lib.nn.functional
    batch, n_points, dim_hidden, num_inds = (4, 10, 16, 4) if small else (64, 100, 64, 16)

    class MAB(nn.Module):
        def __init__(self, dim_Q, dim_K, dim_V, num_heads, ln=False):
            super(MAB, self).__init__()
            self.dim_V = dim_V
            self.num_heads = num_heads
            self.fc_q = nn.Linear(dim_Q, dim_V)
            self.fc_k = nn.Linear(dim_K, dim_V)
            self.fc_v = nn.Linear(dim_K, dim_V)
            if ln:
                self.ln0 = nn.LayerNorm(dim_V)
                self.ln1 = nn.LayerNorm(dim_V)
            self.fc_o = nn.Linear(dim_V, dim_V)

        def forward(self, Q, K):
            Q = self.fc_q(Q)
            K, V = self.fc_k(K), self.fc_v(K)

            dim_split = self.dim_V // self.num_heads
            Q_ = lib.cat(Q.split(dim_split, 2), 0)
            K_ = lib.cat(K.split(dim_split, 2), 0)
            V_ = lib.cat(V.split(dim_split, 2), 0)

            A = lib.softmax(Q_.bmm(K_.transpose(1, 2)) / math.sqrt(self.dim_V), 2)
            O = lib.cat((Q_ + A.bmm(V_)).split(Q.size(0), 0), 2)
            O = O if getattr(self, 'ln0', None) is None else self.ln0(O)
            O = O + F.relu(self.fc_o(O))
            O = O if getattr(self, 'ln1', None) is None else self.ln1(O)
            return O

    class SAB(nn.Module):
        def __init__(self, dim_in, dim_out, num_heads, ln=False):
            super(SAB, self).__init__()
            self.mab = MAB(dim_in, dim_in, dim_out, num_heads, ln=ln)

        def forward(self, X):
            return self.mab(X, X)

    class ISAB(nn.Module):
        def __init__(self, dim_in, dim_out, num_heads, num_inds, ln=False):
            super(ISAB, self).__init__()
            self.I = nn.Parameter(lib.Tensor(1, num_inds, dim_out))
            nn.init.xavier_uniform_(self.I)
            self.mab0 = MAB(dim_out, dim_in, dim_out, num_heads, ln=ln)
            self.mab1 = MAB(dim_in, dim_out, dim_out, num_heads, ln=ln)

        def forward(self, X):
            H = self.mab0(self.I.repeat(X.size(0), 1, 1), X)
            return self.mab1(X, H)

    class PMA(nn.Module):
        def __init__(self, dim, num_heads, num_seeds, ln=False):
            super(PMA, self).__init__()
            self.S = nn.Parameter(lib.Tensor(1, num_seeds, dim))
            nn.init.xavier_uniform_(self.S)
            self.mab = MAB(dim, dim, dim, num_heads, ln=ln)

        def forward(self, X):
            return self.mab(self.S.repeat(X.size(0), 1, 1), X)

    class SetTransformer(nn.Module):
        def __init__(self, dim_input, num_outputs, dim_output, num_inds=32, dim_hidden=128,
                     num_heads=4, ln=False):
            super(SetTransformer, self).__init__()
            self.enc = nn.Sequential(
                ISAB(dim_input, dim_hidden, num_heads, num_inds, ln=ln),
                ISAB(dim_hidden, dim_hidden, num_heads, num_inds, ln=ln))
            self.dec = nn.Sequential(
                PMA(dim_hidden, num_heads, num_outputs, ln=ln),
                SAB(dim_hidden, dim_hidden, num_heads, ln=ln),
                SAB(dim_hidden, dim_hidden, num_heads, ln=ln),
                nn.Linear(dim_hidden, dim_output))

        def forward(self, X):
            return self.dec(self.enc(X))

    model = SetTransformer(1, 1, 1, num_inds=num_inds, dim_hidden=dim_hidden, num_heads=4, ln=True)
    optimizer = lib.optim.Adam(model.parameters(), lr=1e-4)
    criterion = nn.L1Loss()
    x = lib.randint(1, 100, (batch, n_points)).float()
    y = lib.max(x, dim=1)[0]

    def loss():
        return criterion(model(x.unsqueeze(-1)).squeeze(), y)
    return model, optimizer, loss


def main(names, with_torch_compile):
    return untuned_models_seventh.main(names, with_torch_compile, build, steps=6)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    chosen = args[0].split(",") if args else list(NAMES)
    if "-h" in sys.argv or "--help" in sys.argv or set(chosen) - set(NAMES):
        sys.exit(__doc__ + f"\n\nmodels: {', '.join(NAMES)}")
    os.environ.setdefault("LLGRAD_COMPILE", "sync")     # (read when llgrad is imported)
    os.environ.setdefault("LLGRAD_NUM_THREADS", "1")
    main(chosen, "--torch-compile" in sys.argv)
