"""torch.save / torch.load round trips of a training checkpoint (model, optimizer and
scheduler state_dicts, views sharing storage, every common dtype) within llgrad, from llgrad to
PyTorch and from a file PyTorch wrote to llgrad: values, dtypes, strides and storage sharing
as PyTorch's own round trip gives them; whole pickled modules; the map_location forms."""
import collections
import io

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _checkpoint(L):
    L.manual_seed(0)
    m = L.nn.Sequential(L.nn.Conv2d(1, 2, 3), L.nn.BatchNorm2d(2), L.nn.Flatten(),
                        L.nn.Linear(8, 3))
    o = L.optim.Adam(m.parameters(), lr=1e-3)
    s = L.optim.lr_scheduler.StepLR(o, 2)
    m(L.randn(2, 1, 4, 4)).sum().backward()
    o.step()
    s.step()
    x = L.arange(12.).reshape(3, 4)
    return m, {
        "model": m.state_dict(), "opt": o.state_dict(), "sched": s.state_dict(), "epoch": 3,
        "base": x, "t": x.t(), "view": x[1:, ::2], "strided": L.arange(10.)[::3],
        "expanded": L.ones(3, 1).expand(3, 4), "param": L.nn.Parameter(L.ones(2)),
        "int64": L.tensor([1, 2]), "int32": L.tensor([7], dtype=L.int32),
        "int8": L.tensor([-3], dtype=L.int8), "uint8": L.tensor([200], dtype=L.uint8),
        "bool": L.tensor([True]), "half": L.tensor([1.5], dtype=L.float16),
        "bfloat16": L.tensor([1.5], dtype=L.bfloat16), "float64": L.tensor([0.1], dtype=L.float64),
        "complex": L.tensor([1 + 2j]), "scalar": L.tensor(3.5), "empty": L.zeros(0, 3),
        "nested": [L.ones(1), (2, "a")], "size": L.Size([2, 3]),
        "ordered": collections.OrderedDict(a=1)}


def _describe(x):
    """Library-free: a tensor by type name, dtype, shape, strides, values, requires_grad."""
    if hasattr(x, "detach"):
        return (type(x).__name__, str(x.dtype).split(".")[-1], tuple(x.shape), tuple(x.stride()),
                np.asarray(x.detach().tolist()).tolist(), x.requires_grad)
    if isinstance(x, dict):
        return (type(x).__name__, [(k, _describe(v)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_describe(v) for v in x])
    return repr(x)


def _round_trip(src, dst, **load_kw):
    _, ck = _checkpoint(src)
    buf = io.BytesIO()
    src.save(ck, buf)
    buf.seek(0)
    return ck, dst.load(buf, **load_kw)


@pytest.mark.parametrize("weights_only", [None, False])
@pytest.mark.parametrize("src,dst", [(llgrad, llgrad), (llgrad, torch), (torch, llgrad)],
                         ids=["llgrad-llgrad", "llgrad-torch", "torch-llgrad"])
def test_checkpoint_round_trip(src, dst, weights_only):
    kw = {} if weights_only is None else {"weights_only": weights_only}
    saved, got = _round_trip(src, dst, **kw)
    tsaved, tgot = _round_trip(torch, torch, **kw)      # what torch's own round trip keeps
    for d in (saved, got, tsaved, tgot):
        d.pop("size")                                   # (Size's repr names its library)
    assert _describe(tgot) == _describe(tsaved)
    assert _describe(got) == _describe(saved)
    if dst is llgrad:                               # views still share the loaded storage
        got["base"][1, 0] = 100.
        assert got["view"][0, 0].item() == 100. and got["t"][0, 1].item() == 100.


def test_whole_module_pickle_and_weights_only_refusal():
    for L in (llgrad, torch):
        m, _ = _checkpoint(L)
        buf = io.BytesIO()
        L.save(m, buf)
        buf.seek(0)
        m2 = L.load(buf, weights_only=False)
        x = L.ones(1, 1, 4, 4)
        assert type(m2) is type(m) and L.equal(m2(x), m(x))
        buf.seek(0)
        with pytest.raises(Exception, match="Weights only load failed"):
            L.load(buf)


@pytest.mark.parametrize("kw", [{"map_location": "cpu"}, {"map_location": lambda s, loc: s},
                                {"mmap": True}, {"map_location": {"cuda:0": "cpu"}}],
                         ids=["str", "callable", "mmap", "dict"])
def test_load_torch_file_with_map_location(tmp_path, kw):
    path = tmp_path / "ck.pt"
    torch.save({"w": torch.arange(4.), "i": torch.tensor([3])}, path)
    got = llgrad.load(path, **kw)
    assert got["w"].tolist() == [0.0, 1.0, 2.0, 3.0] and got["i"].dtype == llgrad.int64
