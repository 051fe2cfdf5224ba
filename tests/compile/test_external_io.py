"""A compiled function that reads or writes files through a library (Path.read_text, llgrad.save,
np.save, os.listdir in a helper) runs eagerly, as each of its calls must do the I/O again: a
compiled call replayed the traced file's text as a constant and left a checkpoint at the
first step's weights (compile/external_io.py). Its warning names the user's line; a function
that does no I/O of its own (a warning it gives reads source lines) stays compiled."""
import builtins
import io
import os
import threading
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.compile import external_io


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")    # (native code from the second call)


def _calls(fn, prepare, n=4):
    """[fn's result after prepare(k)] for k < n, with compile's warnings noted."""
    out = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(n):
            prepare(k)
            out.append(fn(k))
    return out, [str(w.message) for w in caught]


def test_a_file_read_through_pathlib(tmp_path):
    path = tmp_path / "scale.txt"

    def f(x):
        return x * int(path.read_text())

    compiled = llgrad.compile(f)
    prepare = lambda k: path.write_text(str(k + 2))                    # noqa: E731
    got, said = _calls(lambda k: compiled(llgrad.ones(3) * k).tolist(), prepare)
    want, _ = _calls(lambda k: f(llgrad.ones(3) * k).tolist(), prepare)
    assert got == want
    assert any("reads or writes a file" in s and "test_external_io.py" in s for s in said)


def _load_scale(path):          # (a helper of the user's: no open() in the compiled code)
    return float(np.load(path))


def test_a_file_read_in_a_helper_through_numpy(tmp_path):
    path = str(tmp_path / "scale.npy")

    def f(x):
        return x * _load_scale(path)

    compiled = llgrad.compile(f)
    prepare = lambda k: np.save(path, np.float32(k + 0.5))             # noqa: E731
    got, _ = _calls(lambda k: compiled(llgrad.ones(2)).tolist(), prepare)
    want, _ = _calls(lambda k: f(llgrad.ones(2)).tolist(), prepare)
    assert got == want == [[k + 0.5] * 2 for k in range(4)]


def test_a_checkpoint_saved_inside_the_training_step(tmp_path):
    llgrad.manual_seed(0)
    lin = llgrad.nn.Linear(4, 1)
    opt = llgrad.optim.SGD(lin.parameters(), lr=0.1)
    ckpt = str(tmp_path / "ck.pt")

    def step(x):
        opt.zero_grad()
        loss = lin(x).pow(2).mean()
        loss.backward()
        opt.step()
        llgrad.save(lin.state_dict(), ckpt)
        return loss

    compiled = llgrad.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(5):
            compiled(llgrad.randn(8, 4))
            saved = llgrad.load(ckpt)
            # (the checkpoint holds this step's weights, not the first step's)
            assert llgrad.equal(saved["weight"], lin.weight.detach()), k


def test_a_directory_listing_in_the_function(tmp_path):
    def f(x):
        return x * len(os.listdir(tmp_path))

    compiled = llgrad.compile(f)
    prepare = lambda k: (tmp_path / f"f{k}").write_text("")            # noqa: E731
    got, said = _calls(lambda k: compiled(llgrad.ones(1)).item(), prepare)
    assert got == [1.0, 2.0, 3.0, 4.0]
    assert any("lists or inspects a directory" in s for s in said)


def test_a_file_written_through_numpy(tmp_path):
    path = str(tmp_path / "out.npy")

    def f(x, k):
        np.save(path, np.full(2, float(k)))
        return x + 1

    compiled = llgrad.compile(f)
    for k in range(4):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled(llgrad.ones(2), k)
        assert np.load(path).tolist() == [float(k)] * 2


def test_no_io_of_its_own_stays_compiled():
    def f(x):
        warnings.warn("a user's warning")     # (its line is read from the source file)
        return (x * 2).sin()

    compiled = llgrad.compile(f)
    _, said = _calls(lambda k: compiled(llgrad.ones(3) * k), lambda k: None)
    assert compiled.n_traces == 1
    assert not any("running eagerly" in s for s in said), said


def test_the_wrappers_are_in_place_only_while_recording():
    plain = builtins.open
    with pytest.raises(ZeroDivisionError):
        with external_io.recording():
            assert builtins.open is not plain and io.open is not plain
            1 / 0
    assert builtins.open is plain and io.open is plain and os.listdir.__module__ != __name__
    assert not hasattr(os.listdir, "__wrapped__")


def test_other_threads_are_not_noted(tmp_path):
    path = tmp_path / "other.txt"
    path.write_text("x")
    with external_io.recording() as notes:
        t = threading.Thread(target=path.read_text)
        t.start()
        t.join()
        assert notes == []
        path.read_text()
    assert len(notes) == 1 and notes[0][1].startswith("test_external_io.py:")
