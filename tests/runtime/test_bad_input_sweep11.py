"""Bad input, eleventh sweep: the common mistakes of a PyTorch user raise torch's exception
type with a message naming the problem (torch's words where it has clear ones), eagerly and
inside llgrad.compile (the traceback's innermost user frame is the user's line), and leave
no state half-changed beyond what torch itself leaves (NumPy arrays next to tensors:
test_bad_input_sweep11_b.py). Found and fixed here: cat / stack of a tensor (silently
unbound it), randint without a size, a multi-element tensor lr, a string
fill value, conv operands that are not tensors / a weight of another rank / a bias of
another shape (silently broadcast), requires_grad = "yes", grad_outputs fewer than outputs
(silently dropped), plain attributes before Module.__init__(), layer_norm's weight / bias
of another shape (silently broadcast), F.embedding of a 1-D weight (silently indexed),
recurrent layers over no steps, linspace / logspace of 2.5 steps (values past the end),
x["1"] (read as x[1]), a complex fill value (zeros), embedding_bag's and masked_fill's words."""
import re
import traceback
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _outcome(fn, lib, compiled=False):
    """("ok", value) or (exception type name, its first line, torch's names)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r = fn(lib, (lambda f: llgrad.compile(f)) if compiled else (lambda f: f))
        except Exception as e:      # noqa: BLE001 (the exception is what is compared)
            return type(e).__name__, (str(e).splitlines() or [""])[0].replace("llgrad", "torch")
    return "ok", r.tolist() if hasattr(r, "tolist") else r


def _same(fn, compiled=True):
    want = _outcome(fn, torch)
    assert _outcome(fn, llgrad) == want
    if compiled:
        assert _outcome(fn, llgrad, compiled=True) == want


# ---- a sweep of common mistakes: torch's type and first line, eager and compiled -------------
_MISTAKES = {
    "matmul": lambda t, c: c(lambda a, b: a @ b)(t.ones(2, 3), t.ones(4, 5)),
    "linear": lambda t, c: c(lambda x, w: t.nn.functional.linear(x, w))(t.ones(2, 5),
                                                                        t.ones(3, 4)),
    "cat_sizes": lambda t, c: c(lambda a, b: t.cat([a, b]))(t.ones(2, 3), t.ones(2, 4)),
    "stack_sizes": lambda t, c: c(lambda a, b: t.stack([a, b]))(t.ones(2, 3), t.ones(2, 4)),
    "view": lambda t, c: c(lambda a: a.view(4, 4))(t.ones(2, 3)),
    "view_noncontiguous": lambda t, c: c(lambda x: x.t().view(6))(t.ones(2, 3)),
    "reshape": lambda t, c: c(lambda a: a.reshape(-1, 4))(t.ones(2, 3)),
    "expand": lambda t, c: c(lambda a: a.expand(3, 4))(t.ones(2, 3)),
    "broadcast": lambda t, c: c(lambda a, b: a + b)(t.ones(2, 3), t.ones(4)),
    "inplace_broadcast": lambda t, c: c(lambda a, b: a.add_(b))(t.ones(3), t.ones(2, 3)),
    "ce_float_target": lambda t, c: c(lambda x, y: t.nn.functional.nll_loss(x, y))(
        t.ones(2, 3), t.ones(2)),
    "ce_target_2d": lambda t, c: c(lambda x, y: t.nn.functional.cross_entropy(x, y))(
        t.ones(4, 3), t.zeros(4, 1, dtype=t.long)),
    "ce_out_of_range": lambda t, c: c(lambda x, y: t.nn.functional.cross_entropy(x, y))(
        t.ones(2, 3), t.tensor([0, 3])),
    "embedding_out_of_range": lambda t, c: c(lambda w, i: t.nn.functional.embedding(i, w))(
        t.ones(5, 2), t.tensor([1, 5])),
    "gather_out_of_range": lambda t, c: c(lambda x, i: x.gather(1, i))(
        t.ones(2, 3), t.tensor([[0], [3]])),
    "index_select_float": lambda t, c: c(lambda x, i: x.index_select(0, i))(
        t.ones(2, 3), t.tensor([0., 1.])),
    "dim_out_of_range": lambda t, c: c(lambda x: x.softmax(-3))(t.ones(2, 3)),
    "item_of_many": lambda t, c: c(lambda x: x.item())(t.ones(2)),
    "bool_of_empty": lambda t, c: c(lambda x: x * 2 if x else x)(t.ones(0)),
    "bool_of_many": lambda t, c: c(lambda x: x * 2 if x > 0 else x)(t.ones(2)),
    "int_division_by_zero": lambda t, c: c(lambda a, b: a // b)(t.tensor([1, 2]),
                                                               t.tensor([1, 0])),
    "conv_channels": lambda t, c: c(lambda x, w: t.nn.functional.conv2d(x, w))(
        t.ones(1, 2, 8, 8), t.ones(4, 3, 3, 3)),
    "conv_weight_rank": lambda t, c: c(lambda x, w: t.nn.functional.conv2d(x, w))(
        t.ones(1, 1, 4, 4), t.ones(1, 3, 3)),
    "conv_bias_shape": lambda t, c: c(lambda x, w, b: t.nn.functional.conv2d(x, w, b))(
        t.ones(1, 1, 4, 4), t.ones(2, 1, 3, 3), t.ones(2, 1)),
    "conv1d_bias_shape": lambda t, c: c(lambda x, w, b: t.nn.functional.conv1d(x, w, b))(
        t.ones(1, 1, 4), t.ones(2, 1, 3), t.ones(3)),
    "layer_norm_weight": lambda t, c: c(lambda x, w: t.nn.functional.layer_norm(x, (3,), w))(
        t.ones(2, 3), t.ones(1, 3)),
    "layer_norm_bias": lambda t, c: c(
        lambda x, b: t.nn.functional.layer_norm(x, (3,), None, b))(t.ones(2, 3), t.ones(1)),
    "embedding_1d_weight": lambda t, c: c(lambda i, w: t.nn.functional.embedding(i, w))(
        t.tensor([1]), t.ones(5)),
    "masked_fill_shape": lambda t, c: c(lambda m, a: a.masked_fill(m, 0.))(
        t.ones(3, dtype=t.bool), t.ones(2)),
    "cat_of_a_tensor": lambda t, c: c(lambda a, b: t.cat(a, b))(t.ones(2), t.ones(2)),
    "stack_of_a_tensor": lambda t, c: c(lambda a: t.stack(a))(t.ones(2)),
    "hstack_of_a_tensor": lambda t, c: c(lambda a: t.hstack(a))(t.ones(2)),
    "vstack_of_a_tensor": lambda t, c: c(lambda a: t.vstack(a))(t.ones(2)),
    "lstm_features": lambda t, c: c(t.nn.LSTM(4, 3))(t.ones(5, 2, 3)),
    "lstm_no_steps": lambda t, c: c(t.nn.LSTM(4, 3))(t.ones(0, 2, 4)),
    "gru_no_steps_batch_first": lambda t, c: c(t.nn.GRU(4, 3, batch_first=True))(
        t.ones(2, 0, 4)),
    "bn_batch_of_one": lambda t, c: c(t.nn.BatchNorm1d(3))(t.ones(1, 3)),
    "module_args": lambda t, c: c(lambda x: t.nn.Linear(2, 2)(x, x))(t.ones(1, 2)),
    "backward_twice": lambda t, c: [y.backward() for y in [c(lambda x: (x.exp() * x).sum())(
        t.ones(2, requires_grad=True))] * 2],
    "backward_non_scalar": lambda t, c: c(lambda x: x * 2)(
        t.ones(2, requires_grad=True)).backward(),
    "inplace_leaf": lambda t, c: c(lambda x: x.add_(1))(t.ones(2, requires_grad=True)),
    "call_too_few": lambda t, c: c(_dot)(t.ones(2)),
    "call_too_many": lambda t, c: c(_dot)(t.ones(2), t.ones(2), t.ones(2)),
    "call_bad_keyword": lambda t, c: c(_dot)(t.ones(2), v=t.ones(2)),
    "call_with_none": lambda t, c: c(_dot)(t.ones(2), None),
    "call_with_str": lambda t, c: c(_dot)(t.ones(2), "ab"),
    "call_after_good_calls": lambda t, c: _after_good(c(_dot), t),
}


def _dot(x, w):
    return (x * w).sum()


def _after_good(f, t):
    f(t.ones(2), t.ones(2))
    f(t.ones(2), t.ones(2))
    return [_outcome(lambda t_, c_: f(*args), t) for args in
            ((t.ones(2),), (t.ones(2), None), (t.ones(2), t.ones(3)), (t.ones(2), t.ones(2)))]


@pytest.mark.parametrize("name", list(_MISTAKES))
def test_common_mistakes_as_torch(name):
    _same(_MISTAKES[name])


# ---- creation, optimisers, autograd, modules ------------------------------------------------
@pytest.mark.parametrize("src", ["t.randint(5, (2,)).shape", "t.randint(high=5, size=(2,)).shape",
                                 "t.randint(5, ()).shape", "t.full((2,), 'a')",
                                 "t.full((2,), None)", "t.full((2,), [1])",
                                 "t.zeros(2).fill_(1j)", "t.zeros(2).fill_(2 + 0j)"])
def test_creation_arguments(src):
    _same(lambda t, c: eval(src, {"t": t}), compiled=False)


@pytest.mark.parametrize("bad,good", [
    ("t.linspace(0, 1, 2.5)", "t.linspace(0, 1, 3)"), ("t.linspace(0, 1, 2.0)", None),
    ("t.linspace(0, 1, True)", None), ("t.logspace(0, 1, 2.5)", "t.logspace(0, 1, 3)"),
    ("t.linspace(0, 1, '3')", "t.linspace(0, 1, t.tensor(3))"),
    ("t.ones(3)['1']", "t.arange(3.)[t.tensor(1)]"), ("t.ones(3)['a']", None),
    ("t.ones(3)[b'a']", None)])
def test_argument_types(bad, good):
    # (2.5 steps spaced the values past the end; x["1"] read the string as index 1)
    def fn(src):
        def run(t, c):
            try:
                return eval(src, {"t": t})
            except TypeError:
                return "TypeError"
        return run
    _same(fn(bad), compiled=False)
    assert fn(bad)(llgrad, None) == "TypeError"
    if good:
        _same(fn(good), compiled=False)


def test_creation_arguments_llgrad_words():
    # randint without a size: torch's TypeError (a 0-d draw before); a complex fill value
    # into a real dtype: an error, not zeros
    for src in ("t.randint(5)", "t.randint(2, 5)"):
        with pytest.raises(TypeError):
            eval(src, {"t": torch})
        with pytest.raises(TypeError, match=r"randint\(\) received an invalid combination of "
                                            "arguments - got no size"):
            eval(src, {"t": llgrad})
    with pytest.raises(RuntimeError, match="value cannot be converted to type float without "
                                           "overflow"):
        llgrad.full((2,), 1j, dtype=llgrad.float32)
    assert llgrad.full((2,), 1j).dtype is llgrad.complex64      # (as torch's)


def test_optimizer_arguments():
    def fn(src):
        def run(t, c):
            w = t.ones(2, requires_grad=True)
            if "LBFGS" in src:
                return eval(src, {"t": t, "w": w}).step(None)
            return eval(src, {"t": t, "w": w}) and "made"
        return run
    for src in ("t.optim.SGD([w], lr=t.tensor([0.1, 0.2]))", "t.optim.SGD([w], lr=t.tensor(0.1))",
                "t.optim.Adam([w], lr=t.tensor([0.1, 0.2]))", "t.optim.LBFGS([w])"):
        _same(fn(src), compiled=False)


def test_grad_outputs_count():
    def fn(outs, grads):
        def run(t, c):
            x = t.ones(2, requires_grad=True)
            o = [x * (k + 2) for k in range(outs)]
            g = None if grads is None else [t.ones(2)] * grads
            return [r.tolist() for r in t.autograd.grad(o, x, grad_outputs=g)]
        return run
    for outs, grads in ((2, 1), (1, 0), (1, 2), (2, 2), (2, None)):
        _same(fn(outs, grads), compiled=False)

    def backward(t, c):
        x = t.ones(2, requires_grad=True)
        t.autograd.backward([x * 2, x * 3], [t.ones(2)])
    _same(backward, compiled=False)


@pytest.mark.parametrize("value", ["'yes'", "1", "None", "t.tensor(True)", "True"])
def test_requires_grad_must_be_a_bool(value):
    def fn(t, c):
        x = t.ones(2)
        x.requires_grad = eval(value, {"t": t})
        return x.requires_grad
    _same(fn, compiled=False)


def test_module_attributes_before_init():
    """Plain attributes may be set before Module.__init__() (torch's modules allow it; llgrad
    refused legal code); a parameter or a submodule may not, in torch's words."""
    def fn(first):
        def run(t, c):
            class M(t.nn.Module):
                def __init__(self):
                    setattr(self, "a", eval(first, {"t": t}))
                    super().__init__()
                    self.lin = t.nn.Linear(2, 2)
            m = M()
            return sorted(m.state_dict()), type(m.a).__name__.replace("llgrad", "torch")
        return run
    for first in ("3", "t.ones(2)", "t.nn.Parameter(t.ones(2))", "t.nn.Linear(2, 2)"):
        _same(fn(first), compiled=False)


def test_conv_operands_that_are_not_tensors():
    for src in ("F.conv2d(np.ones((1, 1, 4, 4)), t.ones(2, 1, 3, 3))",
                "F.conv2d(t.ones(1, 1, 4, 4), np.ones((2, 1, 3, 3)))",
                "F.conv1d(np.ones((1, 1, 4)), t.ones(2, 1, 3))",
                "t.nn.Conv2d(1, 1, 1)(np.ones((1, 1, 2, 2), dtype=np.float32))"):
        with pytest.raises(TypeError, match=r"received an invalid combination of arguments - "
                                            r"got \(numpy.ndarray, |, numpy.ndarray"):
            eval(src, {"t": llgrad, "F": llgrad.nn.functional, "np": np})
        with pytest.raises(TypeError):
            eval(src, {"t": torch, "F": torch.nn.functional, "np": np})


def test_embedding_bag_out_of_range_words():
    # (sum and mean of a float32 weight: fbgemm's words; max mode or float64: the kernel's)
    for idx, offs, mode, dt in (([1, 5], [0], "sum", "float32"), ([1, 5], [0], "sum", "float64"),
                                ([9, 0, 1], [0, 2], "mean", "float32"),
                                ([0, 1, 2, 9], [0, 1], "sum", "float32"),
                                ([0, 1, 9], [0, 1], "max", "float32")):
        _same(lambda t, c: t.nn.functional.embedding_bag(
            t.tensor(idx), t.ones(5, 2, dtype=getattr(t, dt)), t.tensor(offs), mode=mode),
              compiled=False)


# ---- state after an error --------------------------------------------------------------------
def _weights_equal(m, before):
    return [bool((p == b).all()) for p, b in zip(m.parameters(), before)]


@pytest.mark.parametrize("bad", ["missing", "shape", "unexpected"])
def test_load_state_dict_failure_leaves_what_torch_leaves(bad):
    """torch's strict load_state_dict copies the entries that fit before it raises (it is not
    atomic); llgrad's leaves the same parameters changed."""
    def fn(t, c):
        t.manual_seed(0)
        m = t.nn.Sequential(t.nn.Linear(2, 2), t.nn.Linear(2, 2))
        before = [p.detach().clone() for p in m.parameters()]
        sd = {k: t.zeros_like(v) for k, v in m.state_dict().items()}
        if bad == "missing":
            del sd["1.weight"]
        elif bad == "shape":
            sd["1.weight"] = t.zeros(3, 2)
        else:
            sd["extra"] = t.zeros(1)
        try:
            m.load_state_dict(sd)
        except RuntimeError as e:
            return str(e).splitlines()[0], _weights_equal(m, before)
    _same(fn, compiled=False)


def test_optimizer_step_failure_leaves_what_torch_leaves():
    """A momentum buffer of the wrong shape (a state_dict of another model) fails at that
    parameter: torch's for-loop SGD has updated the ones before it, and so has llgrad's."""
    def fn(t, c):
        w, v = t.ones(2, requires_grad=True), t.ones(2, requires_grad=True)
        opt = t.optim.SGD([w, v], lr=0.1, momentum=0.9)
        w.grad, v.grad = t.ones(2), t.ones(2)
        opt.step()
        opt.state[v]["momentum_buffer"] = t.ones(3)
        try:
            opt.step()
        except RuntimeError as e:
            return str(e), w.tolist(), v.tolist()
    _same(fn, compiled=False)


@pytest.mark.parametrize("backend", ["llvm", "interpret"])
def test_compiled_trace_error_points_at_the_users_line(backend):
    def inner(x):
        return x.view(4, 4)                 # the line that fails

    def outer(x, w):
        return inner(x + 1) @ w

    line = inner.__code__.co_firstlineno + 1
    cf = llgrad.compile(outer, backend=backend)
    for _ in range(2):                      # (nothing cached: the second call traces again)
        with pytest.raises(RuntimeError, match=re.escape("shape '[4, 4]' is invalid for input "
                                                         "of size 6")) as e:
            cf(llgrad.ones(2, 3), llgrad.ones(4, 4))
        frames = [f for f in traceback.extract_tb(e.value.__traceback__)
                  if f.filename == __file__]
        assert (frames[-1].name, frames[-1].lineno) == ("inner", line)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["llvm", "interpret"])
def test_compiled_value_errors_after_a_good_call(backend):
    """Errors that depend on values (a class target out of range, an embedding index, an
    integer division by zero) on the cached path: eager's error at the user's line, and the
    in-place writes and buffer updates before it, as eager's."""
    F = llgrad.nn.functional

    def make():
        bn = llgrad.nn.BatchNorm1d(3)

        def step(x, y, i, d, acc):
            acc.add_(1.0)
            h = bn(x)
            loss = F.cross_entropy(h, y)            # line 3 of the body
            e = F.embedding(i, x)
            q = d // d
            return loss, e, q
        return bn, step

    def run(fn, bn, y, i, d):
        acc = llgrad.zeros(())
        try:
            fn(llgrad.arange(6.).view(2, 3), llgrad.tensor(y), llgrad.tensor(i),
               llgrad.tensor(d), acc)
            err = None
        except Exception as e:      # noqa: BLE001
            frames = [f for f in traceback.extract_tb(e.__traceback__) if f.name == "step"]
            err = type(e).__name__, str(e).splitlines()[0], frames[-1].lineno
        return err, acc.item(), bn.running_mean.tolist(), int(bn.num_batches_tracked)

    good = ([0, 1], [0, 1], [1, 2])
    bads = (([0, 7], [0, 1], [1, 2]), ([0, 1], [0, 5], [1, 2]), ([0, 1], [0, 1], [1, 0]))
    for bad in bads:
        bn_e, eager = make()
        bn_c, step = make()
        cf = llgrad.compile(step, backend=backend)
        for args in (good, good, bad, good):
            assert run(cf, bn_c, *args) == run(eager, bn_e, *args)

