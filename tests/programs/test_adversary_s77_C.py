"""Tensor semantics against PyTorch, as a hostile tester writes them (s77 C): indices with
more than one Ellipsis, torch.norm's string orders over the wrong number of dims. Each case
`fn(lib, x)` runs with torch, llgrad eagerly and llgrad.compile (a first call that traces,
then calls on other values once the native code is built); observed: outputs' dtypes,
shapes and values, x after the call, x.grad, and the exception's type when torch raises.
The randomized sweeps that found these (dtype pairs, random indices, reductions) are in
test_adversary_s77_C2.py."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import llgrad  # noqa: E402

E = Ellipsis


def _plain(o):
    if hasattr(o, "detach") and hasattr(o, "dtype"):
        t = o.detach()
        name = str(t.dtype).split(".")[-1]
        return ("T", name, tuple(t.shape), np.array(t.float().numpy() if "16" in name
                                                     else t.numpy()).tolist())
    if isinstance(o, (tuple, list)):
        return [_plain(x) for x in o]
    return o


def _observe(lib, fn, base, grad, call):
    x = lib.tensor(base.copy(), requires_grad=grad)
    try:
        out = _plain(call(fn, lib, x))
    except Exception as e:      # noqa: BLE001 (the type is compared with torch's)
        return ("raises", type(e).__name__)
    g = None if x.grad is None else _plain(x.grad)
    return out, _plain(x), g


def _same(want, got, what):
    if want[0] == "raises" or got[0] == "raises":
        assert want == got, f"{what}: torch {want[:2]}, llgrad {str(got)[:300]}"
        return
    assert _close(want, got), f"{what}:\n torch  {str(want)[:400]}\n llgrad {str(got)[:400]}"


def _close(a, b):
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return np.isclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)
    return a == b


def check(fn, base, grad=False, compiled=True):
    """torch == llgrad eager (== llgrad.compile over three calls on other values)."""
    plain = lambda f, lib, x: f(lib, x)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(3 if compiled else 1):
            b = base + k
            want = _observe(torch, fn, b, grad, plain)
            _same(want, _observe(llgrad, fn, b, grad, plain), f"eager {fn.__name__}")
        if not compiled:
            return
        cf = llgrad.compile(fn)
        for k in range(3):
            b = base + k
            want = _observe(torch, fn, b, grad, plain)
            _same(want, _observe(llgrad, cf, b, grad, plain), f"compiled {fn.__name__} call {k}")
            cf.wait()


X3 = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7

# -- several Ellipses: PyTorch steps over the ...'s dims again at each one (NumPy raises);
# llgrad raised IndexError for any second ... --------------------------------------------

ELLIPSES = [(E, E), (E, 0, E), (0, E, E), (E, None, E), (E, E, E), (E, E, 0), (E, 0, E, 1),
            (0, E, 1, E), (E, [0, 1], E), (None, E, E, None), (E, slice(None), E),
            (E, slice(1, None), E), (1, E, E, 2), (E, E, slice(1, None)), (E, 0, 0, 0, E),
            (E, 0, 0, E, E), (E, None, None, E, 0), (E, "mask", E), (E, "index", E)]


def _idx(lib, idx):
    return tuple(lib.tensor([True, False, True, False]) if i == "mask" else
                 lib.tensor([[0], [1]]) if i == "index" else i for i in idx)


@pytest.mark.parametrize("k", range(len(ELLIPSES)))
def test_several_ellipses_get_set_grad(k):
    idx = ELLIPSES[k]

    def get(lib, x):
        return x[_idx(lib, idx)] * 2

    def put(lib, x):
        y = x * 1
        y[_idx(lib, idx)] = -1.5
        return y

    def grad(lib, x):
        y = x[_idx(lib, idx)]
        (y * y).sum().backward()
        return y

    for fn, g in ((get, False), (put, False), (grad, True)):
        check(fn, X3, grad=g, compiled=False)


def test_several_ellipses_zero_dim():
    def zero_dim(lib, x):
        z = x.sum()
        return z[E, E], z[None, E, E], z[E, None, E, None], z[()]
    check(zero_dim, X3, compiled=False)


@pytest.mark.slow
def test_compiled_ellipses_and_norms():
    def mixed(lib, x):
        y = x.clone()
        y[E, 0, E] += 10
        return (x[E, E] + 1, x[0, E, 1, E], x[E, None, E], y, x[E, lib.tensor([2, 0]), E],
                x.norm(dim=(0, 2)), x[0].norm(p="nuc"), x.norm(p="fro", dim=(1,)))
    check(mixed, X3)


def test_compiled_raises():
    def past_the_end(lib, x):
        return x[E, E, 0] + 1

    def nuc_3d(lib, x):
        return x.norm(p="nuc") + 1

    def fro_3_dims(lib, x):
        return (x * 2).norm(dim=(0, 1, 2))
    for fn in (past_the_end, nuc_3d, fro_3_dims):
        check(fn, X3)


def test_several_ellipses_out_of_range_raise():
    def past_the_end(lib, x):
        return x[E, E, 0]

    def none_past_the_end(lib, x):
        return x[None, E, E, None]
    check(past_the_end, X3, compiled=False)
    check(none_past_the_end, X3, compiled=False)


# -- torch.norm's string orders: 'fro' over more than 2 dims and 'nuc' without dim over a
# 3-d tensor are matrix norms and raise in PyTorch; llgrad gave the 2-norm / batched
# nuclear norms ----------------------------------------------------------------------------

NORMS = [dict(dim=(0, 1, 2)), dict(dim=[0, 1, 2], p="fro"), dict(p="nuc"),
         dict(p="nuc", dim=0), dict(p="nuc", keepdim=True), dict(p="foo"),
         dict(dim=(0, 1, 2), p=2), dict(dim=(0, 1), p="nuc"), dict(dim=(), p="fro"),
         dict(dim=(0, 2)), dict(p="fro", dim=(1,), keepdim=True), dict(dim=(0, 0))]


@pytest.mark.parametrize("k", range(len(NORMS)))
def test_norm_string_orders(k):
    kw = NORMS[k]

    def method(lib, x):
        return x.norm(**kw)

    def function_2d(lib, x):
        return lib.norm(x[0], **kw)

    check(method, X3, grad=True, compiled=False)
    check(function_2d, X3, grad=True, compiled=False)


# -- writes into an expanded tensor: PyTorch runs masked_fill_ / index_put_ (so x[mask] = v,
# x[idx] = v) without its internal-overlap check, writing the elements they address (llgrad
# raised); when autograd records such a write (zero_ and fill_ too) PyTorch's error comes
# in backward, from CopySlices (llgrad raised in zero_'s forward and let fill_'s backward
# through) -----------------------------------------------------------------------------------

EXPANDED = [
    lambda L, e: e.masked_fill_(e > 0, -1.0),
    lambda L, e: e.masked_fill_(e > 0, L.tensor(-1.0)),
    lambda L, e: e.masked_fill_(L.tensor([[True] * 5] + [[False] * 5] * 3), -1.0),
    lambda L, e: e.index_put_((L.tensor([0]),), L.tensor(2.0)),
    lambda L, e: e.index_put_((L.tensor([0, 1]),), L.arange(10.).reshape(2, 5)),
    lambda L, e: e.index_put_((L.tensor([0]),), L.tensor(2.0), accumulate=True),
    lambda L, e: e.__setitem__(e > 0, 7.0),
    lambda L, e: e.__setitem__(L.tensor([0]), 7.0),
    lambda L, e: e.__setitem__([1, 2], L.arange(5.)),
    lambda L, e: e.__setitem__(L.tensor([True, False, False, False]), 9.0),
    lambda L, e: e.zero_(),
    lambda L, e: e.fill_(0.5),
    lambda L, e: e.fill_(L.tensor(0.5)),        # (PyTorch's error in the forward)
    lambda L, e: e.add_(1),                     # (and here)
]


@pytest.mark.parametrize("k", range(len(EXPANDED)))
@pytest.mark.parametrize("grad", [False, True])
def test_writes_into_expanded(k, grad):
    write = EXPANDED[k]

    def fn(lib, x):
        b = x * 1 if grad else (x * 1).detach()
        write(lib, b.expand(4, 5))
        if grad:
            (b * lib.arange(5.0)).sum().backward()
        return b
    check(fn, np.arange(5, dtype=np.float32) - 1, grad=grad, compiled=False)


def test_writes_into_expanded_compiled():
    def fn(lib, x):
        b = x * 2
        e = b.expand(4, 5)
        e.masked_fill_(e > 2, -1.0)
        e[lib.tensor([0])] = e[0] + 0.5
        return b, e.sum(0)
    check(fn, np.arange(5, dtype=np.float32) - 1)


# -- an output of split / unbind / chunk (or a view of one) used after its base or a
# sibling view was written in place: PyTorch cannot regenerate its grad_fn and raises;
# llgrad regenerated it (AsStridedBackward0) and went on -------------------------------------

MULTI = [
    "a, b = x.unbind(0)\nwith L.no_grad():\n    a.mul_(2)\nr = a * 1",
    "y = x * 1\na = y.unbind(0)[0]\ny.add_(1)\nr = a * 1",
    "y = x * 1\na = y.split(1)[0]\nwith L.no_grad():\n    y.add_(1)\nr = a * 1",
    "y = x * 1\na, b = y.split(1)\ny[1].add_(1)\nr = a * 1",
    "y = x * 1\nv = y.chunk(2)[0][0]\ny.add_(1)\nr = v * 1",
    "y = x * 1\na = y.unbind(0)[0].unsqueeze(0)\ny.mul_(3)\nr = a.sum()",
    "y = x * 1\na = y.unbind(0)[0]\ny.add_(1)\nr = (a.grad_fn is None, a.requires_grad)",
    "y = x * 1\na = y.unbind(0)[0]\ny.add_(1)\nr = (y * 1, a.detach() + 1, repr(a)[-18:])",
    "y = x * 1\na = y.unbind(0)[0]\ny.add_(1)\nr = y * 2",          # (a unused: fine)
    "a = x.split(1)[1]\nwith L.no_grad():\n    x.mul_(2)\n    r = a * 1",
    "y = x.detach()\na = y.split(1)[0]\ny.add_(1)\nr = a * 1",
    "y = x * 1\na, b = y.unbind(0)\nb.data.add_(1)\nr = a * 1",
    "y = x * 1\na, b = y.unbind(0)\ny.add_(1)\na.mul_(2)\nr = a",
]


@pytest.mark.parametrize("k", range(len(MULTI)))
def test_multi_output_view_after_base_written(k):
    src = MULTI[k]

    def fn(lib, x):
        env = {"L": lib, "x": x}
        exec(src, env)
        r = env["r"]
        if hasattr(r, "requires_grad") and r.requires_grad:
            r.sum().backward()
        return r
    check(fn, np.ones((2, 3), np.float32), grad=True, compiled=False)


@pytest.mark.slow
def test_multi_output_view_compiled():
    def fn(lib, x):
        y = x * 2
        a, b = y.split([1, 2], 1)
        return y, a, b
    cf = llgrad.compile(lambda x: fn(llgrad, x))
    for k in range(3):
        got = []
        for lib, f in ((torch, lambda x: fn(torch, x)), (llgrad, cf)):
            x = lib.ones(2, 3, requires_grad=True) * (k + 1)
            y, a, b = f(x)
            y.add_(1)
            try:
                (b * 1).sum().backward()
                got.append(("ok", x.grad))
            except RuntimeError as e:
                got.append(("raises", str(e)[:60]))
        cf.wait()
        assert got[0] == got[1]
