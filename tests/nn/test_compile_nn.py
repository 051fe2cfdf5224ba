"""One training step per family of issue 21's nn.functional / nn under llgrad.compile: the
same losses and parameters as eager over a few steps, every graph native code."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F


class Acts(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 8)
        self.acts = nn.ModuleList([nn.ELU(0.7), nn.SELU(), nn.CELU(1.5), nn.Hardtanh(-0.5, 0.5),
                                   nn.ReLU6(), nn.LogSigmoid(), nn.Mish(), nn.Hardswish(),
                                   nn.Hardsigmoid(), nn.Softsign(), nn.Tanhshrink(),
                                   nn.Threshold(0.1, 0.5), nn.LeakyReLU(0.1), nn.PReLU(),
                                   nn.Softshrink(0.2)])
        self.glu = nn.GLU()
        self.out = nn.Linear(4, 3)

    def forward(self, x):
        h = self.lin(x)
        h = sum(a(h) for a in self.acts) + F.elu(h * 1, inplace=True)
        return self.out(self.glu(h))


class Losses(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 4)

    def forward(self, x, y):
        h = self.lin(x)
        p = h.sigmoid()
        return (nn.L1Loss()(h, y) + nn.SmoothL1Loss(beta=0.5)(h, y) + nn.HuberLoss()(h, y)
                + nn.BCELoss(weight=llgrad.ones(4) * 0.5)(p, y.sigmoid())
                + nn.KLDivLoss(reduction="batchmean")(h.log_softmax(1), y.softmax(1)))


class Pads(nn.Module):
    def __init__(self):
        super().__init__()
        self.pads = nn.ModuleList([nn.ZeroPad2d((1, 0, 2, 1)), nn.ConstantPad2d(1, 0.5),
                                   nn.ReflectionPad2d(1), nn.ReplicationPad2d((2, 1, 0, 1)),
                                   nn.CircularPad2d(1)])
        self.conv = nn.Conv2d(2, 3, 3)

    def forward(self, x):
        return sum(self.conv(p(x)).mean((2, 3)) for p in self.pads)


class Pools(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.pools = nn.ModuleList([nn.AvgPool2d(2), nn.AvgPool2d(3, 2, 1, ceil_mode=True,
                                                                  count_include_pad=False),
                                    nn.AdaptiveAvgPool2d((2, 3)), nn.AdaptiveAvgPool2d(1),
                                    nn.AdaptiveMaxPool2d((3, 2))])

    def forward(self, x):
        h = self.conv(x)
        h1 = F.avg_pool1d(h.flatten(2), 4) + F.adaptive_avg_pool1d(h.flatten(2), 6)
        return sum(p(h).flatten(1).sum(1, keepdim=True) for p in self.pools) + h1.mean(2)


class Norms(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.gn = nn.GroupNorm(2, 4)
        self.inorm = nn.InstanceNorm2d(4, affine=True, track_running_stats=True)
        self.rms = nn.RMSNorm(5)

    def forward(self, x):
        h = self.conv(x)
        h = self.gn(h) + self.inorm(h) + self.rms(h)
        return F.normalize(h.flatten(1)) * 3


class Interp(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.up = nn.ModuleList([nn.Upsample(scale_factor=2), nn.Upsample(size=(7, 9),
                                                                           mode="bilinear"),
                                 nn.UpsamplingBilinear2d(scale_factor=1.5)])

    def forward(self, x):
        h = self.conv(x)
        return sum(u(h).mean((2, 3)) for u in self.up)


class Convs(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(2, 4, 3, padding=1, groups=2)
        self.t1 = nn.ConvTranspose1d(4, 2, 3, stride=2, output_padding=1)
        self.t2 = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1, groups=1)

    def forward(self, x):
        h = self.t2(x).mean((2, 3))
        s = self.t1(self.c1(x.flatten(2)[:, :, :10])).mean(2)
        return h + s.sum(1, keepdim=True)


class Dist(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Linear(6, 5)

    def forward(self, x, y):
        a, b = self.emb(x), self.emb(y)
        return nn.CosineSimilarity()(a, b).mean() - nn.PairwiseDistance()(a, b).mean() \
            + F.pairwise_distance(a, b, p=1).mean()


def _data(family, rng):
    img = rng.standard_normal((4, 2, 5, 5))
    x, y = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    return {"acts": (x,), "losses": (x, y[:, :4]), "dist": (x, y)}.get(family, (img,))


FAMILIES = {"acts": Acts, "losses": Losses, "pads": Pads, "pools": Pools, "norms": Norms,
            "interp": Interp, "convs": Convs, "dist": Dist}


def _loss(model, family, *xs):
    out = model(*xs)
    if family in ("losses", "dist"):
        return out
    return F.cross_entropy(out, llgrad.tensor(np.arange(out.shape[0]) % out.shape[1]))


def step(model, opt, family, *xs):
    opt.zero_grad()
    loss = _loss(model, family, *xs)
    loss.backward()
    opt.step()
    return loss.detach()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_compiled_training_step_equals_eager(family):
    rng = np.random.default_rng(0)
    batches = [[llgrad.tensor(a.astype(np.float32)) for a in _data(family, rng)]
               for _ in range(3)]
    runs = []
    for compiled in (False, True):
        llgrad.manual_seed(11)
        model = FAMILIES[family]()
        opt = llgrad.optim.SGD(model.parameters(), lr=0.05)
        fn = llgrad.compile(step, fullgraph=True) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error")       # no eager fallback, no interpreted graph
            losses = [fn(model, opt, family, *xs).item() for xs in batches]
        runs.append((losses, {k: v.detach().numpy().copy() for k, v in
                              model.state_dict().items()}, fn))
    (want, wstate, _), (got, gstate, cf) = runs
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
    for k in wstate:
        np.testing.assert_allclose(gstate[k], wstate[k], rtol=2e-5, atol=1e-6, err_msg=k)
    assert cf.n_traces <= 2          # (the first step makes the .grad tensors)
    assert all(not isinstance(k, str) for e in cf.entries for k in e.kernels.values())
