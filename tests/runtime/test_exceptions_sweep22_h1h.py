"""Exception parity with torch, sweep 22 (H1): bad calls inside llgrad.compile, after a good
call (guards hit or miss): torch's eager class, the traceback's innermost frame of this file
the case's own line, and the compiled function still giving eager's values afterwards;
data-dependent errors included, with the good call's shapes (indices out of range in
indexing, gather, scatter, index_select / index_add, embedding and loss targets, one_hot,
integer division by zero, bce inputs and multinomial probabilities out of range). A failed
compiled in-place call leaves its tensor and version as they were."""
import traceback
import warnings

import pytest

import llgrad

torch = pytest.importorskip("torch")

from exceptions_sweep22_h1_harness import catchable_as, rounded  # noqa: E402


def _F(L):
    return L.nn.functional


COMPILED = [
    ("mm_shapes", lambda L, a, b: L.mm(a, b), lambda L: (L.ones(2, 3), L.ones(3, 4)),
     lambda L: (L.ones(2, 3), L.ones(4, 5))),
    ("matmul_batch", lambda L, a, b: a @ b, lambda L: (L.ones(2, 2, 3), L.ones(2, 3, 4)),
     lambda L: (L.ones(2, 2, 3), L.ones(3, 3, 4))),
    ("linear_in", lambda L, x, w: _F(L).linear(x, w), lambda L: (L.ones(2, 4), L.ones(3, 4)),
     lambda L: (L.ones(2, 5), L.ones(3, 4))),
    ("conv2d_channels", lambda L, x, w: _F(L).conv2d(x, w),
     lambda L: (L.ones(1, 3, 6, 6), L.ones(2, 3, 3, 3)),
     lambda L: (L.ones(1, 2, 6, 6), L.ones(2, 3, 3, 3))),
    ("conv1d_small", lambda L, x, w: _F(L).conv1d(x, w),
     lambda L: (L.ones(1, 1, 6), L.ones(1, 1, 3)), lambda L: (L.ones(1, 1, 2), L.ones(1, 1, 3))),
    ("view_noncontig", lambda L, x: x.view(-1),
     lambda L: (L.ones(2, 3),),
     lambda L: (L.ones(3, 2).t(),)),
    ("reshape_numel", lambda L, x: x.reshape(2, 3), lambda L: (L.ones(6),), lambda L: (L.ones(7),)),
    ("expand_smaller", lambda L, x: x.expand(2, 3), lambda L: (L.ones(3),), lambda L: (L.ones(4),)),
    ("cat_shapes", lambda L, a, b: L.cat([a, b]), lambda L: (L.ones(2, 3), L.ones(1, 3)),
     lambda L: (L.ones(2, 3), L.ones(1, 4))),
    ("stack_shapes", lambda L, a, b: L.stack([a, b]), lambda L: (L.ones(3), L.ones(3)),
     lambda L: (L.ones(3), L.ones(4))),
    ("add_broadcast", lambda L, a, b: a + b, lambda L: (L.ones(2, 3), L.ones(3)),
     lambda L: (L.ones(2, 3), L.ones(4))),
    ("add__broadcast_up", lambda L, a, b: a.add_(b), lambda L: (L.ones(2, 3), L.ones(3)),
     lambda L: (L.ones(3), L.ones(2, 3))),
    ("index_oob_value", lambda L, x, i: x[i], lambda L: (L.ones(3), L.tensor([0, 2])),
     lambda L: (L.ones(3), L.tensor([0, 3]))),
    ("index_neg_oob_value", lambda L, x, i: x[i] * 2, lambda L: (L.ones(3), L.tensor([-3, 2])),
     lambda L: (L.ones(3), L.tensor([-4, 2]))),
    ("gather_oob_value", lambda L, x, i: x.gather(1, i),
     lambda L: (L.ones(2, 3), L.tensor([[0], [2]])),
     lambda L: (L.ones(2, 3), L.tensor([[0], [3]]))),
    ("gather_neg_value", lambda L, x, i: x.gather(1, i).sum(),
     lambda L: (L.ones(2, 3), L.tensor([[0], [2]])),
     lambda L: (L.ones(2, 3), L.tensor([[0], [-1]]))),
    ("scatter_oob_value", lambda L, x, i: x.scatter(1, i, 1.),
     lambda L: (L.zeros(2, 3), L.tensor([[0], [2]])),
     lambda L: (L.zeros(2, 3), L.tensor([[0], [3]]))),
    ("scatter_add_oob_value", lambda L, x, i, s: x.scatter_add(0, i, s),
     lambda L: (L.zeros(3), L.tensor([0, 2]), L.ones(2)),
     lambda L: (L.zeros(3), L.tensor([0, 5]), L.ones(2))),
    ("index_select_oob_value", lambda L, x, i: x.index_select(0, i) + 1,
     lambda L: (L.ones(3, 2), L.tensor([0, 2])), lambda L: (L.ones(3, 2), L.tensor([0, 3]))),
    ("index_add_oob_value", lambda L, x, i, s: x.index_add(0, i, s),
     lambda L: (L.zeros(3), L.tensor([0, 2]), L.ones(2)),
     lambda L: (L.zeros(3), L.tensor([0, 3]), L.ones(2))),
    ("embedding_oob_value", lambda L, w, i: _F(L).embedding(i, w).sum(),
     lambda L: (L.ones(5, 2), L.tensor([1, 4])), lambda L: (L.ones(5, 2), L.tensor([1, 5]))),
    ("embedding_neg_value", lambda L, w, i: _F(L).embedding(i, w),
     lambda L: (L.ones(5, 2), L.tensor([1, 4])), lambda L: (L.ones(5, 2), L.tensor([1, -1]))),
    ("cross_entropy_oob_value", lambda L, x, y: _F(L).cross_entropy(x, y),
     lambda L: (L.ones(2, 3), L.tensor([0, 2])), lambda L: (L.ones(2, 3), L.tensor([0, 3]))),
    ("cross_entropy_neg_value", lambda L, x, y: _F(L).cross_entropy(x, y),
     lambda L: (L.ones(2, 3), L.tensor([0, 2])), lambda L: (L.ones(2, 3), L.tensor([0, -5]))),
    ("nll_loss_oob_value", lambda L, x, y: _F(L).nll_loss(x.log_softmax(1), y),
     lambda L: (L.ones(2, 3), L.tensor([0, 2])), lambda L: (L.ones(2, 3), L.tensor([3, 2]))),
    ("cross_entropy_grad_oob", lambda L, x, y: _F(L).cross_entropy(x, y),
     lambda L: (L.ones(2, 3, requires_grad=True), L.tensor([0, 2])),
     lambda L: (L.ones(2, 3, requires_grad=True), L.tensor([0, 3]))),
    ("one_hot_oob_value", lambda L, i: _F(L).one_hot(i, 3).float(), lambda L: (L.tensor([0, 2]),),
     lambda L: (L.tensor([0, 3]),)),
    ("bce_out_of_range_value", lambda L, p, y: _F(L).binary_cross_entropy(p, y),
     lambda L: (L.full((2,), 0.5), L.ones(2)), lambda L: (L.full((2,), 1.5), L.ones(2))),
    ("int_div_zero_value", lambda L, a, b: a // b, lambda L: (L.tensor([4, 2]), L.tensor([1, 2])),
     lambda L: (L.tensor([4, 2]), L.tensor([1, 0]))),
    ("int_rem_zero_value", lambda L, a, b: a % b + 1,
     lambda L: (L.tensor([4, 2]), L.tensor([1, 2])),
     lambda L: (L.tensor([4, 2]), L.tensor([0, 2]))),
    ("multinomial_neg_value", lambda L, p: L.multinomial(p, 1), lambda L: (L.tensor([0.5, 0.5]),),
     lambda L: (L.tensor([-0.5, 0.5]),)),
    ("item_many", lambda L, x: x.sum(0).item(),
     lambda L: (L.ones(2, 1),),
     lambda L: (L.ones(2, 2),)),
    ("bool_many", lambda L, x: x * 2 if x.sum(0) > 0 else x,
     lambda L: (L.ones(2, 1),),
     lambda L: (L.ones(2, 2),)),
    ("mean_int", lambda L, x: x.mean(),
     lambda L: (L.ones(2),),
     lambda L: (L.ones(2, dtype=L.long),)),
    ("neg_bool", lambda L, x: -x, lambda L: (L.ones(2),), lambda L: (L.ones(2, dtype=L.bool),)),
    ("int_add__float", lambda L, a, b: a.add_(b), lambda L: (L.ones(2), L.ones(2)),
     lambda L: (L.ones(2, dtype=L.long), L.ones(2))),
    ("inplace_leaf", lambda L, x: x.mul_(2), lambda L: (L.ones(2),),
     lambda L: (L.ones(2, requires_grad=True),)),
    ("dim_out_of_range", lambda L, x: x.sum(1), lambda L: (L.ones(2, 2),), lambda L: (L.ones(2),)),
    ("permute_repeat", lambda L, x: x.permute(0, 1) * 2,
     lambda L: (L.ones(2, 2),),
     lambda L: (L.ones(2, 2, 2),)),
    ("narrow_oob", lambda L, x: x.narrow(0, 1, 2), lambda L: (L.ones(3),), lambda L: (L.ones(2),)),
    ("select_oob", lambda L, x: x.select(0, 2) + 1, lambda L: (L.ones(3),), lambda L: (L.ones(2),)),
    ("unbind_dim", lambda L, x: x.unbind(1)[0], lambda L: (L.ones(2, 2),), lambda L: (L.ones(2),)),
    ("mse_shape_warn_then_broadcast_err", lambda L, a, b: _F(L).mse_loss(a, b),
     lambda L: (L.ones(2, 3), L.ones(2, 3)), lambda L: (L.ones(2, 3), L.ones(2, 4))),
    ("nll_float_target", lambda L, x, y: _F(L).nll_loss(x, y),
     lambda L: (L.ones(2, 3), L.tensor([0, 1])),
     lambda L: (L.ones(2, 3), L.tensor([0., 1.]))),
    ("bn_batch1", lambda L, x: _F(L).batch_norm(x, None, None, training=True),
     lambda L: (L.ones(2, 3),), lambda L: (L.ones(1, 3),)),
    ("layer_norm_shape", lambda L, x: _F(L).layer_norm(x, (3,)),
     lambda L: (L.ones(2, 3),),
     lambda L: (L.ones(2, 4),)),
    ("masked_fill_shape", lambda L, x, m: x.masked_fill(m, 0.),
     lambda L: (L.ones(3), L.ones(3, dtype=L.bool)),
     lambda L: (L.ones(2), L.ones(3, dtype=L.bool))),
    ("sqrt_int_", lambda L, x: x.sqrt_(),
     lambda L: (L.ones(2),),
     lambda L: (L.ones(2, dtype=L.long),)),
    ("setitem_oob_value", lambda L, x, i: x.index_put_((i,), L.tensor(1.)),
     lambda L: (L.zeros(3), L.tensor([2])),
     lambda L: (L.zeros(3), L.tensor([3]))),
    ("take_oob_value", lambda L, x, i: x.take(i), lambda L: (L.ones(2, 2), L.tensor([3])),
     lambda L: (L.ones(2, 2), L.tensor([4]))),
    ("bincount_neg_value", lambda L, x: L.bincount(x, minlength=4), lambda L: (L.tensor([0, 3]),),
     lambda L: (L.tensor([0, -1]),)),
    ("repeat_interleave_neg_value", lambda L, x, r: x.repeat_interleave(r),
     lambda L: (L.ones(2), L.tensor([1, 2])),
     lambda L: (L.ones(2), L.tensor([1, -2]))),
]


def _seeded(call):
    llgrad.manual_seed(0)       # (multinomial's draws: the same in each call)
    return call()


def _frames(err):
    return [f for f in traceback.extract_tb(err.__traceback__) if f.filename == __file__]


@pytest.mark.parametrize("name,fn,good,bad", COMPILED, ids=[c[0] for c in COMPILED])
def test_compiled_bad_call_raises_as_eager(name, fn, good, bad):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn(torch, *good(torch))
        with pytest.raises(Exception) as t_err:
            fn(torch, *bad(torch))
        with pytest.raises(Exception) as e_err:
            fn(llgrad, *bad(llgrad))
        assert issubclass(e_err.type, catchable_as(t_err.type)), (e_err.value, t_err.value)
        cf = llgrad.compile(lambda *a: fn(llgrad, *a))
        want = _seeded(lambda: fn(llgrad, *good(llgrad)))
        got = _seeded(lambda: cf(*good(llgrad)))
        with pytest.raises(Exception) as c_err:
            cf(*bad(llgrad))
        assert c_err.type is e_err.type, (c_err.value, e_err.value)
        # the innermost frame of this file is the case's own line (the lambda of fn)
        lines = [f.lineno for f in _frames(c_err.value)]
        assert lines and lines[-1] == fn.__code__.co_firstlineno, lines
        again = _seeded(lambda: cf(*good(llgrad)))   # (still eager's values after the error)
    for w, g in ((want, got), (want, again)):
        w = w.item() if hasattr(w, "item") and w.numel() == 1 else w
        g = g.item() if hasattr(g, "item") and g.numel() == 1 else g
        assert rounded(g) == rounded(w)


def _add_(L, a, b):
    return a.add_(b)


def _index_put_(L, x, i):
    return x.index_put_((i,), L.tensor(1.))


def _scatter_(L, x, i):
    return x.scatter_(0, i, 7.)


@pytest.mark.parametrize("fn,good,bad", [
    (_add_, lambda L: (L.ones(3), L.ones(3)), lambda L: (L.ones(2, 3), L.ones(3, 3))),
    (_add_, lambda L: (L.ones(3), L.ones(3)), lambda L: (L.ones(3, dtype=L.long), L.ones(3))),
    (_index_put_, lambda L: (L.zeros(3), L.tensor([1])), lambda L: (L.zeros(3), L.tensor([5]))),
    (_scatter_, lambda L: (L.zeros(3), L.tensor([1, 2])), lambda L: (L.zeros(3), L.tensor([0, 5]))),
], ids=["add_broadcast_up", "add_int_float", "index_put_oob", "scatter_oob"])
def test_compiled_failed_inplace_writes_nothing(fn, good, bad):
    cf = llgrad.compile(lambda *a: fn(llgrad, *a))
    cf(*good(llgrad))
    args = bad(llgrad)
    before = [(a.tolist(), a._version) for a in args]
    with pytest.raises(Exception) as c_err:
        cf(*args)
    with pytest.raises(Exception) as t_err:
        fn(torch, *bad(torch))
    assert issubclass(c_err.type, catchable_as(t_err.type))
    assert [(a.tolist(), a._version) for a in args] == before
