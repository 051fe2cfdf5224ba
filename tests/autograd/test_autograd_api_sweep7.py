"""autograd API corners against PyTorch (each failed before its fix): llgrad.is_anomaly_enabled
and set_anomaly_enabled were a switch of their own, apart from autograd.detect_anomaly /
set_detect_anomaly; autograd.grad's materialize_grads with allow_unused=False and its
is_grads_batched shape error; a non-reentrant checkpoint recomputed from an input written in
place since (a silently wrong gradient) and a reentrant one under autograd.grad; a node's
metadata, a node called, a post hook giving a gradient where there was None; gradcheck's
words; setting requires_grad of a non-leaf; autograd.graph.register_multi_grad_hook (it was
missing); grad(only_inputs=False)'s warning; autograd.functional's strict checks of vjp / jvp
/ hvp (ignored) and its TypeError for a list of inputs or outputs (accepted);
backward(inputs=[t]) of a non-leaf t that retains its grad (t.grad got the gradient twice);
a .grad that requires grad, replaced instead of accumulated into in place; gradcheck's
failure text (NumPy arrays where PyTorch shows tensors)."""
import warnings

import pytest

import llgrad

torch = pytest.importorskip("torch")

from autograd_oracle_sweep7 import same  # noqa: E402


def _anomaly_switches(L):
    seen = [L.is_anomaly_enabled()]
    with L.autograd.set_detect_anomaly(True, check_nan=False):
        seen += [L.is_anomaly_enabled(), L.is_anomaly_check_nan_enabled()]
    L.set_anomaly_enabled(True)
    try:
        seen.append(L.is_anomaly_enabled())
        a = L.tensor([0.0, 1.0], requires_grad=True)
        (a.sqrt() * 0).sum().backward()     # (the engine's nan check is on)
    finally:
        L.set_anomaly_enabled(False)
        seen.append(L.is_anomaly_enabled())


def _anomaly_off(L):
    seen = []
    L.autograd.set_detect_anomaly(True)
    seen.append(L.is_anomaly_enabled())
    L.autograd.set_detect_anomaly(False)
    seen.append(L.is_anomaly_enabled())
    return seen


def _leaf(L):
    return L.tensor([1.0, 2.0], requires_grad=True)


def _checkpoint(L):
    return getattr(L.utils, "checkpoint")


def _checkpoint_input_written(L):
    x = _leaf(L)
    b = x * 1
    y = _checkpoint(L).checkpoint(lambda t: t.exp(), b, use_reentrant=False).sum()
    with L.no_grad():
        b.add_(1)
    y.backward()
    return x.grad


def _checkpoint_kwarg_written(L):
    x = _leaf(L)
    b = x * 1
    y = _checkpoint(L).checkpoint(lambda t, s: (t * s).sin(), x, s=b,
                                  use_reentrant=False).sum()
    with L.no_grad():
        b.add_(1)
    y.backward()
    return x.grad


def _checkpoint_unwritten(L):
    x = _leaf(L)
    y = _checkpoint(L).checkpoint(lambda t: t.exp(), x * 1, use_reentrant=False).sum()
    y.backward()
    return x.grad


def _reentrant_grad(L):
    x = _leaf(L)
    y = _checkpoint(L).checkpoint(lambda t: t * t, x, use_reentrant=True)
    return L.autograd.grad(y.sum(), x)


def _reentrant_inputs(L):
    x = _leaf(L)
    y = _checkpoint(L).checkpoint(lambda t: t * t, x, use_reentrant=True)
    y.sum().backward(inputs=[x])


def _reentrant_backward(L):
    x = _leaf(L)
    y = _checkpoint(L).checkpoint(lambda t: t * t, x, use_reentrant=True)
    y.sum().backward()
    return x.grad


@pytest.mark.parametrize("fn", [
    _anomaly_switches, _anomaly_off,
    lambda L: L.autograd.grad((_leaf(L) * 2).sum(), [_leaf(L)], materialize_grads=True,
                              allow_unused=False),
    lambda L: L.autograd.grad(_leaf(L) * 2, _leaf(L), grad_outputs=L.ones(2),
                              is_grads_batched=True),
    _checkpoint_input_written, _checkpoint_kwarg_written, _checkpoint_unwritten,
    _reentrant_grad, _reentrant_inputs, _reentrant_backward,
])
def test_autograd_api_against_torch(fn):
    same(fn, torch)


def _node_metadata(L):
    y = _leaf(L) * 2
    y.grad_fn.metadata["k"] = 1
    return dict(y.grad_fn.metadata), y.grad_fn.metadata is y.grad_fn.metadata


def _node_called(L):
    return (_leaf(L) * 3).grad_fn(L.ones(2))


def _post_hook_fills_a_none(L):
    y = _leaf(L) * 2                    # (grad_inputs: the leaf's, None for the 2)
    y.grad_fn.register_hook(lambda gi, go: (gi[0], gi[0]))
    y.sum().backward()


def _gradcheck_nothing_requires_grad(L):
    return L.autograd.gradcheck(lambda t: (t ** 2).sum(), (L.tensor([1.0, 2.0],
                                                                    dtype=L.float64),))


@pytest.mark.parametrize("fn", [_node_metadata, _node_called, _post_hook_fills_a_none,
                                _gradcheck_nothing_requires_grad])
def test_nodes_and_gradcheck_against_torch(fn):
    same(fn, torch)


def test_gradcheck_single_precision_warning():
    said = []
    for lib in (llgrad, torch):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with pytest.raises(Exception):
                lib.autograd.gradcheck(lambda t: (t ** 2).sum(),
                                       (lib.tensor([1.0, 2.0], requires_grad=True),))
        said.append([str(x.message) for x in w if "double precision" in str(x.message)])
    assert said[0] == said[1] and said[0]


def _set_requires_grad_of_non_leaf(L, flag):
    b = _leaf(L) * 2
    b.requires_grad_(True)              # (the method lets True pass)
    b.requires_grad = flag


@pytest.mark.parametrize("flag", [True, False])
def test_requires_grad_of_a_non_leaf_against_torch(flag):
    same(lambda L: _set_requires_grad_of_non_leaf(L, flag), torch)


def _multi_grad_hook(L, mode):
    seen = []

    def fn(grads):
        seen.append([g.tolist() if g is not None else None for g in grads] if mode == "all"
                    else grads.tolist())
    a, b = _leaf(L), L.tensor([3.0], requires_grad=True)
    c = a * b
    handle = L.autograd.graph.register_multi_grad_hook((a, b, c), fn, mode=mode)
    (a * 2).sum().backward()
    c.sum().backward(retain_graph=True)
    c.sum().backward(inputs=(a,), retain_graph=True)
    handle.remove()
    c.sum().backward()
    return seen


@pytest.mark.parametrize("mode", ["all", "any", "some"])
def test_multi_grad_hook_against_torch(mode):
    same(lambda L: _multi_grad_hook(L, mode), torch)


def test_only_inputs_warning():
    said = []
    for lib in (llgrad, torch):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            lib.autograd.grad((a * 3).sum(), a, only_inputs=False)
        said.append([(x.category, str(x.message).replace("torch.", "llgrad.")) for x in w])
    assert said[0] == said[1] and said[0]


def _functional(L):
    return getattr(L.autograd, "functional")


@pytest.mark.parametrize("fn", [
    lambda L: _functional(L).vjp(lambda x: L.ones(2), L.ones(2), L.ones(2), strict=True),
    lambda L: _functional(L).vjp(lambda x, y: x * 2, (L.ones(2), L.ones(2)), L.ones(2),
                                 strict=True),
    lambda L: _functional(L).jvp(lambda x: L.ones(2), L.ones(2), L.ones(2), strict=True),
    lambda L: _functional(L).hvp(lambda x: L.ones(()), L.ones(2), L.ones(2), strict=True),
    lambda L: _functional(L).jacobian(lambda x: x * 2, [1.0, 2.0]),
    lambda L: _functional(L).jacobian(lambda x: x * 2, [L.ones(2)]),
    lambda L: _functional(L).hessian(lambda x: x.sum(), [L.ones(2)]),
    lambda L: _functional(L).vjp(lambda x: x * 2, [L.ones(2)], L.ones(2)),
    lambda L: _functional(L).jacobian(lambda x: [x * 2], L.ones(2)),
])
def test_functional_errors_against_torch(fn):
    same(fn, torch)


def _retained_input(L, body):
    a = _leaf(L)
    b = a * 2
    b.retain_grad()
    body(L, b)
    return b.grad, a.grad


@pytest.mark.parametrize("body", [
    lambda L, b: (b * 3).sum().backward(inputs=[b]),        # (its .grad was written twice)
    lambda L, b: (b * 3).sum().backward(inputs=[b, b]),
    lambda L, b: b.sum().backward(inputs=[b]),
    lambda L, b: [b.mul_(2), (b * 3).sum().backward(inputs=[b])],
])
def test_backward_inputs_that_retain_grad_against_torch(body):
    same(lambda L: _retained_input(L, body), torch)


def _accumulated_in_place(L, create_first):
    a = _leaf(L)
    if create_first:
        (a * a).sum().backward(create_graph=True)
    else:
        a.grad = L.tensor([1.0, 1.0]).requires_grad_()
    g = a.grad
    (a * a).sum().backward()                # (into g, in place: it was replaced)
    return g.tolist(), a.grad is g, a.grad.requires_grad


@pytest.mark.parametrize("create_first", [True, False])
def test_grad_that_requires_grad_accumulates_in_place(create_first):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (backward(create_graph=True)'s)
        assert _accumulated_in_place(llgrad, create_first) == \
            _accumulated_in_place(torch, create_first)


def _gradcheck_failure_text(L):
    def forward(ctx, x):
        return x * 2
    bad = type("Bad", (L.autograd.Function,), {"forward": staticmethod(forward),
                                               "backward": staticmethod(lambda ctx, g: g * 3)})
    x = L.arange(1.0, 3.0, dtype=L.float64).requires_grad_()
    with pytest.raises(Exception) as e:
        L.autograd.gradcheck(bad.apply, (x,))
    return type(e.value).__name__, str(e.value).replace("torch.", "llgrad.")


def test_gradcheck_failure_shows_tensors_as_torch():
    assert _gradcheck_failure_text(llgrad) == _gradcheck_failure_text(torch)
