"""The tensor ops of issue 21 that are not ops of the table (einsum, outer, meshgrid,
isclose/allclose, repeat_interleave, argsort, the norms' front ends) and the ones that cannot
be traced (masked_select, nonzero, unique), against PyTorch: values, dtypes, grad_fn names,
gradients, gradcheck in float64, and PyTorch's errors. A compiled function using the
untraceable ones runs eagerly (with a warning) and gives eager's results. (The ops of the
table are in samples_tensor.py, run by test_optable.py and the trace and llvm tests.)"""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

_rng = np.random.default_rng(21)


def _r(*shape):
    return _rng.standard_normal(shape)


def _run(lib, fn, arrays):
    xs = [lib.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = fn(lib, *xs)
    return xs, list(out) if isinstance(out, (tuple, list)) else [out]


def check(fn, *arrays, names=True):
    """fn(lib, *tensors) in both libraries: outputs, grad_fn names, gradients."""
    lx, lo = _run(llgrad, fn, arrays)
    tx, to = _run(torch, fn, arrays)
    assert len(lo) == len(to)
    for a, b in zip(lo, to):
        assert tuple(a.shape) == tuple(b.shape) and str(a.dtype)[7:] == str(b.dtype)[6:]
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-7,
                                   atol=1e-12)
        if names:
            assert type(a.grad_fn).__name__ == type(b.grad_fn).__name__
    keep = [k for k, o in enumerate(to) if o.requires_grad]
    if not keep:
        return lo
    seeds = [_rng.standard_normal(tuple(to[k].shape)) for k in keep]
    lx, tx = [x for x in lx if x.requires_grad], [x for x in tx if x.requires_grad]
    lg = llgrad.autograd.grad([lo[k] for k in keep], lx,
                              [llgrad.tensor(s) for s in seeds], allow_unused=True)
    tg = torch.autograd.grad([to[k] for k in keep], tx, [torch.tensor(s) for s in seeds],
                             allow_unused=True)
    for a, b in zip(lg, tg):
        if b is None:
            assert a is None or not a.numpy().any()
        else:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-7, atol=1e-12)
    return lo


def gradcheck(fn, *arrays):
    xs = [llgrad.tensor(a, requires_grad=True) for a in arrays]
    assert llgrad.autograd.gradcheck(lambda *t: fn(llgrad, *t), xs)
    assert llgrad.autograd.gradgradcheck(lambda *t: fn(llgrad, *t), xs)


# ---- einsum ---------------------------------------------------------------------------------

EINSUM = [
    ("ij,jk->ik", (3, 4), (4, 5)), ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
    ("ii", (3, 3)), ("ii->i", (3, 3)), ("i,j->ij", (3,), (4,)), ("i,i->", (4,), (4,)),
    ("...ij,...jk", (2, 3, 4), (4, 2)), ("ij,jk,kl->il", (2, 3), (3, 4), (4, 2)),
    ("bij->j", (2, 3, 4)), ("ij->ji", (3, 4)), ("bi,bi->b", (3, 4), (3, 4)),
    ("ij,jk", (3, 4), (4, 2)), ("b i d, b j d -> b i j", (2, 3, 4), (2, 5, 4)),
    ("bhid,bhjd->bhij", (2, 2, 3, 4), (2, 2, 5, 4)), ("iij->j", (3, 3, 2)),
    ("i,i,i->i", (4,), (4,), (4,)), ("ij,ij->", (1, 4), (3, 4)), ("ab,cd->abcd", (2, 1), (1, 3)),
]


@pytest.mark.parametrize("eq,shapes", [(e, s) for e, *s in EINSUM], ids=[e for e, *_ in EINSUM])
def test_einsum_matches_torch(eq, shapes):
    check(lambda T, *xs: T.einsum(eq, *xs), *[_r(*s) for s in shapes], names=False)


def test_einsum_names_forms_and_gradcheck():
    a, b = _r(3, 4), _r(4, 2)
    for eq in ("ij,jk->ik", "i,j->ij", "ij->", "ij->ji"):
        args = (a, b) if "," in eq and eq[0] == "i" and eq[1] == "j" else \
            (a[:, 0].copy(), b[0].copy()) if eq == "i,j->ij" else (a,)
        check(lambda T, *xs: T.einsum(eq, *xs), *args)                      # grad_fn names too
    check(lambda T, x, y: T.einsum(x, [0, 1], y, [1, 2], [0, 2]), a, b)     # sublists
    check(lambda T, x, y: T.einsum("ij,jk->ik", [x, y]), a, b)              # a list
    gradcheck(lambda T, x, y: T.einsum("bij,bkj->bik", x, y), _r(2, 3, 2), _r(2, 2, 2))


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(3, 4), (3, 4)]), ("ij,jk->ik", [(3, 4)]), ("ij,j->i", [(3, 4), (4,), (4,)]),
    ("ijk->i", [(3, 4)]), ("ij->k", [(3, 4)]), ("ij->ii", [(3, 4)]), ("ii->i", [(3, 4)]),
    ("i...j...->i", [(3, 4)]), ("i1->i", [(3, 4)]), ("...ij->i", [(3,)])])
def test_einsum_errors_are_torchs(eq, shapes, monkeypatch):
    # torch checks the equation itself only without opt_einsum (installed with jax, it
    # raises its own ValueErrors first): compare against torch's own checks
    monkeypatch.setattr(torch.backends.opt_einsum, "enabled", False)
    errors = []
    for lib in (torch, llgrad):
        with pytest.raises(RuntimeError) as e:
            lib.einsum(eq, *[lib.tensor(_r(*s)) for s in shapes])
        errors.append(str(e.value).split("\n")[0])
    assert errors[0] == errors[1]


# ---- composites --------------------------------------------------------------------------------

def test_outer_meshgrid_repeat_interleave_argsort():
    v, w, x = _r(4), _r(3), _r(3, 4)
    check(lambda T, a, b: T.outer(a, b), v, w)
    check(lambda T, a, b: a.ger(b), v, w)
    for indexing in ("ij", "xy"):
        check(lambda T, a, b, c: T.meshgrid(a, b, c, indexing=indexing), v, w, _r(2))
    with pytest.warns(UserWarning, match="indexing argument"):
        llgrad.meshgrid(llgrad.ones(2), llgrad.ones(3))
    check(lambda T, a: a.repeat_interleave(2), x)
    check(lambda T, a: T.repeat_interleave(a, 3, dim=1), x)
    check(lambda T, a: a.repeat_interleave(T.tensor([2, 0, 1]), dim=0), x)
    check(lambda T, a: a.repeat_interleave(T.tensor(2)), v)
    check(lambda T, r: T.repeat_interleave(r), np.array([1, 3, 0, 2]))
    check(lambda T, a: (a.argsort(1), T.argsort(a, 0, descending=True),
                        a.argsort(stable=True), a.msort()), x)
    gradcheck(lambda T, a: a.repeat_interleave(2, dim=0) * T.outer(a[0], a[1]).sum(), _r(2, 3))


def test_norm_front_ends():
    x = _r(2, 3, 4)
    check(lambda T, a: (a.norm(), a.norm(p="fro", dim=(1, 2)), T.norm(a, 3, 1, keepdim=True),
                        T.norm(a, dim=-1)), x)
    check(lambda T, a: (T.linalg.norm(a), T.linalg.norm(a, dim=1), T.linalg.norm(a[0], 1),
                        T.linalg.norm(a[0], float("inf")), T.linalg.norm(a, "fro", (0, 2))), x)
    check(lambda T, a: (T.linalg.matrix_norm(a, -1), T.linalg.matrix_norm(a, 1, keepdim=True),
                        T.linalg.matrix_norm(a, -float("inf"), dim=(0, 2))), x, names=False)
    check(lambda T, a: T.linalg.vector_norm(a.detach().float(), dtype=T.float64, dim=1), x)
    gradcheck(lambda T, a: T.linalg.matrix_norm(a, float("inf")) + a.norm(2.5), _r(3, 3))
    check(lambda T, a: (T.linalg.matrix_norm(a, "nuc"), T.linalg.matrix_norm(a, 2),
                        T.linalg.matrix_norm(a, -2)), x, names=False)   # (through the SVD)


def test_isclose_allclose():
    a = np.array([1.0, np.nan, np.inf, -np.inf, 1e-9, 2.0, 0.0])
    b = np.array([1.0 + 1e-6, np.nan, np.inf, np.inf, 0.0, 2.1, -0.0])
    for kw in ({}, {"equal_nan": True}, {"rtol": 0, "atol": 0}, {"rtol": 0.1}):
        check(lambda T, x, y: (T.isclose(x, y, **kw), x.isclose(y, **kw)), a, b)
        for lib in (torch, llgrad):
            got = [lib.allclose(lib.tensor(a), lib.tensor(b), **kw),
                   lib.tensor(a[:1]).allclose(lib.tensor(b[:1]), **kw)]
            assert got == [torch.allclose(torch.tensor(a), torch.tensor(b), **kw),
                           torch.allclose(torch.tensor(a[:1]), torch.tensor(b[:1]), **kw)]
    check(lambda T, x, y: T.isclose(x, y), np.array([1, 2, 3]), np.array([1, 3, 3]))


def test_clamp_family():
    a = np.array([-2.0, -0.5, 0.0, 0.5, 2.0])
    lo, hi = np.full(5, -1.0), np.array([1.0, 1.0, 1.0, 0.0, 0.0])
    check(lambda T, x: (x * 1).clip_(-1, 1), a)
    check(lambda T, x, l, h: (x * 1).clamp_(l, h), a, lo, hi)
    check(lambda T, x: (T.clamp_(x * 1, min=-1), T.clip_(x * 1, max=1), T.clamp_min_(x * 1, 0.2),
                        T.clamp_max_(x * 1, 0.2)), a)
    check(lambda T, x: (x.clamp(T.tensor(1.0), T.tensor(-1.0)), x.clamp(min=T.tensor(0.5))), a)
    check(lambda T, i: (i.clamp(0.5, 2.5), i.clamp(0, 2)), np.array([1, 2, 3]))


def test_compiled_step_with_tensor_ops_is_native_and_matches_eager():
    def step(q, k, w):
        s = llgrad.einsum("bid,bjd->bij", q, k) / 2.0
        s = s.masked_fill(llgrad.ones(3, 3, dtype=llgrad.bool).triu(1), float("-inf"))
        top = s.softmax(-1).topk(2, dim=-1).values.cumprod(-1)
        r = llgrad.einsum("bij,jk->bik", top.repeat(1, 1, 2)[..., :3], w)
        return r.norm(dim=-1).sort(-1, descending=True).values.sum() + w.flip(0).roll(1).sum()

    cf = llgrad.compile(step)
    for _ in range(2):
        arrays = [_r(2, 3, 4), _r(2, 3, 4), _r(3, 5)]
        xs = [llgrad.tensor(a, requires_grad=True) for a in arrays]
        ys = [llgrad.tensor(a, requires_grad=True) for a in arrays]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = cf(*xs)
        want = step(*ys)
        got.backward()
        want.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
        for x, y in zip(xs, ys):
            np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-10, atol=1e-12)
    assert cf.n_traces == 1
    assert all(not isinstance(k, str) for k in cf.entries[0].kernels.values())


# ---- data-dependent shapes (eager only) -----------------------------------------------------

def test_masked_select_nonzero_unique():
    x = _r(3, 4)
    check(lambda T, a: a.masked_select(a > 0), x)
    check(lambda T, a, m: T.masked_select(a, m > 0), x, _r(4))           # broadcast mask
    check(lambda T, a, m: a.masked_select(m), x[0].copy(), np.array([[True], [False]]))
    gradcheck(lambda T, a: a.masked_select(T.tensor([True, False, True])) * 2, _r(2, 3))
    i = np.array([[1, 0, 2], [0, 0, 3]])
    check(lambda T, a: (a.nonzero(), T.nonzero(a), T.argwhere(a)) + a.nonzero(as_tuple=True), i)
    check(lambda T, a: a.nonzero(as_tuple=True) + (a.nonzero(),), np.array(2.0))
    check(lambda T, a: a.nonzero(), np.zeros((0, 3)))
    u = np.array([[3, 1], [2, 1], [3, 3]])
    check(lambda T, a: T.unique(a, return_inverse=True, return_counts=True), u)
    # (PyTorch's result has a grad_fn, Unique2Backward0, whose backward raises: none here)
    check(lambda T, a: (a.detach().unique(), a.detach().unique(sorted=False)), u.astype(float))
    check(lambda T, a: T.unique(a, dim=0, return_inverse=True, return_counts=True),
          np.array([[1, 2], [0, 5], [1, 2]]))


def test_compiled_functions_using_data_dependent_shapes_equal_eager():
    def f(x, m):
        picked = x.masked_select(m)
        idx = x.nonzero()
        return picked.sum() * 2 + idx.shape[0] + x.detach().unique().sum()
    cf = llgrad.compile(f)
    for k in range(3):
        a = np.array([[1.0, 0.0, 2.0], [2.0, 0.0, -1.0 - k]])
        m = llgrad.tensor(a > 0)
        x, y = llgrad.tensor(a, requires_grad=True), llgrad.tensor(a, requires_grad=True)
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            got = cf(x, m)
        # (masked_select, nonzero and unique trace as bool-mask indexing, their counts
        # guarded)
        assert not any("running eagerly" in str(w.message) for w in rec)
        want = f(y, m)
        got.backward()
        want.backward()
        assert got.item() == want.item()
        np.testing.assert_array_equal(x.grad.numpy(), y.grad.numpy())


# ---- PyTorch's errors ---------------------------------------------------------------------------

def _x(T):
    return T.tensor(np.arange(12.0).reshape(3, 4))


ERRORS = {
    "tril_1d": lambda T: T.ones(3).tril(),
    "flip_dup": lambda T: _x(T).flip(0, 0),
    "flip_oob": lambda T: _x(T).flip(2),
    "roll_align": lambda T: _x(T).roll((1, 2), (0,)),
    "roll_flat_pair": lambda T: _x(T).roll((1, 2)),
    "repeat_few": lambda T: _x(T).repeat(2),
    "repeat_neg": lambda T: _x(T).repeat(2, -1),
    "ri_neg": lambda T: _x(T).repeat_interleave(-1),
    "ri_size": lambda T: _x(T).repeat_interleave(T.tensor([1, 2]), dim=0),
    "diag_3d": lambda T: T.diag(T.ones(2, 2, 2)),
    "outer_2d": lambda T: T.outer(_x(T), T.ones(4)),
    "baddbmm_size": lambda T: T.baddbmm(T.ones(2, 3, 5), T.ones(2, 3, 4), T.ones(2, 5, 5)),
    "unfold_big": lambda T: _x(T).unfold(1, 5, 1),
    "unfold_step": lambda T: _x(T).unfold(1, 2, 0),
    "frac_int": lambda T: T.tensor([1, 2]).frac(),
    "round_dec_int": lambda T: T.tensor([1, 2]).round(decimals=1),
    "sort_dim": lambda T: _x(T).sort(2),
    "topk_big": lambda T: _x(T).topk(5),
    "scatter_src_dtype": lambda T: _x(T).scatter(1, T.tensor([[0], [1], [2]]), _x(T).float()),
    "scatter_rank": lambda T: _x(T).scatter(1, T.tensor([0, 1]), _x(T)),
    "scatter_size": lambda T: _x(T).scatter(1, T.zeros(4, 2, dtype=T.long), _x(T)),
    "scatter_reduce_name": lambda T: _x(T).scatter_reduce(1, T.tensor([[0], [1], [2]]), _x(T),
                                                           "foo"),
    "scatter_legacy_name": lambda T: _x(T).scatter(1, T.tensor([[0], [1], [2]]), 1.0,
                                                   reduce="foo"),
    "masked_select_dtype": lambda T: _x(T).masked_select(T.ones(3, 4, dtype=T.int64)),
    "masked_select_shape": lambda T: _x(T).masked_select(T.ones(3, 5, dtype=T.bool)),
    "vector_norm_int": lambda T: T.linalg.vector_norm(T.tensor([1, 2])),
    "norm_int": lambda T: T.tensor([1, 2]).norm(),
    "vector_norm_inf_empty": lambda T: T.linalg.vector_norm(T.zeros(0, 3), float("inf")),
    "matrix_norm_1d": lambda T: T.linalg.matrix_norm(T.ones(3)),
    "matrix_norm_ord": lambda T: T.linalg.matrix_norm(_x(T), 3),
    "isclose_dtype": lambda T: T.isclose(_x(T), _x(T).float()),
    "allclose_dtype": lambda T: T.allclose(_x(T).float(), _x(T)),
    "vector_norm_narrowing": lambda T: T.linalg.vector_norm(_x(T), dtype=T.float32),
    "isclose_rtol": lambda T: T.isclose(_x(T), _x(T), rtol=-1),
    "meshgrid_indexing": lambda T: T.meshgrid(T.ones(2), indexing="foo"),
    "multinomial_neg": lambda T: T.multinomial(T.tensor([-1.0, 1.0]), 1),
    "multinomial_zero": lambda T: T.multinomial(T.tensor([0.0, 0.0]), 1),
    "multinomial_3d": lambda T: T.multinomial(T.ones(2, 2, 2), 1),
    "multinomial_int": lambda T: T.multinomial(T.tensor([1, 2]), 1),
    "multinomial_k0": lambda T: T.multinomial(T.tensor([1.0, 2.0]), 0),
    "multinomial_many": lambda T: T.multinomial(T.tensor([1.0, 2.0]), 3),
    "uniform_int": lambda T: T.tensor([1, 2]).uniform_(),
    "uniform_range": lambda T: _x(T).uniform_(2, 1),
    "normal_int": lambda T: T.tensor([1, 2]).normal_(),
    "normal_std": lambda T: _x(T).normal_(0, -1),
    "bernoulli_int": lambda T: T.bernoulli(T.tensor([1, 0])),
    "bernoulli_p": lambda T: _x(T).bernoulli_(1.5),
    "bernoulli_probs": lambda T: T.bernoulli(T.tensor([1.5, 0.0])),
    "default_dtype_int": lambda T: T.set_default_dtype(T.int64),
    "finfo_int": lambda T: T.finfo(T.int64),
    "iinfo_float": lambda T: T.iinfo(T.float32),
    "iinfo_bool": lambda T: T.iinfo(T.bool),
    "diag_embed_0d": lambda T: T.diag_embed(T.tensor(1.0)),
    "clamp_none": lambda T: T.clamp_(_x(T)),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_are_torchs(name):
    caught = []
    for lib in (torch, llgrad):
        with pytest.raises(Exception) as e:
            ERRORS[name](lib)
        caught.append((type(e.value), str(e.value).split("\n")[0]))
    assert caught[0][0] is caught[1][0] or issubclass(caught[1][0], caught[0][0])
    assert caught[1][1] == caught[0][1].replace("torch.", "torch.")
