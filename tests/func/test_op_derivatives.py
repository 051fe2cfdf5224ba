"""Forward mode and batched backward for every op of the op table that has a VJP
(tests/func/op_cases.py): jvp (the double-VJP trick) equals float64 central differences;
jacrev (vmap of vjp_fn: the VJP rules run on batched cotangents) and jacfwd (vmap of jvp)
equal the Jacobian built row by row from unbatched vjp calls. No torch needed."""
import numpy as np
import pytest

import llgrad
import llgrad.func as F
from llgrad.ir import OPS
from llgrad.runtime import dispatch
from op_cases import CASES, EPS, RANDOM_CASES, inputs

DIFF = "fpu"


def _split(name, seed):
    fn, specs = CASES[name]
    args = inputs(name, seed=seed)
    diff = [k for k, s in enumerate(specs) if s[0] in DIFF]

    def g(*d):
        a = list(args)
        for k, v in zip(diff, d):
            a[k] = v
        return fn(*a)
    return g, tuple(args[k] for k in diff), [specs[k] for k in diff]


@pytest.mark.parametrize("name", sorted(CASES))
def test_jvp_equals_finite_differences(name):
    g, primals, specs = _split(name, seed=2)
    if not primals:
        pytest.skip("no differentiable input")
    rng = np.random.default_rng(5)
    tangents = tuple(llgrad.tensor(rng.standard_normal(tuple(p.shape))
                                   * (0.1 if s[0] in "pu" else 1.0))
                     for p, s in zip(primals, specs))
    out, jv = F.jvp(g, primals, tangents)
    np.testing.assert_allclose(out.numpy(), g(*primals).numpy())
    if not out.is_floating_point():
        np.testing.assert_array_equal(jv.numpy(), np.zeros(out.shape))
        return
    eps = EPS.get(name, 1e-6)
    plus = g(*[p + eps * t for p, t in zip(primals, tangents)]).numpy()
    minus = g(*[p - eps * t for p, t in zip(primals, tangents)]).numpy()
    np.testing.assert_allclose(jv.numpy(), (plus - minus) / (2 * eps), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", sorted(CASES))
def test_batched_backward_equals_row_by_row(name):
    g, primals, _ = _split(name, seed=3)
    if not primals or not g(*primals).is_floating_point():
        pytest.skip("nothing to differentiate")
    nums = tuple(range(len(primals)))
    out, vjp_fn = F.vjp(g, *primals)
    rows = []
    for r in range(out.numel()):
        e = llgrad.zeros(out.numel(), dtype=out.dtype)
        e[r] = 1.0
        rows.append(vjp_fn(e.reshape(tuple(out.shape))))
    jr = F.jacrev(g, argnums=nums)(*primals)
    jf = F.jacfwd(g, argnums=nums)(*primals)
    for j, p in enumerate(primals):
        want = llgrad.stack([row[j] for row in rows]).reshape(tuple(out.shape) + tuple(p.shape))
        np.testing.assert_allclose(jr[j].numpy(), want.numpy(), atol=1e-10)
        np.testing.assert_allclose(jf[j].numpy(), want.numpy(), atol=1e-8)


@pytest.mark.parametrize("name", sorted(RANDOM_CASES))
def test_random_ops_have_zero_tangent_for_the_overwritten_input(name):
    x = llgrad.rand(3, 4, dtype=llgrad.float64) + 0.1
    fn = RANDOM_CASES[name]
    llgrad.manual_seed(1)
    _, jv = F.jvp(fn, (x,), (llgrad.ones(3, 4, dtype=llgrad.float64),))
    llgrad.manual_seed(1)
    eps = 1e-6
    plus = fn(x + eps)
    llgrad.manual_seed(1)
    minus = fn(x - eps)
    np.testing.assert_allclose(jv.numpy(), ((plus - minus) / (2 * eps)).numpy(), atol=1e-5)


class _Recorder:
    """In the dispatcher's batching slot: records each op called, batches nothing."""
    def __init__(self):
        self.seen = set()

    def call(self, op, inputs, attrs):
        self.seen.add(op.name)
        return NotImplemented

    def call_inplace(self, op, t, inputs, attrs):
        self.seen.add(op.name)
        return NotImplemented


# ops whose backward PyTorch does not differentiate (a jvp here is a double VJP): their vmap
# and gradients are tested with the op
NO_FORWARD_MODE = {"ctc_loss": "tests/nn/test_ctc_op_s75.py"}


def test_the_cases_cover_every_op_with_a_vjp(monkeypatch):
    rec = _Recorder()
    monkeypatch.setattr(dispatch, "batching", rec)
    for name in CASES:
        CASES[name][0](*inputs(name))
    for fn in RANDOM_CASES.values():
        fn(llgrad.rand(3, 4, dtype=llgrad.float64))
    monkeypatch.setattr(dispatch, "batching", None)
    # (complex-valued ops: their derivatives are tests/runtime/test_complex.py's, test_fft.py's)
    missing = sorted(n for n, op in OPS.items() if op.vjp is not None and n not in rec.seen
                     and op.complex != "only" and n not in NO_FORWARD_MODE
                     and not hasattr(op.vjp, "no_derivative"))
    assert not missing, f"ops with a VJP that no case of op_cases.py runs: {missing}"
