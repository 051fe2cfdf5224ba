"""Oracle suite: every program is written once as `prog(lib, F, *inputs)` and run in both
PyTorch and llgrad from the same NumPy inputs. We compare output values, dtypes, shapes,
requires_grad and grad_fn class names, the gradients of all inputs, and for error programs
the exception type. String outputs (reprs) are compared after replacing 'torch.' by
'llgrad.' and masking 0x... addresses.

Float inputs require grad unless wrapped in NG(...); integer/bool arrays become plain
tensors; anything else is passed through as is. Unless a program says backward=False, the
harness backpropagates sum_i (out_i * W_i).sum() over every output that requires grad
(W_i fixed random weights), so each output's gradient path is checked."""
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as TF  # noqa: E402

import llgrad  # noqa: E402
import llgrad.nn.functional as LF  # noqa: E402

LIBS = {"torch": (torch, TF), "llgrad": (llgrad, LF)}
# programs with inf/nan make NumPy warn; PyTorch is silent
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
PROGRAMS = []

# ---- inputs ------------------------------------------------------------------------------------
_rng = np.random.default_rng(20240611)


def randn(*shape, dtype=np.float32):
    return _rng.standard_normal(shape).astype(dtype)


def rand(*shape, lo=0.5, hi=2.0, dtype=np.float32):
    """Positive values (safe for log, sqrt, division)."""
    return _rng.uniform(lo, hi, shape).astype(dtype)


def arr(data, dtype=np.float32):
    return np.array(data, dtype=dtype)


class NG:
    """A float tensor input that does not require grad."""

    def __init__(self, a):
        self.a = np.asarray(a)


def make_inputs(lib, specs):
    out = []
    for s in specs:
        if isinstance(s, NG):
            out.append(lib.tensor(s.a))
        elif isinstance(s, np.ndarray):
            out.append(lib.tensor(s, requires_grad=s.dtype.kind == "f"))
        else:
            out.append(s)
    return out


# ---- registry ---------------------------------------------------------------------------------

class Prog:
    def __init__(self, fn, inputs, backward, error, grad_fn, rtol, atol, graph_differs):
        self.fn, self.inputs, self.backward, self.error = fn, inputs, backward, error
        self.grad_fn, self.rtol, self.atol = grad_fn, rtol, atol
        self.graph_differs = graph_differs


def program(*inputs, backward=True, error=False, grad_fn=True, rtol=None, atol=None,
            xfail=None, graph_differs=None):
    """graph_differs: why the results' grad_fn names match PyTorch's but the nodes behind
    them (next_functions) do not; their edges are then not compared."""
    def deco(fn):
        marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
        PROGRAMS.append(pytest.param(Prog(fn, inputs, backward, error, grad_fn, rtol, atol,
                                          graph_differs),
                                     id=fn.__name__, marks=marks))
        return fn
    return deco


# ---- normalising results of either library ------------------------------------------------------

def _is_tensor(x):
    return isinstance(x, (torch.Tensor, llgrad.Tensor))


def _dtype_name(d):
    return str(d).split(".")[-1]


_ADDR = re.compile(r"0x[0-9a-fA-F]+")


def _norm_str(s):
    return _ADDR.sub("0x?", s.replace("torch.", "llgrad."))


class TRec:
    """A tensor's observable state."""

    def __init__(self, t):
        self.dtype = _dtype_name(t.dtype)
        self.shape = tuple(t.shape)
        self.value = np.array(t.detach().numpy(), copy=True)
        self.requires_grad = bool(t.requires_grad)
        fn = t.grad_fn
        self.grad_fn = None if fn is None else type(fn).__name__
        # the graph's edges, as names: (node class or None, input number) per edge
        self.edges = None if fn is None else tuple(
            (None if f is None else type(f).__name__, i) for f, i in fn.next_functions)


def norm(x):
    if _is_tensor(x):
        return TRec(x)
    if isinstance(x, (torch.Size, llgrad.Size)):
        return ("Size", tuple(x))
    if isinstance(x, (torch.dtype, llgrad.dtype)):
        return ("dtype", _dtype_name(x))
    if isinstance(x, (tuple, list)):
        return [norm(v) for v in x]
    if isinstance(x, dict):
        return {k: norm(v) for k, v in x.items()}
    if isinstance(x, str):
        return _norm_str(x)
    if hasattr(x, "next_functions"):          # a backward node
        return ("node", type(x).__name__)
    return x


def _flat(x):
    if _is_tensor(x):
        yield x
    elif isinstance(x, (tuple, list)):
        for v in x:
            yield from _flat(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _flat(v)


def _weights(i, shape, dtype):
    r = np.random.default_rng(1000 + i)
    return r.standard_normal(tuple(shape)).astype(_dtype_name(dtype))


def run(libname, prog):
    lib, F = LIBS[libname]
    inputs = make_inputs(lib, prog.inputs)
    if prog.error:
        try:
            prog.fn(lib, F, *inputs)
        except Exception as e:       # noqa: BLE001 - the type is what we compare
            return ("raised", type(e).__name__)
        return ("no error", None)
    out = prog.fn(lib, F, *inputs)
    res = norm(out)                  # before backward: grad_fn names as the program left them
    if prog.backward:
        diff = [t for t in _flat(out) if t.requires_grad]
        if diff:
            loss = None
            for i, t in enumerate(diff):
                term = (t * lib.tensor(_weights(i, t.shape, t.dtype))).sum()
                loss = term if loss is None else loss + term
            loss.backward()
    grads = norm([t.grad if _is_tensor(t) and t.requires_grad else None for t in inputs])
    return res, grads


def _tols(dtype, prog):
    if dtype == "float64":
        rtol, atol = 1e-9, 1e-10
    elif dtype == "float16":
        rtol, atol = 1e-2, 1e-3
    else:
        rtol, atol = 2e-5, 2e-6
    return prog.rtol or rtol, prog.atol or atol


def compare(t, l, prog, path):
    if isinstance(t, TRec):
        assert isinstance(l, TRec), f"{path}: torch gave a tensor, llgrad {l!r}"
        assert l.dtype == t.dtype, f"{path}: dtype {l.dtype} != torch {t.dtype}"
        assert l.shape == t.shape, f"{path}: shape {l.shape} != torch {t.shape}"
        assert l.requires_grad == t.requires_grad, \
            f"{path}: requires_grad {l.requires_grad} != torch {t.requires_grad}"
        if prog.grad_fn:
            assert l.grad_fn == t.grad_fn, f"{path}: grad_fn {l.grad_fn} != torch {t.grad_fn}"
            assert prog.graph_differs or l.edges == t.edges, \
                f"{path}: {l.grad_fn}.next_functions {l.edges} != torch {t.edges}"
        if t.value.dtype.kind == "f":
            rtol, atol = _tols(t.dtype, prog)
            ok = np.allclose(l.value, t.value, rtol=rtol, atol=atol, equal_nan=True)
            assert ok, (f"{path}: values differ (max abs err "
                        f"{np.nanmax(np.abs(l.value - t.value)) if t.value.size else 0})\n"
                        f"llgrad {l.value}\ntorch  {t.value}")
        else:
            assert np.array_equal(l.value, t.value), \
                f"{path}: values differ\nllgrad {l.value}\ntorch  {t.value}"
    elif isinstance(t, list):
        assert isinstance(l, list) and len(l) == len(t), f"{path}: {l!r} vs torch {t!r}"
        for i, (a, b) in enumerate(zip(t, l)):
            compare(a, b, prog, f"{path}[{i}]")
    elif isinstance(t, dict):
        assert isinstance(l, dict) and l.keys() == t.keys(), f"{path}: {l!r} vs torch {t!r}"
        for k in t:
            compare(t[k], l[k], prog, f"{path}[{k!r}]")
    elif isinstance(t, float):
        assert isinstance(l, float) and np.isclose(l, t, rtol=1e-5, atol=1e-6), \
            f"{path}: {l!r} != torch {t!r}"
    else:
        assert l == t, f"{path}: {l!r} != torch {t!r}"


# =================================================================================================
# Programs
# =================================================================================================

# ---- views ---------------------------------------------------------------------------------------

@program(randn(3, 4))
def view_reshape_flatten(lib, F, x):
    a = x.view(4, 3)
    return (a, x.view(-1, 2), x.t().reshape(12), x.reshape(2, 2, 3).flatten(1),
            x.unsqueeze(1).squeeze(1), x.view_as(a), x.reshape(-1), x.flatten(),
            x.unflatten(1, (2, 2)), x.view(1, 3, 4).squeeze(), x.shape, x.t().is_contiguous())


@program(randn(3, 1), randn(4, 3), arr(1.5), randn(1, 3, 1, 2))
def reshape_edges(lib, F, x, y, s, z):
    e = x.expand(3, 4)
    return (e.reshape(12), y.t().view(3, 2, 2), y.t().reshape(2, 6),
            s.flatten(), s.view(-1), s.reshape(1, 1), s.unsqueeze(0).squeeze(), z.squeeze((0, 2)),
            z.squeeze(0), z.squeeze(-1), z.unsqueeze(-1).shape, y.t().reshape(3, 4).is_contiguous(),
            y.reshape(2, -1, 3), y.view(3, 4).view(-1), y.chunk(3, 1), y.chunk(4),
            y.split([1, 2], 1))


@program(randn(4, 3))
def reshape_alias(lib, F, y):
    return y.t().reshape(3, 2, 2)


@program(randn(2, 3, 4))
def transpose_permute(lib, F, x):
    return (x.transpose(0, 2), x.permute(2, 0, 1), x.transpose(-1, -2).contiguous(), x.mT,
            x[0].t(), x.permute(1, 2, 0).reshape(3, 8), x.swapaxes(0, 1),
            x.permute(2, 0, 1).stride(), x.transpose(0, 2).stride())


@program(randn(3, 1), randn(4, 5))
def expand_narrow_select(lib, F, x, y):
    return (x.expand(3, 4), x.expand(2, -1, 4), lib.broadcast_to(x, (2, 3, 5)),
            y.narrow(1, 1, 3), y.narrow(0, -2, 2), y.select(0, -1), y.select(1, 2),
            y.narrow(1, 1, 3).select(1, 0), x.expand(3, 4).stride())


@program(randn(4, 4), randn(2, 3, 3))
def diagonal_as_strided(lib, F, x, y):
    return (x.diagonal(), x.diagonal(1), x.diagonal(-2), y.diagonal(0, 1, 2),
            y.diagonal(offset=1, dim1=-1, dim2=0), x.as_strided((2, 2), (1, 2), 1),
            x.as_strided((3, 3), (1, 1)), x[1:].as_strided((2, 2), (4, 1)),
            x[1:].as_strided((2, 2), (4, 1)).storage_offset())


@program(randn(5, 3))
def unbind(lib, F, x):
    return x.unbind(1), x.unbind(), lib.unbind(x, -1)[2]


@program(randn(5, 3))
def split_chunk(lib, F, x):
    return x.split(2), x.split([1, 4]), x.chunk(2, 1), lib.chunk(x, 3), lib.split(x, 2, dim=1)


@program(randn(4, 5, 6))
def index_basic(lib, F, x):
    return (x[1:3, ::2], x[..., None, 1], x[None, :, -1], x[::3, 1:5:2, ...], x[1],
            x[-1, 2, 3], x[:, None, ..., None], x[...], x[-3:, -1:], x[..., ::4])


@program(randn(4, 3))
def index_empty_slice(lib, F, x):
    return x[1:1], x[:, 3:], x[2:0], x[-1:0:1]


@program(randn(4, 5, 6), arr([3, 0, 3], np.int64), arr([[1, 4], [0, 1]], np.int64),
         np.array([[1, 0, 1, 0, 0], [0, 0, 0, 0, 1], [1, 1, 0, 0, 0], [0, 0, 0, 0, 0]], bool),
         graph_differs=("PyTorch indexes a basic slice first (SliceBackward0, SelectBackward0),"
                        " llgrad in one IndexBackward0"))
def index_advanced(lib, F, x, i, j, m):
    return (x[i], x[:, j], x[i, 1:3, [0, 5, 2]], x[m], x[[0, 2], :, [1, 3]], x[..., [-1, 0]],
            x[i, None], x[1, j], x[i[:2], j[0]], x[j[1], j[0]])


@program(randn(3, 4), np.array([[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 1, 0]], bool),
         np.array([1, 0, 1, 1], bool),
         graph_differs=("PyTorch indexes a basic slice first (SliceBackward0, SelectBackward0),"
                        " llgrad in one IndexBackward0"))
def index_bool(lib, F, x, m, c):
    return x[m], x[:, c], x[x > 0], x[1, c], \
        x[m.logical_not()]


# ---- in-place on views ------------------------------------------------------------------------

@program(randn(3, 4))
def inplace_slice_mul(lib, F, a):
    b = a * 1
    b[:, 1:].mul_(2)
    return b


@program(randn(3, 4))
def inplace_t_select_add(lib, F, x):
    b = x.clone()
    v = b.t()[0]
    v.add_(1)
    b.t()[2].add_(x[:, 0] * 2)
    return b, v


@program(randn(3, 4), randn(4), randn(1, 4), arr([2], np.int64))
def setitem_tensors_scalars(lib, F, a, v, w, idx):
    b = a.clone()
    b[1] = v
    b[:, 0] = 3.0
    b[idx] = w
    b[0, 1:3] = v[:2] * 2
    b[b > 1] = 0.0
    b[-1, ::2] = v[1]
    return b


@program(randn(3, 4), np.array([[1, 0, 0, 1], [0, 1, 1, 0]], bool),
         np.array([[1, 0], [0, 1], [1, 1]], bool), arr(0.25))
def masked_fill_on_slice(lib, F, a, m1, m2, val):
    b = a * 1
    b[1:].masked_fill_(m1, 0.5)
    b[:, ::2].masked_fill_(m2, -1.0)
    return b


@program(randn(3, 4), np.array([1, 0, 0, 1], bool), arr(0.25))
def masked_fill_tensor_value(lib, F, a, m, val):
    return a.masked_fill(m, val), (a * 2).masked_fill_(m, val)


@program(randn(3, 4))
def view_after_base_inplace(lib, F, a):
    b = a * 2
    v = b[0]
    w = b[:, 1:3]
    b.mul_(3)
    return b, v, w


@program(randn(3, 4), randn(2, 3))
def inplace_view_chain(lib, F, a, y):
    b = a.clone()
    c = b.view(2, 6)
    c[:, ::2].mul_(y)
    b.t()[1:, 0].sub_(a[0, 1:] * 0.5)
    return b, c


@program(randn(4), randn(4))
def inplace_ops_nonleaf(lib, F, x, y):
    a = x * 1
    a.add_(y, alpha=2)
    a.clamp_(-1.0, 1.0)
    a.exp_()
    b = y.clone()
    b.mul_(x).sigmoid_()
    c = x.clone()
    c.copy_(y * 3)
    c += 1
    c *= y
    return a, b, c


@program(randn(4, 3), randn(2, 3), arr([0, 2], np.int64), randn(3))
def setitem_on_views_and_index_put(lib, F, a, v, idx, w):
    b = a * 1
    b[1:][idx] = v
    c = a.clone()
    c.index_put_((idx,), v, accumulate=True)
    d = a.clone()
    d.t()[:, 0] = w
    e = a.clone()
    e[..., 1][idx] = w[:2]
    return b, c, d, e


@program(randn(3, 4), arr(1.5), np.array([[1, 0, 0, 1], [0, 0, 1, 0], [0, 0, 0, 0]], bool),
         randn(3), arr([0, 0, 2], np.int64), randn(3, 4))
def setitem_broadcast_mask_accumulate(lib, F, a, s, m, v, idx, w):
    b = a * 1
    b[:, 1] = s
    b[m] = v
    b[2] = s * 2
    c = a.clone()
    c.index_put_((idx,), w, accumulate=True)
    d = a.clone()
    d[idx[1:], lib.tensor([1, 3])] = v[:2]
    return b, c, d


@program(randn(3, 4))
def no_grad_and_detach(lib, F, x):
    with lib.no_grad():
        y = x * 2
        x.mul_(1)
    z = x.detach()
    w = (x * 3).detach().requires_grad_()
    with lib.enable_grad():
        u = x.exp()
    with lib.set_grad_enabled(False):
        q = u * 2
    return y, z, w, u, q, lib.is_grad_enabled(), x._version


@program(randn(3, 4), randn(3))
def backward_variants(lib, F, x, y):
    h = x * y[:, None]
    g1, g2 = lib.autograd.grad(h, (x, y), grad_outputs=lib.ones_like(h) * 0.5,
                               retain_graph=True)
    g3, g4 = lib.autograd.grad(h.sum(), [x, x.exp()], allow_unused=True, retain_graph=True)
    h.backward(lib.full((3, 4), 2.0), retain_graph=True)
    h.sum().backward(inputs=[y], retain_graph=True)
    lib.autograd.backward([h.sum(), (h * h).sum()], [lib.tensor(1.0), lib.tensor(0.5)])
    return g1, g2, g3, g4


@program(randn(3, 4))
def iterate_and_misc_views(lib, F, x):
    rows = [r * 1 for r in x]
    return (rows, list(x), x.T, lib.transpose(x, 0, 1), lib.t(x), lib.narrow(x, 1, 0, 2),
            lib.select(x, 1, -1), lib.squeeze(x[None]), lib.unsqueeze(x, -1), lib.flatten(x[None]),
            lib.diagonal(x, 1), lib.permute(x, (1, 0)), x.t().as_strided((2, 2), (1, 4), 1))


@program(randn(3, 4), np.array([[0, 0, 1, 1], [1, 0, 0, 0], [0, 0, 0, 0]], bool))
def masked_softmax_inf(lib, F, x, m):
    s = x.masked_fill(m, float("-inf"))
    return s.softmax(-1), s.log_softmax(-1), s.logsumexp(-1), s.amax(-1), s.exp()


@program(randn(5), rand(5))
def nan_gradients_where(lib, F, x, p):
    return (lib.where(x > 0, x.sqrt(), x * 0), lib.where(x > 0, x.log(), x), x.sqrt(),
            (x.abs() + 1).pow(p))


@program(arr([0.0, 1.5, 0.0, 2.0]), rand(4), arr([1.0, 0.0, -1.0, 0.5]))
def pow_edge_cases(lib, F, x, q, y):
    return x ** q, x ** 2, x ** 0.5, x.pow(y.detach()), 0.0 ** q, x ** y, x ** 0


@program(arr([0.0, 2.0]), arr([0.0, 1.0]))
def pow_tensor_exponent_zero_at_zero(lib, F, x, e):
    return x ** e


@program(randn(4, 3), randn(2, 3), arr([[0, 1, 2], [3, 0, 1]], np.int64), arr([1, 3], np.int64),
         randn(2, 3))
def scatter_index_add(lib, F, x, s, idx, i, src):
    return x.scatter_add(0, idx, s), x.index_add(0, i, src), x.index_add(0, i, src, alpha=2)


@program(randn(2, 3, 4), randn(5, 4), randn(5), grad_fn=False)
def linear_values(lib, F, x, w, b):
    return F.linear(x, w, b), F.linear(x[0], w), F.linear(x, w)


# ---- hooks, retain_grad, accumulation --------------------------------------------------------

@program(randn(3), backward=False)
def hook_leaf(lib, F, x):
    seen = []

    def h(g):
        seen.append(g.clone())
        return g * 2
    x.register_hook(h)
    y = (x * x).sum()
    y.backward()
    return y, seen


@program(randn(3), randn(3), backward=False)
def hook_nonleaf(lib, F, x, y):
    seen = []
    h = x * y

    def hk(g):
        seen.append(g.detach().clone())
        return g + 1
    handle = h.register_hook(hk)
    h2 = h.exp()
    h2.register_hook(lambda g: g * 0.5)
    h2.sum().backward(retain_graph=True)
    handle.remove()
    (h * 2).sum().backward()
    return h2, seen


@program(randn(3), randn(3), backward=False)
def node_hooks(lib, F, x, y):
    seen = []
    h = x * y
    z = h.exp()
    z.grad_fn.register_prehook(lambda gout: (gout[0] * 2,))
    h.grad_fn.register_hook(lambda gin, gout: seen.append((gin[0].clone(), gout[0].clone())))
    z.sum().backward()
    return seen, [type(f).__name__ if f is not None else None
                  for f, _ in z.grad_fn.next_functions], z.grad_fn.next_functions[0][1]


@program(randn(3, 4), randn(4), backward=False)
def retain_grad(lib, F, x, y):
    h = x.exp()
    h.retain_grad()
    z = h * y
    z.retain_grad()
    (z.sum() * 2).backward()
    return h.grad, z.grad, h.retains_grad, z.is_leaf, x.is_leaf


@program(randn(3), randn(3), backward=False)
def grad_accumulation(lib, F, x, y):
    (x * y).sum().backward()
    g1 = x.grad.clone()
    (x * x + y).sum().backward()
    return g1


# ---- custom autograd.Function ------------------------------------------------------------------

@program(randn(3, 2), randn(2))
def custom_function(lib, F, x, y):
    class MyExpMul(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, k):
            e = a.exp()
            ctx.save_for_backward(e, b)
            ctx.k = k
            return e * b * k

        @staticmethod
        def backward(ctx, g):
            e, b = ctx.saved_tensors
            return g * e * b * ctx.k, (g * e * ctx.k).sum(0), None
    return MyExpMul.apply(x, y, 3.0)


@program(randn(4))
def custom_function_mark_dirty(lib, F, x):
    class AddOne(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            a.add_(1)
            ctx.mark_dirty(a)
            return a

        @staticmethod
        def backward(ctx, g):
            return g * 1
    h = x * 2
    out = AddOne.apply(h)
    return out, out is h, h._version


@program(randn(3, 4))
def custom_function_non_differentiable(lib, F, x):
    class TwiceAndMax(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            m = a.amax(0)
            ctx.mark_non_differentiable(m)
            return a * 2, m, a.argmax(1)

        @staticmethod
        def backward(ctx, g, gm, gi):
            return g * 2
    y, m, i = TwiceAndMax.apply(x)
    return y, m, i, (y * m).sum()


@program(randn(3), randn(3))
def custom_function_variants(lib, F, x, y):
    class Ident(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a

        @staticmethod
        def backward(ctx, g):
            return g * 3

    class Scale(lib.autograd.Function):          # setup_context style
        @staticmethod
        def forward(a, k):
            return a * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.k = inputs[1]

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

    class Pair(lib.autograd.Function):           # one output unused: grads materialised
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b, a + b

        @staticmethod
        def backward(ctx, g1, g2):
            a, b = ctx.saved_tensors
            return g1 * b + g2, g1 * a + g2

    class Needs(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.flags = ctx.needs_input_grad
            return a * 2 + b

        @staticmethod
        def backward(ctx, g):
            return g * 2 if ctx.needs_input_grad[0] else None, \
                g if ctx.needs_input_grad[1] else None

    i = Ident.apply(x)
    p, q = Pair.apply(x, y)
    n = Needs.apply(x, y.detach())
    return i, i is x, Scale.apply(y, 2.5), p, n, Pair.apply(x, y)[1]


@program(randn(3), randn(3), backward=False)
def hooks_and_inplace(lib, F, x, y):
    seen = []
    h = x * y
    h.register_hook(lambda g: seen.append(g.clone()))
    h.retain_grad()
    h.add_(1)
    h.mul_(y)
    h.sum().backward()
    b = x * 2
    v = b[1:]
    v.retain_grad()
    v.mul_(y[1:])
    (b * y).sum().backward()
    return seen, h.grad, h.grad_fn, v.grad, v.grad_fn


@program(randn(3, 4))
def tensor_metadata(lib, F, x):
    y = x * 1
    v = y[1]
    return (x.float() is x, x.contiguous() is x, y.t().contiguous().is_contiguous(),
            v._base is y, y.t()._base is y, y.view(-1)[2:]._base is y, x.clone().is_leaf,
            v.data_ptr() - y.data_ptr(), v.storage_offset(), y.t().stride(), x.dim(), x.ndim,
            x.numel(), x.size(), x.size(-1), x.shape[0], len(x), x.is_leaf, y.is_leaf,
            y.requires_grad, x.detach().requires_grad, x.new_zeros(2, 3), x.new_ones((2,)),
            x.new_full((2,), 3), x.new_tensor([1, 2]), x.element_size(), x.is_floating_point(),
            lib.tensor([1]).is_floating_point(), x.type(), lib.is_tensor(x),
            x.detach().sum().item(),
            x[0, 0].item() == float(x[0, 0].detach()), x.tolist(), lib.tensor([1, 2]).tolist())


@program(randn(2, 3), randn(0), randn(2, 3), arr([[1, 2]], np.int64),
         graph_differs=("the empty 1-d input reaches CatBackward0 through a view in llgrad"))
def cat_with_empty(lib, F, x, e, y, i):
    return (lib.cat([x, e]), lib.cat([e, x, y], 1), lib.stack([x[0], y[0]], 1), lib.cat([e, e]),
            lib.cat([i, lib.tensor([])]), lib.cat([i, lib.tensor([], dtype=lib.int64)], 1))


# ---- higher order ------------------------------------------------------------------------------

@program(randn(4), backward=False,
         graph_differs=("PyTorch's backward formulas multiply by Scalars (MulBackward1), "
                        "llgrad's VJP rules by wrapped numbers (MulBackward0)"))
def grad_of_grad(lib, F, x):
    y = (x ** 3).sum()
    g, = lib.autograd.grad(y, x, create_graph=True)
    g2, = lib.autograd.grad(g.sum(), x)
    return g, g2


@program(randn(3), randn(3), backward=False, grad_fn=False)
def double_backward(lib, F, x, y):
    z = (x.tanh() * y).sum()
    gx, = lib.autograd.grad(z, x, create_graph=True)
    (gx * gx).sum().backward()
    return gx


@program(rand(5, dtype=np.float64), backward=False, grad_fn=False)
def higher_order_ops(lib, F, x):
    f = (x.sigmoid() * x.exp() + x.sin() * x.log_softmax(0) + x.log() * x.sqrt()).sum()
    g, = lib.autograd.grad(f, x, create_graph=True)
    g2, = lib.autograd.grad((g * g).sum(), x, create_graph=True)
    g3, = lib.autograd.grad(g2.sum(), x)
    return g, g2, g3


@program(randn(4, 3, dtype=np.float64), backward=False, grad_fn=False)
def higher_order_views_inplace(lib, F, x):
    b = x * 1
    b[0].mul_(x[1])
    b[:, 1:].exp_()
    v = b.t()[2]
    f = (b * b).sum() + v.sum() + x[[0, 0, 3]].pow(3).sum() + x.gather(
        1, lib.tensor([[0], [2], [1], [1]])).sin().sum()
    g, = lib.autograd.grad(f, x, create_graph=True)
    g2, = lib.autograd.grad((g * g).sum(), x)
    return g, g2


@program(randn(6, 5, dtype=np.float64), randn(5, 3, dtype=np.float64),
         arr([0, 2, 1, 1, 0, 2], np.int64), randn(5, dtype=np.float64), backward=False,
         grad_fn=False)
def higher_order_nn(lib, F, x, w, y, g):
    h = F.layer_norm(x, (5,), g, None)
    logits = (h @ w).tanh() * 3
    loss = F.cross_entropy(logits, y) + F.mse_loss(logits.softmax(1), logits.sigmoid()) + \
        F.binary_cross_entropy_with_logits(logits, logits.detach().sigmoid()) + \
        logits.logsumexp(1).mean() + logits.std() + logits.amax(1).sum() + F.gelu(logits).var()
    gw, gx = lib.autograd.grad(loss, (w, x), create_graph=True)
    penalty = (gw * gw).sum() + (gx ** 2).mean()
    penalty.backward()
    return loss, gw, gx, penalty


# ---- arithmetic ----------------------------------------------------------------------------------

@program(randn(3, 1), randn(1, 4), rand(3, 4))
def arith_broadcast(lib, F, x, y, p):
    return (x + y, x - y, x * y, y / p, x.add(y, alpha=2), x.sub(y, alpha=0.5), -x, x + 1,
            1 + x, x * 2.5, 3 * y, x - 1, x.mul(y).div(2), p / x.abs().add(1),
            lib.add(x, y), lib.mul(p, y))


@program(randn(4), rand(4), rand(4))
def scalar_left_and_pow(lib, F, x, p, q):
    return (2 - x, 2 / p, 2 ** x, p ** q, x ** 2, p ** 0.5, x ** 0, 1.5 ** x, x.square(),
            q.pow(3), p.reciprocal(), lib.pow(p, q), lib.pow(x, 3), 0.5 - p * 2)


@program(rand(3, 4), randn(3, 4))
def unary_math(lib, F, p, x):
    return (p.log(), p.sqrt(), p.rsqrt(), x.exp(), p.log1p(), (x.abs() + 0.1).log1p(),
            x.expm1(), x.abs(), x.sign(), x.sin(),
            x.cos(), x.tanh(), x.sigmoid(), lib.exp(x), lib.abs(x), lib.sqrt(p), x.neg())


@program(randn(3, 5) * 3)
def activations(lib, F, x):
    return (x.relu(), F.relu(x), F.leaky_relu(x), F.leaky_relu(x, 0.2), F.gelu(x),
            F.gelu(x, approximate="tanh"), F.silu(x), F.softplus(x),
            F.softplus(x, beta=2, threshold=1), lib.sigmoid(x), lib.relu(x), F.softmax(x, 1))


@program(arr([-100.0, -20.0, -1e-3, 0.0, 0.5, 1.0, 30.0, 100.0]),
         NG(arr([0.0, 1.0, 0.5, 0.0, 1.0, 0.3, 0.0, 1.0])))
def extreme_and_boundary_values(lib, F, x, t):
    return (x.relu(), x.abs(), x.sign(), F.leaky_relu(x), F.gelu(x), F.gelu(x, approximate="tanh"),
            F.silu(x), F.softplus(x), F.softplus(x, beta=0.5, threshold=5), x.sigmoid(), x.tanh(),
            x.clamp(0.0, 1.0), x.log_softmax(0), x.softmax(0), x.logsumexp(0),
            F.binary_cross_entropy_with_logits(x, t, reduction="none"),
            F.binary_cross_entropy_with_logits(x, t, pos_weight=lib.tensor(3.0)),
            (x * 0.01).exp(), x.clamp(max=0.0), lib.maximum(x, lib.zeros(())))


@program(randn(3, 4), randn(3, 4), np.array([[1, 0, 1, 0], [0, 0, 1, 1], [1, 1, 1, 0]], bool))
def clamp_maximum_where(lib, F, x, y, c):
    return (x.clamp(-0.5, 0.5), x.clamp(min=0), x.clamp(max=0.1), lib.clamp(x, -1, 1),
            lib.maximum(x, y), lib.minimum(x, y), lib.where(c, x, y), lib.where(c, x, 0.0),
            x.where(c, y), x.clip(-0.2, 0.3))


@program(arr([1.0, 2.0, 3.0, 2.0, -1.0]), arr([1.0, 3.0, 1.0, 2.0, -1.0]))
def maximum_minimum_ties(lib, F, x, y):
    return lib.maximum(x, y), lib.minimum(x, y), x.clamp(2.0, 3.0)


@program(randn(3, 4), rand(3, 4), arr([3, -7, 5], np.int64), arr([-0.5, -1.0, 0.0, -0.2]),
         arr([0.5, 0.3, 1.0, 0.1]), randn(3, 4, dtype=np.float64), np.array([True, False, True]),
         graph_differs=("sum(dtype=) casts first in llgrad (ToCopyBackward0 behind "
                        "SumBackward1)"))
def misc_methods(lib, F, x, p, i, lo, hi, d, b):
    v = (x * 1)[1]
    v.copy_(d[0])
    w = (x * 1)
    w[0].fill_(lo[0])
    w[2].zero_()
    return (7 // i, 7 % i, 2.5 // p.detach(), 3.0 % p.detach(), x.clamp(lo, hi),
            x.clamp(min=lo), lib.clamp(x, max=hi),
            x.to(lib.float64), x.to(d), x.to("cpu"), x.to(lib.float32, copy=True), x.type_as(d),
            x.var(False), x.std(True), x.sum(0, dtype=lib.float64), x.mean(1, dtype=lib.float64),
            i.prod(0), i.cumsum(0, dtype=lib.float32), (x > 0).all(1), (x > 0).any(), lib.max(x, p),
            lib.min(x, p), v, w, True ^ b, b ^ True, b | False, b & True, ~b, -i, i.abs(),
            lib.allclose(x, x + 1e-9), lib.equal(x, x), lib.where(x > 0)[1], x.var(1, correction=2),
            x.argmax(keepdim=True), i.max(), i.min(0), lib.broadcast_tensors(lo, x)[0],
            x.new_full((2,), 1.5, requires_grad=True), i.div(2, rounding_mode="trunc"),
            i.div(2, rounding_mode="floor"), x.detach().div(0.3, rounding_mode="floor"),
            x.detach().sum().div(i.sum(), rounding_mode="trunc"))


@program(randn(3, 4), backward=False)
def div_rounding_mode_grad_fn(lib, F, x):
    return x.div(0.3, rounding_mode="floor"), x.div(-0.7, rounding_mode="trunc")


@program(randn(2, 4) * 2, arr([0.5, -1.0, 0.0, 1.0]), arr([-0.5, 0.3, -1.0, 2.0]))
def clamp_tensor_bounds_min_gt_max(lib, F, x, lo, hi):
    return x.clamp(lo, hi)


@program()
def creation_more(lib, F):
    lib.manual_seed(0)
    return (lib.tensor([True, 2]), lib.tensor([[1, 2], [3, 4]], dtype=lib.float32),
            lib.tensor(np.float64(1.5)), lib.tensor(np.array([1, 2], np.int32)),
            lib.arange(0, 5, 0.5), lib.arange(5, dtype=lib.float32), lib.zeros((2, 3)),
            lib.ones([2]), lib.eye(2, 3), lib.empty(2, 0).shape, lib.zeros_like(lib.tensor([1, 2])),
            lib.full_like(lib.zeros(2), 2), lib.full_like(lib.zeros(2, dtype=lib.int64), 2.7),
            lib.as_tensor([1.0, 2.0]), lib.from_numpy(np.arange(3)), lib.randn(2, 3).shape,
            lib.randn(2, dtype=lib.float64).dtype, lib.rand(3).dtype, lib.randint(0, 5, (4,)).dtype,
            lib.randperm(4).dtype, lib.initial_seed(), lib.linspace(-1, 1, 3),
            lib.zeros(2, requires_grad=True), lib.ones(1, 2, dtype=lib.float64),
            lib.tensor([[1.5]]).dtype, lib.tensor([]).shape, lib.tensor(2.0).shape)


# ---- reductions ----------------------------------------------------------------------------------

@program(randn(3, 4, 5),
         graph_differs=("sum(dtype=) casts first in llgrad (ToCopyBackward0 behind "
                        "SumBackward1)"))
def reductions_sum_mean(lib, F, x):
    return (x.sum(), x.sum(1), x.sum((0, 2), keepdim=True), x.sum(-1, keepdim=True), x.mean(),
            x.mean((1, 2)), x.mean(0, keepdim=True), lib.sum(x, dim=(-1, 0)), lib.mean(x, -1),
            x.sum(dim=1, dtype=lib.float64))


@program(arr([[1.5, 0.0, 2.0, -1.0], [0.0, 3.0, 0.0, 1.0], [2.0, -0.5, 1.5, 1.1]]))
def prod_with_zeros(lib, F, x):
    return x.prod(), x.prod(1), x.prod(0, keepdim=True), x[2].prod(), lib.prod(x, -1)


@program(arr([[1.0, 3.0, 3.0, 0.5], [2.0, 2.0, -1.0, 2.0], [0.0, -4.0, 3.0, -4.0]]))
def amax_amin_max_ties(lib, F, x):
    return (x.amax(), x.amax(1), x.amin((0, 1)), x.amin(-1, keepdim=True), x.max(), x.min(),
            lib.amax(x, 0), x.max(1).values, x.max(1).indices)


@program(randn(3, 5))
def max_min_indices(lib, F, x):
    v, i = x.max(1)
    r = x.min(0, keepdim=True)
    t = lib.max(x, -1, keepdim=True)
    return (x.max(), x.min(), v, i, r.values, r.indices, x.argmax(), x.argmin(1),
            t[0], t[1], x.argmax(0, keepdim=True), lib.min(x, 1)[0])


@program(randn(3, 4, 2, dtype=np.float64))
def var_std_logsumexp(lib, F, x):
    return (x.var(), x.var(1), x.var(0, unbiased=False, keepdim=True), x.std(),
            x.std(1, keepdim=True), x.std(correction=0), x.var(dim=(0, 2)), x.logsumexp(1),
            x.logsumexp((0, 1)), x.logsumexp(0, keepdim=True), lib.logsumexp(x, -1),
            lib.var(x, 2, correction=0), lib.std(x, (1, 2), keepdim=True))


@program(randn(2, 3, 4))
def softmax_family(lib, F, x):
    return (x.softmax(1), x.log_softmax(0), F.softmax(x, dim=-1), F.log_softmax(x, dim=1),
            lib.softmax(x, 0), lib.log_softmax(x * 10, 2), x.softmax(-1, dtype=lib.float64))


# ---- matrix products -------------------------------------------------------------------------

@program(randn(4), randn(4), randn(3, 4), randn(4, 5), randn(2, 3, 4), randn(2, 4, 5),
         randn(2, 1, 3, 4), randn(5, 4, 2),
         graph_differs=("batched matmul: PyTorch's UnsafeViewBackward0 leads to BmmBackward0, "
                        "llgrad's to the operands"))
def matmul_family(lib, F, v, w, A, B, X, Y, P, Q):
    return (v @ w, A @ v, A @ B, X @ Y, P @ Q, X @ B, v @ Y, A.mm(B), X.bmm(Y), lib.matmul(X, w),
            lib.mm(A, B), A.matmul(B), X @ Y[0], lib.dot(v, w), A.mv(w), A @ Y, Q.mT @ w, P @ B)


@program(randn(4), randn(4, 5))
def matmul_1d_2d(lib, F, v, B):
    return v @ B


# ---- data movement -----------------------------------------------------------------------------

@program(randn(2, 3), randn(4, 3), randn(2, 3))
def cat_stack(lib, F, x, y, z):
    return (lib.cat([x, y]), lib.cat((x, z), dim=1), lib.cat([x, z, x], -1), lib.stack([x, z]),
            lib.stack([x, z], dim=2), lib.stack((x, z), -1), lib.cat([x, y * 2], dim=0))


@program(randn(3, 4), arr([[0, 3], [1, 1], [2, 0]], np.int64), arr([[2, 0, 1, 1]], np.int64),
         arr([2, 0, 2], np.int64), np.array([[1, 0, 0, 1], [0, 1, 0, 0], [1, 1, 1, 1]], bool))
def gather_index_select_masked_cumsum(lib, F, x, idx, idx0, i1, m):
    return (x.gather(1, idx), lib.gather(x, 0, idx0), x.index_select(0, i1),
            x.index_select(1, i1), x.masked_fill(m, 0.0), x.masked_fill(m, -1.5), x.cumsum(0),
            x.cumsum(-1), lib.cumsum(x, 1), lib.masked_fill(x, m[0], 2.0),
            lib.index_select(x, -1, i1[:2]))


@program(randn(3, 4))
def dropout_p0_and_eval(lib, F, x):
    h = x * 2
    return (F.dropout(h, p=0.0), F.dropout(h, p=0.5, training=False), F.dropout(h, 0.0, True),
            F.dropout(x, 0.3, training=False) is x, F.dropout(h, 0.9, False) is h)


# ---- nn.functional -------------------------------------------------------------------------------

@program(randn(2, 3, 4), randn(4), randn(4), randn(3, 4))
def layer_norm(lib, F, x, w, b, w2):
    return (F.layer_norm(x, (4,), w, b), F.layer_norm(x, (3, 4)), F.layer_norm(x, [4], eps=1e-3),
            F.layer_norm(x, (3, 4), w2, None), F.layer_norm(x * 3 + 1, (4,), None, b))


@program(randn(4, 3, 5), randn(3), randn(3), NG(np.zeros(3, np.float32)),
         NG(np.ones(3, np.float32)), randn(6, 3))
def batch_norm_train(lib, F, x, w, b, rm, rv, x2):
    y = F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.2)
    y2 = F.batch_norm(x2, rm, rv, training=True)
    y3 = F.batch_norm(x2 * 2, None, None, w, None, training=True)
    return y, y2, y3, rm.clone(), rv.clone()


@program(randn(4, 3, 5), randn(3), randn(3), NG(randn(3)), NG(rand(3)), randn(5, 3))
def batch_norm_eval(lib, F, x, w, b, rm, rv, x2):
    return (F.batch_norm(x, rm, rv, w, b, training=False), F.batch_norm(x, rm, rv),
            F.batch_norm(x2, rm, rv, None, b, eps=1e-3))


@program(randn(6, 3), arr([[0, 1, 5, 1], [3, 3, 2, 5]], np.int64))
def embedding(lib, F, w, idx):
    return (F.embedding(idx, w), F.embedding(idx, w, padding_idx=1),
            F.embedding(idx[0], w, padding_idx=-1), F.embedding(idx[1, 1], w))


@program(randn(5, 4), arr([1, 0, 3, 3, 2], np.int64))
def cross_entropy_reductions(lib, F, x, t):
    return (F.cross_entropy(x, t), F.cross_entropy(x, t, reduction="sum"),
            F.cross_entropy(x, t, reduction="none"))


@program(randn(5, 4), arr([1, -100, 3, 2, 0], np.int64), arr([1, 0, 3, 2, 2], np.int64),
         NG(rand(4)))
def cross_entropy_weight_ignore(lib, F, x, t, t2, w):
    return (F.cross_entropy(x, t, weight=w), F.cross_entropy(x, t2, ignore_index=2),
            F.cross_entropy(x, t, reduction="none"),
            F.cross_entropy(x, t2, weight=w, ignore_index=2, reduction="none"),
            F.cross_entropy(x, t2, weight=w, ignore_index=2, reduction="sum"),
            F.cross_entropy(x, t2, weight=w, ignore_index=2))


@program(randn(5, 4), arr([1, 0, 3, 2, 2], np.int64), NG(rand(4)),
         graph_differs=("PyTorch's label smoothing multiplies by Scalars (MulBackward1)"))
def cross_entropy_label_smoothing(lib, F, x, t, w):
    return (F.cross_entropy(x, t, label_smoothing=0.1),
            F.cross_entropy(x, t, weight=w, label_smoothing=0.2),
            F.cross_entropy(x, t, ignore_index=2, label_smoothing=0.3),
            F.cross_entropy(x, t, weight=w, ignore_index=2, label_smoothing=0.1),
            F.cross_entropy(x, t, label_smoothing=0.1, reduction="none"),
            F.cross_entropy(x, t, weight=w, label_smoothing=0.1, reduction="sum"))


_PROBS = np.random.default_rng(7).dirichlet(np.ones(4), 5).astype(np.float32)


@program(randn(5, 4), NG(_PROBS), NG(rand(4)), randn(4))
def cross_entropy_prob_targets(lib, F, x, p, w, v):
    return (F.cross_entropy(x, p, reduction="sum"), F.cross_entropy(x, p, reduction="none"),
            F.cross_entropy(x, p, weight=w, reduction="sum"),
            F.cross_entropy(x, p, label_smoothing=0.2, reduction="none"),
            F.cross_entropy(x, p, weight=w, label_smoothing=0.1, reduction="none"),
            F.cross_entropy(v, p[0], weight=w, reduction="none"))


@program(randn(5, 4), NG(_PROBS), NG(rand(4)), grad_fn=False)
def cross_entropy_prob_targets_mean_values(lib, F, x, p, w):
    return (F.cross_entropy(x, p), F.cross_entropy(x, p, weight=w),
            F.cross_entropy(x, p, label_smoothing=0.2))


@program(randn(5, 4), NG(_PROBS))
def cross_entropy_prob_targets_mean(lib, F, x, p):
    return F.cross_entropy(x, p)


_KT = arr([[0, 3, 1], [2, 2, -100]], np.int64)


@program(randn(2, 4, 3), _KT, NG(rand(4)), randn(2, 4, 3, 2),
         arr([[[0, 1]] * 3, [[3, 2]] * 3], np.int64))
def cross_entropy_kdim_none(lib, F, x, t, w, x4, t4):
    return (F.cross_entropy(x, t, reduction="none"),
            F.cross_entropy(x, t, weight=w, reduction="none"),
            F.nll_loss(x.log_softmax(1), t, reduction="none"),
            F.cross_entropy(x4.unsqueeze(-1), t4.unsqueeze(-1), reduction="none"))


@program(randn(2, 4, 3), _KT, NG(rand(4)), randn(2, 4, 3, 2),
         arr([[[0, 1]] * 3, [[3, 2]] * 3], np.int64),
         graph_differs=("PyTorch flattens k-dim inputs for nll_loss2d (ViewBackward0), llgrad "
                        "does not"))
def cross_entropy_kdim(lib, F, x, t, w, x4, t4):
    return (F.cross_entropy(x, t), F.cross_entropy(x, t, weight=w, reduction="sum"),
            F.cross_entropy(x4, t4), F.cross_entropy(x4, t4, reduction="none"),
            F.cross_entropy(x, t, label_smoothing=0.1), F.nll_loss(x4, t4, reduction="sum"))


@program(randn(4), arr(2, np.int64), NG(rand(4)))
def cross_entropy_1d(lib, F, v, c, w):
    return (F.cross_entropy(v, c), F.cross_entropy(v, c, weight=w, reduction="sum"),
            F.nll_loss(v, c, reduction="mean"))


@program(randn(4), arr(2, np.int64))
def cross_entropy_1d_none(lib, F, v, c):
    return F.cross_entropy(v, c, reduction="none")


@program(randn(5, 4), arr([1, 0, 3, 0, 2], np.int64), NG(rand(4)))
def nll_loss(lib, F, x, t, w):
    lp = x.log_softmax(1)
    return (F.nll_loss(lp, t), F.nll_loss(lp, t, weight=w, reduction="sum"),
            F.nll_loss(lp, t, ignore_index=0, reduction="none"),
            F.nll_loss(lp, t, weight=w, ignore_index=0), F.nll_loss(x, t, weight=w))


@program(randn(3, 4), randn(3, 4))
def mse_loss(lib, F, x, y):
    return (F.mse_loss(x, y), F.mse_loss(x, y, reduction="sum"),
            F.mse_loss(x, y, reduction="none"), F.mse_loss(x * 2, y.detach()))


@program(randn(3, 4) * 3, rand(3, 4, lo=0.0, hi=1.0), NG(rand(3, 4)), NG(rand(4)))
def bce_with_logits(lib, F, x, t, w, pw):
    B = F.binary_cross_entropy_with_logits
    return (B(x, t), B(x, t, weight=w), B(x, t, pos_weight=pw),
            B(x, t, weight=w, pos_weight=pw, reduction="none"),
            B(x, t.detach(), weight=w[0], pos_weight=pw, reduction="sum"))


@program(randn(3, 4), randn(4), arr(0.5, np.float64), rtol=2e-5, atol=2e-6)
def inplace_activations_and_broadcast(lib, F, x, r, d):
    a = x * 1
    F.relu(a, inplace=True)
    b = x * 1
    b.sigmoid_()
    c = x * 1
    same = c.add_(r) is c
    c.mul_(d)
    c.clamp_(min=-0.5)
    e = x.clone()
    e.sub_(r, alpha=0.5).div_(2.0).pow_(2)
    return a, b, c, same, e


@program(randn(3, 4))
def leaky_relu_inplace(lib, F, x):
    b = x * 1
    F.leaky_relu(b, 0.1, inplace=True)
    return b


# ---- integration programs ----------------------------------------------------------------------

@program(randn(8, 5), arr([0, 2, 1, 2, 0, 1, 1, 0], np.int64), randn(16, 5) * 0.3,
         NG(np.zeros(16, np.float32)), randn(3, 16) * 0.3, NG(np.zeros(3, np.float32)),
         backward=False, rtol=1e-4, atol=1e-5)
def mlp_sgd_steps(lib, F, x, y, w1, b1, w2, b2):
    b1.requires_grad_()
    b2.requires_grad_()
    params = [w1, b1, w2, b2]
    losses = []
    for step in range(3):
        h = F.gelu(F.linear(x, w1, b1))
        h = F.layer_norm(h, (16,))
        logits = F.linear(F.dropout(h, 0.0), w2, b2)
        loss = F.cross_entropy(logits, y, label_smoothing=0.05)
        loss.backward()
        with lib.no_grad():
            for p in params:
                p -= 0.5 * p.grad
                if step < 2:
                    p.grad.zero_()
        losses.append(loss.detach())
    return losses, [p.detach().clone() for p in params]


@program(randn(2, 4, 8), randn(8, 8) * 0.3, randn(8, 8) * 0.3, randn(8, 8) * 0.3, randn(8),
         randn(8), rtol=1e-4, atol=1e-5)
def attention_block(lib, F, x, wq, wk, wv, g, b):
    h = F.layer_norm(x, (8,), g, b)
    q, k, v = h @ wq, h @ wk, h @ wv
    q = q.view(2, 4, 2, 4).transpose(1, 2)
    k = k.view(2, 4, 2, 4).transpose(1, 2)
    v = v.view(2, 4, 2, 4).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / 2.0)
    mask = lib.tensor(np.triu(np.ones((4, 4), bool), 1))
    att = att.masked_fill(mask, float("-inf")).softmax(-1)
    y = (att @ v).transpose(1, 2).contiguous().view(2, 4, 8)
    return x + y, att


# ---- dtypes -----------------------------------------------------------------------------------

@program(arr([1, 2, 3], np.int64), arr([4, 5, 6], np.int32), NG(randn(3)),
         NG(arr(2.5, np.float64)), NG(randn(3, dtype=np.float64)), np.array([True, False, True]),
         arr([2, -3, 7], np.int64))
def dtype_promotion(lib, F, i, j, f, d0, d1, b, k):
    return (i + 1.5, i * 2, i / k, i + j, j * 2, j / 2, f + d0, f + d1, f * i, b + i, b & b,
            i > 1, f == f, f < 0.5, i.float(), f.double(), b + True, i.sum(), i.prod(),
            i.cumsum(0), f.to(lib.float64), j.sum(), i + d0, j + f, d0 * 2, b.sum(),
            (f > 0).dtype, (i + 1.5).dtype, k // 2, k % 3, f // 0.5, f % 0.7,
            j.float().dtype, lib.where(b, i, 1.5).dtype, lib.where(b, i, 1).dtype)


@program(randn(3), arr(2.0, np.float64), randn(3, dtype=np.float64), arr([1, 2, 3], np.int64))
def dtype_promotion_grads(lib, F, x, d0, d1, i):
    return x + d0, x * d1, x.double() * 2, d0 * 3, x * i, i * d0, x.to(lib.float64) + d1


@program()
def creation_dtypes(lib, F):
    return (lib.tensor(1.5), lib.tensor([1, 2]), lib.tensor([True]), lib.tensor([[1.0, 2]]),
            lib.arange(5), lib.arange(0, 1, 0.25), lib.arange(1, 7, 2), lib.zeros(2, 3),
            lib.ones(2, dtype=lib.int32), lib.full((2,), 3), lib.full((2,), 3.0),
            lib.full((1,), True), lib.eye(3), lib.linspace(0, 1, 5), lib.zeros_like(lib.ones(2)),
            lib.ones_like(lib.tensor([1, 2])), lib.tensor(3), lib.tensor([1.0], dtype=lib.float64))



# ---- reprs -----------------------------------------------------------------------------------

@program(arr([[0.5, -1.25], [3.0, 1e-3]]), arr([1.0, 2.0], np.float64), backward=False)
def reprs(lib, F, x, d):
    y = x * 2
    return [repr(t) for t in (x, y, y.sum(), x.unbind(0)[0], x > 0, lib.tensor([1, -2]), d,
                              d.exp(), x.detach(), x.t(), lib.tensor([]), y.grad_fn, x.shape,
                              x.dtype, d.dtype, x[0, 0] * 1e5, x.argmax(), x.max(1),
                              x.min(0, keepdim=True), lib.arange(2000.).reshape(40, 50),
                              lib.tensor(np.float16([1.5, 2])), lib.tensor(np.uint8([1, 250])),
                              lib.tensor(np.arange(24.).reshape(2, 3, 4)), lib.zeros(2, 0, 3),
                              lib.tensor([123456789.0, 1.0]), lib.tensor(np.arange(1200)))] + \
        [str(y)]


# ---- errors (types only) -----------------------------------------------------------------------

@program(randn(3), error=True)
def err_version_counter_output(lib, F, x):
    y = x.exp()
    y.add_(1)
    y.sum().backward()


@program(randn(3), error=True)
def err_version_counter_input(lib, F, x):
    y = x * 2
    z = y * y
    y[0].mul_(3)
    z.sum().backward()


@program(randn(3), error=True)
def err_version_counter_inplace_chain(lib, F, x):
    b = x.clone()
    b.sigmoid_().mul_(x)
    b.sum().backward()


# tensors that require grad where PyTorch never differentiates (no silent zero gradient)
@program(randn(4, 3), arr([0, 1, 2, 0], np.int64), rand(3), error=True)
def err_nll_loss_weight_requires_grad(lib, F, x, t, w):
    F.nll_loss(x.log_softmax(1), t, weight=w)


@program(NG(randn(4, 3)), arr([0, 1, 2, 0], np.int64), rand(3), error=True)
def err_cross_entropy_weight_requires_grad(lib, F, x, t, w):
    F.cross_entropy(x, t, weight=w)


@program(randn(4, 3), NG(rand(4, 3)), rand(3), error=True)
def err_bce_pos_weight_requires_grad(lib, F, x, y, p):
    F.binary_cross_entropy_with_logits(x, y, pos_weight=p)


@program(randn(4, 3), rand(3), NG(rand(3)), error=True)
def err_batch_norm_running_mean_requires_grad(lib, F, x, rm, rv):
    F.batch_norm(x, rm, rv, training=True)


@program(randn(4, 3), NG(rand(3)), rand(3), error=True)
def err_batch_norm_eval_running_var_requires_grad(lib, F, x, rm, rv):
    F.batch_norm(x, rm, rv, training=False)


@program(randn(3), error=True)
def err_inplace_leaf(lib, F, x):
    x.add_(1)


@program(randn(3), error=True)
def err_inplace_view_of_leaf(lib, F, x):
    x[0].mul_(2)


@program(randn(3), error=True)
def err_backward_twice(lib, F, x):
    y = (x * x).sum()
    y.backward()
    y.backward()


@program(randn(3), randn(4), error=True)
def err_shape_mismatch_add(lib, F, x, y):
    return x + y


@program(randn(3), error=True)
def err_nonscalar_backward(lib, F, x):
    (x * 2).backward()


@program(randn(3, 2), error=True)
def err_multi_view_inplace(lib, F, x):
    x.clone().unbind(0)[0].mul_(2)


@program(randn(2, 3), randn(2, 3), error=True)
def err_mm_shape(lib, F, x, y):
    return x.mm(y)


@program(error=True)
def err_int_requires_grad(lib, F):
    return lib.tensor([1, 2], requires_grad=True)


@program(randn(3, 2), error=True)
def err_index_out_of_range(lib, F, x):
    return x[5]


@program(randn(3, 2), error=True)
def err_view_incompatible(lib, F, x):
    return x.t().view(-1)


@program(randn(3), randn(3), error=True)
def err_grad_unused(lib, F, x, y):
    return lib.autograd.grad((x * 2).sum(), [x, y])


@program(arr([1, 2], np.int64), error=True)
def err_inplace_int_float_result(lib, F, i):
    i.add_(1.5)


@program(randn(2, 3), randn(2, 4), error=True)
def err_cat_mismatch(lib, F, x, y):
    return lib.cat([x, y])


@program(randn(4), error=True)
def err_expand_inplace_overlap(lib, F, x):
    a = (x * 1)[None].expand(3, 4)
    a.add_(1)


@program(randn(4), error=True)
def err_detach_shares_version(lib, F, x):
    y = x.exp()
    y.detach().mul_(2)
    y.sum().backward()


@program(randn(4), error=True)
def err_requires_grad_false_nonleaf(lib, F, x):
    (x * 2).requires_grad_(False)


@program(randn(4), error=True)
def err_grad_nonscalar(lib, F, x):
    return lib.autograd.grad(x * 2, x)


@program(randn(4), error=True)
def err_backward_under_no_grad(lib, F, x):
    with lib.no_grad():
        y = (x * 2).sum()
    y.backward()


@program(randn(4), error=True)
def err_retain_grad_no_grad(lib, F, x):
    x.detach().retain_grad()


@program(arr([1, 2], np.int64), error=True)
def err_mean_of_int(lib, F, i):
    return i.mean()


@program(randn(3), error=True)
def err_saved_input_of_function_modified(lib, F, x):
    class Sq(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            a, = ctx.saved_tensors
            return 2 * a * g
    h = x * 1
    out = Sq.apply(h)
    h.add_(1)
    out.sum().backward()


@program(randn(3, 2), error=True)
def err_view_size(lib, F, x):
    return x.view(5)

@program(randn(3, 2), error=True)
def err_expand_bad(lib, F, x):
    return x.expand(3, 3)

@program(randn(3, 2), error=True)
def err_permute_bad(lib, F, x):
    return x.permute(0)

@program(randn(3, 2), error=True)
def err_reshape_bad(lib, F, x):
    return x.reshape(7)

@program(randn(3, 2), error=True)
def err_narrow_bad(lib, F, x):
    return x.narrow(0, 2, 5)

@program(randn(3, 2), error=True)
def err_select_bad(lib, F, x):
    return x.select(0, 5)

@program(randn(3, 2), error=True)
def err_two_ellipsis(lib, F, x):
    return x[..., ..., 0]

@program(randn(3, 2), error=True)
def err_too_many_indices(lib, F, x):
    return x[0, 0, 0]

@program(randn(3, 2), error=True)
def err_dim_out_of_range(lib, F, x):
    return x.sum(5)

@program(randn(3, 2), error=True)
def err_softmax_dim_out_of_range(lib, F, x):
    return x.softmax(2)

@program(randn(3, 2), error=True)
def err_gather_float_index(lib, F, x):
    return x.gather(1, x.detach())

@program(randn(3, 2), error=True)
def err_index_float_tensor(lib, F, x):
    return x[x.detach()[:, 0]]

@program(randn(3, 2), error=True)
def err_stack_mismatch(lib, F, x):
    return lib.stack([x, x.t()])

@program(randn(3, 2), error=True)
def err_cross_entropy_target_range(lib, F, x):
    return F.cross_entropy(x, lib.tensor([0, 1, 2]))

@program(randn(3, 2), error=True)
def err_embedding_range(lib, F, x):
    return F.embedding(lib.tensor([3]), x)

@program(randn(3, 2), error=True)
def err_mm_dtype(lib, F, x):
    return x.mm(lib.ones(2, 2, dtype=lib.float64))

@program(randn(3, 2), error=True)
def err_matmul_0d(lib, F, x):
    return x @ x.sum()

@program(randn(3, 2), error=True)
def err_item_many(lib, F, x):
    return x.item()

@program(randn(3, 2), error=True)
def err_bool_many(lib, F, x):
    return bool(x > 0)

@program(randn(3, 2), error=True)
def err_numpy_requires_grad(lib, F, x):
    return x.numpy()

@program(randn(3, 2), error=True)
def err_len_0d(lib, F, x):
    return len(x.sum())

@program(randn(3, 2), error=True)
def err_clamp_no_bounds(lib, F, x):
    return x.clamp()

@program(randn(3, 2), error=True)
def err_mse_reduction(lib, F, x):
    return F.mse_loss(x, x, reduction='avg')

@program(randn(3, 2), error=True)
def err_dropout_p(lib, F, x):
    return F.dropout(x, 1.5)

@program(randn(3, 2), error=True)
def err_bce_shape(lib, F, x):
    return F.binary_cross_entropy_with_logits(x, x[0])

@program(randn(3, 2), error=True)
def err_layer_norm_shape(lib, F, x):
    return F.layer_norm(x, (3,))

@program(randn(3, 2), error=True)
def err_unflatten_bad(lib, F, x):
    return x.unflatten(0, (2, 2))

@program(randn(3, 2), error=True)
def err_split_sizes(lib, F, x):
    return x.split([1, 1])

@program(randn(3, 2), error=True)
def err_masked_fill_nonbool(lib, F, x):
    return x.masked_fill(lib.ones(3, 2, dtype=lib.int64), 0.0)

@program(randn(3, 2), error=True)
def err_set_grad_wrong_shape(lib, F, x):
    x.grad = lib.zeros(2)

@program(randn(3, 2), error=True)
def err_index_select_2d_index(lib, F, x):
    return x.index_select(0, lib.tensor([[0]]))

@program(randn(3), error=True)
def err_function_bad_grad_shape(lib, F, x):
    class Bad(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g[:2]
    Bad.apply(x).sum().backward()


@program(randn(3), error=True)
def err_function_too_many_grads(lib, F, x):
    class Bad(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g, g
    Bad.apply(x).sum().backward()


# ---- the test ---------------------------------------------------------------------------------

def test_enough_programs():
    assert len(PROGRAMS) >= 45


@pytest.mark.parametrize("prog", PROGRAMS)
def test_oracle(prog):
    expected = run("torch", prog)
    got = run("llgrad", prog)
    if prog.error:
        assert expected[0] == "raised", f"torch did not raise: {expected}"
        assert got == expected, f"llgrad {got} vs torch {expected}"
        return
    compare(expected[0], got[0], prog, "out")
    compare(expected[1], got[1], prog, "grad")
