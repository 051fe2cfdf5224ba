"""Six more training steps, written as their reference code writes them and run before llgrad
was tuned on any of them (2026-12-07, stop 76): a FiLM visual-reasoning net (ethanjperez/film:
a GRU question encoder whose last real token is picked by gather, FiLMed residual blocks over
coordinate maps, gammas shifted by 1, BatchNorm without affine; Adam with weight decay), a
ConvMixer (locuslab/convmixer: patch convolution, depthwise 5x5 'same' convolutions in a
Residual, GELU before BatchNorm; AdamW, clip_grad_norm_, the learning rate written into the
param group each step by np.interp as its train script does), the gated-attention MIL net
(AMLab-Amsterdam/AttentionDeepMIL: a LeNet over the instances of a bag, tanh * sigmoid
attention, softmax over the instances, clamped Bernoulli likelihood; four bags of different
sizes a step), and in untuned_models_nineteenth_b.py and _c.py a DARTS search network
(quark0/darts: MixedOps of eight candidate ops weighted by softmaxed alphas, the first-order
architect step on a validation batch inside the step; SGD with momentum and Adam), a Pointer
Network (shirgur/PointerNet: a bidirectional LSTM encoder, a hand-written LSTM decoder loop
pointing by masked attention, `att[mask] = inf[mask]`, the next input picked by a one-hot
boolean mask) and SchNet (schnetpack 2's representation: Gaussian RBF of pair distances from index_select, a
cosine cutoff, continuous-filter convolutions summed by index_add, shifted softplus; energies and
forces by autograd.grad(create_graph=True)).

    python bench/untuned_models_nineteenth.py [name,...] [--torch-compile]

Per model: torch eager, torch.compile (with --torch-compile), llgrad eager and llgrad compiled,
1 thread each; the checks, the timing and its printout are untuned_models_eleventh.py's (main
there). build(lib, name, small=True) makes the tests' smaller versions."""
import os
import sys
import types

import numpy as np

import untuned_models_nineteenth_b
import untuned_models_nineteenth_c
from untuned_models_fifth import training_step

NAMES = ("film", "convmixer", "abmil", "darts", "ptrnet", "schnet")


def _maker(name):
    for mod in (untuned_models_nineteenth_b, untuned_models_nineteenth_c):
        if hasattr(mod, "_" + name):
            return getattr(mod, "_" + name)
    return globals()["_" + name]


def build(lib, name, small=False):
    np.random.seed(0)
    return training_step(lib, lambda lib: _maker(name)(lib, small))


def _film(lib, small):
    # (film/vr/models/filmed_net.py's FiLMedNet, FiLMedResBlock, coord_map and
    # film_gen.py's FiLMGen with encoder_type 'gru', decoder 'linear', gamma_baseshift 1;
    # raw images into a strided stem in place of ResNet features)
    nn, F = lib.nn, lib.nn.functional
    batch, size, dim, n_mod, vocab, qlen, hid = (2, 8, 8, 2, 12, 5, 8) if small else (
        16, 32, 32, 4, 50, 12, 64)
    NULL = 0

    def coord_map(shape, start=-1, end=1):
        m, n = shape
        x_coord_row = lib.linspace(start, end, steps=n)
        y_coord_row = lib.linspace(start, end, steps=m)
        x_coords = x_coord_row.unsqueeze(0).expand(lib.Size((m, n))).unsqueeze(0)
        y_coords = y_coord_row.unsqueeze(1).expand(lib.Size((m, n))).unsqueeze(0)
        return lib.cat([x_coords, y_coords], 0)

    class FiLMGen(nn.Module):
        def __init__(self, null_token=0, wordvec_dim=hid, hidden_dim=hid, module_dim=dim,
                     num_modules=n_mod):
            super().__init__()
            self.NULL = null_token
            self.num_modules, self.module_dim = num_modules, module_dim
            self.cond_feat_size = 2 * module_dim
            self.encoder_embed = nn.Embedding(vocab, wordvec_dim)
            self.encoder_rnn = nn.GRU(wordvec_dim, hidden_dim, 1, batch_first=True)
            self.decoder_linear = nn.Linear(hidden_dim, num_modules * self.cond_feat_size)

        def get_dims(self, x=None):
            V_out = self.num_modules * self.cond_feat_size
            H = self.encoder_rnn.hidden_size
            N = x.size(0) if x is not None else None
            T_in = x.size(1) if x is not None else None
            return V_out, H, N, T_in

        def before_rnn(self, x, replace=0):
            N, T = x.size()
            idx = lib.LongTensor(N).fill_(T - 1)
            x_cpu = x.cpu()         # (the reference's Python scan for each row's first NULL)
            for i in range(N):
                for t in range(T - 1):
                    if x_cpu.data[i, t] != self.NULL and x_cpu.data[i, t + 1] == self.NULL:
                        idx[i] = t
                        break
            idx = idx.type_as(x.data)
            x[x.data == self.NULL] = replace
            return x, idx

        def encoder(self, x):
            V_out, H, N, T_in = self.get_dims(x=x)
            x, idx = self.before_rnn(x)
            embed = self.encoder_embed(x)
            out, _ = self.encoder_rnn(embed)
            idx = idx.view(N, 1, 1).expand(N, 1, H)
            return out.gather(1, idx).view(N, H)

        def forward(self, x):
            encoded = self.encoder(x)
            film_pre_mod = self.decoder_linear(encoded)
            return film_pre_mod.view(x.size(0), self.num_modules, self.cond_feat_size)

    class FiLM(nn.Module):
        def forward(self, x, gammas, betas):
            gammas = gammas.unsqueeze(2).unsqueeze(3).expand_as(x)
            betas = betas.unsqueeze(2).unsqueeze(3).expand_as(x)
            return (gammas * x) + betas

    class FiLMedResBlock(nn.Module):
        def __init__(self, in_dim, out_dim=None, with_residual=True, with_batchnorm=True,
                     with_cond=(True, True), kernel_size=3, with_input_proj=1,
                     num_cond_maps=2):
            super().__init__()
            out_dim = out_dim or in_dim
            self.with_residual, self.with_batchnorm = with_residual, with_batchnorm
            self.input_proj = nn.Conv2d(in_dim + num_cond_maps, in_dim,
                                        kernel_size=with_input_proj, padding=with_input_proj // 2)
            self.conv1 = nn.Conv2d(in_dim, out_dim, kernel_size=kernel_size,
                                   padding=kernel_size // 2)
            self.bn1 = nn.BatchNorm2d(out_dim, affine=False)
            self.film = FiLM()

        def forward(self, x, gammas, betas, extra_channels=None):
            x = lib.cat([x, extra_channels], 1)
            x = F.relu(self.input_proj(x))
            out = x
            x = self.conv1(x)
            x = self.bn1(x)
            x = self.film(x, gammas, betas)
            x = F.relu(x)
            if self.with_residual:
                x = out + x
            return x

    class FiLMedNet(nn.Module):
        def __init__(self, module_dim=dim, num_modules=n_mod, classifier_fc_layers=(hid,),
                     num_answers=10, gamma_baseshift=1.):
            super().__init__()
            self.num_modules, self.module_dim = num_modules, module_dim
            self.gamma_baseshift = gamma_baseshift
            self.stem = nn.Sequential(nn.Conv2d(3, module_dim, 3, stride=2, padding=1),
                                      nn.BatchNorm2d(module_dim), nn.ReLU(inplace=True))
            self.coords = coord_map((size // 2, size // 2))
            self.function_modules = nn.ModuleList(
                [FiLMedResBlock(module_dim) for _ in range(num_modules)])
            self.classifier = nn.Sequential(
                nn.Conv2d(module_dim + 2, module_dim * 2, kernel_size=1),
                nn.BatchNorm2d(module_dim * 2), nn.ReLU(inplace=True), nn.MaxPool2d(2, 2),
                nn.Flatten(), nn.Linear(module_dim * 2 * (size // 4) ** 2, classifier_fc_layers[0]),
                nn.ReLU(inplace=True), nn.Linear(classifier_fc_layers[0], num_answers))

        def forward(self, x, film):
            gammas, betas = lib.split(film[:, :, :2 * self.module_dim], self.module_dim, dim=-1)
            gammas = gammas + self.gamma_baseshift
            feats = self.stem(x)
            batch_coords = self.coords.unsqueeze(0).expand(
                lib.Size((x.size(0), *self.coords.size())))
            for fn_num in range(self.num_modules):
                feats = self.function_modules[fn_num](feats, gammas[:, fn_num, :],
                                                      betas[:, fn_num, :], batch_coords)
            feats = lib.cat([feats, batch_coords], 1)
            return self.classifier(feats)

    class Both(nn.Module):      # (train_loop's program_generator and execution_engine)
        def __init__(self):
            super().__init__()
            self.program_generator, self.execution_engine = FiLMGen(), FiLMedNet()

    model = Both()
    opt = lib.optim.Adam(model.parameters(), lr=3e-4, weight_decay=1e-5)
    rng = np.random.RandomState(1)
    lens = rng.randint(qlen // 2, qlen, batch)
    q = rng.randint(1, vocab, (batch, qlen)) * (np.arange(qlen)[None] < lens[:, None])
    questions, answers = lib.tensor(q), lib.tensor(rng.randint(0, 10, batch))
    feats = lib.tensor(rng.randn(batch, 3, size, size).astype(np.float32)).to(
        lib.get_default_dtype())        # (the tests run it in float64)
    loss_fn = nn.CrossEntropyLoss()

    def loss():
        programs_pred = model.program_generator(questions.clone())
        scores = model.execution_engine(feats, programs_pred)
        return loss_fn(scores, answers)
    return model, opt, loss


def _convmixer(lib, small):
    # (convmixer.py's ConvMixer and Residual; train/train_cifar.py's AdamW, clip_grad_norm_
    # and its np.interp one-cycle schedule set into param_groups[0] before each step)
    nn = lib.nn
    batch, size, dim, depth, kernel, patch = (2, 8, 8, 1, 3, 2) if small else (
        16, 32, 64, 3, 5, 2)

    class Residual(nn.Module):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def forward(self, x):
            return self.fn(x) + x

    def ConvMixer(dim, depth, kernel_size=9, patch_size=7, n_classes=1000):
        return nn.Sequential(
            nn.Conv2d(3, dim, kernel_size=patch_size, stride=patch_size),
            nn.GELU(),
            nn.BatchNorm2d(dim),
            *[nn.Sequential(
                Residual(nn.Sequential(
                    nn.Conv2d(dim, dim, kernel_size, groups=dim, padding="same"),
                    nn.GELU(),
                    nn.BatchNorm2d(dim)
                )),
                nn.Conv2d(dim, dim, kernel_size=1),
                nn.GELU(),
                nn.BatchNorm2d(dim)
            ) for i in range(depth)],
            nn.AdaptiveAvgPool2d((1, 1)),
            nn.Flatten(),
            nn.Linear(dim, n_classes)
        )

    model = ConvMixer(dim, depth, kernel_size=kernel, patch_size=patch, n_classes=10)
    epochs, lr_max, iters = 25, 0.01, 100
    lr_schedule = lambda t: np.interp([t], [0, epochs * 2 // 5, epochs * 4 // 5, epochs],
                                      [0, lr_max, lr_max / 20.0, 0])[0]
    opt = lib.optim.AdamW(model.parameters(), lr=lr_max, weight_decay=0.01)
    criterion = nn.CrossEntropyLoss()
    images, labels = lib.randn(batch, 3, size, size), lib.randint(0, 10, (batch,))
    it = [0]

    def loss():
        lr = lr_schedule(1 + it[0] / iters)
        opt.param_groups[0].update(lr=lr)
        it[0] += 1
        return criterion(model(images), labels)
    return model, opt, loss, {"clip": 1.0}


def _abmil(lib, small):
    # (AttentionDeepMIL/model.py's GatedAttention and calculate_objective; main.py's Adam;
    # MNIST-bag-sized 28x28 instances, four bags whose losses are summed in one step)
    nn, F = lib.nn, lib.nn.functional
    sizes, M, L = ((3, 5), 32, 16) if small else ((8, 12, 10, 14), 500, 128)

    class GatedAttention(nn.Module):
        def __init__(self):
            super(GatedAttention, self).__init__()
            self.M = M
            self.L = L
            self.ATTENTION_BRANCHES = 1
            self.feature_extractor_part1 = nn.Sequential(
                nn.Conv2d(1, 20, kernel_size=5), nn.ReLU(), nn.MaxPool2d(2, stride=2),
                nn.Conv2d(20, 50, kernel_size=5), nn.ReLU(), nn.MaxPool2d(2, stride=2))
            self.feature_extractor_part2 = nn.Sequential(nn.Linear(50 * 4 * 4, self.M), nn.ReLU())
            self.attention_V = nn.Sequential(nn.Linear(self.M, self.L), nn.Tanh())
            self.attention_U = nn.Sequential(nn.Linear(self.M, self.L), nn.Sigmoid())
            self.attention_w = nn.Linear(self.L, self.ATTENTION_BRANCHES)
            self.classifier = nn.Sequential(
                nn.Linear(self.M * self.ATTENTION_BRANCHES, 1), nn.Sigmoid())

        def forward(self, x):
            x = x.squeeze(0)
            H = self.feature_extractor_part1(x)
            H = H.view(-1, 50 * 4 * 4)
            H = self.feature_extractor_part2(H)  # KxM
            A_V = self.attention_V(H)  # KxL
            A_U = self.attention_U(H)  # KxL
            A = self.attention_w(A_V * A_U)  # element wise multiplication # KxATTENTION_BRANCHES
            A = lib.transpose(A, 1, 0)  # ATTENTION_BRANCHESxK
            A = F.softmax(A, dim=1)  # softmax over K
            Z = lib.mm(A, H)  # ATTENTION_BRANCHESxM
            Y_prob = self.classifier(Z)
            Y_hat = lib.ge(Y_prob, 0.5).float()
            return Y_prob, Y_hat, A

        def calculate_objective(self, X, Y):
            Y = Y.float()
            Y_prob, _, A = self.forward(X)
            Y_prob = lib.clamp(Y_prob, min=1e-5, max=1. - 1e-5)
            neg_log_likelihood = -1. * (Y * lib.log(Y_prob) + (1. - Y) * lib.log(1. - Y_prob))
            return neg_log_likelihood, A

    model = GatedAttention()
    opt = lib.optim.Adam(model.parameters(), lr=0.0005, betas=(0.9, 0.999), weight_decay=10e-5)
    rng = np.random.RandomState(1)
    bags = [(lib.tensor(rng.rand(1, k, 1, 28, 28).astype(np.float32)),
             lib.tensor([float(rng.randint(0, 2))])) for k in sizes]

    def loss():
        total = 0
        for data, bag_label in bags:
            l, _ = model.calculate_objective(data, bag_label)
            total = total + l
        return total.sum() / len(bags)
    return model, opt, loss


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
