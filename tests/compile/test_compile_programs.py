"""llgrad.compile on whole programs: each program is a plain function of tensors, run eagerly
and through llgrad.compile(fn, backend=b) for b in ("interpret", "eager"). The compiled
function is called three times on fresh copies of the same inputs (the first call of a guard
key traces and returns the eager results; the 2nd and 3rd run the compiled graphs), with a
backward() after each; outputs, ALL leaf gradients, inputs after the call (mutations) and
aliasing of outputs with inputs are compared with eager, and the interpret backend must have
traced exactly once."""
import math

import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F

BACKENDS = ("interpret", "python", "llvm", "eager")
RTOL, ATOL = 2e-5, 1e-5          # float32


@pytest.fixture(autouse=True)
def _no_backend_env(monkeypatch):
    monkeypatch.delenv("LLGRAD_BACKEND", raising=False)
    monkeypatch.delenv("LLGRAD_DUMP", raising=False)


# ---- helpers ----------------------------------------------------------------------------------

def _rng(seed):
    return np.random.default_rng(seed)


def rnd(seed, *shape, dtype=np.float32):
    return _rng(seed).standard_normal(shape).astype(dtype)


def T(a, rg=False):
    """A fresh tensor holding a copy of the array a."""
    return llgrad.tensor(np.array(a, copy=True), requires_grad=rg)


def flat(obj, path="out"):
    """[(path, leaf)] of nested tuples / lists / dicts, with the container types in path."""
    if isinstance(obj, (tuple, list)):
        res = []
        for i, v in enumerate(obj):
            res += flat(v, f"{path}<{type(obj).__name__}>[{i}]")
        return res
    if isinstance(obj, dict):
        res = []
        for k, v in obj.items():
            res += flat(v, f"{path}<dict>[{k!r}]")
        return res
    return [(path, obj)]


def arr(t):
    return np.array(t.detach().numpy(), copy=True)


def given_grad(t, k):
    """A fixed, shape-determined gradient for the k-th differentiable output."""
    return llgrad.tensor(_rng(1000 + k).standard_normal(t.shape).astype(t.detach().numpy().dtype))


def default_backward(out, args):
    diff = [leaf for _, leaf in flat(out)
            if isinstance(leaf, llgrad.Tensor) and leaf.requires_grad]
    if len(diff) == 1 and diff[0].ndim == 0:
        diff[0].backward()                      # a scalar loss
    elif diff:
        llgrad.autograd.backward(diff, [given_grad(t, k) for k, t in enumerate(diff)])
    return []


class Inputs:
    """What make() returns when the arguments are not leaves: the arguments and the leaves
    they were computed from (whose .grad is compared too)."""

    def __init__(self, args, leaves):
        self.args, self.leaves = args, leaves


def run_once(f, prog):
    """Call f on fresh inputs, backward; a record of everything observable."""
    made = prog["make"]()
    args, extra_leaves = (made.args, made.leaves) if isinstance(made, Inputs) else (made, [])
    if prog.get("seed") is not None:
        llgrad.manual_seed(prog["seed"])
    out = f(*args)
    in_leaves = [t for _, t in flat(args, "arg") if isinstance(t, llgrad.Tensor)]
    rec = {"out": [], "grad_fns": []}
    for path, leaf in flat(out):
        if isinstance(leaf, llgrad.Tensor):
            alias = tuple(i for i, t in enumerate(in_leaves)
                          if leaf.numel() and np.shares_memory(leaf.detach().numpy(),
                                                               t.detach().numpy()))
            rec["out"].append((path, "tensor", leaf.dtype, tuple(leaf.shape),
                               leaf.requires_grad, alias, arr(leaf)))
            rec["grad_fns"].append(None if leaf.grad_fn is None else type(leaf.grad_fn).__name__)
        else:
            rec["out"].append((path, type(leaf).__name__, leaf))
    extra = prog.get("backward", default_backward)(out, args)
    rec["extra"] = [arr(e) for e in extra]
    rec["grads"] = [(i, None if t.grad is None else arr(t.grad))
                    for i, t in enumerate(in_leaves + extra_leaves)
                    if t.is_leaf and t.requires_grad]
    rec["inputs_after"] = [arr(t) for t in in_leaves]
    if prog.get("seed") is not None:            # the generator must stand where eager left it
        rec["rng_after"] = llgrad.rand(4).numpy().copy()
    if prog.get("check"):
        prog["check"](out, args)
    return rec


def assert_same(got, want, what):
    assert len(got["out"]) == len(want["out"]), what
    for g, w in zip(got["out"], want["out"]):
        assert g[:6] == w[:6] if g[1] == "tensor" else g == w, (what, g[:6], w[:6])
        if g[1] == "tensor":
            np.testing.assert_allclose(g[6], w[6], rtol=RTOL, atol=ATOL,
                                       err_msg=f"{what}: output {g[0]}")
    assert len(got["extra"]) == len(want["extra"])
    for k, (g, w) in enumerate(zip(got["extra"], want["extra"])):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=f"{what}: extra {k}")
    assert [i for i, _ in got["grads"]] == [i for i, _ in want["grads"]]
    for (i, g), (_, w) in zip(got["grads"], want["grads"]):
        assert (g is None) == (w is None), f"{what}: grad of input {i}: {g} vs {w}"
        if g is not None:
            assert g.dtype == w.dtype and g.shape == w.shape, (what, i)
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL,
                                       err_msg=f"{what}: grad of input {i}")
    for i, (g, w) in enumerate(zip(got["inputs_after"], want["inputs_after"])):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL,
                                   err_msg=f"{what}: input {i} after the call")
    if "rng_after" in want:
        np.testing.assert_array_equal(got["rng_after"], want["rng_after"],
                                      err_msg=f"{what}: generator state after the call")


def check_program(prog, backend):
    want = run_once(prog["fn"], prog)
    cf = llgrad.compile(prog["fn"], backend=backend)
    for call in range(3):
        got = run_once(cf, prog)
        assert_same(got, want, f"{prog['fn'].__name__} [{backend}] call {call + 1}")
        cf.wait()                   # (the native code, when built in the background)
        if backend != "eager" and call > 0:   # the compiled graphs ran
            for (path, *rest), gf in zip(got["out"], got["grad_fns"]):
                if rest[0] == "tensor" and rest[3]:
                    assert gf == "CompiledFunctionBackward", (path, gf)
    if backend != "eager":
        assert cf.n_traces == 1
    else:
        assert cf.n_traces == 0
    if backend == "llvm":       # every graph ran as native code, none on the interpreter
        notes = {which: k for which, k in cf.entries[0].kernels.items() if isinstance(k, str)}
        assert not notes, notes
    return cf


PROGRAMS = []


def program(make, backward=None, seed=None, check=None, interpret_bug=None):
    """Register fn as a program; interpret_bug: an llgrad bug that makes the interpret
    backend fail (the case is a strict xfail there)."""
    def deco(fn):
        p = {"fn": fn, "make": make, "seed": seed, "check": check}
        if backward is not None:
            p["backward"] = backward
        for b in BACKENDS:
            marks = [pytest.mark.xfail(strict=True, reason=interpret_bug)] \
                if interpret_bug and b == "interpret" else []
            PROGRAMS.append(pytest.param(p, b, id=f"{fn.__name__}-{b}", marks=marks))
        return fn
    return deco


# ---- programs ---------------------------------------------------------------------------------

@program(lambda: (T(rnd(1, 8, 5)), T(rnd(2, 5, 16) * 0.5, True), T(rnd(3, 16), True),
                  T(rnd(4, 16, 4) * 0.5, True), T(rnd(5, 4), True),
                  llgrad.tensor([0, 3, 1, 2, 2, 0, 1, 3])))
def mlp_cross_entropy(x, w1, b1, w2, b2, target):
    h = (x @ w1 + b1).tanh()
    h = F.relu(h @ w2 + b2)
    return F.cross_entropy(h, target)


@program(lambda: (T(rnd(6, 2, 5, 8), True), T(rnd(7, 8, 8) * 0.3, True),
                  T(rnd(8, 8, 8) * 0.3, True), T(rnd(9, 8, 8) * 0.3, True)))
def attention_causal(x, wq, wk, wv):
    q, k, v = x @ wq, x @ wk, x @ wv
    d = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    i = llgrad.arange(x.shape[1])
    causal = i.unsqueeze(0) > i.unsqueeze(1)          # True above the diagonal
    att = scores.masked_fill(causal, float("-inf")).softmax(-1)
    return att @ v


@program(lambda: (T(rnd(10, 4, 3, 8), True), T(rnd(11, 8), True), T(rnd(12, 8), True)))
def layer_norm_functional(x, w, b):
    return F.layer_norm(x, (8,), w, b)


@program(lambda: (T(rnd(13, 4, 3, 8), True), T(rnd(14, 8), True), T(rnd(15, 8), True)))
def layer_norm_handwritten(x, w, b):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return ((x - mu) / (var + 1e-5).sqrt() * w + b).sum()


@program(lambda: (T(rnd(16, 6, 5), True), llgrad.tensor([0, 4, 1, 2, 3, 0])))
def cross_entropy_label_smoothing(logits, target):
    return F.cross_entropy(logits, target, label_smoothing=0.1)


@program(lambda: (T(rnd(17, 6, 5), True), T(np.abs(rnd(18, 6, 5)) / 3)))
def cross_entropy_probabilities_smoothed_sum(logits, probs):
    return F.cross_entropy(logits, probs, label_smoothing=0.2, reduction="sum")


@program(lambda: (T(rnd(19, 3, 4), True),))
def view_inplace_slice_mul(x):
    h = x * 1
    h[:, 1:] *= 2
    return h


@program(lambda: (T(rnd(20, 3, 4), True),))
def view_inplace_transpose_select(x):
    h = x * 1
    h.t()[0].add_(1)
    return (h * h).sum()


@program(lambda: (T(rnd(21, 4, 6), True),))
def indexing_basic(x):
    return x[1:, ::2].sum() + (x[0] * x[-1]).sum() + x[..., -1].exp().sum() + x[:, None, 2].sum()


@program(lambda: (T(rnd(22, 5, 3), True), llgrad.tensor([4, 0, 4, 2])))
def indexing_int_tensor(x, idx):
    return x[idx] * 2, x[idx, idx % 3]


@program(lambda: (T(rnd(23, 4, 5), True), llgrad.tensor([[0, 0], [4, 1], [2, 2], [3, 0]])))
def gather_dim1(x, idx):
    return x.gather(1, idx)


@program(lambda: (T(rnd(24, 5, 3), True), llgrad.tensor([3, 1, 3])))
def index_select_dim0(x, idx):
    return x.index_select(0, idx).sigmoid()


@program(lambda: (T(rnd(25, 3, 4, 5), True),))
def reductions(x):
    return (x.sum(1), x.mean((0, 2)), x.amax(-1), x.var(1), x.logsumexp(0),
            x.sum(-1, keepdim=True), x.var(2, correction=0, keepdim=True), x.amax((0, 1)))


@program(lambda: (T(rnd(26, 4, 3), True), T(rnd(27, 3, 5), True), T(rnd(28, 5), True),
                  T(rnd(29, 3, 1), True), T(rnd(30, 4), True)))
def broadcasting(x, w, b, col, row):
    return (x @ w + b).sum() + (col * row).square().sum()


class StraightThroughClamp(llgrad.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clamp(-0.5, 0.5)

    @staticmethod
    def backward(ctx, g):
        return g                      # straight-through: the gradient passes unchanged


def _ste_check(out, args):
    (x,) = args
    # the custom backward's gradient (not clamp's masked autodiff): d/dx sum(3*y) = 3
    np.testing.assert_allclose(x.grad.numpy(), np.full(x.shape, 3.0, np.float32))


@program(lambda: (T(rnd(31, 4, 5), True),), check=_ste_check)
def custom_function_straight_through(x):
    return (StraightThroughClamp.apply(x) * 3).sum()


class ScaledExp(llgrad.autograd.Function):
    @staticmethod
    def forward(ctx, x, s):
        y = x.exp() * s
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y, None


@program(lambda: (T(rnd(32, 3, 4), True),))
def custom_function_saved_tensors(x):
    return ScaledExp.apply(x.tanh(), 2.0).mean()


def _double_backward(out, args):
    x, w = args
    (g,) = llgrad.autograd.grad(out, x, create_graph=True)
    (g * g).sum().backward()
    return [g]


@program(lambda: (T(rnd(33, 3, 4), True), T(rnd(34, 4), True)), backward=_double_backward)
def double_backward(x, w):
    return ((x * w).tanh() * x).sum()


@program(lambda: (T(rnd(35, 3, 4), True), T(rnd(36, 4), True)))
def multiple_outputs(x, w):
    y = x * w
    return y.sum(), y.exp(), w.sin()


@program(lambda: (T(rnd(37, 3, 4), True), T(rnd(38, 4), True)))
def nested_outputs(x, w):
    y = x @ w
    return {"loss": y.square().mean(), "parts": (y, [x.relu(), w * 2])}


@program(lambda: (T(rnd(39, 4, 3)), T(rnd(40, 3), True)))
def alias_output_slice_of_input(x, w):
    return x[1:], (x * w).sum()


@program(lambda: (T(rnd(41, 4, 3), True), T(rnd(42, 3), True)))
def alias_output_transpose_of_grad_input(x, w):
    return x.t(), (x * w).sum()


def _nonleaf_alias_inputs():
    base, w = T(rnd(86, 3, 2), True), T(rnd(87, 2), True)
    return Inputs((base * 1, w), [base, w])


def _modify_aliased_output_then_backward(out, args):
    (v, loss), (x, _) = out, args
    v.mul_(3)                   # rebases x's history (x is a non-leaf): CopySlices
    (loss + (x * llgrad.tensor(rnd(88, 3, 2))).sum()).backward()
    return [x]


@program(_nonleaf_alias_inputs, backward=_modify_aliased_output_then_backward)
def alias_output_of_nonleaf_input_modified_in_place(x, w):
    return x[1:], (w * w).sum() + x.sum()


def _output_view_of_output_modified(out, args):
    y, y1 = out
    y1.mul_(3)                  # y1 is a view of y: y's history must see the write
    (y * llgrad.tensor(rnd(89, 2, 3))).sum().backward()
    return [y]


@program(lambda: (T(rnd(90, 2, 3), True),), backward=_output_view_of_output_modified)
def output_view_of_output_modified_in_place(x):
    y = x * 2
    return y, y[1]


def _nonleaf_noncontiguous_inputs():
    base = T(rnd(91, 2, 3), True)
    return Inputs((base.t(), base * 2, (base * 3)[:, ::2]), [base])


@program(_nonleaf_noncontiguous_inputs)
def nonleaf_noncontiguous_inputs(a, b, c):
    return (a * b.t()).sum() + (c.exp() @ a[::2]).sum()


def _twice(x, *rest):
    return (x, *rest, x)


@program(lambda: _twice(T(rnd(92, 3), True), T(rnd(93, 3), True)))
def same_tensor_passed_twice(a, b, c):
    return (a * b).sum() + (a.exp() * c).sum()


@program(lambda: _twice(T(rnd(94, 3))))
def same_tensor_passed_twice_mutated(x, y):
    x.add_(1)
    return y * 2


@program(lambda: (T(rnd(43, 3, 4)), T(rnd(44, 4), True)))
def mutated_input(x, w):
    x.add_(1)
    x[0].mul_(2)
    return (w.exp() * 2).sum() + x.sum(), x * 3


@program(lambda: (T(rnd(43, 3, 4)), T(rnd(44, 4), True)))
def mutated_input_saved_for_backward(x, w):
    x.add_(1)
    return (x * w).sum()


@program(lambda: (T(rnd(45, 3, 5), True),))
def non_differentiable_outputs(x):
    y = x.exp()
    return y.sum(), y.argmax(1), y > 1.0, x.detach() * 2


@program(lambda: (T(rnd(46, 6, 8), True), T(rnd(47, 8), True)), seed=0)
def dropout_seeded(x, w):
    return (F.dropout(x, 0.3) * w).sum() + F.dropout(w, 0.5).sum()


@program(lambda: (T(rnd(48, 6, 3, 2), True), T(rnd(49, 3) * 0.1), T(1 + np.abs(rnd(50, 3))),
                  T(rnd(51, 3), True), T(rnd(52, 3), True)))
def batch_norm_training(x, running_mean, running_var, w, b):
    return F.batch_norm(x, running_mean, running_var, w, b, training=True, momentum=0.2)


@program(lambda: (T(rnd(53, 3, 4), True), 0.5, 3, "tanh"))
def python_scalars(x, alpha, n, act):
    for _ in range(n):
        x = getattr(x, act)() * alpha + 1
    return x.sum()


@program(lambda: (T(rnd(54, 5, 3), True), T(rnd(55, 5, 3))))
def mse_loss(x, y):
    return F.mse_loss(x, y) + F.mse_loss(x * 2, y, reduction="sum")


@program(lambda: (T(rnd(56, 5, 3), True), T((rnd(57, 5, 3) > 0).astype(np.float32)),
                  T(np.abs(rnd(58, 3))), T(np.abs(rnd(59, 5, 3)))))
def bce_with_logits(x, y, pos_weight, weight):
    return F.binary_cross_entropy_with_logits(x, y, pos_weight=pos_weight) + \
        F.binary_cross_entropy_with_logits(x * 2, y, weight, reduction="sum")


@program(lambda: (T(rnd(84, 3, 4), True), T(rnd(85, 4), True)))
def unused_input_grad_stays_none(x, w):
    return (x * 2).sum()


@program(lambda: (T(rnd(59, 2, 1, 3, 4), True), T(rnd(60, 5, 4, 2), True)))
def matmul_batched_broadcast(a, b):
    return a @ b


@program(lambda: (T(rnd(61, 3, 4), True), T(rnd(62, 2, 4), True)))
def cumsum_cat_stack(x, y):
    c = llgrad.cat([x, y * 2], dim=0).cumsum(0)
    s = llgrad.stack([x[:2], y], dim=1).cumsum(-1)
    return c, s


@program(lambda: (T(rnd(63, 3, 4), True), T(rnd(64, 3, 4), True)))
def where_select(x, y):
    return llgrad.where(x > y, x * 2, y.exp()), llgrad.where(x > 0, x, 0.0)


@program(lambda: (T(rnd(65, 4, 6), True), T(rnd(66, 6, 6) * 0.4, True)))
def activations_mix(x, w):
    h = F.gelu(x @ w) + F.silu(x) + F.softplus(x) + F.leaky_relu(x, 0.1) + x.sigmoid()
    return F.log_softmax(h, -1).sum() + F.gelu(h, approximate="tanh").mean()


@program(lambda: (llgrad.tensor([[1, 3, 0], [2, 2, 4]]), T(rnd(67, 5, 4), True)))
def embedding_mean(idx, table):
    return F.embedding(idx, table).mean(1)


@program(lambda: (T(rnd(68, 6, 4), True), llgrad.tensor([0, -100, 3, 1, -100, 2])))
def nll_loss_ignore_index(x, t):
    return F.nll_loss(F.log_softmax(x, 1), t, ignore_index=-100)


@program(lambda: (T(rnd(69, 3, 5), True),))
def max_min_with_dim(x):
    v, i = x.max(1)
    m, j = x.min(0, keepdim=True)
    return v, i, m * 2, j


@program(lambda: (T(rnd(70, 2, 3, 4), True),))
def views_chain(x):
    y = x.permute(2, 0, 1).reshape(4, 6)
    z = y.unsqueeze(0).expand(3, 4, 6).flatten(1)
    a, b = x.split([1, 2], dim=1)
    return z.sum(0) * 1.5, a.squeeze(1) @ b.transpose(1, 2).sum(2).t()


@program(lambda: (T(rnd(71, 3, 4), True), T(rnd(72, 4), True)))
def inplace_on_intermediates(x, w):
    h = x @ w.unsqueeze(1)
    h.mul_(2).add_(1)
    h.relu_()
    g = x.clone()
    g.clamp_(-0.3, 0.3)
    return h.sum() + g.square().sum()


@program(lambda: (T(rnd(73, 3, 4).astype(np.float64), True), T(rnd(74, 4), True),
                  llgrad.tensor([1, 2, 3, 4])))
def dtype_promotion(x64, w32, ints):
    return (x64 * w32 + ints).sum(), (w32 * ints).sum() / 3


@program(lambda: (T(rnd(75, 3, 4), True), T(rnd(76, 3, 4), True)))
def detach_and_scatter(x, y):
    z = x * y.detach()
    idx = llgrad.tensor([[0, 1, 2, 0], [2, 2, 1, 0], [1, 0, 0, 2]])
    acc = llgrad.zeros(3, 4).scatter_add(0, idx, z)
    return acc.pow(2).sum() + z.index_add(0, llgrad.tensor([2, 0, 2]), y).sum()


@program(lambda: (T(rnd(77, 4, 3), True), T(rnd(78, 4, 3), True)))
def softmax_then_setitem_mask(x, y):
    p = x.softmax(1)
    q = p.clone()
    q[y > 0] = 0.0
    return (q * y).sum() + p.std(0).sum()


@pytest.mark.parametrize("prog,backend", PROGRAMS)
def test_program(prog, backend):
    check_program(prog, backend)


def test_at_least_32_programs():
    assert len(PROGRAMS) // len(BACKENDS) >= 32


# ---- a method of a small class whose tensors are attributes ------------------------------------

def _make_model_class(backend):
    class TinyModel:
        def __init__(self):
            self.w1 = T(rnd(80, 4, 8) * 0.5, True)
            self.b1 = T(rnd(81, 8), True)
            self.w2 = T(rnd(82, 8, 3) * 0.5, True)
            self.scale = T(np.array([2.0], np.float32))     # a buffer, no grad

        @llgrad.compile(backend=backend)
        def forward(self, x, target):
            h = (x @ self.w1 + self.b1).tanh()
            return F.cross_entropy(h @ self.w2 * self.scale, target)

    return TinyModel


@pytest.mark.parametrize("backend", BACKENDS)
def test_method_of_a_class_with_tensor_attributes(backend):
    cls = _make_model_class(backend)
    m = cls()
    params = [m.w1, m.b1, m.w2]
    X, tgt = rnd(83, 5, 4), np.array([0, 2, 1, 1, 0])

    def step(call):
        for p in params:
            p.grad = None
        loss = call(T(X), llgrad.tensor(tgt))
        loss.backward()
        return loss.item(), [p.grad.numpy().copy() for p in params]

    want_loss, want_grads = step(lambda x, t: cls.__dict__["forward"].fn(m, x, t))
    for call in range(3):
        loss, grads = step(m.forward)
        np.testing.assert_allclose(loss, want_loss, rtol=RTOL, atol=ATOL)
        for g, w in zip(grads, want_grads):
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=f"call {call + 1}")
    cf = cls.__dict__["forward"]
    assert cf.n_traces == (0 if backend == "eager" else 1)
