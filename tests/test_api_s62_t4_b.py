"""torch.hub's downloads, torch.utils.checkpoint's helpers for hand-written checkpointing,
torch.autograd.variable / set_multithreading_enabled, Tensor.stft / istft and the small
names programs import (torch.types.FileLike, torch.serialization.SourceChangeWarning), each
against torch."""
import hashlib
import io
import os
import pathlib
import warnings
import zipfile

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


# ---- torch.hub: download_url_to_file, load_state_dict_from_url (file:// URLs: no network) -----
def _saved_checkpoint(tmp_path, name="weights.pth"):
    path = tmp_path / "src" / name
    path.parent.mkdir(exist_ok=True)
    torch.save({"w": torch.arange(6.0).reshape(2, 3), "b": torch.tensor([1, 2])}, path)
    return path


def test_download_url_to_file_copies_and_checks_hash(tmp_path):
    src = _saved_checkpoint(tmp_path)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    for m in (torch, llgrad):
        dst = tmp_path / f"copy_{m.__name__}.pth"
        m.hub.download_url_to_file(src.as_uri(), str(dst), hash_prefix=digest[:10],
                                   progress=False)
        assert dst.read_bytes() == src.read_bytes()
        bad = tmp_path / f"bad_{m.__name__}.pth"
        with pytest.raises(RuntimeError, match="invalid hash value"):
            m.hub.download_url_to_file(src.as_uri(), str(bad), hash_prefix="0000000000",
                                       progress=False)
        assert not bad.exists()
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_load_state_dict_from_url_downloads_once_and_loads(tmp_path, capsys):
    src = _saved_checkpoint(tmp_path)
    ref = torch.hub.load_state_dict_from_url(src.as_uri(), model_dir=str(tmp_path / "t"),
                                             progress=False, weights_only=True)
    out = capsys.readouterr().out
    sd = llgrad.hub.load_state_dict_from_url(src.as_uri(), model_dir=str(tmp_path / "l"),
                                             progress=False, weights_only=True)
    assert capsys.readouterr().out == out.replace(str(tmp_path / "t"), str(tmp_path / "l"))
    assert sorted(sd) == sorted(ref)
    for k in ref:
        assert sd[k].dtype == getattr(llgrad, str(ref[k].dtype).split(".")[1])
        np.testing.assert_array_equal(sd[k].numpy(), ref[k].numpy())
    src.write_bytes(b"changed")                  # cached: not downloaded again
    again = llgrad.hub.load_state_dict_from_url(src.as_uri(), model_dir=str(tmp_path / "l"),
                                                progress=False)
    assert capsys.readouterr().out == ""
    np.testing.assert_array_equal(again["w"].numpy(), ref["w"].numpy())


def test_load_state_dict_from_url_default_dir_file_name_and_hash(tmp_path, monkeypatch):
    src = _saved_checkpoint(tmp_path)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    named = src.with_name(f"net-{digest[:8]}.pth")
    named.write_bytes(src.read_bytes())
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "home"))
    sd = llgrad.hub.load_state_dict_from_url(named.as_uri(), progress=False, check_hash=True)
    assert (tmp_path / "home" / "hub" / "checkpoints" / named.name).exists()
    assert sd["w"].shape == (2, 3)
    wrong = src.with_name("net-deadbeef.pth")
    wrong.write_bytes(src.read_bytes())
    with pytest.raises(RuntimeError, match="invalid hash value"):
        llgrad.hub.load_state_dict_from_url(wrong.as_uri(), progress=False, check_hash=True)
    sd2 = llgrad.hub.load_state_dict_from_url(src.as_uri(), model_dir=str(tmp_path / "m"),
                                              file_name="other.pt", progress=False)
    assert (tmp_path / "m" / "other.pt").exists() and sd2["b"].tolist() == [1, 2]


def test_load_state_dict_from_url_unzips_a_single_file_zip(tmp_path):
    src = _saved_checkpoint(tmp_path)
    zipped = tmp_path / "src" / "legacy.zip"
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.write(src, "inner.pth")
    for m in (torch, llgrad):
        with pytest.warns(FutureWarning, match="old format"):
            sd = m.hub.load_state_dict_from_url(zipped.as_uri(), progress=False,
                                                model_dir=str(tmp_path / m.__name__))
        assert (tmp_path / m.__name__ / "inner.pth").exists()
        assert sd["w"].numpy().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


# ---- torch.utils.checkpoint's helpers -------------------------------------------------------
def test_detach_variable_as_torch():
    for m in (torch, llgrad):
        a = m.ones(2, requires_grad=True) * 2
        b = m.zeros(1)
        out = m.utils.checkpoint.detach_variable((a, b, 3))
        assert out[2] == 3 and out[0].requires_grad and out[0].is_leaf
        assert not out[1].requires_grad and out[0].grad_fn is None
        out[0].sum().backward()                 # a leaf of its own: the gradient stops there
        assert out[0].grad.tolist() == [1.0, 1.0]
        with pytest.raises(RuntimeError, match="Only tuple of tensors is supported. Got "
                                               "Unsupported input type: list"):
            m.utils.checkpoint.detach_variable([a])


def test_check_backward_validity_and_device_states_as_torch():
    for m in (torch, llgrad):
        cp = m.utils.checkpoint
        with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
            cp.check_backward_validity((m.ones(1), 2))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            cp.check_backward_validity((m.ones(1, requires_grad=True),))
        assert cp.get_device_states(m.ones(2), 3) == ([], [])
        cp.set_device_states([], [])
        assert cp.DefaultDeviceType.get_device_type() == "cpu"


# ---- torch.autograd ----------------------------------------------------------------------------
def test_autograd_variable_raises_as_torch():
    for m in (torch, llgrad):
        with pytest.raises(RuntimeError, match=r"torch.autograd.variable\(...\) is deprecated"):
            m.autograd.variable(m.ones(1))


def test_set_multithreading_enabled_context_and_gradients():
    from llgrad.runtime.grad_mode import _is_multithreading_enabled
    for m in (torch, llgrad):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        with m.autograd.set_multithreading_enabled(False):
            (x * x).sum().backward()
        assert x.grad.tolist() == [2.0, 4.0]
        assert m.autograd.grad_mode.set_multithreading_enabled is \
            m.autograd.set_multithreading_enabled
    assert _is_multithreading_enabled()
    with llgrad.autograd.set_multithreading_enabled(False):
        assert not _is_multithreading_enabled()
    assert _is_multithreading_enabled()


# ---- small names -------------------------------------------------------------------------------
def test_types_file_like_and_source_change_warning_as_torch():
    assert llgrad.types.FileLike.__args__[0] is str and \
        llgrad.types.FileLike == torch.types.FileLike
    assert issubclass(llgrad.serialization.SourceChangeWarning, Warning)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=llgrad.serialization.SourceChangeWarning)
        warnings.warn("changed", llgrad.serialization.SourceChangeWarning)


# ---- Tensor.stft / istft: the functions as methods, values and gradients -----------------------
def test_tensor_stft_istft_values_and_gradients():
    x = np.random.RandomState(0).randn(2, 80)
    results = []
    for m in (torch, llgrad):
        t = m.tensor(x, requires_grad=True)
        win = m.hann_window(16, dtype=m.float64)
        s = t.stft(16, hop_length=4, window=win, return_complex=True)
        back = s.istft(16, hop_length=4, window=win, length=80)
        (s.abs().pow(2).sum() + (back * back).sum()).backward()
        results.append((s.detach().numpy(), back.detach().numpy(), t.grad.numpy(),
                        str(s.dtype).split(".")[1]))
    for a, b in zip(results[0][:3], results[1][:3]):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-10)
    assert results[0][3] == results[1][3] == "complex128"
    with pytest.raises(RuntimeError, match="return_complex"):
        llgrad.ones(40).stft(8)
