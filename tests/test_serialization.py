"""llgrad.save / llgrad.load in PyTorch's checkpoint format: round trips within llgrad
(always), checkpoints written by torch.save loading into llgrad models and optimisers and
the other way round (when torch is installed), tensor layout (strides, offsets, shared
storages, dtypes), the archive's layout, and the safety of weights_only loading."""
import io
import os
import pathlib
import pickle
import zipfile
from collections import Counter, OrderedDict

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
from llgrad import serialization as S
from llgrad.serialization import torch_names, writer


def _torch():
    return pytest.importorskip("torch")


def roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    llgrad.save(obj, buf)
    buf.seek(0)
    return llgrad.load(buf, **load_kwargs)


def _layout(lib):
    """Tensors sharing storages in various layouts, and one of each dtype."""
    base = lib.arange(24, dtype=lib.float32).reshape(4, 6)
    out = {
        "base": base, "row": base[1], "cols": base[:, 1::2], "t": base.t(),
        "tail": base.reshape(-1)[5:17], "scalar": base[2, 3], "empty": base[:0],
        "expanded": lib.tensor([1.0, 2.0]).reshape(2, 1).expand(2, 3),
    }
    for name in ("float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"):
        dt = getattr(lib, name)
        out[name] = (lib.arange(6) % 3).reshape(2, 3).to(dt)
    return out


def _describe(lib, d):
    res = {}
    for k, t in d.items():
        res[k] = (str(t.dtype).split(".")[-1], tuple(t.shape), tuple(t.stride()),
                  t.storage_offset(), t.detach().numpy().tolist())
    return res


# ---- llgrad alone --------------------------------------------------------------------------------

def test_roundtrip_keeps_layout_sharing_and_dtypes():
    d = _layout(llgrad)
    back = roundtrip(d)
    assert list(back) == list(d)
    assert _describe(llgrad, back) == _describe(llgrad, d)
    assert all(back[k]._storage is back["base"]._storage
               for k in ("row", "cols", "t", "tail", "scalar", "empty"))
    back["base"][1, 1] = 100.0                      # shared memory after loading, too
    assert back["row"][1].item() == 100.0 and back["t"][1, 1].item() == 100.0
    assert back["base"]._version == back["row"]._version


def test_roundtrip_of_containers_plain_values_and_parameters():
    p = nn.Parameter(llgrad.ones(2))
    frozen = nn.Parameter(llgrad.zeros(1), requires_grad=False)
    leaf = llgrad.tensor([1.0, 2.0], requires_grad=True)
    obj = {"od": OrderedDict(a=1, b=[2.5, None, True]), "tuple": (1, "x", b"bytes", 2 ** 70),
           "set": {1, 2}, "counter": Counter({3: 2}), "complex": 1 + 2j, "neg": -3,
           "float": 1e-300, "dtype": llgrad.float16, "dtypes": [llgrad.bool, llgrad.int8],
           "size": llgrad.Size([2, 3]), "device": llgrad.device("cpu"), "p": p,
           "frozen": frozen, "leaf": leaf, "same": [leaf, leaf], "bytearray": bytearray(b"z")}
    back = roundtrip(obj)
    assert back["od"] == obj["od"] and isinstance(back["od"], OrderedDict)
    for k in ("tuple", "set", "counter", "complex", "neg", "float", "bytearray"):
        assert back[k] == obj[k] and type(back[k]) is type(obj[k])
    assert back["dtype"] is llgrad.float16 and back["dtypes"] == [llgrad.bool, llgrad.int8]
    assert back["size"] == llgrad.Size([2, 3]) and isinstance(back["size"], llgrad.Size)
    assert back["device"] == llgrad.device("cpu")
    assert isinstance(back["p"], nn.Parameter) and back["p"].requires_grad
    assert isinstance(back["frozen"], nn.Parameter) and not back["frozen"].requires_grad
    assert back["leaf"].requires_grad and back["leaf"].is_leaf
    assert back["same"][0] is back["same"][1] is back["leaf"]


def test_model_and_optimizer_checkpoint_roundtrip(tmp_path):
    llgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    opt = llgrad.optim.AdamW(model.parameters(), lr=0.01)
    sched = llgrad.optim.lr_scheduler.StepLR(opt, step_size=2)
    x = llgrad.randn(8, 3)
    for _ in range(3):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        sched.step()
    path = tmp_path / "ckpt.pt"
    llgrad.save({"model": model.state_dict(), "opt": opt.state_dict(),
                 "sched": sched.state_dict(), "epoch": 3}, path)
    ck = llgrad.load(path)
    llgrad.manual_seed(1)
    model2 = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    model2.load_state_dict(ck["model"])
    opt2 = llgrad.optim.AdamW(model2.parameters(), lr=0.5)
    opt2.load_state_dict(ck["opt"])
    sched2 = llgrad.optim.lr_scheduler.StepLR(opt2, step_size=2)
    sched2.load_state_dict(ck["sched"])
    assert ck["epoch"] == 3 and opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    for m, o in ((model, opt), (model2, opt2)):
        for _ in range(2):
            o.zero_grad()
            m(x).pow(2).mean().backward()
            o.step()
    for p, q in zip(model.parameters(), model2.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


def test_files_paths_and_streams(tmp_path):
    t = llgrad.arange(5.0)
    for target in (str(tmp_path / "a.pt"), tmp_path / "b.pt"):
        llgrad.save(t, target)
        assert llgrad.load(target).tolist() == t.tolist()
        assert llgrad.load(pathlib.Path(target)).tolist() == t.tolist()
    with open(tmp_path / "c.pt", "wb") as f:
        llgrad.save({"t": t}, f)
    with open(tmp_path / "c.pt", "rb") as f:
        assert llgrad.load(f)["t"].tolist() == t.tolist()

    class WriteOnly:
        def __init__(self):
            self.chunks = []

        def write(self, b):
            self.chunks.append(bytes(b))

    class ReadOnly:
        def __init__(self, data):
            self.buf = io.BytesIO(data)

        def read(self, n=-1):
            return self.buf.read(n)

    w = WriteOnly()
    llgrad.save(t, w)
    assert llgrad.load(ReadOnly(b"".join(w.chunks))).tolist() == t.tolist()
    with pytest.raises(RuntimeError, match="not a PyTorch checkpoint"):
        llgrad.load(io.BytesIO(b"hello"))
    with pytest.raises(TypeError, match="expected a path or a binary file object"):
        llgrad.load(42)


def test_archive_layout():
    buf = io.BytesIO()
    llgrad.save({"a": llgrad.ones(3), "b": llgrad.zeros(2, dtype=llgrad.int64)}, buf)
    data = buf.getvalue()
    zf = zipfile.ZipFile(io.BytesIO(data))
    assert zf.namelist() == ["archive/data.pkl", "archive/.format_version",
                             "archive/.storage_alignment", "archive/byteorder",
                             "archive/data/0", "archive/data/1", "archive/version",
                             "archive/.data/serialization_id"]
    assert zf.read("archive/version") == b"3\n" and zf.read("archive/.format_version") == b"1"
    assert zf.read("archive/data/0") == np.ones(3, np.float32).tobytes()
    for info in zf.infolist():
        assert info.compress_type == zipfile.ZIP_STORED
        n, e = np.frombuffer(data[info.header_offset + 26:info.header_offset + 30], "<u2")
        assert (info.header_offset + 30 + n + e) % 64 == 0           # data 64-byte aligned
    pkl = zf.read("archive/data.pkl")
    assert pkl.startswith(b"\x80\x02")                                # protocol 2
    assert b"ctorch._utils\n_rebuild_tensor_v2\n" in pkl and b"ctorch\nFloatStorage\n" in pkl
    assert b"ctorch\nLongStorage\n" in pkl
    buf2 = io.BytesIO()
    llgrad.save({"a": llgrad.ones(3), "b": llgrad.zeros(2, dtype=llgrad.int64)}, buf2)
    assert buf2.getvalue() == data                                    # deterministic


# ---- weights_only safety -------------------------------------------------------------------------

class Custom:
    def __init__(self, v=1):
        self.v = v


class Exploit:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_a_pickled_callable_is_refused_with_a_clear_error(tmp_path):
    marker = tmp_path / "pwned"
    buf = io.BytesIO()
    llgrad.save({"w": llgrad.ones(2), "x": Exploit(marker)}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError) as info:
        llgrad.load(buf)
    msg = str(info.value)
    assert msg.startswith("Weights only load failed.")
    assert f"Unsupported global: GLOBAL {os.system.__module__}.system was not an allowed " \
           "global by default" in msg
    assert "weights_only` set to `False`" in msg and "add_safe_globals([system])" in msg
    assert not marker.exists()
    for obj, name in ((print, "GLOBAL print "), (Custom(), f"GLOBAL {__name__}.Custom "),
                      (np.zeros(2), "GLOBAL numpy")):
        with pytest.raises(pickle.UnpicklingError, match=name):
            roundtrip({"bad": obj})


def test_weights_only_false_and_safe_globals():
    back = roundtrip({"c": Custom(5), "f": print}, weights_only=False)
    assert isinstance(back["c"], Custom) and back["c"].v == 5 and back["f"] is print
    with S.safe_globals([Custom]):
        assert roundtrip([Custom(7)])[0].v == 7
        assert Custom in S.get_safe_globals()
    with pytest.raises(pickle.UnpicklingError):
        roundtrip([Custom(7)])
    S.add_safe_globals([Custom])
    try:
        assert roundtrip(Custom(8)).v == 8
    finally:
        S.clear_safe_globals()
    assert S.get_safe_globals() == []
    with pytest.raises(RuntimeError, match="Can not safely load weights when explicit "
                                           "pickle_module is specified"):
        llgrad.load(io.BytesIO(b""), pickle_module=pickle, weights_only=True)


def _crafted(location="cpu", size=(2,), stride=(1,), numel=2, offset=0):
    """An archive written by hand: one float32 storage of `numel` elements at `location`,
    one tensor of it with the given size, stride and offset."""
    pid = writer._StoragePid(("storage", torch_names._STORAGE_TYPE[llgrad.float32], "0", location,
                              numel))
    obj = writer._Reduced(torch_names._REBUILD_TENSOR_V2,
                          (pid, offset, size, stride, False, OrderedDict()))
    pkl = io.BytesIO()
    writer._Pickler(pkl, 2, writer._StorageWriter()).dump(obj)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("archive/data.pkl", pkl.getvalue())
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/data/0", np.arange(numel, dtype=np.float32).tobytes())
        zf.writestr("archive/version", "3\n")
    out.seek(0)
    return out


def test_out_of_bounds_tensors_are_refused():
    assert llgrad.load(_crafted(size=(2, 2), stride=(1, 2), numel=4)).tolist() == \
        [[0.0, 2.0], [1.0, 3.0]]
    with pytest.raises(RuntimeError, match="out of bounds for storage of size 8"):
        llgrad.load(_crafted(size=(1000,)))
    with pytest.raises(RuntimeError, match="out of bounds"):
        llgrad.load(_crafted(size=(2,), offset=1))
    with pytest.raises(RuntimeError, match="negative"):
        llgrad.load(_crafted(size=(2,), stride=(-1,)))


def test_map_location():
    with pytest.raises(RuntimeError, match="Attempting to deserialize object on a CUDA device "
                                           "but llgrad runs on the CPU only.*map_location"):
        llgrad.load(_crafted("cuda:0"))
    for ml in ("cpu", llgrad.device("cpu"), {"cuda:0": "cpu"}, lambda storage, loc: storage,
               lambda storage, loc: None):
        if callable(ml) and not isinstance(ml, llgrad.device) and ml(1, "x") is None:
            with pytest.raises(RuntimeError, match="Attempting to deserialize"):
                llgrad.load(_crafted("cuda:0"), map_location=ml)
            continue
        assert llgrad.load(_crafted("cuda:0"), map_location=ml).tolist() == [0.0, 1.0]
    with pytest.raises(RuntimeError, match="CPU only"):
        llgrad.load(_crafted(), map_location="cuda")


# ---- with torch ----------------------------------------------------------------------------------

def _torch_model(torch):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Tanh(),
                            torch.nn.Linear(4, 2))
    m(torch.randn(8, 3))                          # running statistics move
    return m.eval()


def _llgrad_model():
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Tanh(), nn.Linear(4, 2)).eval()


def test_torch_state_dict_loads_into_llgrad_model(tmp_path):
    torch = _torch()
    tm = _torch_model(torch)
    torch.save(tm.state_dict(), tmp_path / "sd.pt")
    sd = llgrad.load(tmp_path / "sd.pt")
    assert isinstance(sd, OrderedDict) and list(sd) == list(tm.state_dict())
    assert sd["1.num_batches_tracked"].dtype == llgrad.int64
    model = _llgrad_model()
    assert str(model.load_state_dict(sd)) == "<All keys matched successfully>"
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    with torch.no_grad():
        expected = tm(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(model(llgrad.from_numpy(x)).detach().numpy(), expected,
                               rtol=1e-5, atol=1e-6)


def test_llgrad_state_dict_loads_into_torch_model(tmp_path):
    torch = _torch()
    llgrad.manual_seed(3)
    model = _llgrad_model().train()
    model(llgrad.randn(8, 3))
    model.eval()
    llgrad.save(model.state_dict(), tmp_path / "sd.pt")
    sd = torch.load(tmp_path / "sd.pt", weights_only=True)
    tm = _torch_model(torch)
    tm.load_state_dict(sd)
    x = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    with torch.no_grad():
        got = tm(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, model(llgrad.from_numpy(x)).detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    assert sd["1.num_batches_tracked"].dtype == torch.int64


def _train(lib, model, opt, sched, x, y, steps):
    for _ in range(steps):
        opt.zero_grad()
        loss = lib.nn.functional.mse_loss(model(x), y)
        loss.backward()
        lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
    return [p.detach().numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("direction", ["torch->llgrad", "llgrad->torch"])
@pytest.mark.parametrize("opt_name", ["Adam", "SGD", "RMSprop"])
def test_training_checkpoint_moves_between_libraries(tmp_path, direction, opt_name):
    """A whole training checkpoint (model, optimiser and scheduler state, epoch, loss)
    written by one library's save, loaded by the other's load into its model, optimiser
    and scheduler: training continues on the same trajectory in both."""
    torch = _torch()
    src, dst = (torch, llgrad) if direction == "torch->llgrad" else (llgrad, torch)
    rng = np.random.default_rng(0)
    xs, ys = rng.standard_normal((16, 3)).astype(np.float32), \
        rng.standard_normal((16, 2)).astype(np.float32)
    init = [rng.standard_normal(s).astype(np.float32) * 0.5 for s in [(4, 3), (4,), (2, 4),
                                                                      (2,)]]
    opt_kwargs = {"Adam": dict(lr=0.01), "SGD": dict(lr=0.05, momentum=0.9),
                  "RMSprop": dict(lr=0.001, centered=True)}[opt_name]

    def build(lib):
        m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2))
        with lib.no_grad():
            for p, a in zip(m.parameters(), init):
                p.copy_(lib.tensor(a))
        opt = getattr(lib.optim, opt_name)(m.parameters(), **opt_kwargs)
        sched = lib.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
        return m, opt, sched

    sm, so, ss = build(src)
    sx, sy = src.tensor(xs), src.tensor(ys)
    _train(src, sm, so, ss, sx, sy, 5)
    ckpt = {"epoch": 5, "model_state_dict": sm.state_dict(), "optimizer_state_dict":
            so.state_dict(), "scheduler": ss.state_dict(), "loss": 0.25}
    src.save(ckpt, tmp_path / "ckpt.pt")
    loaded = dst.load(tmp_path / "ckpt.pt")
    dm, do, ds = build(dst)
    dm.load_state_dict(loaded["model_state_dict"])
    do.load_state_dict(loaded["optimizer_state_dict"])
    ds.load_state_dict(loaded["scheduler"])
    assert loaded["epoch"] == 5 and loaded["loss"] == 0.25
    assert ds.get_last_lr() == pytest.approx(ss.get_last_lr(), rel=1e-12)
    ours = _train(dst, dm, do, ds, dst.tensor(xs), dst.tensor(ys), 5)
    theirs = _train(src, sm, so, ss, sx, sy, 5)
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6)


def test_torch_reads_llgrad_layout_and_values(tmp_path):
    torch = _torch()
    d = _layout(llgrad)
    llgrad.save(d, tmp_path / "l.pt")
    td = torch.load(tmp_path / "l.pt", weights_only=True)
    assert _describe(torch, td) == _describe(llgrad, d)
    ptr = td["base"].untyped_storage().data_ptr()
    assert all(td[k].untyped_storage().data_ptr() == ptr
               for k in ("row", "cols", "t", "tail", "scalar"))
    assert torch.load(tmp_path / "l.pt", mmap=True)["cols"].tolist() == d["cols"].tolist()


def test_llgrad_reads_torch_layout_and_values(tmp_path):
    torch = _torch()
    td = _layout(torch)
    torch.save(td, tmp_path / "t.pt")
    d = llgrad.load(tmp_path / "t.pt")
    assert _describe(llgrad, d) == _describe(torch, td)
    assert all(d[k]._storage is d["base"]._storage
               for k in ("row", "cols", "t", "tail", "scalar", "empty"))


def test_plain_values_and_parameters_cross_both_ways(tmp_path):
    torch = _torch()
    obj = {"od": OrderedDict(a=1), "list": [1, 2.5, "s", None, True, (3, b"b")],
           "set": {4}, "counter": Counter("aab"), "complex": 2 - 1j, "bytes": b"\x00\xff"}
    for src, dst in ((llgrad, torch), (torch, llgrad)):
        extra = {"p": src.nn.Parameter(src.ones(2)), "g": src.tensor([1.0], requires_grad=True),
                 "dtype": src.float64, "size": src.Size([1, 2]), "dev": src.device("cpu")}
        src.save({**obj, **extra}, tmp_path / "o.pt")
        back = dst.load(tmp_path / "o.pt", weights_only=True)
        assert {k: back[k] for k in obj} == obj
        assert isinstance(back["p"], dst.nn.Parameter) and back["p"].requires_grad
        assert back["g"].requires_grad and not isinstance(back["g"], dst.nn.Parameter)
        assert back["dtype"] is dst.float64 and tuple(back["size"]) == (1, 2)
        assert isinstance(back["size"], dst.Size) and back["dev"] == dst.device("cpu")


def test_torch_refuses_what_llgrad_refuses(tmp_path):
    torch = _torch()
    torch.save({"f": os.system}, tmp_path / "bad.pt")
    with pytest.raises(pickle.UnpicklingError, match="Unsupported global: GLOBAL "
                                                     f"{os.system.__module__}.system"):
        llgrad.load(tmp_path / "bad.pt")
    llgrad.save({"f": os.system}, tmp_path / "bad2.pt")
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        torch.load(tmp_path / "bad2.pt")


def test_torch_special_files(tmp_path):
    torch = _torch()
    torch.save(torch.arange(3.0), tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(RuntimeError, match="legacy format"):
        llgrad.load(tmp_path / "legacy.pt")
    torch.save({"bf": torch.tensor([1.5, -2.25], dtype=torch.bfloat16)}, tmp_path / "bf.pt")
    bf = llgrad.load(tmp_path / "bf.pt")["bf"]
    assert bf.dtype == llgrad.bfloat16 and bf.tolist() == [1.5, -2.25]
    buf = io.BytesIO()
    torch.save([torch.ones(2)], buf)
    buf.seek(0)
    assert llgrad.load(buf, map_location=torch.device("cpu"))[0].tolist() == [1.0, 1.0]


def test_torch_offset_calculation_agrees(tmp_path, monkeypatch):
    """PyTorch's debug check that storage offsets computed from the archive layout (as
    torch.utils.serialization.config.load.calculate_storage_offsets does) match the
    records: llgrad writes each record's sizes after its data, as PyTorch's writer does."""
    torch = _torch()
    monkeypatch.setenv("TORCH_SERIALIZATION_DEBUG", "1")
    llgrad.save({"a": llgrad.ones(3), "b": llgrad.arange(7), "c": llgrad.zeros(2, 2)},
                tmp_path / "d.pt")
    assert torch.load(tmp_path / "d.pt")["b"].tolist() == list(range(7))


def test_tensor_attributes_cross_both_ways():
    """Attributes set on a tensor or a Parameter are saved with it (PyTorch's
    _rebuild_from_type_v2 / _rebuild_parameter_with_state) and restored."""
    torch = _torch()
    for src, dst in ((torch, llgrad), (llgrad, torch)):
        t = src.ones(2)
        t.foo = 3
        p = src.nn.Parameter(src.zeros(1))
        p.bar = "x"
        buf = io.BytesIO()
        src.save({"t": t, "p": p}, buf)
        buf.seek(0)
        back = dst.load(buf)
        assert back["t"].foo == 3 and back["t"].tolist() == [1.0, 1.0]
        assert back["p"].bar == "x" and isinstance(back["p"], dst.nn.Parameter)
