"""Views made under no_grad / inference_mode of a tensor that requires grad (PyTorch's
CreationMeta NO_GRAD_MODE / INFERENCE_MODE): they require grad but are leaves with no
gradient edge, and in-place use with grad mode on (of them, or of their base before reading
their grad_fn) is an error."""
import pytest

import llgrad as torch

TAIL = ("Given that this use case is ambiguous and error-prone, it is forbidden. You can "
        "clarify your code by moving both the view and the inplace either both inside the "
        "{block} (if you don't want the inplace to be tracked) or both outside (if you want "
        "the inplace to be tracked).")
NG_INPLACE = ("A view was created in no_grad mode and is being modified inplace with grad "
              "mode enabled. " + TAIL.format(block="no_grad block"))
NG_REBASE = ("A view was created in no_grad mode and its base or another view of its base "
             "has been modified inplace with grad mode enabled. " +
             TAIL.format(block="no_grad block"))
INF_INPLACE = ("A view was created in inference mode and is being modified inplace in normal "
               "mode. " + TAIL.format(block="inference_mode block"))
INF_REBASE = ("A view was created in inference mode and its base or another view of its base "
              "has been modified inplace in normal mode. " +
              TAIL.format(block="inference_mode block"))


def _raises(msg, fn):
    with pytest.raises(RuntimeError) as info:
        fn()
    assert str(info.value) == msg


def test_no_grad_view_is_a_requires_grad_leaf_without_edge():
    x = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        v = x[:2]
    assert v.requires_grad and v.is_leaf and v.grad_fn is None
    y = v * 2
    assert y.requires_grad and type(y.grad_fn).__name__ == "MulBackward0"
    assert y.grad_fn.next_functions == ((None, 0), (None, 0))
    y.sum().backward()
    assert v.grad is None and x.grad is None
    assert repr(v) == "tensor([1., 1.], requires_grad=True)"


def test_no_grad_view_inplace():
    x = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        v = x[:2]
    _raises(NG_INPLACE, lambda: v.mul_(2))
    assert x.tolist() == [1., 1., 1.] and x._version == 0
    with torch.no_grad():
        v.mul_(2)                            # both inside no_grad: allowed
    assert x.tolist() == [2., 2., 1.]
    assert v.requires_grad                   # never reads grad_fn
    _raises(NG_REBASE, lambda: v.grad_fn)
    _raises(NG_REBASE, lambda: v.is_leaf)
    _raises(NG_REBASE, lambda: v * 2)
    assert repr(v) == "tensor([2., 2.], grad_fn=<Invalid>)"


def test_no_grad_view_of_non_leaf():
    x = torch.ones(3, requires_grad=True)
    y = x * 1
    with torch.no_grad():
        u = y[:2]
    assert u.requires_grad and u.is_leaf
    _raises(NG_INPLACE, lambda: u.add_(1))
    y.mul_(2)                                # the base, with grad on: fine for y itself
    _raises(NG_REBASE, lambda: u.grad_fn)
    y.sum().backward()
    assert x.grad.tolist() == [2., 2., 2.]


def test_no_grad_view_of_plain_tensor():
    t = torch.zeros(3)
    with torch.no_grad():
        w = t[:2]
    assert not w.requires_grad and w.grad_fn is None
    w.add_(1)                                # nothing requires grad: fine
    t.add_(1)
    assert w.grad_fn is None and t.tolist() == [2., 2., 1.]
    x = torch.ones(2, requires_grad=True)
    _raises(NG_INPLACE, lambda: w.mul_(x))   # an operand requiring grad: the error


def test_inference_mode_view():
    x = torch.ones(3, requires_grad=True)
    with torch.inference_mode():
        q = x[:2]
        i = torch.ones(3)[:2]
    assert q.requires_grad and q.is_leaf and not q.is_inference()
    assert i.is_inference()
    with torch.no_grad():
        q2 = x[:2]
        q.mul_(1)                             # allowed under no_grad
    _raises(INF_INPLACE, lambda: q.mul_(1))
    _raises(INF_REBASE, lambda: q.grad_fn)
    _raises(NG_REBASE, lambda: q2.grad_fn)


def test_views_of_such_views_inherit_the_mode():
    x = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        v = x[:2]
        v2 = v[:1]
    _raises(NG_INPLACE, lambda: v2.mul_(2))
    w = v[:1]                                 # made in grad mode: recorded, still no_grad
    assert not w.is_leaf and w.grad_fn.next_functions == ((None, 0),)
    msg = NG_INPLACE.replace("A view was created", "Output 0 of Slice is a view of a view "
                             "which was created")
    _raises(msg, lambda: w.mul_(2))
    with torch.inference_mode():
        q = x[:2]
    with torch.no_grad():
        q2 = q[:1]                            # inference wins over a later no_grad
    _raises(INF_INPLACE, lambda: q2.mul_(1))
    with torch.inference_mode():
        q3 = v[:1]                            # and over an earlier no_grad
    _raises(INF_INPLACE, lambda: q3.mul_(1))


def test_unbind_under_no_grad():
    x = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        a = x.unbind(0)[0]
        a.mul_(2)                             # allowed (not a multi-output view here)
    with torch.no_grad():
        b = x.unbind(0)[1]
    _raises(NG_INPLACE, lambda: b.mul_(2))
    z = torch.zeros(3).unbind(0)[0]
    z.mul_(2)                                 # nothing requires grad


def test_base_requires_grad_later():
    b = torch.zeros(3)
    with torch.no_grad():
        bv = b[:2]
    assert not bv.requires_grad
    b.requires_grad_()
    assert bv.requires_grad
    _raises(NG_INPLACE, lambda: bv.mul_(2))
    c = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        cv = c[:2]
    c.requires_grad_(False)
    assert not cv.requires_grad


def test_copying_reshape_under_no_grad_is_not_a_view():
    x = torch.ones(2, 3, requires_grad=True)
    with torch.no_grad():
        r = x.t().reshape(6)                  # a copy, not a view
        v = x.reshape(6)                      # a view
    assert not r.requires_grad and r._base is None
    r.add_(1)
    assert v.requires_grad
    _raises(NG_INPLACE, lambda: v.add_(1))


# ---- PyTorch as the oracle -------------------------------------------------------------------
def _outcome(fn):
    try:
        return ("ok", fn())
    except RuntimeError as e:
        return ("raise", str(e))


def _scenarios(T):
    def grad_fn_name(t):
        fn = t.grad_fn
        return None if fn is None else type(fn).__name__

    def s_basic():
        x = T.ones(3, requires_grad=True)
        with T.no_grad():
            v = x[1:]
        y = (v * 3).sum()
        y.backward()
        return (v.requires_grad, v.is_leaf, x.grad is None, v.grad is None,
                [f is None for f, _ in y.grad_fn.next_functions[0][0].next_functions])

    def s_inplace(mode, inner):
        def run():
            x = T.ones(3, requires_grad=True)
            y = x * 2
            ctx = T.no_grad if mode == "no_grad" else T.inference_mode
            with ctx():
                v = y.view(3)[:2]
            if inner:
                with T.no_grad():
                    v.add_(1)
                return (y.tolist(), _outcome(lambda: grad_fn_name(v)), v.requires_grad)
            return v.add_(1).tolist()
        return run

    def s_base_bumped(mode):
        def run():
            x = T.ones(2, 3, requires_grad=True)
            y = x.exp()
            ctx = T.no_grad if mode == "no_grad" else T.inference_mode
            with ctx():
                v = y.t()
            y.mul_(2)
            return (_outcome(lambda: grad_fn_name(v)), v.requires_grad,
                    _outcome(lambda: v.is_leaf))
        return run

    def s_view_of_view(mode):
        def run():
            x = T.ones(4, requires_grad=True)
            ctx = T.no_grad if mode == "no_grad" else T.inference_mode
            with ctx():
                v = x.view(2, 2)
            w = v[0]
            return (grad_fn_name(w), w.is_leaf, _outcome(lambda: w.mul_(2).tolist()),
                    _outcome(lambda: w.transpose(0, 0).unsqueeze(0).add_(1).tolist()))
        return run

    def s_plain(mode):
        def run():
            t = T.zeros(3)
            ctx = T.no_grad if mode == "no_grad" else T.inference_mode
            with ctx():
                w = t[:2]
            return (w.requires_grad, w.is_inference(), w.add_(1).tolist(),
                    _outcome(lambda: w.mul_(T.ones(2, requires_grad=True)).tolist()))
        return run

    def s_reshape():
        x = T.ones(2, 3, requires_grad=True)
        with T.no_grad():
            r = x.t().reshape(6)
        return (r.requires_grad, r.is_leaf, _outcome(lambda: r.add_(1).tolist()))

    return {"basic": s_basic, "reshape": s_reshape,
            **{f"inplace_{m}_{i}": s_inplace(m, i) for m in ("no_grad", "inference")
               for i in (False, True)},
            **{f"bumped_{m}": s_base_bumped(m) for m in ("no_grad", "inference")},
            **{f"view_of_view_{m}": s_view_of_view(m) for m in ("no_grad", "inference")},
            **{f"plain_{m}": s_plain(m) for m in ("no_grad", "inference")}}


@pytest.mark.parametrize("name", sorted(_scenarios(torch)))
def test_matches_torch(name):
    real = pytest.importorskip("torch")
    assert _outcome(_scenarios(torch)[name]) == _outcome(_scenarios(real)[name])


def test_autograd_grad_of_a_no_grad_view_is_unused():
    # PyTorch: the view requires grad but has no edge, so it is an unused input
    x = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        v = x[:2]
    assert torch.autograd.grad((v * 2).sum(), v, allow_unused=True) == (None,)
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        torch.autograd.grad((v * 2).sum(), v)
    y = (v * 2).sum()
    (gx,) = torch.autograd.grad(y * x.sum(), x)      # x itself is still reached
    assert gx.tolist() == [4.0, 4.0, 4.0]


def test_compiled_call_with_a_no_grad_view_requires_grad_as_eager():
    # the flat guard key of a compiled call reads requires_grad as eager does: a view made
    # under no_grad of a tensor that requires grad must not reuse the plain tensor's entry
    f = torch.compile(lambda t: t * 2, backend="llvm")
    plain = torch.ones(2)
    for _ in range(3):
        assert not f(plain).requires_grad
    x = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        v = x[:2]
    for _ in range(3):
        y = f(v)
        assert y.requires_grad and y.tolist() == [2.0, 2.0]
