"""Session 74 (i), adversarial cases (2): ModuleDict / ParameterList / ParameterDict /
Sequential operations, forward hooks (with_kwargs, prepend, always_call) and global module
hooks; llgrad.save / llgrad.load round trips (views of one base stay views, non-contiguous
and expanded tensors, every dtype, nested containers, optimizer and scheduler state, a
whole module with weights_only=False, weights_only refusing classes, map_location, files,
mmap, layouts) and files crossing between torch and llgrad; copy.deepcopy of tensors
(shared storages, .grad, a non-leaf's error) and modules. As test_adversary_s74_i.py: each
case's result (or exception) is compared as text with torch's."""
import collections
import copy
import io
import os
import pickle
import tempfile

import pytest

pytest.importorskip("torch")
import torch  # noqa: E402

import llgrad  # noqa: E402
from test_adversary_s74_i import outcome, same  # noqa: E402,F401

pytestmark = pytest.mark.torch


CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def rt(lib, obj, **kw):
    b = io.BytesIO()
    lib.save(obj, b)
    b.seek(0)
    return lib.load(b, **kw)

@case
def moduledict_ops(lib):
    md = lib.nn.ModuleDict({"z": lib.nn.ReLU(), "a": lib.nn.Tanh()})
    md.update([("m", lib.nn.GELU()), ("z", lib.nn.ELU())])
    md["c"] = lib.nn.Identity()
    popped = md.pop("a")
    out = [list(md.keys()), [type(v).__name__ for v in md.values()], type(popped).__name__]
    for bad in (lib.nn.ReLU(), [("a",)]):
        try:
            md.update(bad)
        except Exception as e:
            out.append((type(e).__name__, str(e)))
    return out


@case
def parameter_containers(lib):
    pl = lib.nn.ParameterList([lib.nn.Parameter(lib.ones(2)), lib.ones(3)])
    pl.append(lib.zeros(1))
    pd = lib.nn.ParameterDict({"b": lib.nn.Parameter(lib.ones(1)), "a": lib.ones(2)})
    pd["c"] = lib.ones(1)
    pd.update({"b": lib.zeros(2)})
    pd["s"] = "str"
    m = lib.nn.Module()
    m.pl, m.pd = pl, pd
    return ([type(p).__name__ for p in pl], [p.requires_grad for p in pl], list(pd.keys()),
            [type(v).__name__ for v in pd.values()], list(m.state_dict()), pd.get("zz", 5))


@case
def sequential_ops(lib):
    s = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.ReLU(), lib.nn.Linear(2, 1))
    out = [type(s[-1]).__name__, list(s[1:]._modules), list(s[::-1]._modules)]
    s.append(lib.nn.Sigmoid())
    s.insert(0, lib.nn.Identity())
    s.extend([lib.nn.Tanh()])
    del s[1:3]
    s[-1] = lib.nn.ELU()
    out.append((list(s._modules), [type(m).__name__ for m in s], type(s.pop(0)).__name__))
    for f in (lambda: s[10], lambda: s[-10], lambda: s["a"]):
        try:
            f()
        except Exception as e:
            out.append((type(e).__name__, str(e)))
    return out, len(s + lib.nn.Sequential(lib.nn.ReLU())), list((s * 2)._modules)


@case
def forward_hooks(lib):
    log = []

    class M(lib.nn.Module):
        def forward(self, x, scale=1.0):
            if scale < 0:
                raise ValueError("negative scale")
            return x * scale
    m = M()
    m.register_forward_pre_hook(lambda mod, a, k: (log.append(("pre", sorted(k))), (a, {"scale": k.get("scale", 1.0) * 3}))[1], with_kwargs=True)
    m.register_forward_pre_hook(lambda *a: log.append("first"), prepend=True)
    m.register_forward_hook(lambda mod, a, k, out: out + 1, with_kwargs=True)
    m.register_forward_hook(lambda *a: log.append(("always", repr(a[-1]))), always_call=True)
    y = m(lib.ones(1), scale=2.0)
    try:
        m(lib.ones(1), scale=-1.0)
    except ValueError as e:
        log.append(str(e))
    with m.register_forward_hook(lambda *a: log.append("ctx")):
        m(lib.ones(1))
    return y.tolist(), log, len(m._forward_hooks)


@case
def global_module_hooks(lib):
    log = []
    h1 = lib.nn.modules.module.register_module_forward_pre_hook(
        lambda m, a: log.append(("gpre", type(m).__name__)))
    h2 = lib.nn.modules.module.register_module_forward_hook(
        lambda m, a, o: o * 2 if isinstance(m, lib.nn.ReLU) else None)
    m = lib.nn.Sequential(lib.nn.ReLU())
    try:
        y = m(lib.ones(1))
    finally:
        h1.remove()
        h2.remove()
    return y.tolist(), m(lib.ones(1)).tolist(), log



@case
def views_stay_views(lib):
    base = lib.arange(12.)
    x = rt(lib, {"a": base[2:6], "b": base.view(3, 4).t(), "base": base, "alone": base[1:3]})
    x["base"][3] = 100.
    return (x["a"].tolist(), x["b"][:, 0].tolist(), x["a"].storage_offset(), x["b"].stride(),
            x["alone"].untyped_storage().nbytes())


@case
def non_contiguous_and_expanded(lib):
    t = lib.arange(12.).reshape(3, 4).t()
    e = lib.arange(3.).reshape(3, 1).expand(3, 4)
    x, y = rt(lib, [t, e])
    return x.tolist(), x.stride(), x.is_contiguous(), y.stride(), y.tolist()


@case
def dtypes_and_empty(lib):
    d = {"i": lib.tensor([1, -2], dtype=lib.int32), "b": lib.tensor([True, False]),
         "h": lib.tensor([1.5, 2.25], dtype=lib.float16), "bf": lib.tensor([1.5], dtype=lib.bfloat16),
         "u8": lib.tensor([255], dtype=lib.uint8), "i64": lib.tensor([2 ** 40]),
         "c": lib.tensor([1 + 2j]), "f64": lib.tensor([0.1], dtype=lib.float64),
         "s": lib.tensor(3.5), "e": lib.zeros(0, 3)}
    return [(k, str(v.dtype), tuple(v.shape), v.tolist()) for k, v in rt(lib, d).items()]


@case
def nested_containers(lib):
    t = lib.ones(2)
    x = rt(lib, {"a": [1, (2, t), {"b": None}], "t": (t,), "set": {1, 2}, "bytes": b"ab",
                 "od": collections.OrderedDict(z=1, a=2), 0: "int key", (1, 2): 3.5})
    return (type(x["a"][1]).__name__, x["a"][1][1] is x["t"][0], type(x["od"]).__name__,
            list(x["od"]), x["set"], x["bytes"], x[0], x[(1, 2)])


@case
def parameters_and_grad_flags(lib):
    p = lib.nn.Parameter(lib.ones(2))
    (p * 2).sum().backward()
    q = lib.nn.Parameter(lib.ones(2), requires_grad=False)
    r = lib.ones(2, requires_grad=True) * 2
    x = rt(lib, [p, q, r])
    return [(type(y).__name__, y.requires_grad, y.is_leaf, y.grad) for y in x]


@case
def optimizer_and_scheduler_state(lib):
    lib.manual_seed(0)
    m = lib.nn.Linear(2, 1)
    opt = lib.optim.Adam(m.parameters(), lr=0.1)
    sch = lib.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    m(lib.ones(3, 2)).sum().backward()
    opt.step()
    sch.step()
    ck = rt(lib, {"o": opt.state_dict(), "s": sch.state_dict(), "m": m.state_dict()})
    opt2 = lib.optim.Adam(m.parameters(), lr=0.5)
    opt2.load_state_dict(ck["o"])
    return (sorted(ck["o"]["state"][0]), ck["o"]["state"][0]["step"], opt2.param_groups[0]["lr"],
            sorted(ck["s"].items()), dict(ck["m"]._metadata))


@case
def whole_module(lib):
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.Tanh())
    x = rt(lib, m, weights_only=False)
    return repr(x), x[0].weight.tolist() == m[0].weight.tolist(), type(x[0].weight).__name__


@case
def weights_only_refuses_module(lib):
    try:
        rt(lib, lib.nn.Linear(1, 1))
    except pickle.UnpicklingError as e:
        return "Unsupported global: GLOBAL" in str(e), "was not an allowed global" in str(e)


@case
def map_locations(lib):
    seen = []
    x = [rt(lib, lib.ones(2), map_location=ml) for ml in
         ("cpu", lib.device("cpu"), {"cpu": "cpu"},
          lambda s, loc: seen.append((s.nbytes(), loc)) or s.cpu())]
    return [str(t.device) for t in x], seen


@case
def file_paths_and_mmap(lib):
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "a.pt")
        lib.save({"w": lib.arange(4.)}, p)
        x = lib.load(p, mmap=True)["w"]
        x[0] = 7.
        return lib.load(p)["w"].tolist(), x.tolist()


@case
def plain_objects(lib):
    return rt(lib, [lib.float16, lib.device("cpu"), lib.Size([2, 3]), 1 + 2j, 2 ** 100,
                    float("inf"), bytearray(b"a"), collections.Counter("aab")])


@case
def layouts_round_trip(lib):            # (llgrad wrote a global llgrad.load refused)
    return rt(lib, {"l": [lib.strided, lib.sparse_coo]})


@case
def save_into_missing_directory(lib):   # (PyTorch's RuntimeError, not FileNotFoundError)
    lib.save(lib.ones(1), os.path.join(tempfile.gettempdir(), "no_such_dir_s74i", "a.pt"))


@case
def deepcopy_keeps_views_and_grad(lib):     # (copies were independent, without .grad)
    base = lib.ones(6, requires_grad=True)
    (base * 2).sum().backward()
    base.note = "mine"
    with lib.no_grad():
        d = copy.deepcopy({"a": base, "b": base[2:], "c": base.view(2, 3).t()})
        d["a"][3] = 50.
    return (d["b"].tolist(), d["c"].tolist(), d["c"].stride(), d["b"].storage_offset(),
            d["a"].grad.tolist(), d["a"].note, d["b"].is_leaf)


@case
def deepcopy_non_leaf(lib):             # (llgrad copied it)
    copy.deepcopy(lib.ones(2, requires_grad=True) * 2)


@case
def deepcopy_weight_norm_module(lib):   # (the classic weight_norm deepcopy error)
    m = lib.nn.utils.weight_norm(lib.nn.Linear(2, 2))
    m(lib.ones(1, 2))
    copy.deepcopy(m)


@case
def deepcopy_tied_and_parametrized(lib):
    m = lib.nn.Sequential(lib.nn.Embedding(4, 3), lib.nn.Linear(3, 4, bias=False))
    m[1].weight = m[0].weight
    p = lib.nn.utils.parametrizations.weight_norm(lib.nn.Linear(2, 2))
    c, cp = copy.deepcopy(m), copy.deepcopy(p)
    return (c[1].weight is c[0].weight, c[0].weight is m[0].weight, type(c[0].weight).__name__,
            sorted(n for n, _ in cp.named_parameters()))


@pytest.mark.parametrize("fn", CASES, ids=[f.__name__ for f in CASES])
def test_like_torch(fn):
    same(fn)


def test_empty_file_is_eof():           # (torch.load's EOFError; llgrad raised no EOFError)
    for lib in (torch, llgrad):
        with pytest.raises(EOFError):
            lib.load(io.BytesIO(b""))
