"""F.batch_norm's checks of eps as torch 2.13's: not positive in training, negative in eval."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _outcome(lib, fn):
    try:
        return ("ok", np.asarray(fn(lib).detach().numpy()))
    except Exception as e:      # noqa: BLE001 (the error is what is compared)
        return (type(e).__name__, str(e).splitlines()[0])


@pytest.mark.parametrize("training,eps,shape", [
    (True, 0.0, (4, 3)), (True, -1e-5, (4, 3, 5)), (True, 0, (2, 3, 4, 4)),
    (False, 0.0, (4, 3)), (False, -1e-3, (4, 3)), (True, 0.0, (1, 3)),
    (True, 1e-5, (4, 3))])
def test_batch_norm_eps_checks(training, eps, shape):
    x = np.random.RandomState(0).randn(*shape).astype(np.float32)

    def fn(lib):
        return lib.nn.functional.batch_norm(lib.tensor(x), lib.zeros(shape[1]),
                                            lib.ones(shape[1]), training=training, eps=eps)
    got, want = _outcome(llgrad, fn), _outcome(torch, fn)
    assert got[0] == want[0]
    if want[0] == "ok":
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
    else:
        assert got[1].replace("llgrad.", "torch.") == want[1]


def test_batch_norm_module_eps_zero_training():
    for lib in (llgrad, torch):
        m = lib.nn.BatchNorm2d(3, eps=0.0)
        with pytest.raises(ValueError, match="batch_norm eps must be positive during training"):
            m(lib.ones(2, 3, 4, 4))
        m.eval()
        assert m(lib.ones(2, 3, 4, 4)).shape == (2, 3, 4, 4)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("which,size", [("mean", 3), ("var", 3), ("mean", 5)])
def test_batch_norm_one_running_stat(training, which, size):
    x = np.random.RandomState(1).randn(4, 3, 5).astype(np.float32)

    def fn(lib):
        stat = lib.zeros(size) if which == "mean" else lib.ones(size)
        rm, rv = (stat, None) if which == "mean" else (None, stat)
        return lib.nn.functional.batch_norm(lib.tensor(x), rm, rv, training=training)
    got, want = _outcome(llgrad, fn), _outcome(torch, fn)
    assert got[0] == want[0]
    assert got[1] == want[1]


@pytest.mark.parametrize("call", [
    lambda lib, x: lib.batch_norm(x, None, None, lib.zeros(3), lib.ones(3), True, 0.1, 0.0,
                                  False),
    lambda lib, x: lib.native_batch_norm(x, None, None, lib.zeros(3), lib.ones(3), True, 0.1,
                                         0.0)[0],
    lambda lib, x: lib.batch_norm(x, None, None, lib.zeros(3), None, True, 0.1, 1e-5, False)])
def test_aten_batch_norm_takes_any_eps(call):
    """torch.batch_norm / native_batch_norm have no eps check (F.batch_norm's is Python's)."""
    x = np.random.RandomState(2).randn(4, 3).astype(np.float32)
    got = _outcome(llgrad, lambda lib: call(lib, lib.tensor(x)))
    want = _outcome(torch, lambda lib: call(lib, lib.tensor(x)))
    assert got[0] == want[0]
    if want[0] == "ok":
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
    else:
        assert got[1] == want[1]
