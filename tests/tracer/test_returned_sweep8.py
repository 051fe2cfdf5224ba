"""`.item()` as a returned list comprehension's item (`return [l.item() for l in losses]`,
the usual way to hand back several losses) is a graph output like `return loss.item()`:
one trace serves every value, the numbers are eager's."""
import numpy as np

import llgrad


def _losses_step():
    torch = llgrad
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        losses = [m(x).pow(2).mean(), m(x).abs().sum()]
        torch.stack(losses).sum().backward()
        opt.step()
        return [l.item() for l in losses]
    return m, step


def test_item_in_a_returned_list_comprehension_is_an_output_not_a_guard():
    m_e, eager = _losses_step()
    m_c, step = _losses_step()
    compiled = llgrad.compile(step)
    xs = [llgrad.randn(4, 3) for _ in range(6)]
    got = [compiled(x) for x in xs]
    want = [eager(x) for x in xs]
    assert all(type(v) is float for r in got for v in r)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert len(compiled.entries) == 1
    np.testing.assert_allclose(m_c.weight.detach().numpy(), m_e.weight.detach().numpy(),
                               rtol=1e-6)


def test_a_comprehension_condition_on_an_item_still_guards():
    def f(xs):
        return [x.sum().item() for x in xs if x.sum().item() > 0]
    cf = llgrad.compile(f)
    for xs in ([llgrad.ones(2), -llgrad.ones(2)], [-llgrad.ones(2), llgrad.ones(2) * 3]):
        assert cf(list(xs)) == f(list(xs))


def test_item_as_a_returned_dict_comprehension_value_is_an_output():
    def f(x):
        parts = {"sum": x.sum(), "max": x.max()}
        return {k: v.item() for k, v in parts.items()}
    cf = llgrad.compile(f)
    for i in range(4):
        x = llgrad.arange(3.0) * i
        assert cf(x) == f(x)
    assert len(cf.entries) == 1
