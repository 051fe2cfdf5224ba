"""torch.func / torch.autograd.functional / forward_ad transforms applied inside
llgrad.compile: the compiled call equals eager (values, or the same error) over calls with
changing values and seeds, with no fallback warning; eager equals torch for each case."""
import copy
import warnings

import numpy as np
import pytest

import llgrad as L
from test_func_parity_s64_g9_functional import same_as_torch

torch = pytest.importorskip("torch")


def _x(T, s):
    return T.tensor(np.random.RandomState(s).randn(3, 4).astype(np.float32))


def _flat(o):
    if isinstance(o, dict):
        return [x for k in sorted(o) for x in _flat(o[k])]
    if isinstance(o, (tuple, list)):
        return [x for v in o for x in _flat(v)]
    return [o]


def _outcome(fn, args, seed):
    L.manual_seed(seed)
    try:
        return "ok", fn(*args)
    except (RuntimeError, ValueError) as e:
        return "err", f"{type(e).__name__}: {e}"


def _nesting(o):
    if isinstance(o, (tuple, list)):
        return type(o).__name__, [_nesting(v) for v in o]
    return sorted(o) if isinstance(o, dict) else "leaf"


def compiled_equals_eager(f, nargs=2, fallback=None):
    """fn = compile(f) gives f's results (or error); it compiles without a warning, or, with
    fallback, runs eagerly with a warning naming the reason fallback."""
    fn = L.compile(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for s in range(3):
            args = [_x(L, s + 7 * i) for i in range(nargs)]
            (ck, c), (ek, e) = _outcome(fn, args, s), _outcome(f, args, s)
            assert ck == ek, (c, e)
            if ck == "err":
                assert c == e
                continue
            assert _nesting(c) == _nesting(e)
            for a, b in zip(_flat(c), _flat(e), strict=True):
                np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-5)
    eager = [str(w.message) for w in caught if "running eagerly" in str(w.message)]
    if fallback is None:
        assert not caught, [str(w.message) for w in caught]
    else:
        assert eager and all(fallback in m and "test_func_parity_s64_g9" in m for m in eager)


def dropout_under_vmap(T, randomness):
    return lambda x, y: T.func.vmap(lambda u: T.nn.functional.dropout(u, 0.5, True) * y[0],
                                    randomness=randomness)(x)


def fwd_ad(T):
    def f(x, y):
        fa = T.autograd.forward_ad
        with fa.dual_level():
            return tuple(fa.unpack_dual((fa.make_dual(x, y).sin() * x).softmax(-1)))
    return f


AF = lambda T: T.autograd.functional      # noqa: E731
CASES = {
    "vmap-dropout-different": lambda T: dropout_under_vmap(T, "different"),
    "vmap-dropout-same": lambda T: dropout_under_vmap(T, "same"),
    "vmap-dropout-error": lambda T: dropout_under_vmap(T, "error"),
    "vmap-inplace-unbatched-error": lambda T: lambda x, y: T.func.vmap(
        lambda u, v: v.add_(u), in_dims=(0, None))(x, y[0]),
    "vmap-nested-kwargs": lambda T: lambda x, y: T.func.vmap(T.func.vmap(
        lambda a, b, scale=1.0: (a * b).sum() * scale, in_dims=(None, 0)), in_dims=(0, None))(
        x, y, scale=y[0, 0]),
    "grad-aux-argnums": lambda T: lambda x, y: T.func.grad(
        lambda a, b: ((a * b).sin().sum(), {"m": a.mean()}), argnums=(0, 1), has_aux=True)(x, y),
    "jacfwd-dict": lambda T: lambda x, y: T.func.jacfwd(
        lambda a: {"s": a.sin() * y[0], "t": (a.sum(), a * a[0])})(x[0]),
    "hessian": lambda T: lambda x, y: T.func.hessian(lambda a: (a.sin() * a.prod()).sum())(x[0]),
    "linearize": lambda T: lambda x, y: (lambda o, f: (o, f(y)))(
        *T.func.linearize(lambda a: a.sin() * a, x)),
    "af-jacobian-vectorize": lambda T: lambda x, y: AF(T).jacobian(
        lambda a: a.sin() * a.sum(), x[0], vectorize=True),
    "af-hessian-create-graph": lambda T: lambda x, y: AF(T).hessian(
        lambda a: (a.exp() * a).sum(), x[0], create_graph=True),
    "af-hvp": lambda T: lambda x, y: AF(T).hvp(lambda a: (a.sin() * a).sum(), x, y),
    "af-vjp-constant-output": lambda T: lambda x, y: AF(T).vjp(lambda a: T.ones(3, 4), x, y),
    "af-hvp-strict-linear": lambda T: lambda x, y: AF(T).hvp(lambda a: (a * 2).sum(), x, y,
                                                             strict=True),
    "forward-ad": fwd_ad,
    "af-jacobian-forward-mode-lists": lambda T: lambda x, y: AF(T).jacobian(
        lambda a, b: (a * b, a.sum()), (x[0], y[0]), vectorize=True, strategy="forward-mode"),
    "af-jvp-strict-linear-create-graph": lambda T: lambda x, y: AF(T).jvp(
        lambda a: a * 2, x, y, strict=True, create_graph=True),
    "vmap-different-out-dims-none": lambda T: lambda x, y: T.func.vmap(
        lambda u: (u * y[0], y * 2), out_dims=(0, None), randomness="different")(x),
    "vmap-different-batched-out-dims-none": lambda T: lambda x, y: T.func.vmap(
        lambda u: u * 2, out_dims=None, randomness="different")(x),
    "linearize-bad-tangent": lambda T: lambda x, y: T.func.linearize(lambda a: a.sin(), x)[1](
        y[0]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_equals_eager(name):
    if name not in ("vmap-dropout-different", "vmap-dropout-same"):        # (random streams differ from torch's)
        same_as_torch(lambda T: CASES[name](T)(_x(T, 0), _x(T, 7)))
    compiled_equals_eager(CASES[name](L), fallback=FALLBACKS.get(name))


# (what llgrad.compile runs eagerly, with a warning naming the reason and the user's line)
FALLBACKS = {"af-hessian-create-graph": "leaf that requires grad made inside the function",
             "forward-ad": "forward-mode AD"}


def _tied():
    L.manual_seed(0)

    class M(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = L.nn.Linear(4, 4, bias=False)
            self.b = L.nn.Linear(4, 4, bias=False)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))
    return M()


def test_functional_call_tied_and_ensemble_compiled():
    m = _tied()
    compiled_equals_eager(lambda x, y: L.func.grad(
        lambda p: L.func.functional_call(m, p, (x,), strict=True).pow(2).sum())(
        {"a.weight": y.repeat(2, 1)[:4]}))
    ms = [L.nn.Sequential(L.nn.Linear(4, 4), L.nn.BatchNorm1d(4)).eval() for _ in range(3)]
    params, buffers = L.func.stack_module_state(ms)
    base = copy.deepcopy(ms[0]).to("meta")
    compiled_equals_eager(lambda x: L.func.vmap(
        lambda p, b, u: L.func.functional_call(base, (p, b), (u,)), in_dims=(0, 0, None))(
        params, buffers, x), nargs=1)


def test_custom_function_generated_vmap_compiled():
    class Cube(L.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            return g * 3 * ctx.saved_tensors[0] ** 2
    compiled_equals_eager(lambda x: (L.func.vmap(Cube.apply)(x),
                                     L.func.vmap(L.func.grad(lambda u: Cube.apply(u).sum()))(x)),
                          nargs=1)
