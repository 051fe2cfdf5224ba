"""Sweep of ~150 common ops and functionals at realistic sizes, llgrad eager beside torch
eager, forward (`fwd`) and forward + backward of the output's sum (`bwd`), to find the
pathological ones (an op 5-100x slower than torch: a Python loop, a needless copy, an
O(n^2) algorithm, a NumPy call slow for the layout).

    LLGRAD_COMPILE=sync python bench/eager_op_sweep.py [--quick] [--filter SUBSTR]
        [--repeat 7] [--block-ms 20] [--top N] [--check]

Both pinned to one thread (LLGRAD_NUM_THREADS=1, torch.set_num_threads(1)); each case's
time is process CPU time (time.process_time: the machine may be shared) per call over a
block of calls sized to about block-ms, llgrad and torch blocks interleaved, median of
`repeat`. Prints a table sorted by ratio llgrad / torch, worst first. `--quick`: 3 repeats
of 5 ms blocks. `--check`: no timing; prints each case whose output or input gradients
differ from torch's (dtype, shape, or values beyond rtol 1e-4) or that raises.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("LLGRAD_NUM_THREADS", "1")
os.environ.setdefault("LLGRAD_COMPILE", "sync")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import llgrad  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)
R = np.random.RandomState(0)


def rn(*s):
    return R.randn(*s).astype(np.float32)


def ri(hi, *s):
    return R.randint(0, hi, size=s).astype(np.int64)


# shared inputs (numpy), made once so both libraries see the same values
A = rn(64, 256); B = rn(64, 256); P = np.abs(rn(64, 256)) + 0.1; M = rn(256, 128)
IMG = rn(8, 64, 32, 32); SEQ = rn(32, 128, 512); SEQS = rn(32, 128, 64)
W2 = rn(64, 64, 3, 3) * 0.05; W1 = rn(64, 64, 5) * 0.05; S1 = rn(8, 64, 256)
BA = rn(32, 64, 128); BB = rn(32, 128, 64); MASK = R.rand(64, 256) > 0.5
IDX = ri(64, 200); IDX2 = ri(256, 64, 32); TGT = ri(256, 64); EMB = rn(10000, 128)
TOK = ri(10000, 32, 64); GI = ri(64, 32, 128, 8); CE_SEQ = ri(64, 4096); CE_4D = ri(64, 8, 32, 32)
CTC_T = ri(19, 8, 10) + 1; TRI = rn(128, 128); PROB = 1 / (1 + np.exp(-A))
CASES = []


def case(name, bwd=True):
    def deco(make):
        CASES.append((name, make, bwd))
        return make
    return deco


def un(name, f, x=A, bwd=True):
    case(name, bwd)(lambda L, T: (lambda t=T(x): lambda: f(L, t))())


for _n, _f, _x in [
        ("exp", lambda L, t: t.exp(), A), ("log", lambda L, t: t.log(), P),
        ("sqrt", lambda L, t: t.sqrt(), P), ("rsqrt", lambda L, t: t.rsqrt(), P),
        ("tanh", lambda L, t: t.tanh(), A), ("sigmoid", lambda L, t: t.sigmoid(), A),
        ("sin", lambda L, t: t.sin(), A), ("abs", lambda L, t: t.abs(), A),
        ("relu", lambda L, t: L.relu(t), A), ("gelu", lambda L, t: L.nn.functional.gelu(t), A),
        ("gelu_tanh", lambda L, t: L.nn.functional.gelu(t, approximate="tanh"), A),
        ("silu", lambda L, t: L.nn.functional.silu(t), A),
        ("mish", lambda L, t: L.nn.functional.mish(t), A),
        ("softplus", lambda L, t: L.nn.functional.softplus(t), A),
        ("elu", lambda L, t: L.nn.functional.elu(t), A),
        ("leaky_relu", lambda L, t: L.nn.functional.leaky_relu(t, 0.1), A),
        ("hardswish", lambda L, t: L.nn.functional.hardswish(t), A),
        ("erf", lambda L, t: t.erf(), A), ("pow2", lambda L, t: t ** 2, A),
        ("pow_frac", lambda L, t: t ** 1.5, P), ("clamp", lambda L, t: t.clamp(-0.5, 0.5), A),
        ("neg", lambda L, t: -t, A), ("reciprocal", lambda L, t: t.reciprocal(), P),
        ("square", lambda L, t: t.square(), A), ("log1p", lambda L, t: t.log1p(), P),
        ("img_relu", lambda L, t: L.relu(t), IMG), ("seq_gelu", lambda L, t: L.nn.functional.gelu(t), SEQ),
        ("seq_add_scalar", lambda L, t: t * 0.5 + 1.0, SEQ),
        ("logsigmoid", lambda L, t: L.nn.functional.logsigmoid(t), A),
        ("hardtanh", lambda L, t: L.nn.functional.hardtanh(t), A)]:
    un(_n, _f, _x)


def bi(name, f, x=A, y=B):
    case(name)(lambda L, T: (lambda a=T(x), b=T(y): lambda: f(L, a, b))())


for _n, _f, _x, _y in [
        ("add", lambda L, a, b: a + b, A, B), ("mul", lambda L, a, b: a * b, A, B),
        ("div", lambda L, a, b: a / b, A, P), ("sub", lambda L, a, b: a - b, A, B),
        ("add_bcast_row", lambda L, a, b: a + b, A, B[0]), ("mul_bcast_col", lambda L, a, b: a * b, A, B[:, :1]),
        ("img_bias_add", lambda L, a, b: a + b, IMG, rn(64, 1, 1)),
        ("seq_mul_bcast", lambda L, a, b: a * b, SEQ, rn(512)),
        ("maximum", lambda L, a, b: L.maximum(a, b), A, B), ("pow_tt", lambda L, a, b: a ** b, P, B),
        ("atan2", lambda L, a, b: L.atan2(a, b), A, B),
        ("lerp", lambda L, a, b: L.lerp(a, b, 0.3), A, B),
        ("matmul", lambda L, a, b: a @ b, A, M), ("linear", lambda L, a, b: L.nn.functional.linear(a, b.t()), A, M),
        ("bmm", lambda L, a, b: L.bmm(a, b), BA, BB),
        ("matmul_bcast", lambda L, a, b: a @ b, BA, BB[0]),
        ("matmul_4d", lambda L, a, b: a.view(4, 8, 64, 128) @ b.view(4, 8, 128, 64), BA, BB),
        ("einsum_bij_bjk", lambda L, a, b: L.einsum("bij,bjk->bik", a, b), BA, BB),
        ("einsum_attn", lambda L, a, b: L.einsum("bhqd,bhkd->bhqk", a, b), rn(4, 8, 64, 32), rn(4, 8, 64, 32)),
        ("einsum_outer", lambda L, a, b: L.einsum("i,j->ij", a, b), A[0], B[0]),
        ("einsum_trace_sum", lambda L, a, b: L.einsum("ij,ij->i", a, b), A, B),
        ("where", lambda L, a, b: L.where(a > 0, a, b), A, B),
        ("cat0", lambda L, a, b: L.cat([a, b], 0), A, B), ("cat1", lambda L, a, b: L.cat([a, b], 1), A, B),
        ("stack", lambda L, a, b: L.stack([a, b, a], 1), A, B),
        ("mse", lambda L, a, b: L.nn.functional.mse_loss(a, b), A, B),
        ("l1", lambda L, a, b: L.nn.functional.l1_loss(a, b), A, B),
        ("smooth_l1", lambda L, a, b: L.nn.functional.smooth_l1_loss(a, b), A, B),
        ("huber", lambda L, a, b: L.nn.functional.huber_loss(a, b), A, B),
        ("cosine_sim", lambda L, a, b: L.nn.functional.cosine_similarity(a, b), A, B),
        ("kl_div", lambda L, a, b: L.nn.functional.kl_div(L.log_softmax(a, 1), L.softmax(b, 1), reduction="batchmean"), A, B),
        ("bce", lambda L, a, b: L.nn.functional.binary_cross_entropy(a.sigmoid(), b), A, PROB),
        ("bce_logits", lambda L, a, b: L.nn.functional.binary_cross_entropy_with_logits(a, b), A, PROB),
        ("cdist", lambda L, a, b: L.cdist(a, b), A, B), ("addcmul", lambda L, a, b: L.addcmul(a, a, b, value=0.5), A, B),
        ("conv2d", lambda L, a, b: L.nn.functional.conv2d(a, b, padding=1), IMG, W2),
        ("conv2d_s2", lambda L, a, b: L.nn.functional.conv2d(a, b, stride=2, padding=1), IMG, W2),
        ("conv2d_dw", lambda L, a, b: L.nn.functional.conv2d(a, b, padding=1, groups=64), IMG, rn(64, 1, 3, 3)),
        ("conv2d_1x1", lambda L, a, b: L.nn.functional.conv2d(a, b), IMG, rn(128, 64, 1, 1) * 0.1),
        ("conv1d", lambda L, a, b: L.nn.functional.conv1d(a, b, padding=2), S1, W1),
        ("conv1d_dil", lambda L, a, b: L.nn.functional.conv1d(a, b, padding=4, dilation=2), S1, W1),
        ("conv_t2d", lambda L, a, b: L.nn.functional.conv_transpose2d(a, b, stride=2, padding=1, output_padding=1), IMG, W2),
        ("conv_t1d", lambda L, a, b: L.nn.functional.conv_transpose1d(a, b, stride=2), S1, W1)]:
    bi(_n, _f, _x, _y)

for _d in (0, 1):
    for _n, _f in [("sum", lambda t, d: t.sum(d)), ("mean", lambda t, d: t.mean(d)),
                   ("max", lambda t, d: t.max(d)[0]), ("amax", lambda t, d: t.amax(d)),
                   ("std", lambda t, d: t.std(d)), ("var", lambda t, d: t.var(d)),
                   ("prod", lambda t, d: (t * 0.01 + 1).prod(d)), ("logsumexp", lambda t, d: t.logsumexp(d)),
                   ("norm", lambda t, d: t.norm(dim=d)), ("softmax", lambda t, d: t.softmax(d)),
                   ("log_softmax", lambda t, d: t.log_softmax(d)), ("cumsum", lambda t, d: t.cumsum(d)),
                   ("cumprod", lambda t, d: (t * 0.01 + 1).cumprod(d)),
                   ("argmax", lambda t, d: t.argmax(d)), ("min_d", lambda t, d: t.min(d)[0]), ("median", lambda t, d: t.median(d)[0])]:
        un(f"{_n}_d{_d}", lambda L, t, f=_f, d=_d: f(t, d), A, _n != "argmax")
for _d in (0, 1, 2):
    un(f"seq_sum_d{_d}", lambda L, t, d=_d: t.sum(d), SEQS)
    un(f"seq_softmax_d{_d}", lambda L, t, d=_d: t.softmax(d), SEQS)
un("img_mean_hw", lambda L, t: t.mean((2, 3)), IMG)
un("seq_softmax_big", lambda L, t: t.softmax(-1), SEQ)
un("sum_all", lambda L, t: t.sum())
un("sort", lambda L, t: t.sort(1)[0]); un("sort_d0", lambda L, t: t.sort(0)[0])
un("topk", lambda L, t: t.topk(10, 1)[0]); un("argsort", lambda L, t: t.argsort(1), A, False)
un("kthvalue", lambda L, t: t.kthvalue(5, 1)[0])
un("tril", lambda L, t: t.tril(), TRI); un("triu", lambda L, t: t.triu(1), TRI)
un("permute_contig", lambda L, t: t.permute(0, 2, 3, 1).contiguous(), IMG)
un("transpose_contig", lambda L, t: t.transpose(1, 2).contiguous(), SEQ)
un("split", lambda L, t: L.cat([s * 2 for s in t.split(64, 1)], 0))
un("chunk", lambda L, t: L.cat([s * 2 for s in t.chunk(4, 1)], 0))
un("unbind", lambda L, t: L.stack([s + 1 for s in t.unbind(0)]), rn(16, 64, 64))
un("flip", lambda L, t: t.flip(1)); un("roll", lambda L, t: t.roll(3, 1))
un("repeat", lambda L, t: t.repeat(2, 3)); un("expand_contig", lambda L, t: t[:, None].expand(64, 8, 256).contiguous())
un("slice_step", lambda L, t: t[:, ::2] * 2); un("narrow", lambda L, t: t.narrow(1, 10, 100) * 2)
un("masked_fill", lambda L, t: t.masked_fill(t > 0.5, 0.0))
un("dropout", lambda L, t: L.nn.functional.dropout(t, 0.1, True))
un("dropout_img", lambda L, t: L.nn.functional.dropout(t, 0.1, True), IMG)
un("layer_norm", lambda L, t: L.nn.functional.layer_norm(t, (256,)))
un("layer_norm_seq", lambda L, t: L.nn.functional.layer_norm(t, (512,)), SEQ)
un("rms_norm", lambda L, t: L.nn.functional.rms_norm(t, (512,)), SEQ)
un("group_norm", lambda L, t: L.nn.functional.group_norm(t, 8), IMG)
un("batch_norm", lambda L, t: L.nn.functional.batch_norm(t, None, None, training=True), IMG)
un("batch_norm1d", lambda L, t: L.nn.functional.batch_norm(t, None, None, training=True))
for _s, _x in (("", rn(8, 32, 32, 32)), ("_b", rn(32, 16, 16, 64))):    # (NHWC: channels_last)
    _c, _cl = _x.shape[3], (lambda t: t.permute(0, 3, 1, 2))
    bi(f"cl_conv3x3{_s}", lambda L, a, b: L.nn.functional.conv2d(_cl(a), b, padding=1), _x, rn(_c, _c, 3, 3) * 0.05)
    bi(f"cl_conv1x1{_s}", lambda L, a, b: L.nn.functional.conv2d(_cl(a), b), _x, rn(2 * _c, _c, 1, 1) * 0.1)
    bi(f"cl_batch_norm{_s}", lambda L, a, w: L.nn.functional.batch_norm(_cl(a), None, None, w, w * 0.5, training=True), _x, rn(_c))
un("instance_norm", lambda L, t: L.nn.functional.instance_norm(t), IMG)
un("normalize", lambda L, t: L.nn.functional.normalize(t, dim=1))
un("max_pool2d", lambda L, t: L.nn.functional.max_pool2d(t, 2), IMG)
un("max_pool2d_3s2", lambda L, t: L.nn.functional.max_pool2d(t, 3, 2, 1), IMG)
un("avg_pool2d", lambda L, t: L.nn.functional.avg_pool2d(t, 2), IMG)
un("avg_pool2d_3s1", lambda L, t: L.nn.functional.avg_pool2d(t, 3, 1, 1), IMG)
un("adaptive_avg_1", lambda L, t: L.nn.functional.adaptive_avg_pool2d(t, 1), IMG)
un("adaptive_avg_7", lambda L, t: L.nn.functional.adaptive_avg_pool2d(t, 7), IMG)
un("adaptive_max_4", lambda L, t: L.nn.functional.adaptive_max_pool2d(t, 4), IMG)
un("max_pool1d", lambda L, t: L.nn.functional.max_pool1d(t, 2), S1)
un("avg_pool1d", lambda L, t: L.nn.functional.avg_pool1d(t, 4), S1)
un("adaptive_avg1d", lambda L, t: L.nn.functional.adaptive_avg_pool1d(t, 10), S1)
un("interp_nearest", lambda L, t: L.nn.functional.interpolate(t, scale_factor=2), IMG)
un("interp_bilinear", lambda L, t: L.nn.functional.interpolate(t, scale_factor=2, mode="bilinear"), IMG)
un("interp_bilinear_ac", lambda L, t: L.nn.functional.interpolate(t, size=(48, 48), mode="bilinear", align_corners=True), IMG)
un("interp_bicubic", lambda L, t: L.nn.functional.interpolate(t, scale_factor=2, mode="bicubic"), IMG[:2])
un("interp_linear1d", lambda L, t: L.nn.functional.interpolate(t, scale_factor=2, mode="linear"), S1)
for _m in ("constant", "reflect", "replicate", "circular"):
    un(f"pad_{_m}", lambda L, t, m=_m: L.nn.functional.pad(t, (2, 2, 2, 2), mode=m), IMG)
un("unfold", lambda L, t: L.nn.functional.unfold(t, 3, padding=1), IMG[:2])
un("fold", lambda L, t: L.nn.functional.fold(t, (32, 32), 3, padding=1), rn(2, 576, 1024))
un("tensor_unfold", lambda L, t: t.unfold(2, 8, 4).sum(-1), S1)
un("pixel_shuffle", lambda L, t: L.nn.functional.pixel_shuffle(t, 2), IMG)
un("pixel_unshuffle", lambda L, t: L.nn.functional.pixel_unshuffle(t, 2), IMG)
un("getitem_adv", lambda L, t: t[L.tensor(IDX)])
un("getitem_adv2", lambda L, t: t[L.tensor(IDX[:64]), L.tensor(TGT)])
un("getitem_mask", lambda L, t: t[L.tensor(MASK)])
un("index_select0", lambda L, t: t.index_select(0, L.tensor(IDX)))
un("index_select1", lambda L, t: t.index_select(1, L.tensor(IDX)))
un("gather", lambda L, t: t.gather(1, L.tensor(IDX2)))
un("gather_seq", lambda L, t: t.gather(2, L.tensor(GI)), SEQS)
un("take_along", lambda L, t: L.take_along_dim(t, L.tensor(IDX2), 1))
un("scatter", lambda L, t: L.zeros(64, 256).scatter(1, L.tensor(IDX2), t[:, :32]))
un("scatter_add", lambda L, t: L.zeros(64, 256).scatter_add(1, L.tensor(IDX2), t[:, :32]))
un("scatter_reduce_amax", lambda L, t: L.zeros(64, 256).scatter_reduce(1, L.tensor(IDX2), t[:, :32], "amax"))
un("index_add", lambda L, t: L.zeros(64, 256).index_add(0, L.tensor(IDX), L.cat([t, t, t, t])[:200]))
un("index_put_acc", lambda L, t: L.zeros(64, 256).index_put((L.tensor(IDX),), L.cat([t, t, t, t])[:200], accumulate=True))
un("index_copy", lambda L, t: L.zeros(256, 256).index_copy(0, L.tensor(np.arange(64) * 4), t))
un("nonzero", lambda L, t: (t > 0).nonzero(), A, False)
un("one_hot", lambda L, t: L.nn.functional.one_hot(L.tensor(TGT.ravel()), 256).float() * t.sum())
un("embedding", lambda L, t: L.nn.functional.embedding(L.tensor(TOK), t), EMB)
un("embedding_bag", lambda L, t: L.nn.functional.embedding_bag(L.tensor(TOK), t, mode="mean"), EMB)
un("embedding_bag_sum_off", lambda L, t: L.nn.functional.embedding_bag(L.tensor(TOK.ravel()), t, L.tensor(np.arange(0, 2048, 16)), mode="sum"), EMB)
un("cross_entropy", lambda L, t: L.nn.functional.cross_entropy(t, L.tensor(TGT)))
un("cross_entropy_ls", lambda L, t: L.nn.functional.cross_entropy(t, L.tensor(TGT), label_smoothing=0.1))
un("cross_entropy_seq", lambda L, t: L.nn.functional.cross_entropy(t.view(-1, 64), L.tensor(CE_SEQ)), SEQS)
un("cross_entropy_4d", lambda L, t: L.nn.functional.cross_entropy(t, L.tensor(CE_4D)), IMG)
un("nll", lambda L, t: L.nn.functional.nll_loss(t.log_softmax(1), L.tensor(TGT)))
un("ctc", lambda L, t: L.nn.functional.ctc_loss(t.log_softmax(2), L.tensor(CTC_T),
                                                L.tensor([50] * 8), L.tensor([10] * 8)), rn(50, 8, 20))
un("margin_ranking", lambda L, t: L.nn.functional.margin_ranking_loss(t[0], t[1], L.ones(256)))
un("triplet", lambda L, t: L.nn.functional.triplet_margin_loss(t[:20], t[20:40], t[40:60]))
un("multilabel_soft", lambda L, t: L.nn.functional.multilabel_soft_margin_loss(t, L.tensor(MASK.astype(np.float32))))
un("sdpa", lambda L, t: L.nn.functional.scaled_dot_product_attention(t, t, t), rn(4, 8, 64, 32))
un("sdpa_causal", lambda L, t: L.nn.functional.scaled_dot_product_attention(t, t, t, is_causal=True), rn(4, 8, 64, 32))
un("setitem_slice", lambda L, t: _setitem(L, t, lambda z, v: z.__setitem__((slice(None), slice(0, 128)), v[:, :128])))
un("setitem_adv", lambda L, t: _setitem(L, t, lambda z, v: z.__setitem__(L.tensor(IDX[:64] % 64), v)))
un("setitem_mask", lambda L, t: _setitem(L, t, lambda z, v: z.__setitem__(L.tensor(MASK), v[L.tensor(MASK)])))
un("int_remainder", lambda L, t: L.tensor(IDX2) % 7, A, False)
un("int_floordiv", lambda L, t: L.tensor(IDX2) // 7, A, False)
un("diff", lambda L, t: L.diff(t, dim=1)); un("outer", lambda L, t: L.outer(t[0], t[1]))
un("clone_t", lambda L, t: t.t().clone()); un("var_mean", lambda L, t: L.var_mean(t, 1)[0])


def _setitem(L, t, op):
    z = L.zeros(64, 256) + t * 0  # differentiable base
    op(z, t * 2)
    return z


def _params(L, n=20, g=True):
    R2 = np.random.RandomState(1)
    ps = [L.tensor(R2.randn(64, 64).astype(np.float32), requires_grad=True) for _ in range(n)]
    for p in ps:
        p.grad = L.tensor(R2.randn(64, 64).astype(np.float32))
    return ps


for _n, _mk in [("adam", lambda L, ps: L.optim.Adam(ps, 1e-3)), ("adamw", lambda L, ps: L.optim.AdamW(ps, 1e-3)),
                ("sgd_mom", lambda L, ps: L.optim.SGD(ps, 1e-3, momentum=0.9)),
                ("rmsprop", lambda L, ps: L.optim.RMSprop(ps, 1e-3)), ("adagrad", lambda L, ps: L.optim.Adagrad(ps, 1e-3))]:
    @case(f"optim_{_n}", bwd=False)
    def _opt(L, T, mk=_mk):
        ps = _params(L)
        opt = mk(L, ps)
        return lambda: opt.step()


@case("clip_grad_norm", bwd=False)
def _clip(L, T):
    ps = _params(L)
    return lambda: L.nn.utils.clip_grad_norm_(ps, 1.0)


@case("zero_grad", bwd=False)
def _zg(L, T):
    ps = _params(L)
    opt = L.optim.SGD(ps, 1e-3)
    return lambda: (opt.zero_grad(set_to_none=False))


def _leaf_maker(L, grad):
    """(T, leaves): T makes a case's tensors, float32 ones requiring grad when grad, noted in
    leaves."""
    leaves = []

    def T(x):
        t = L.tensor(x, requires_grad=grad and x.dtype == np.float32)
        if t.requires_grad:
            leaves.append(t)
        return t
    return T, leaves


def build(L, make, grad):
    T, leaves = _leaf_maker(L, grad)
    fn = make(L, T)
    if not grad:
        return fn

    def step():
        out = fn()
        out = out[0] if isinstance(out, (tuple, list)) else out
        out.sum().backward()
        for t in leaves:
            t.grad = None
    return step


def outputs(L, make, grad):
    """(forward output arrays, leaf gradient arrays) of one call, for --check."""
    T, leaves = _leaf_maker(L, grad)
    out = make(L, T)()
    out = out[0] if isinstance(out, (tuple, list)) else out
    if out is None:             # (an optimiser's step)
        return []
    if grad:
        out.sum().backward()
    return [out.detach().numpy()] + [t.grad.numpy() if t.grad is not None else None
                                     for t in leaves]


def check(make, grad):
    """'' when llgrad's outputs (and gradients) match torch's, else what differs."""
    got, want = outputs(llgrad, make, grad), outputs(torch, make, grad)
    for i, (g, w) in enumerate(zip(got, want)):
        what = "out" if i == 0 else f"grad{i - 1}"
        if (g is None) != (w is None):
            return f"{what}: None vs {w is None}"
        if g is None:
            continue
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"{what}: {g.dtype}{g.shape} vs torch {w.dtype}{w.shape}"
        if not np.allclose(g, w, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(w).max(initial=0))),
                           equal_nan=True):
            return f"{what}: max abs diff {np.nanmax(np.abs(g.astype(np.float64) - w)):.3g}"
    return ""


def block(fn, number):
    t0 = time.process_time()
    for _ in range(number):
        fn()
    return (time.process_time() - t0) / number


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--filter", default="")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--block-ms", type=float, default=20.0)
    ap.add_argument("--top", type=int, default=0)
    ap.add_argument("--check", action="store_true",
                    help="compare values and gradients with torch's instead of timing")
    a = ap.parse_args()
    repeat, bms = (3, 5.0) if a.quick else (a.repeat, a.block_ms)
    rows = []
    for name, make, bwd in CASES:
        for mode in (("fwd", "bwd") if bwd else ("fwd",)):
            full = f"{name}/{mode}"
            if a.filter not in full:
                continue
            if a.check:
                if "dropout" not in name:       # (random)
                    try:
                        why = check(make, mode == "bwd")
                    except Exception as e:  # noqa: BLE001
                        why = f"{type(e).__name__}: {str(e)[:120]}"
                    if why:
                        print(f"MISMATCH {full}: {why}")
                continue
            try:
                fns = [build(llgrad, make, mode == "bwd"), build(torch, make, mode == "bwd")]
                for f in fns:
                    f(); f()
                numbers = []
                for f in fns:
                    t = block(f, 1)
                    numbers.append(max(1, int(bms / 1e3 / max(t, 1e-7))))
                times = [[], []]
                for _ in range(repeat):
                    for i, f in enumerate(fns):
                        times[i].append(block(f, numbers[i]))
                ll, th = (statistics.median(x) * 1e6 for x in times)
                rows.append((ll / th, full, ll, th))
            except Exception as e:  # noqa: BLE001
                rows.append((float("inf"), full, 0.0, 0.0))
                print(f"{full}: {type(e).__name__}: {str(e)[:150]}", file=sys.stderr)
    if a.check:
        return
    rows.sort(reverse=True)
    if a.top:
        rows = rows[:a.top]
    print(f"{'case':34s} {'llgrad us':>11s} {'torch us':>10s} {'ratio':>7s}")
    for r, n, ll, th in rows:
        print(f"{n:34s} {ll:11.1f} {th:10.1f} {r:7.2f}")


if __name__ == "__main__":
    main()
