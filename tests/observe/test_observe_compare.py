"""llgrad.debug.compare: a planted wrong lowering is found and named (node, op, line,
largest difference), in the forward and in the backward; LLGRAD_CHECK checks every call."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.codegen.build  # noqa: F401 (fills the lowering table)
import llgrad.debug
from llgrad.codegen.lowerings import vecmath
from llgrad.codegen.lowerings.table import LOWERINGS
from llgrad.codegen.native import keys


def _line(marker):
    with open(__file__) as f:
        for k, line in enumerate(f, 1):
            if marker in line and "_line(" not in line:
                return k
    raise AssertionError(marker)


@pytest.fixture
def plant(monkeypatch):
    """plant(op, emit): a wrong lowering for op, for this test only. The code fingerprint
    changes with it, so no kernel cached before (in memory or on disk) is taken for one
    built with the planted lowering, nor the other way round."""
    fingerprint = keys._code_fingerprint()

    def do(op, emit):
        monkeypatch.setattr(LOWERINGS[op], "emit", emit)
        monkeypatch.setattr(keys, "_code_fingerprint",
                            lambda: fingerprint + f"+planted {op} in {id(emit)}")
    return do


def loss(x, w):
    h = (x @ w) * 0.5
    e = h.exp()                                   # PLANTED-EXP
    return (e * h).tanh().sum()                   # PLANTED-BACKWARD


def _args():
    llgrad.manual_seed(3)
    return llgrad.randn(7, 5), llgrad.randn(5, 9, requires_grad=True)


def test_no_difference_on_correct_code():
    report = llgrad.debug.compare(loss, *_args())
    assert report.ok and report.mismatch is None, report
    assert any("forward: llvm vs interpreter" in c for c in report.checked)
    assert any("backward: llvm vs interpreter" in c for c in report.checked)
    assert any("eager vs interpreter" in c for c in report.checked)
    assert "no difference" in str(report)


def test_a_planted_wrong_lowering_is_named(plant):
    plant("exp", lambda sg, node, a: a)          # exp(x) computed as x: wrong
    report = llgrad.debug.compare(loss, *_args())
    assert not report.ok
    m = report.mismatch
    assert m.graph == "forward" and m.comparison == "llvm vs interpreter"
    assert m.op == "exp"
    assert m.loc.endswith(f"test_observe_compare.py:{_line('# PLANTED-EXP')}"), m.loc
    assert m.max_abs_diff > 1e-3 and m.index is not None
    text = str(report)
    assert "MISMATCH" in text and "= exp %" in text and "largest difference" in text
    assert "in kernel group g" in text


def test_a_planted_wrong_lowering_in_the_backward_is_named(plant):
    # tanh's backward is 1 - y*y (rsub); the forward has no rsub
    plant("rsub", lambda sg, node, a, b: sg.sub(a, b))
    x, w = _args()
    report = llgrad.debug.compare(loss, x, w)
    m = report.mismatch
    assert m is not None and m.graph == "backward" and m.op == "rsub", report
    assert m.loc.endswith(f"test_observe_compare.py:{_line('# PLANTED-BACKWARD')}"), m.loc


def test_llgrad_check_warns_or_raises_at_the_call(plant):
    plant("exp", lambda sg, node, a: vecmath.exp(sg, sg.add(a, sg.const(1, a.dt))))
    f = llgrad.compile(loss)
    x, w = _args()
    llgrad.debug.set_check(True)
    try:
        f(x, w)                         # traced: an eager run, nothing compiled to check
        with pytest.warns(RuntimeWarning, match="exp"):
            f(x, w)
        llgrad.debug.set_check("raise")
        with pytest.raises(llgrad.debug.MismatchError, match="= exp %"):
            f(x, w)
    finally:
        llgrad.debug.set_check(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(x, w)                         # off: no check


def test_compare_leaves_the_inputs_alone():
    x, w = _args()
    xs, ws = x.numpy().copy(), w.detach().numpy().copy()
    llgrad.debug.compare(loss, x, w)
    np.testing.assert_array_equal(x.numpy(), xs)
    np.testing.assert_array_equal(w.detach().numpy(), ws)
    assert w.grad is None


def test_llgrad_check_env_var_checks_every_call(tmp_path):
    import os
    import subprocess
    import sys
    script = tmp_path / "prog.py"
    script.write_text("import warnings\n"
                      "import llgrad\n"
                      "import llgrad.codegen.build\n"
                      "from llgrad.codegen.lowerings.table import LOWERINGS\n"
                      "from llgrad.codegen.native import keys\n"
                      "fp = keys._code_fingerprint()\n"
                      "keys._code_fingerprint = lambda: fp + 'planted-env'\n"
                      "LOWERINGS['exp'].emit = lambda sg, node, a: a\n"
                      "@llgrad.compile\n"
                      "def f(x):\n"
                      "    return x.exp().sum()\n"
                      "x = llgrad.randn(6)\n"
                      "f(x)\n"
                      "with warnings.catch_warnings(record=True) as w:\n"
                      "    warnings.simplefilter('always')\n"
                      "    f(x)\n"
                      "hit = any('= exp %' in str(m.message) for m in w)\n"
                      "print('WARNED' if hit else 'QUIET')\n")
    env = dict(os.environ, LLGRAD_CHECK="1", LLGRAD_QUIET="1")
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "WARNED", (res.stdout, res.stderr)
