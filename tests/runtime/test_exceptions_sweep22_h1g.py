"""Exception parity with torch, sweep 22 (H1): the state a failed call leaves. An in-place
op that raises leaves its tensor and version as they were; load_state_dict, optimisers and
BatchNorm leave what torch leaves (load_state_dict(strict=True) copies the entries that fit
before it raises, in torch and in llgrad). Not copied from torch: index_put_ / index_add_ /
index_copy_ / index_fill_ / scatter_ / scatter_add_ / masked_scatter_ with an index out of
range (or too few source values) write the elements before it and then raise in torch;
llgrad checks first and writes nothing (_TORCH_HALF_WRITES). Compiled calls: _h1h.py."""
import warnings

import pytest

import llgrad

torch = pytest.importorskip("torch")

from exceptions_sweep22_h1_harness import catchable_as, rounded  # noqa: E402


def _run(L, setup, bad, snap):
    """(the exception's class or None, the state snap reads after the call)."""
    objs = setup(L)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            bad(L, *objs)
            err = None
        except Exception as e:      # noqa: BLE001 (the exception is what is compared)
            err = type(e)
    return err, rounded(snap(*objs))


def _vals(*ts):
    return [(t.tolist(), t._version) for t in ts]


def _a(L):
    return (L.arange(3.),)


def _a2(L):
    return (L.arange(6.).reshape(2, 3),)


def _leaf(L):
    return (L.ones(2, requires_grad=True),)


def _ai(L):
    return (L.arange(3),)


def _mod(L):
    L.manual_seed(0)
    m = L.nn.Linear(2, 2)
    with L.no_grad():
        m.weight.copy_(L.tensor([[1., 2.], [3., 4.]]))
        m.bias.copy_(L.tensor([5., 6.]))
    return (m,)


def _modsnap(m):
    return [(k, v.tolist()) for k, v in m.state_dict().items()]


def _seqmod(L):
    m = L.nn.Sequential(L.nn.Linear(2, 2), L.nn.BatchNorm1d(2))
    with L.no_grad():
        for p in m.parameters():
            p.fill_(1.)
    return (m,)


def _opt(L):
    w = L.tensor([1., 2.], requires_grad=True)
    o = L.optim.SGD([w], lr=0.1, momentum=0.9)
    (w * w).sum().backward()
    o.step()
    return w, o


def _optsnap(w, o):
    return w.tolist(), [g["lr"] for g in o.param_groups], len(o.param_groups), \
        sorted(len(v) for v in o.state.values())


def _state_cases():
    S = []
    def add(name, setup, bad, snap=_vals):
        S.append((name, setup, bad, snap))
    add("add__broadcast_up", _a, lambda L, a: a.add_(L.ones(2, 3)))
    add("mul__mismatch", _a, lambda L, a: a.mul_(L.ones(4)))
    add("sub__alpha_bad", _ai, lambda L, a: a.sub_(L.ones(3, dtype=L.long), alpha=0.5))
    add("add__alpha_bad", _ai, lambda L, a: a.add_(1, alpha=1.5))
    add("int_add__float", _ai, lambda L, a: a.add_(1.5))
    add("int_mul__float_t", _ai, lambda L, a: a.mul_(L.ones(3)))
    add("int_div__", _ai, lambda L, a: a.div_(2))
    add("int_iadd_float", _ai, lambda L, a: a.__iadd__(L.ones(3)))
    add("int_sqrt_", _ai, lambda L, a: a.sqrt_())
    add("float_add__complex", _a, lambda L, a: a.add_(1j))
    add("copy__mismatch", _a, lambda L, a: a.copy_(L.ones(4)))
    add("copy__broadcast_up", _a, lambda L, a: a.copy_(L.ones(2, 3)))
    add("setitem_shape", _a2, lambda L, a: a.__setitem__(slice(None), L.ones(4)))
    add("setitem_oob", _a, lambda L, a: a.__setitem__(3, 9.))
    add("setitem_tensor_idx_oob", _a, lambda L, a: a.__setitem__(L.tensor([0, 5]), 9.))
    add("setitem_mask_shape", _a, lambda L, a: a.__setitem__(L.tensor([True, False]), 9.))
    add("setitem_values_count", _a,
        lambda L, a: a.__setitem__(L.tensor([0, 1]), L.tensor([9., 9., 9.])))
    add("setitem_float_into_int_ok", _ai, lambda L, a: a.__setitem__(0, 9.5))
    add("index_put__oob", _a, lambda L, a: a.index_put_((L.tensor([0, 5]),), L.tensor([9., 9.])))
    add("index_put__neg_oob", _a, lambda L, a: a.index_put_((L.tensor([1, -4]),), L.tensor(9.)))
    add("index_put__accumulate_oob", _a,
        lambda L, a: a.index_put_((L.tensor([0, 5]),), L.tensor([9., 9.]), accumulate=True))
    add("index_put__dtype", _a,
        lambda L, a: a.index_put_((L.tensor([0]),), L.tensor([9.], dtype=L.float64)))
    add("index_add__oob", _a, lambda L, a: a.index_add_(0, L.tensor([0, 3]), L.ones(2)))
    add("index_add__dtype", _a,
        lambda L, a: a.index_add_(0, L.tensor([0]), L.ones(1, dtype=L.float64)))
    add("index_copy__oob", _a, lambda L, a: a.index_copy_(0, L.tensor([0, 3]), L.ones(2)))
    add("index_fill__oob", _a, lambda L, a: a.index_fill_(0, L.tensor([0, 3]), 9.))
    add("scatter__oob", _a2, lambda L, a: a.scatter_(1, L.tensor([[0, 3]]), 9.))
    add("scatter__src_oob", _a2, lambda L, a: a.scatter_(1, L.tensor([[0, 3]]), L.ones(1, 2)))
    add("scatter_add__oob", _a, lambda L, a: a.scatter_add_(0, L.tensor([0, 3]), L.ones(2)))
    add("scatter__neg", _a, lambda L, a: a.scatter_(0, L.tensor([0, -1]), 9.))
    add("scatter_reduce__bad", _a,
        lambda L, a: a.scatter_reduce_(0, L.tensor([0]), L.ones(1), "avg"))
    add("masked_fill__shape", _a, lambda L, a: a.masked_fill_(L.ones(2, 3, dtype=L.bool), 9.))
    add("masked_fill__float_mask", _a, lambda L, a: a.masked_fill_(L.ones(3), 9.))
    add("masked_scatter__few", _a,
        lambda L, a: a.masked_scatter_(L.ones(3, dtype=L.bool), L.ones(2)))
    add("clamp__min_gt_max_ok", _a, lambda L, a: a.clamp_(2., 1.))
    add("clamp__int_float", _ai, lambda L, a: a.clamp_(0.5, 1.5))
    add("fill__tensor_nd", _a, lambda L, a: a.fill_(L.ones(2)))
    add("fill__str", _a, lambda L, a: a.fill_("x"))
    add("zero__ok", _a, lambda L, a: a.zero_())
    add("resize__then_ok", _a, lambda L, a: a.t_())
    add("t__3d", lambda L: (L.ones(2, 2, 2),), lambda L, a: a.t_())
    add("transpose__dim", _a2, lambda L, a: a.transpose_(0, 2))
    add("unsqueeze__dim", _a2, lambda L, a: a.unsqueeze_(5))
    add("squeeze__dim", _a2, lambda L, a: a.squeeze_(5))
    add("out_shape_wrong_dtype", _a, lambda L, a: L.add(L.ones(3), 1.5, out=a.long()))
    add("out_mm_dtype", _a2, lambda L, a: L.mm(L.ones(2, 2), L.ones(2, 3), out=a.double()))
    add("out_int_dtype_self", _ai, lambda L, a: L.mul(a, 1.5, out=a))
    add("out_resize_warn", _a, lambda L, a: L.add(L.ones(2, 2), 1, out=a))
    add("leaf_add_", lambda L: (L.ones(2, requires_grad=True),), lambda L, a: a.add_(1))
    add("leaf_setitem", _leaf, lambda L, a: a.__setitem__(0, 5.))
    add("leaf_data_shape_ok", _leaf, lambda L, a: setattr(a, "data", L.zeros(3)))
    add("leaf_data_list", _leaf, lambda L, a: setattr(a, "data", [1., 2.]))
    add("grad_set_shape", _leaf, lambda L, a: setattr(a, "grad", L.ones(3)),
        lambda a: (a.tolist(), a.grad))
    add("requires_grad_int", _ai, lambda L, a: a.requires_grad_(),
        lambda a: (a.tolist(), a.requires_grad))
    add("load_sd_missing", _mod,
        lambda L, m: m.load_state_dict({"weight": L.zeros(2, 2)}), _modsnap)
    add("load_sd_unexpected", _mod, lambda L, m: m.load_state_dict(
        {"weight": L.zeros(2, 2), "bias": L.zeros(2), "x": L.zeros(1)}), _modsnap)
    add("load_sd_shape", _mod, lambda L, m: m.load_state_dict(
        {"weight": L.zeros(2, 2), "bias": L.zeros(3)}), _modsnap)
    add("load_sd_shape_nonstrict", _mod, lambda L, m: m.load_state_dict(
        {"weight": L.zeros(3, 2), "bias": L.zeros(2)}, strict=False), _modsnap)
    add("load_sd_not_tensor", _mod, lambda L, m: m.load_state_dict(
        {"weight": L.zeros(2, 2), "bias": [0., 0.]}), _modsnap)
    add("load_sd_seq_bn", _seqmod, lambda L, m: m.load_state_dict(
        {k: (L.zeros(3) if k == "1.running_var" else v * 0)
         for k, v in m.state_dict().items()}), _modsnap)
    add("load_sd_not_dict", _mod,
        lambda L, m: m.load_state_dict([("weight", L.zeros(2, 2))]), _modsnap)
    add("module_assign_tensor_to_param", _mod,
        lambda L, m: setattr(m, "weight", L.zeros(2, 2)), _modsnap)
    add("module_to_bad_dtype", _mod, lambda L, m: m.to("floaty"), _modsnap)
    add("opt_load_sd_groups", _opt, lambda L, w, o: o.load_state_dict(
        {"state": {}, "param_groups": [{"params": [0, 1], "lr": 5.}]}), _optsnap)
    add("opt_add_group_dup", _opt,
        lambda L, w, o: o.add_param_group({"params": [w], "lr": 5.}), _optsnap)
    add("opt_add_group_nonleaf", _opt,
        lambda L, w, o: o.add_param_group({"params": [w * 2], "lr": 5.}), _optsnap)
    add("opt_add_group_bad_lr", _opt, lambda L, w, o: o.add_param_group(
        {"params": [L.ones(1, requires_grad=True)], "lr": -5.}), _optsnap)
    add("opt_step_closure_raises", _opt, lambda L, w, o: o.step(lambda: 1 / 0), _optsnap)
    add("backward_twice_grad", lambda L: (L.ones(2, requires_grad=True),),
        lambda L, x: [y.backward() for y in [(x.exp() * x).sum()] * 2],
        lambda x: (x.tolist(), x.grad.tolist()))
    add("backward_version_grad", lambda L: (_leaf(L)[0], _leaf(L)[0]), _version_both,
        lambda x, w: (x.grad, w.grad))
    return S


def _version_both(L, x, w):
    a = x * 2
    b = a * w
    a.add_(1)
    b.sum().backward()



STATE = _state_cases()
# torch writes the elements before the bad index, then raises: llgrad writes none
_TORCH_HALF_WRITES = {"setitem_tensor_idx_oob", "index_put__oob", "index_put__neg_oob",
                      "index_put__accumulate_oob", "index_add__oob", "index_copy__oob",
                      "index_fill__oob", "scatter__oob", "scatter__src_oob", "scatter_add__oob",
                      "scatter__neg", "masked_scatter__few"}


@pytest.mark.parametrize("name,setup,bad,snap", STATE, ids=[c[0] for c in STATE])
def test_state_after_a_failed_call(name, setup, bad, snap):
    t_err, t_state = _run(torch, setup, bad, snap)
    l_err, l_state = _run(llgrad, setup, bad, snap)
    assert (t_err is None) == (l_err is None), (t_err, l_err)
    assert l_err is None or issubclass(l_err, catchable_as(t_err)), (l_err, t_err)
    if name in _TORCH_HALF_WRITES:
        assert t_err is not None and t_state != _run(torch, setup, lambda *a: None, snap)[1]
        assert l_state == _run(llgrad, setup, lambda *a: None, snap)[1]     # (untouched)
    else:
        assert l_state == t_state
