"""Training steps of models nobody tuned llgrad for when they were added
(MobileNet-style depthwise convs, a small ResNet with BatchNorm, an MLP-Mixer, a VAE with its
reparameterisation draw, an EmbeddingBag text classifier, a 1-D conv net with LayerNorm, a
conv autoencoder with ConvTranspose2d, nn.TransformerEncoder with dropout, a 2-layer LSTM
language model; untuned_models_more.py's ConvNeXt-style, EfficientNet-style and DCGAN
steps; untuned_models_third.py's ViT, GPT, U-Net, GRU seq2seq, tabular net and GCN;
untuned_models_fourth.py's Swin, WaveNet, MoE, PointNet, RealNVP flow and GAT;
untuned_models_fifth.py's DenseNet, TCN, VQ-VAE, SimCLR, DDPM and DeepFM;
untuned_models_sixth.py's ResNet-18, char-GRU, attention U-Net, Perceiver, PINN and triplet
Siamese net; untuned_models_seventh.py's DLRM, spatial transformer, DQN, tiny NeRF, BiLSTM-CRF
and nn.Transformer translation model; untuned_models_eighth.py's BERT masked LM, Conformer,
CLIP-mini, DeepSpeech2-style CTC model, RK4 neural ODE and YOLO-style detector;
untuned_models_ninth.py's CapsNet, DCN-V2, KAN, mixture density net, linear-attention LM and
Mamba LM; untuned_models_tenth.py's fast style transfer net, Set Transformer, TabNet, word2vec
skip-gram and ESPCN; the last four sets have runners of their own too), each a whole
step (zero_grad, forward, loss, backward, the optimizer; Adam unless said otherwise): torch
eager, llgrad eager and llgrad compiled, 1 thread each, seeded alike (llgrad draws PyTorch's
numbers), losses after 6 steps compared. Blocks of 3 steps interleaved; medians of 7 blocks.

    python bench/untuned_models.py [name,name,...]"""
import sys
import warnings

import llgrad
import torch
import untuned_models_more
import untuned_models_third
import untuned_models_fourth
import untuned_models_fifth
import untuned_models_sixth
import untuned_models_seventh
import untuned_models_eighth
import untuned_models_ninth
import untuned_models_tenth
from measure import block_medians
from llgrad.compile.eager_builds import wait as wait_eager_builds

MORE = ("convnext", "effnet", "dcgan")      # (untuned_models_more.py)
THIRD = ("vit", "gpt", "unet", "seq2seq", "tabular", "gcn")     # (untuned_models_third.py)
FOURTH = untuned_models_fourth.NAMES     # (swin, wavenet, moe, pointnet, flow, gat)
FIFTH = untuned_models_fifth.NAMES   # (densenet, tcn, vqvae, simclr, ddpm, deepfm)
SIXTH = untuned_models_sixth.NAMES   # (resnet18, chargru, attunet, perceiver, pinn, siamese)
SEVENTH = untuned_models_seventh.NAMES  # (dlrm, stn, dqn, nerf, crf, translate)
EIGHTH = untuned_models_eighth.NAMES    # (bert, conformer, clip, ctc, node, yolo)
NINTH = untuned_models_ninth.NAMES  # (capsnet, dcn, kan, mdn, linattn, mamba)
TENTH = untuned_models_tenth.NAMES  # (style, settf, tabnet, sgns, espcn)


def build(lib, name):
    if name in MORE:
        return untuned_models_more.build(lib, name)
    if name in THIRD:
        return untuned_models_third.build(lib, name)
    if name in FOURTH:
        return untuned_models_fourth.build(lib, name)
    if name in FIFTH:
        return untuned_models_fifth.build(lib, name)
    if name in SIXTH:
        return untuned_models_sixth.build(lib, name)
    if name in SEVENTH:
        return untuned_models_seventh.build(lib, name)
    if name in EIGHTH:
        return untuned_models_eighth.build(lib, name)
    if name in NINTH:
        return untuned_models_ninth.build(lib, name)
    if name in TENTH:
        return untuned_models_tenth.build(lib, name)
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(0)
    if name == "mobilenet":
        def dw(cin, cout, s):
            return nn.Sequential(nn.Conv2d(cin, cin, 3, s, 1, groups=cin, bias=False), nn.BatchNorm2d(cin), nn.ReLU6(),
                                 nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU6())
        m = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU6(), dw(16, 32, 1), dw(32, 64, 2), dw(64, 64, 1),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
        x, y = lib.randn(16, 3, 32, 32), lib.randint(0, 10, (16,))
        loss = lambda out, y: F.cross_entropy(out, y)
    elif name == "resnet":
        class Block(nn.Module):
            def __init__(s, c):
                super().__init__()
                s.c1 = nn.Conv2d(c, c, 3, padding=1, bias=False); s.b1 = nn.BatchNorm2d(c)
                s.c2 = nn.Conv2d(c, c, 3, padding=1, bias=False); s.b2 = nn.BatchNorm2d(c)
            def forward(s, x):
                return F.relu(x + s.b2(s.c2(F.relu(s.b1(s.c1(x))))))
        m = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), Block(32), Block(32), nn.MaxPool2d(2),
                          Block(32), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
        x, y = lib.randn(16, 3, 16, 16), lib.randint(0, 10, (16,))
        loss = lambda out, y: F.cross_entropy(out, y)
    elif name == "mixer":
        class MixerBlock(nn.Module):
            def __init__(s, p, c):
                super().__init__()
                s.n1, s.n2 = nn.LayerNorm(c), nn.LayerNorm(c)
                s.tok = nn.Sequential(nn.Linear(p, 2 * p), nn.GELU(), nn.Linear(2 * p, p))
                s.ch = nn.Sequential(nn.Linear(c, 4 * c), nn.GELU(), nn.Linear(4 * c, c))
            def forward(s, x):
                x = x + s.tok(s.n1(x).transpose(1, 2)).transpose(1, 2)
                return x + s.ch(s.n2(x))
        class Mixer(nn.Module):
            def __init__(s):
                super().__init__()
                s.patch = nn.Conv2d(3, 64, 4, 4)
                s.blocks = nn.Sequential(*[MixerBlock(64, 64) for _ in range(2)])
                s.norm, s.head = nn.LayerNorm(64), nn.Linear(64, 10)
            def forward(s, x):
                x = s.patch(x).flatten(2).transpose(1, 2)
                return s.head(s.norm(s.blocks(x)).mean(1))
        m = Mixer()
        x, y = lib.randn(16, 3, 32, 32), lib.randint(0, 10, (16,))
        loss = lambda out, y: F.cross_entropy(out, y)
    elif name == "vae":
        class VAE(nn.Module):
            def __init__(s):
                super().__init__()
                s.enc = nn.Linear(784, 256); s.mu = nn.Linear(256, 20); s.lv = nn.Linear(256, 20)
                s.dec = nn.Sequential(nn.Linear(20, 256), nn.ReLU(), nn.Linear(256, 784), nn.Sigmoid())
            def forward(s, x):
                h = F.relu(s.enc(x)); mu, lv = s.mu(h), s.lv(h)
                z = mu + lib.randn_like(mu) * lib.exp(0.5 * lv)
                return s.dec(z), mu, lv
        m = VAE()
        x, y = lib.rand(64, 784), None
        def loss(out, y):
            r, mu, lv = out
            return F.binary_cross_entropy(r, x, reduction="sum") - 0.5 * lib.sum(1 + lv - mu.pow(2) - lv.exp())
    elif name == "textcls":
        class TC(nn.Module):
            def __init__(s):
                super().__init__()
                s.emb = nn.EmbeddingBag(5000, 64, mode="mean"); s.fc = nn.Linear(64, 4)
            def forward(s, text, offsets):
                return s.fc(s.emb(text, offsets))
        m = TC()
        x = (lib.randint(0, 5000, (640,)), lib.arange(0, 640, 10))
        y = lib.randint(0, 4, (64,))
        loss = lambda out, y: F.cross_entropy(out, y)
    elif name == "conv1d":
        class C1(nn.Module):
            def __init__(s):
                super().__init__()
                s.c1 = nn.Conv1d(32, 64, 5, padding=2); s.n = nn.LayerNorm(64); s.c2 = nn.Conv1d(64, 64, 3, padding=1)
                s.fc = nn.Linear(64, 5)
            def forward(s, x):
                h = F.gelu(s.c1(x))
                h = s.n(h.transpose(1, 2)).transpose(1, 2)
                h = F.gelu(s.c2(h)) + h
                return s.fc(h.amax(-1))
        m = C1()
        x, y = lib.randn(32, 32, 100), lib.randint(0, 5, (32,))
        loss = lambda out, y: F.cross_entropy(out, y)
    elif name == "convae":
        m = nn.Sequential(nn.Conv2d(1, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(),
                          nn.ConvTranspose2d(32, 16, 3, 2, 1, output_padding=1), nn.ReLU(),
                          nn.ConvTranspose2d(16, 1, 3, 2, 1, output_padding=1), nn.Sigmoid())
        x = lib.rand(32, 1, 28, 28); y = x
        loss = lambda out, y: F.mse_loss(out, y)
    elif name == "tfenc":
        layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, batch_first=True)
        class T(nn.Module):
            def __init__(s):
                super().__init__()
                s.emb = nn.Embedding(1000, 64); s.enc = nn.TransformerEncoder(layer, 2); s.fc = nn.Linear(64, 2)
            def forward(s, t):
                return s.fc(s.enc(s.emb(t)).mean(1))
        m = T()
        x, y = lib.randint(0, 1000, (16, 32)), lib.randint(0, 2, (16,))
        loss = lambda out, y: F.cross_entropy(out, y)
    elif name == "lstm_lm":
        class LM(nn.Module):
            def __init__(s):
                super().__init__()
                s.emb = nn.Embedding(500, 64); s.rnn = nn.LSTM(64, 128, 2, batch_first=True); s.fc = nn.Linear(128, 500)
            def forward(s, t):
                o, _ = s.rnn(s.emb(t))
                return s.fc(o)
        m = LM()
        x, y = lib.randint(0, 500, (16, 20)), lib.randint(0, 500, (16, 20))
        loss = lambda out, y: F.cross_entropy(out.reshape(-1, 500), y.reshape(-1))
    opt = lib.optim.Adam(m.parameters(), lr=1e-3)
    xs = x if isinstance(x, tuple) else (x,)
    def step():
        opt.zero_grad()
        out = m(*xs)
        l = loss(out, y)
        l.backward()
        opt.step()
        return l
    return m, step

NAMES = ["mobilenet", "resnet", "mixer", "vae", "textcls", "conv1d", "convae", "tfenc", "lstm_lm",
         *MORE, *THIRD, *FOURTH, *FIFTH, *SIXTH, *SEVENTH, *EIGHTH, *NINTH, *TENTH]


def main(names):
    torch.set_num_threads(1)
    llgrad.set_num_threads(1)
    for name in names:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            fns, losses = {}, {}
            for k, lib, wrap in (("torch", torch, None), ("llgrad eager", llgrad, None),
                                 ("llgrad compiled", llgrad, llgrad.compile)):
                step = build(lib, name)[1]      # (seeded: each run draws from the same state)
                fns[k] = step = wrap(step) if wrap else step
                losses[k] = [float(step()) for _ in range(6)]
            fns["llgrad compiled"].wait()
            wait_eager_builds()     # (an eager kernel still building would be timed too)
        notes = sorted({str(x.message)[:150] for x in w if "llgrad" in str(x.message)})
        med = block_medians(fns)
        t, e, c = med["torch"], med["llgrad eager"], med["llgrad compiled"]
        print(f"{name:10s} torch {t:7.2f} ms  llgrad eager {e:7.2f} ({e / t:.2f}x)  "
              f"compiled {c:7.2f} ({c / t:.2f}x)  loss after 6 steps: |eager - torch| "
              f"{abs(losses['llgrad eager'][-1] - losses['torch'][-1]):.1e}, |compiled - "
              f"torch| {abs(losses['llgrad compiled'][-1] - losses['torch'][-1]):.1e}",
              flush=True)
        for n in notes:
            print("    ", n)


if __name__ == "__main__":
    chosen = sys.argv[1].split(",") if len(sys.argv) > 1 else NAMES
    if sys.argv[1:2] in (["-h"], ["--help"]) or set(chosen) - set(NAMES):
        sys.exit(__doc__ + f"\n\nmodels: {', '.join(NAMES)}" + ("" if sys.argv[1:2] in
                 (["-h"], ["--help"]) else f"\nunknown: {', '.join(set(chosen) - set(NAMES))}"))
    main(chosen)
