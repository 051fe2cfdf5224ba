"""Custom autograd.Functions across calls: ctx.save_for_backward, mark_dirty (an in-place
forward), mark_non_differentiable (sort's indices), set_materialize_grads(False) (an unused
output's gradient reaching backward as None): torch, llgrad eager and llgrad.compile over six
calls (stateful_harness_s70_a11.check)."""
import pytest

pytest.importorskip("torch")
from stateful_harness_s70_a11 import check  # noqa: E402
from test_stateful_autograd_s70_a11 import _params, xy  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case; the fast regressions are in
# test_stateful_regressions_s70_a11.py)


def _functions(lib):
    class Clip(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, lo):
            ctx.save_for_backward(x)
            ctx.lo = lo
            return x.clamp(min=lo)

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * (x > ctx.lo).float() + 0.1 * g, None

    class DoubleInPlace(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return 2 * g

    class SortWithIndex(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            v, i = x.sort(-1)
            ctx.mark_non_differentiable(i)
            ctx.save_for_backward(i)
            return v, i

        @staticmethod
        def backward(ctx, gv, gi):
            i, = ctx.saved_tensors
            return lib.zeros_like(gv).scatter(-1, i, gv)

    class TwoOut(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            if g2 is None:
                return g1 * 2
            return g1 * 2 + g2 * 3
    return Clip, DoubleInPlace, SortWithIndex, TwoOut


def custom_function_saved(lib):
    Clip, _, _, _ = _functions(lib)
    w, = _params(lib, (4, 2))

    def step(x, y):
        loss = (Clip.apply(x @ w, -0.2) * y).sum()
        loss.backward()
        return loss
    return dict(step=step, state=lambda: [w.grad])


def custom_function_mark_dirty(lib):
    _, DoubleInPlace, _, _ = _functions(lib)
    w, = _params(lib, (4, 2))

    def step(x, y):
        h = x @ w
        out = DoubleInPlace.apply(h)
        loss = (out.tanh() * y).sum()
        loss.backward()
        return loss, out is h, h
    return dict(step=step, state=lambda: [w.grad])


def custom_function_non_differentiable(lib):
    _, _, SortWithIndex, _ = _functions(lib)
    w, = _params(lib, (4, 2))

    def step(x, y):
        v, i = SortWithIndex.apply(x @ w)
        loss = (v * y).sum()
        loss.backward()
        return loss, i, i.requires_grad
    return dict(step=step, state=lambda: [w.grad])


def custom_function_unmaterialized(lib):
    _, _, _, TwoOut = _functions(lib)
    w, = _params(lib, (4, 2))

    def step(x, y):
        a, b = TwoOut.apply(x @ w)
        loss = (a * y).sum()        # (b unused: its gradient reaches backward as None)
        loss.backward()
        return loss
    return dict(step=step, state=lambda: [w.grad])


CASES = [custom_function_saved, custom_function_mark_dirty, custom_function_non_differentiable,
         custom_function_unmaterialized]


@pytest.mark.parametrize("make", CASES, ids=lambda f: f.__name__)
def test_custom_functions(make):
    check(make, xy)
