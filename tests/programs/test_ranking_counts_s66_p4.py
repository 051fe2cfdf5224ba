"""Sweep 66 (p4), learning-to-rank and count-weighted programs, run with PyTorch, with llgrad
eagerly and with llgrad compiling the training step (tutorial_harness.py):

- LambdaRank-style listwise training over per-query lists with graded (tied) labels: ranks
  by a stable argsort of a stable argsort, gains 2 ** label - 1 of an int tensor, DCG
  discounts 1 / log2(rank + 2), the ideal DCG from a descending sort, the |delta NDCG| of
  each pair weighting a RankNet loss built from torch.sign of label differences, ListNet's
  softmax cross-entropy added;
- frequency-aware embedding training: torch.unique(return_inverse, return_counts) of the
  batch's ids weights each example by 1 / count of its id, bincount(minlength) keeps the
  running id counts in a long buffer.

test_integer_pow_native: `2 ** labels` (an integer tensor exponent) ran in the IR
interpreter inside compiled steps (the native lowering refused integer pow beyond x ** 0..3);
it is now square-and-multiply in native code (lowerings/ops_int_pow.py), wrapping as
PyTorch's, negative exponents included.
"""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def lambdarank(torch, env):
    nn = torch.nn
    Q, N, D = 4, 6, 5
    scorer = env.init(nn.Sequential(nn.Linear(D, 12), nn.ReLU(), nn.Linear(12, 1, bias=False)))
    opt = torch.optim.Adam(scorer.parameters(), lr=5e-3)

    def dcg(labels, ranks):
        gains = (2 ** labels - 1).float()
        return (gains / torch.log2(ranks.float() + 2)).sum(-1)

    def train_step(x, labels):
        scores = scorer(x).squeeze(-1)                                   # Q N
        with torch.no_grad():
            order = scores.argsort(dim=1, descending=True, stable=True)
            ranks = order.argsort(dim=1, stable=True)
            ideal = labels.sort(dim=1, descending=True, stable=True).values
            idcg = dcg(ideal, torch.arange(N).expand(Q, N)).clamp(min=1e-6)
            ndcg = dcg(labels, ranks) / idcg
            gains = (2 ** labels - 1).float()
            disc = 1 / torch.log2(ranks.float() + 2)
            delta = ((gains[:, :, None] - gains[:, None, :])
                     * (disc[:, :, None] - disc[:, None, :])).abs() / idcg[:, None, None]
        s_ij = torch.sign(labels[:, :, None] - labels[:, None, :])      # int64 in {-1, 0, 1}
        diff = scores[:, :, None] - scores[:, None, :]
        pair = nn.functional.softplus(-diff) * (s_ij > 0)
        ranknet = (delta * pair).sum() / (s_ij > 0).sum().clamp(min=1)
        listnet = -(labels.float().softmax(1) * scores.log_softmax(1)).sum(1).mean()
        loss = ranknet + 0.5 * listnet
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), ndcg, ranks, s_ij.dtype

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"step {it}", step(env.randn(Q, N, D), env.randint(0, 4, (Q, N))))
    env.rec("params", dict(scorer.state_dict()))


def frequency_weighted(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, D, K = 12, 6, 3

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.out = nn.Linear(D, K)
            self.register_buffer("id_counts", torch.zeros(V, dtype=torch.long))

        def forward(self, ids):
            return self.out(self.emb(ids))

    model = env.init(Model())
    opt = torch.optim.SGD(model.parameters(), lr=0.3)

    def train_step(ids, y):
        uniq, inverse, counts = torch.unique(ids, return_inverse=True, return_counts=True)
        weight = 1.0 / counts[inverse].float()
        with torch.no_grad():
            model.id_counts += torch.bincount(ids, minlength=V)
        loss = (weight * F.cross_entropy(model(ids), y, reduction="none")).sum() / len(uniq)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), uniq, counts

    step = env.step(train_step)
    for it, n in enumerate((10, 10, 7)):
        env.rec(f"step {it}", step(env.randint(0, V, (n,)), env.randint(0, K, (n,))))
    env.rec("counts", model.id_counts)
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {
    "lambdarank": lambdarank,
    "frequency_weighted": frequency_weighted,
}
FAST = ("frequency_weighted",)


@pytest.mark.parametrize("name,program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8"])
def test_integer_pow_native(dtype):
    """Integer pow in a compiled function: native code (no interpreted kernel), torch's
    values: wrapped products, 0 ** 0 == 1, negative exponents of 1, -1 and others."""
    rng = np.random.default_rng(3)
    base = rng.integers(-4, 5, 40)
    exp = np.concatenate([rng.integers(-3, 70, 36), [0, -1, -2, 63]])
    if dtype == "uint8":
        base, exp = np.abs(base), np.abs(exp)

    def f(lib, b, e):
        return b ** e, 2 ** e.clamp(min=0), (b * 3) ** 7, b.pow(e.abs()) - 1

    want = f(torch, *(torch.tensor(a).to(getattr(torch, dtype)) for a in (base, exp)))
    args = [llgrad.tensor(a).to(getattr(llgrad, dtype)) for a in (base, exp)]
    cf = llgrad.compile(lambda b, e: f(llgrad, b, e))
    for _ in range(2):          # trace, then the native kernel
        got = cf(*args)
    cf.wait()
    kernels = [k for e in cf.entries for k in e.kernels.values()]
    assert kernels and not any(isinstance(k, str) for k in kernels), kernels
    for g, w in zip(got, want):
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        np.testing.assert_array_equal(g.numpy(), w.numpy())
