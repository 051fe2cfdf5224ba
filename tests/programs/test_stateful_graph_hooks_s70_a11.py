"""The autograd graph's own hooks and modes inside a compiled step: saved-tensor hooks
(pack/unpack that change what the backward reads), save_on_cpu, checkpoint, anomaly
detection, multi-grad hooks, hooks and pre-hooks on grad_fn nodes, forward-mode AD,
torch.func.grad and vmap: torch, llgrad eager and llgrad.compile over six calls
(stateful_harness_s70_a11.check)."""
import pytest

pytest.importorskip("torch")
from stateful_harness_s70_a11 import check, randn  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile or two a case)


def xy(i):
    return randn(10 + i, 3, 4), randn(20 + i, 3, 2)


def _w(lib, k=1, shape=(4, 2)):
    return lib.tensor(randn(k, *shape), requires_grad=True)


def saved_tensor_hooks_scale(lib):
    w = _w(lib)
    count = [0]

    def pack(t):
        count[0] += 1
        return t.detach() * 2

    def step(x, y):
        with lib.autograd.graph.saved_tensors_hooks(pack, lambda t: t / 4):
            loss = ((x @ w).sin() * y).sum()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: [w.grad, count[0] > 0])   # (how many: see the
    # xfail in test_stateful_regressions_s70_a11.py)


def save_on_cpu(lib):
    w = _w(lib)

    def step(x, y):
        with lib.autograd.graph.save_on_cpu():
            loss = ((x @ w).tanh() * y).sum()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: [w.grad])


def checkpointed(lib):
    w, v = _w(lib), _w(lib, 2, (2, 2))

    def block(h):
        return (h @ v).tanh() * 2

    def step(x, y):
        h = lib.utils.checkpoint.checkpoint(block, x @ w, use_reentrant=False)
        loss = (h - y).pow(2).sum()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: [w.grad, v.grad])


def anomaly_nan_backward_errors(lib):
    w = _w(lib)

    def step(x, y):
        with lib.autograd.detect_anomaly(check_nan=True):
            loss = ((x @ w).abs().sqrt() * 0).sum() + (x @ w * y).sum()
            h = (w - w).sqrt()          # (sqrt(0)'s gradient is inf; times 0: NaN)
            (loss + h.sum()).backward()
        return loss
    return dict(step=step, state=lambda: [w.grad])


def multi_grad_hook(lib):
    w, v = _w(lib), _w(lib, 2, (2,))
    seen = []
    lib.autograd.graph.register_multi_grad_hook(
        (w, v), lambda grads: seen.append(sum(float(g.sum()) for g in grads if g is not None)))

    def step(x, y):
        loss = ((x @ w + v) * y).pow(2).sum()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: [w.grad, v.grad, len(seen), seen[-1] if seen else 0])


def node_hooks(lib):
    w = _w(lib)

    def step(x, y):
        h = x @ w
        t = h.tanh()
        t.grad_fn.register_prehook(lambda gout: (gout[0] * 2,))
        t.grad_fn.register_hook(lambda gin, gout: (gin[0].clamp(-0.5, 0.5),))
        loss = (t * y).sum()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: [w.grad])


def forward_mode(lib):
    w = _w(lib)
    fwAD = lib.autograd.forward_ad

    def step(x, y):
        with fwAD.dual_level():
            d = fwAD.make_dual(x, y.sum(1, keepdim=True).expand(3, 4))
            out = (d @ w.detach()).sin()
            p, t = fwAD.unpack_dual(out)
        return p, t
    return dict(step=step, state=lambda: [])


def func_grad_and_vmap(lib):
    w = _w(lib)

    def f(wv, x):
        return (x @ wv).tanh().sum()

    def step(x, y):
        g = lib.func.grad(f)(w.detach(), x)
        per = lib.func.vmap(lambda xi: lib.func.grad(f)(w.detach(), xi[None]))(x)
        return g, per
    return dict(step=step, state=lambda: [])


def grad_of_grad_hook_on_intermediate(lib):
    w = _w(lib)

    def step(x, y):
        h = x @ w
        h.register_hook(lambda g: g * 3)
        g, = lib.autograd.grad((h.sin() * y).sum(), w, create_graph=True)
        g.pow(2).sum().backward()
        return g
    return dict(step=step, state=lambda: [w.grad])


CASES = [saved_tensor_hooks_scale, save_on_cpu, checkpointed, anomaly_nan_backward_errors,
         multi_grad_hook, node_hooks, forward_mode, func_grad_and_vmap,
         grad_of_grad_hook_on_intermediate]

# (cases compile runs eagerly, and the reason its warning gives; save_on_cpu compiles: its
# pair is the identity on llgrad's CPU tensors, s76)
EAGER = {saved_tensor_hooks_scale: "saved_tensors_hooks", forward_mode: "forward-mode AD"}


@pytest.mark.parametrize("make", CASES, ids=lambda f: f.__name__)
def test_graph_hooks(make):
    check(make, xy, compiled_warns=EAGER.get(make), atol=1e-5)
