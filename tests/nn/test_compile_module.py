"""Compiling modules and training steps: parameters are graph inputs (an optimiser step
never recompiles), train/eval is a guard, BatchNorm's running statistics are written back,
and compiled training follows eager's loss curve."""
import subprocess
import sys
import os

import numpy as np

import llgrad
import llgrad.nn as nn
from llgrad.datasets import spirals


def model(seed=0, bn=False):
    llgrad.manual_seed(seed)
    layers = [nn.Linear(2, 16)] + ([nn.BatchNorm1d(16)] if bn else []) + \
        [nn.Tanh(), nn.Dropout(0.1), nn.Linear(16, 3)]
    return nn.Sequential(*layers)


def test_compiled_module_forward_tracks_parameter_updates_without_recompiling():
    m = model()
    cm = llgrad.compile(m)
    x = llgrad.randn(8, 2)
    opt = llgrad.optim.SGD(m.parameters(), lr=0.1)
    m.eval()
    for _ in range(4):
        out = cm(x)
        with llgrad.no_grad():
            np.testing.assert_allclose(out.detach().numpy(), m(x).numpy(), rtol=1e-5,
                                       atol=1e-6)
        out.sum().backward()
        opt.step()
        opt.zero_grad()
    assert cm.n_traces == 1


def test_train_eval_is_a_guard_and_batchnorm_buffers_are_written_back():
    m_e, m_c = model(bn=True), model(bn=True)
    cm = llgrad.compile(m_c)
    x = llgrad.randn(8, 2)
    for mode in ("train", "train", "eval", "eval", "train"):
        for mm in (m_e, m_c):
            mm.train(mode == "train")
        llgrad.manual_seed(5)
        want = m_e(x)
        llgrad.manual_seed(5)
        got = cm(x)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
        bn_e, bn_c = m_e[1], m_c[1]
        np.testing.assert_allclose(bn_c.running_mean.numpy(), bn_e.running_mean.numpy(),
                                   rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(bn_c.running_var.numpy(), bn_e.running_var.numpy(),
                                   rtol=1e-6, atol=1e-7)
        assert bn_c.num_batches_tracked.item() == bn_e.num_batches_tracked.item()
    assert cm.n_traces == 2          # one for train, one for eval


def step(m, opt, loss_fn, x, y):
    opt.zero_grad()
    loss = loss_fn(m(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def test_compiled_training_follows_eager_loss_curve():
    x, y = spirals(n_per_class=40, seed=1)
    x, y = llgrad.from_numpy(x), llgrad.from_numpy(y)
    curves = []
    for compiled in (False, True):
        m = model(seed=3)
        opt = llgrad.optim.Adam(m.parameters(), lr=0.02)
        fn = llgrad.compile(step) if compiled else step
        llgrad.manual_seed(7)
        curves.append([fn(m, opt, nn.CrossEntropyLoss(), x, y).item() for _ in range(20)])
    np.testing.assert_allclose(curves[1], curves[0], rtol=1e-4, atol=1e-5)
    assert curves[1][-1] < curves[1][0]


def test_demo_runs_as_a_new_user_would(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-m", "llgrad", "demo"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=120,
                       env={**os.environ, "PYTHONPATH": root})
    assert r.returncode == 0, r.stderr
    last = [ln for ln in r.stdout.splitlines() if "final test accuracy" in ln][0]
    assert float(last.rsplit(" ", 1)[1]) > 0.9
    assert "step time (median): eager" in r.stdout
    assert (tmp_path / "llgrad_demo_dumps" / "train_step.txt").exists()
