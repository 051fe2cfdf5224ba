"""Compiled code at edge values, part 2 (test_edge_values_s76_f.py: the helpers): float16 /
bfloat16 chains (each op rounds to the storage dtype as eager does) and empty / size-1 dims
through fused chains and reductions (sum of empty is 0, mean nan, max raises)."""
import importlib.util
import os

import numpy as np
import pytest

pytest.importorskip("torch")

_spec = importlib.util.spec_from_file_location(
    "_edge_values_s76_f", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                       "test_edge_values_s76_f.py"))
_edge = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_edge)
NAN, INF, _check, _outputs = _edge.NAN, _edge.INF, _edge._check, _edge._outputs


# ---- float16 / bfloat16 chains ------------------------------------------------------------------

def _half_inputs():
    r = np.random.default_rng(2)
    x = np.concatenate([r.normal(size=40) * 300, [65504, 70000, -1e5, 1e-8, 6e-8, NAN, INF, -0.0]])
    y = np.concatenate([r.normal(size=40) * 3, [2, 1, 0.5, 1e-4, 1e4, 0, -INF, 0.0]])
    z = r.normal(size=(5, 300)) * 4
    return x.astype(np.float32), y.astype(np.float32), z.astype(np.float32)


HALF = [
    ("chain", lambda m, x, y, z: (x * y + y) * 3 - x),
    ("scaled", lambda m, x, y, z: (x * 0.1) * 10),
    ("tiny_adds", lambda m, x, y, z: x + 1e-3 + 1e-3),
    ("to_float", lambda m, x, y, z: (x * y).float() + 1),
    ("mixed", lambda m, x, y, z: x * y.float()), ("exp", lambda m, x, y, z: m.exp(x / 100) * y),
    ("clamp", lambda m, x, y, z: m.clamp(x, -100, 100) * y),
    ("round", lambda m, x, y, z: m.round(x / 7)),
    ("sum", lambda m, x, y, z: (z * 1).sum(1)), ("mean", lambda m, x, y, z: (z * 1).mean()),
    ("cumsum", lambda m, x, y, z: (z * 1).cumsum(1)), ("amax", lambda m, x, y, z: (z * 2).amax(1)),
    ("softmax", lambda m, x, y, z: m.softmax(z * 2, 1)),
    ("log_softmax", lambda m, x, y, z: m.log_softmax(z * 2, 1)),
    ("layer_norm", lambda m, x, y, z: m.nn.functional.layer_norm(z * 1, (300,))),
]
HALF_APPROX = {"exp", "sum", "mean", "cumsum", "softmax", "log_softmax", "layer_norm"}


@pytest.mark.slow
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_chains_round_as_eager(dt):
    """Every op rounds to the storage dtype (sums accumulate wider) as eager does."""
    progs = [(n, lambda m, x, y, z, p=p: p(m, *(a.to(getattr(m, dt)) for a in (x, y, z))))
             for n, p in HALF]
    _check(progs, _half_inputs(), approx=HALF_APPROX, fallback_ok=True)


# ---- empty tensors, size-0 and size-1 dims ------------------------------------------------------

EMPTY = [
    ("sum", lambda m, e, f, g, o: ((e * 2 + 1).sum(), (f * 2 + 1).sum(1), (g * 2 + 1).sum(1))),
    ("mean", lambda m, e, f, g, o: ((e * 2 + 1).mean(), (f * 2 + 1).mean(1), (g * 2 + 1).mean(0))),
    ("prod", lambda m, e, f, g, o: ((e * 2 + 1).prod(), (f * 2 + 1).prod(1))),
    ("var", lambda m, e, f, g, o: ((f * 2).var(1), (o * 2).var(1), (o * 2).std(1))),
    ("amax0", lambda m, e, f, g, o: (f * 2 + 1).amax(0)),
    ("amax_g", lambda m, e, f, g, o: (g * 2 + 1).amax(1)),
    ("logsumexp", lambda m, e, f, g, o: (m.logsumexp(f * 2 + 1, 1), m.logsumexp(o * 2, 1))),
    ("softmax", lambda m, e, f, g, o: (m.softmax(f * 2 + 1, 1), m.log_softmax(o * 2, 1))),
    ("norm", lambda m, e, f, g, o: (m.linalg.vector_norm(e * 2),
                                    m.linalg.vector_norm(f * 2, ord=INF, dim=0))),
    ("cumsum", lambda m, e, f, g, o: (m.cumsum(e * 2, 0), m.cumprod(f * 2, 1))),
    ("matmul", lambda m, e, f, g, o: ((f * 2) @ (f * 2).T, (f * 2).T @ (f * 2),
                                      (g * 2).T @ (g * 2))),
    ("broadcast", lambda m, e, f, g, o: (e * 2 + o[0], (e * 2 + o[0]).sum(), (f * 2 + o).sum(1))),
    ("cat", lambda m, e, f, g, o: m.cat([e * 2, o[:, 0] + 1])),
    ("where", lambda m, e, f, g, o: m.where(e > 0, e, -e).sum()),
    ("expand", lambda m, e, f, g, o: ((e * 2).expand(4, 0) + 1, (e * 2).reshape(0, 5, 3) + 1)),
    ("size1", lambda m, e, f, g, o: (m.softmax(o * 2, 1), (o * 2).mean(1), m.sort(o * 2, 1)[1],
                                     m.cummax(o * 2, 1)[1])),
    ("loss", lambda m, e, f, g, o: m.nn.functional.mse_loss(e * 2, e)),
]


@pytest.mark.slow
def test_empty_and_size_one_dims_through_fused_chains():
    e, f, g = (np.zeros(s, np.float32) for s in ((0,), (3, 0), (0, 4)))
    _check(EMPTY, (e, f, g, np.arange(3, dtype=np.float32).reshape(3, 1)), fallback_ok=True)


def test_empty_reductions_raise_or_give_identity_fast():
    f = np.zeros((3, 0), np.float32)
    _check([("sum_mean", lambda m, x: ((x * 2 + 1).sum(1), (x * 2 + 1).mean(1), (x + 1).sum()))],
           (f,), backends=("llvm",))
    for prog in (lambda m, x: (x * 2 + 1).max(), lambda m, x: (x * 2 + 1).amax(1),
                 lambda m, x: (x * 2).argmax(1)):
        for how in ("torch", "eager", "llvm"):
            with pytest.raises((RuntimeError, IndexError)):
                _outputs(prog, (f,), how)
