"""Compile-contract adversary s62 (helper H2, t2): a number in an object or a dict that
changes between calls (so an input of the graph) and is then set to None. The flat guard
walker made for such a call checked the attribute's type (None) and passed it to the
dynamic number's input, raising "int() argument must be ... not 'NoneType'" where eager
runs (guard_walker._dynamic: no walker then; the full walk guards None by value)."""
import pytest

import llgrad


class _Config:
    pass


def _calls(compile_with, values, where):
    cfg, box = _Config(), {}

    def f(x):
        k = cfg.k if where == "attribute" else box["k"]
        return x * (1.0 if k is None else k)
    g = llgrad.compile(f, backend=compile_with) if compile_with else f
    out = []
    for v in values:
        cfg.k = box["k"] = v
        out.append(g(llgrad.ones(2)).tolist())
    return out


@pytest.mark.parametrize("where", ["attribute", "dict"])
@pytest.mark.parametrize("values", [[0.1, 0.2, 0.3, None, 0.4, None],
                                    [0.1, 0.2, None, None, 0.5],
                                    [1, 2, 3, None, None, 4]])
def test_dynamic_number_set_to_none_runs_as_eager(values, where):
    assert _calls("interpret", values, where) == _calls(None, values, where)


def _bn_steps(compile_with, momenta=(0.1, 0.2, None, 0.3, None, 0.5)):
    """Per call of a step setting BatchNorm's momentum from its argument: the loss, the
    running mean and the count."""
    llgrad.manual_seed(0)
    m = llgrad.nn.Sequential(llgrad.nn.Linear(3, 4), llgrad.nn.BatchNorm1d(4))

    def step(x, momentum):
        m[1].momentum = momentum
        return m(x).sum()
    f = llgrad.compile(step, backend=compile_with) if compile_with else step
    got = []
    for i, mom in enumerate(momenta):
        out = f(llgrad.arange(12.0).reshape(4, 3) * (i + 1), mom)
        got.append((out.item(), m[1].running_mean.tolist(), m[1].num_batches_tracked.item()))
    return got


def test_batch_norm_momentum_set_from_an_argument_inside_the_step():
    """The momentum each call sets (None: a cumulative average) is read by the next call's
    guard walk as the module's attribute."""
    want, got = _bn_steps(None), _bn_steps("interpret")
    for (l0, r0, n0), (l1, r1, n1) in zip(want, got):
        assert n1 == n0 and l1 == pytest.approx(l0, abs=1e-5)
        assert r1 == pytest.approx(r0, rel=1e-6)


@pytest.mark.xfail(strict=True, reason=(
    "the running mean after the first momentum=None call that follows calls with a dynamic "
    "momentum differs from eager's in the last bit (2.4e-7); target: eager's bits"))
def test_batch_norm_momentum_none_after_dynamic_momenta_bit_exact():
    assert _bn_steps("interpret", (0.1, 0.2, None, 0.3)) == \
        _bn_steps(None, (0.1, 0.2, None, 0.3))
