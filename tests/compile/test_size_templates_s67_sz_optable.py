"""The op table at many batch sizes (compile/size_templates.py): for each op's sample program
(tests/runtime/test_optable.py) whose first tensor input has a leading dimension n, the
inputs sharing that leading dimension are drawn again along it at sizes n, 2n, 3n, 5 and 2
(rows of the sample, each scaled by a factor in [0.9, 1.1], so values stay in the sample's
domain); `llgrad.compile(lambda *xs: program(*xs))` at each size must equal eager at that
size: outputs exactly in kind and closely in value, and the gradients of the inputs after a
backward of the sum of the float outputs through the compiled call. Sizes eager rejects
(an index past a smaller batch) are skipped.

The default run takes a few ops of each kind; the whole table is marked slow. Every
program makes at most 2 traces (the two sizes of its template), but UNTEMPLATED's, which
trace again at new sizes (never wrong, only slower): the reason is their own."""
import importlib.util
import os

import numpy as np
import pytest

import llgrad

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                     "runtime", "test_optable.py")
_spec = importlib.util.spec_from_file_location("_optable_for_sizes", _PATH)
optable = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(optable)

DEFAULT = ("mul", "exp", "matmul", "sum", "softmax", "layer_norm", "where", "max", "cumsum",
           "expand")

_FLOAT = "a float of the size in the graph (1 / numel, a mean's divisor): no k * size**e"
_DIAGONAL = "a diagonal's length, min(rows, columns), is no k * size**e"
UNTEMPLATED = {     # (session 67: traces at sizes n, 2n, 3n, 5, 2)
    "std-all": _FLOAT, "var-all": _FLOAT, "mse_loss-mean": _FLOAT,
    "diag_embed-diag_vector": _DIAGONAL, "diagonal-main": _DIAGONAL,
    "diagonal_copy-diag_matrix": _DIAGONAL,
    "unbind-dim0": "one output per row: the graphs differ in more than sizes",
    "slice-step": "not investigated (no fit is logged)",
    "fused_lstm_cell_backward-vjp": "a list in the entry as long as the batch",
    "lstm_layer_backward-vjp": "a list in the entry as long as the batch",
    "convolution3d-pad_bias": "a batch of 1: sizes 1, 2, 3 (a template's sizes are >= 2)",
    "prod-all": "an affine size (k * s + m): its template serves after a third trace",
    "normal-inplace": "a dict in the entry differs in length between sizes",
}


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    monkeypatch.delenv("LLGRAD_DYNAMIC_SIZES", raising=False)


def _array(a):
    return a.arr if isinstance(a, optable.K) else a if isinstance(a, np.ndarray) else None


def _batched(case):
    """(n, the positions of the inputs whose leading dimension is n) or None."""
    arrays = [_array(a) for a in case.inputs]
    first = next((a for a in arrays if a is not None), None)
    if first is None or first.ndim == 0 or first.shape[0] < 1:
        return None
    n = first.shape[0]
    return n, [i for i, a in enumerate(arrays) if a is not None and a.ndim and a.shape[0] == n]


def _cases(ops=None):
    out = []
    for op, cases in optable.SAMPLES.items():
        if op in optable.EAGER_ONLY or (ops is not None and op not in ops):
            continue
        case = next((c for c in cases if _batched(c) is not None), None)
        if case is not None:
            marks = () if op in DEFAULT else (pytest.mark.slow,)
            out.append(pytest.param(op, case, id=f"{op}-{case.id}", marks=marks))
    return out


def _inputs(case, positions, n, size, seed):
    rng = np.random.default_rng(seed)
    rows = np.arange(size) % n if size % n == 0 else rng.integers(0, n, size)
    out = []
    for i, a in enumerate(case.inputs):
        if i in positions:
            arr = _array(a)[rows]
            if arr.dtype.kind == "f":
                arr = arr * rng.uniform(0.9, 1.1, arr.shape).astype(arr.dtype)
            a = optable.K(arr) if isinstance(a, optable.K) else arr
        out.append(a)
    return optable.build(llgrad, out)


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _call(fn, xs, backward):
    outs = _flat(fn(*xs))
    floats = [o for o in outs if isinstance(o, llgrad.Tensor) and o.requires_grad]
    if backward and floats:
        sum(o.sum() for o in floats).backward()
    return ([o.detach().numpy().copy() if isinstance(o, llgrad.Tensor) else o for o in outs],
            [x.grad.numpy().copy() if isinstance(x, llgrad.Tensor) and x.grad is not None
             else None for x in xs])


def _same(want, got, where):
    for w, g in zip(want, got):
        if isinstance(w, np.ndarray):
            assert isinstance(g, np.ndarray) and g.dtype == w.dtype and g.shape == w.shape, where
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-11, equal_nan=True,
                                       err_msg=where)
        else:
            assert (w is None) == (g is None) and type(w) is type(g), where
            if w is not None:
                assert w == g or (w != w and g != g), where


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("op, case", _cases())
def test_an_op_at_five_batch_sizes_equals_eager(op, case, backward):
    n, positions = _batched(case)
    program = optable._llgrad_fn(case)
    compiled = llgrad.compile(lambda *xs: program(*xs))
    for k, size in enumerate([n, 2 * n, 3 * n, 5, 2]):
        seed = size
        llgrad.manual_seed(k)
        try:
            want = _call(program, _inputs(case, positions, n, size, seed), backward)
        except Exception:           # (eager rejects this size: an index past it, ...)
            continue
        llgrad.manual_seed(k)
        got = _call(compiled, _inputs(case, positions, n, size, seed), backward)
        _same(want[0], got[0], f"{op} outputs at size {size}")
        _same(want[1], got[1], f"{op} gradients at size {size}")
    assert compiled.n_traces <= 2 or f"{op}-{case.id}" in UNTEMPLATED, compiled.n_traces
