"""Sweep 17b (H), part 1: decoding from a hand-written decoder with a KV cache: batched beam
search (topk over flattened beam scores, floor division, index_select reordering of the cache)
and top-p sampling with a repetition penalty (gather / scatter_, sort, cumsum, multinomial),
eager and compiled; the sampler takes the generator torch.manual_seed returns as an argument,
as sampling helpers do. Run with PyTorch, with llgrad eagerly and compiled
(tutorial_harness.py)."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

import llgrad  # noqa: E402

pytestmark = pytest.mark.torch


def gen(torch, env):
    nn = torch.nn
    F = nn.functional
    V, D, T = 13, 8, 12

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.pos = nn.Embedding(T, D)
            self.qkv = nn.Linear(D, 3 * D)
            self.o = nn.Linear(D, D)
            self.head = nn.Linear(D, V)

        def forward(self, idx, cache=None):
            Bn, L = idx.shape
            start = 0 if cache is None else cache[0].shape[1]
            x = self.emb(idx) + self.pos(torch.arange(start, start + L))
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            if cache is not None:
                k = torch.cat([cache[0], k], 1)
                v = torch.cat([cache[1], v], 1)
            att = F.scaled_dot_product_attention(q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1),
                                                 is_causal=cache is None).squeeze(1)
            return self.head(x + self.o(att)), (k, v)

    model = env.init(LM())
    model.eval()
    prompt = env.randint(0, V, (2, 3))

    def beam_search(prompt, width, steps):
        Bn = prompt.size(0)
        seqs = prompt.repeat_interleave(width, dim=0)
        scores = torch.zeros(Bn, width)
        scores[:, 1:] = -1e9
        logits, cache = model(seqs)
        for s in range(steps):
            lp = F.log_softmax(logits[:, -1], dim=-1).view(Bn, width, V)
            cand = (scores.unsqueeze(-1) + lp).view(Bn, -1)
            top, ix = cand.topk(width, dim=-1)
            beam = torch.div(ix, V, rounding_mode="floor")
            tok = ix % V
            base = (torch.arange(Bn) * width).unsqueeze(1)
            sel = (base + beam).view(-1)
            seqs = torch.cat([seqs.index_select(0, sel), tok.view(-1, 1)], dim=1)
            cache = tuple(c.index_select(0, sel) for c in cache)
            scores = top
            logits, cache = model(tok.view(-1, 1), cache)
        return seqs.view(Bn, width, -1), scores

    def sample(prompt, steps, g, top_p=0.8, penalty=1.3):
        seqs = prompt
        logits, cache = model(seqs)
        for s in range(steps):
            lg = logits[:, -1].clone()
            prev = torch.gather(lg, 1, seqs)
            prev = torch.where(prev < 0, prev * penalty, prev / penalty)
            lg.scatter_(1, seqs, prev)
            srt, idx = torch.sort(lg, descending=True)
            cum = torch.cumsum(F.softmax(srt, dim=-1), dim=-1)
            remove = cum > top_p
            remove[..., 1:] = remove[..., :-1].clone()
            remove[..., 0] = False
            rm = remove.scatter(1, idx, remove)
            lg = lg.masked_fill(rm, float("-inf"))
            nxt = torch.multinomial(F.softmax(lg / 0.7, dim=-1), 1)
            seqs = torch.cat([seqs, nxt], 1)
            logits, cache = model(nxt, cache)
        return seqs

    with torch.no_grad():
        seqs, scores = beam_search(prompt, 3, 5)
        env.rec("beam", seqs)
        env.rec("beam scores", scores)
        g = torch.manual_seed(123)
        env.rec("topp", sample(prompt, 6, g))
    bs = env.step(beam_search)
    sp = env.step(sample)
    with torch.no_grad():
        seqs, scores = bs(prompt, 3, 5)
        env.rec("beam c", seqs)
        env.rec("beam scores c", scores)
        g = torch.manual_seed(123)
        env.rec("topp c", sp(prompt, 6, g))
        g = torch.manual_seed(123)
        env.rec("topp c2", sp(prompt, 6, g))



def test_beam_search_and_top_p_sampling():
    run_tutorial(gen)


def test_default_generator_as_an_argument_is_compiled():
    """The default generator passed in (g = manual_seed(s); f(x, g)) is no changed input: the
    traced run is kept as compiled code, and calls draw what eager calls draw."""
    def draw(x, g):
        return x + llgrad.rand(3), llgrad.randn(2, 3).sum(0)

    cf = llgrad.compile(draw)
    x = llgrad.ones(2, 3)
    want, got = [], []
    g = llgrad.manual_seed(5)
    for _ in range(3):
        want.append([t.numpy() for t in draw(x, g)])
    g = llgrad.manual_seed(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            got.append([t.numpy() for t in cf(x, g)])
    assert len(cf.entries) == 1 and cf.n_traces == 1      # (the first call's trace kept)
    for w, o in zip(want, got):
        for a, b in zip(w, o):
            np.testing.assert_array_equal(b, a)
    torch.manual_seed(5)
    np.testing.assert_array_equal(want[0][0], (torch.ones(2, 3) + torch.rand(3)).numpy())


def test_own_generator_as_an_argument_still_runs_eagerly():
    """Another generator's draws cannot be replayed: that call runs eagerly, with a warning,
    and gives eager's numbers."""
    cf = llgrad.compile(lambda x, g: x + llgrad.rand(3, generator=g))
    g1, g2 = llgrad.Generator().manual_seed(3), llgrad.Generator().manual_seed(3)
    with pytest.warns(UserWarning, match="llgrad.Generator object"):
        a = cf(llgrad.zeros(3), g1)
    np.testing.assert_array_equal(a.numpy(), llgrad.rand(3, generator=g2).numpy())
    np.testing.assert_array_equal(cf(llgrad.zeros(3), g1).numpy(),
                                  llgrad.rand(3, generator=g2).numpy())


def test_own_generators_state_read_between_calls_follows_eager():
    """Only the default generator is guarded by identity: another generator reseeded between
    calls is read as it is now (its initial_seed() in the result), as eager reads it."""
    def f(x, g):
        return x * g.initial_seed()
    cf = llgrad.compile(f)
    x, g = llgrad.ones(2), llgrad.Generator()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in (5, 7, 5, 11):
            g.manual_seed(seed)
            np.testing.assert_array_equal(cf(x, g).numpy(), f(x, g).numpy())
