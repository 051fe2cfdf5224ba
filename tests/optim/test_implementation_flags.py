"""The implementation flags PyTorch's CPU optimisers take: fused=True (Adam, AdamW, SGD,
Adagrad) runs, giving PyTorch's fused results to within an ulp (PyTorch's fused CPU kernel
and its for-loop differ by that much too); fused with foreach, and a capturable step on a
CPU, raise PyTorch's errors."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name,kw", [("Adam", {}), ("AdamW", {"weight_decay": 0.1}),
                                     ("SGD", {"momentum": 0.9}), ("Adagrad", {})])
def test_fused_steps_give_pytorchs_fused_results(name, kw):
    start = np.random.default_rng(0).standard_normal(200).astype(np.float32)
    out = []
    for T in (torch, llgrad):
        p = T.nn.Parameter(T.tensor(start.copy()))
        opt = getattr(T.optim, name)([p], lr=0.01, fused=True, **kw)
        for i in range(10):
            p.grad = T.sin(p.detach() * (i + 1))
            opt.step()
        out.append(p.detach().numpy().copy())
        assert opt.param_groups[0]["fused"] is True
    np.testing.assert_allclose(out[1], out[0], rtol=1e-6, atol=1e-7)


def test_the_flags_pytorch_refuses_raise_its_errors():
    for T in (torch, llgrad):
        p = T.nn.Parameter(T.ones(3))
        with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True`"):
            T.optim.Adam([p], fused=True, foreach=True)
    for T in (torch, llgrad):       # (accepted by the constructor, refused by the step)
        p = T.nn.Parameter(T.ones(3))
        opt = T.optim.Adam([p], capturable=True)
        p.grad = T.ones(3)
        with pytest.raises(AssertionError, match="capturable=True, params and state_steps"):
            opt.step()
