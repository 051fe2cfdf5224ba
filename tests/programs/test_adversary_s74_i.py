"""Session 74 (i), adversarial module and state_dict cases: load_state_dict's strict=False
result (the _IncompatibleKeys named tuple), strict=True and size-mismatch errors, assign=True
(the given tensor becomes the parameter), _metadata versions (an old BatchNorm checkpoint
without num_batches_tracked), prefixes of nested modules, persistent=False buffers, the load
pre / post hooks and state_dict pre / post hooks, an overridden _load_from_state_dict,
extra state, keep_vars; and the module API: shared submodules and tied weights
(named_modules / named_parameters with remove_duplicate=False), apply, zero_grad, train /
eval, to(dtype) / half(), repr, add_module / register_buffer / register_parameter errors,
setattr and del, and ModuleList operations (the other containers, hooks, serialization and
copy.deepcopy: test_adversary_s74_i_2.py).
Each case is a function of the library; its result (or the exception's type and text) is
compared as text with "torch" and "llgrad" made one name."""
import collections

import pytest

pytest.importorskip("torch")
import torch  # noqa: E402

import llgrad  # noqa: E402

pytestmark = pytest.mark.torch


def outcome(fn, lib):
    try:
        got = repr(fn(lib))
    except Exception as e:      # (the type and text are compared with torch's)
        got = f"raises {type(e).__name__}: {e}"
    return got.replace("llgrad", "LIB").replace("torch", "LIB")


def same(fn):
    want, got = outcome(fn, torch), outcome(fn, llgrad)
    assert got == want, f"{fn.__name__}:\n torch : {want}\n llgrad: {got}"


CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def net(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.ReLU(), lib.nn.Linear(3, 1))


def shared(lib):
    lib.manual_seed(0)
    lin = lib.nn.Linear(2, 2)
    return lib.nn.Sequential(lin, lib.nn.Tanh(), lin)


def tied(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = lib.nn.Embedding(4, 3)
            self.out = lib.nn.Linear(3, 4, bias=False)
            self.out.weight = self.emb.weight
    return M()


@case
def strict_false_keys(lib):
    m = net(lib)
    sd = m.state_dict()
    sd.pop("0.bias")
    sd["extra"] = lib.zeros(1)
    r = m.load_state_dict(sd, strict=False)
    return type(r).__name__, r.missing_keys, r.unexpected_keys, r, tuple(r)


@case
def strict_true_message(lib):
    m = net(lib)
    sd = m.state_dict()
    sd.pop("0.bias")
    sd["extra"] = lib.zeros(1)
    m.load_state_dict(sd)


@case
def size_mismatch_even_non_strict(lib):
    m = net(lib)
    sd = m.state_dict()
    sd["0.weight"] = lib.zeros(4, 2)
    m.load_state_dict(sd, strict=False)


@case
def assign_keeps_given_tensor(lib):
    m = net(lib)
    w = lib.ones(3, 2)
    sd = m.state_dict()
    sd["0.weight"] = w
    m.load_state_dict(sd, assign=True)
    return (type(m[0].weight).__name__, m[0].weight.requires_grad,
            m[0].weight.data_ptr() == w.data_ptr())


@case
def copy_casts_into_existing(lib):
    m = net(lib)
    w0 = m[0].weight
    sd = m.state_dict()
    sd["0.weight"] = lib.ones(3, 2, dtype=lib.float64).t().contiguous().t()
    m.load_state_dict(sd)
    return m[0].weight is w0, m[0].weight.dtype, m[0].weight.stride(), m[0].weight.sum().item()


@case
def metadata_versions(lib):
    m = lib.nn.Sequential(lib.nn.BatchNorm1d(2))
    sd = m.state_dict()
    return type(sd).__name__, dict(sd._metadata), list(sd)


@case
def old_batchnorm_checkpoint(lib):
    m = lib.nn.Sequential(lib.nn.BatchNorm1d(2))
    sd = m.state_dict()
    del sd["0.num_batches_tracked"]
    sd._metadata["0"]["version"] = 1
    return m.load_state_dict(sd), m[0].num_batches_tracked


@case
def buffers_persistence(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("a", lib.ones(2))
            self.register_buffer("b", lib.ones(2), persistent=False)
            self.register_buffer("c", None)
    m = lib.nn.Sequential(M())
    r = m.load_state_dict({"0.a": lib.zeros(2)})
    m[0].register_buffer("b", lib.ones(1))         # (registered again: persistent now)
    return [n for n, _ in m.named_buffers()], r, list(m.state_dict())


@case
def prefixes(lib):
    m = lib.nn.Sequential(lib.nn.Sequential(lib.nn.Linear(1, 1)))
    return (list(m.state_dict(prefix="pre.")), list(m[0].state_dict()),
            list(m[0][0].state_dict(prefix="x.")))


@case
def keep_vars(lib):
    m = net(lib)
    sd, plain = m.state_dict(keep_vars=True), m.state_dict()
    return (sd["0.weight"] is m[0].weight, type(plain["0.weight"]).__name__,
            plain["0.weight"].requires_grad,
            plain["0.weight"].data_ptr() == m[0].weight.data_ptr())


@case
def load_hooks(lib):
    m = lib.nn.Sequential(lib.nn.Linear(1, 1))
    log = []

    def pre(module, sd, prefix, local_metadata, strict, missing, unexpected, errors):
        log.append((type(module).__name__, prefix, sorted(sd), strict))
        sd[prefix + "bias"] = lib.full((1,), 7.0)

    def post(module, keys):
        log.append((type(module).__name__, list(keys.missing_keys), list(keys.unexpected_keys)))
        keys.unexpected_keys.clear()
    m[0]._register_load_state_dict_pre_hook(pre, with_module=True)
    m[0].register_load_state_dict_pre_hook(lambda *a: log.append(("public", a[2])))
    m.register_load_state_dict_post_hook(post)
    sd = m.state_dict()
    del sd["0.bias"]
    sd["zz"] = lib.ones(1)
    return m.load_state_dict(sd), log, m[0].bias.item()


@case
def state_dict_hooks(lib):
    m = lib.nn.Sequential(lib.nn.Linear(1, 1))
    log = []
    m[0].register_state_dict_pre_hook(lambda mod, prefix, keep: log.append(("pre", prefix, keep)))

    def post(mod, sd, prefix, local_metadata):
        log.append(("post", prefix, sorted(sd), dict(local_metadata)))
        sd[prefix + "extra"] = 1
    m[0].register_state_dict_post_hook(post)
    return list(m.state_dict(keep_vars=True)), log


@case
def renamed_key_by_override(lib):
    class M(lib.nn.Linear):
        def _load_from_state_dict(self, sd, prefix, *rest):
            if prefix + "old_w" in sd:
                sd[prefix + "weight"] = sd.pop(prefix + "old_w")
            super()._load_from_state_dict(sd, prefix, *rest)
    m = lib.nn.Sequential(M(1, 1))
    r = m.load_state_dict({"0.old_w": lib.full((1, 1), 3.0), "0.bias": lib.zeros(1)})
    return r, m[0].weight.item()


@case
def extra_state(lib):
    class M(lib.nn.Module):
        v = 1

        def get_extra_state(self):
            return {"v": self.v}

        def set_extra_state(self, st):
            self.v = st["v"]
    m = lib.nn.Sequential(M())
    sd = m.state_dict()
    sd["0._extra_state"] = {"v": 9}
    m.load_state_dict(sd)
    return list(m.state_dict()), m[0].v


@case
def tied_and_shared_names(lib):
    m, s = tied(lib), shared(lib)
    return ([n for n, _ in m.named_parameters()],
            [n for n, _ in m.named_parameters(remove_duplicate=False)],
            list(m.state_dict()), sum(p.numel() for p in m.parameters()),
            [n for n, _ in s.named_modules()], [n for n, _ in s.named_modules(remove_duplicate=False)],
            [n for n, _ in s.named_parameters(remove_duplicate=False, prefix="p")],
            m.load_state_dict({"emb.weight": lib.ones(4, 3)}, strict=False))


@case
def apply_train_eval_requires_grad(lib):
    m = lib.nn.Sequential(shared(lib), lib.nn.Dropout(), lib.nn.Sequential(lib.nn.BatchNorm1d(2)))
    seen = []

    def init(mod):
        seen.append(type(mod).__name__)
        if isinstance(mod, lib.nn.Linear):
            lib.nn.init.constant_(mod.weight, 0.5)
    r = m.apply(init)
    m.eval()
    m[2].train()
    flags = [x.training for x in m.modules()]
    return r is m, seen, flags, m.requires_grad_(False) is m, [p.requires_grad for p in m.parameters()]


@case
def zero_grad_modes(lib):
    m = shared(lib)
    m(lib.ones(1, 2)).sum().backward()
    g = m[0].weight.grad
    m.zero_grad(set_to_none=False)
    kept = m[0].weight.grad is g, m[0].weight.grad.abs().sum().item()
    m.zero_grad()
    return kept, m[0].weight.grad


@case
def dtype_conversions(lib):
    m = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.BatchNorm1d(2))
    w = m[0].weight
    m(lib.ones(3, 2)).sum().backward()
    r = m.to(lib.float64)
    first = (r is m, m[0].weight is w, type(m[0].weight).__name__, m[0].weight.grad.dtype,
             m[1].num_batches_tracked.dtype)
    m.half()
    return first, m[0].weight.dtype, m[1].running_var.dtype, m.to(lib.zeros(1)).bias.dtype


@case
def to_integer_dtype(lib):
    lib.nn.Linear(1, 1).to(lib.int32)


@case
def repr_text(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.pl = lib.nn.ParameterList([lib.nn.Parameter(lib.ones(2)),
                                            lib.nn.Parameter(lib.ones(1, 2, dtype=lib.float64))])
            self.pd = lib.nn.ParameterDict({"x": lib.nn.Parameter(lib.ones(3))})
            self.seq = lib.nn.Sequential(collections.OrderedDict(
                conv=lib.nn.Conv2d(1, 2, 3, stride=2, padding=1, bias=False),
                bn=lib.nn.BatchNorm2d(2, momentum=None), act=lib.nn.LeakyReLU(0.2, inplace=True),
                lstm=lib.nn.LSTM(2, 3, num_layers=2, batch_first=True),
                ml=lib.nn.ModuleList([lib.nn.Identity(), lib.nn.GELU(approximate="tanh")]),
                md=lib.nn.ModuleDict({"b": lib.nn.ReLU(), "a": lib.nn.Softmax(dim=1)}),
                empty=lib.nn.Sequential()))

        def extra_repr(self):
            return "hello\nworld"
    return repr(M())


@case
def registration_errors(lib):
    out = []
    attempts = [lambda m: m.add_module("a.b", lib.nn.ReLU()), lambda m: m.add_module("", None),
                lambda m: m.add_module("x", 3), lambda m: m.add_module(1, None),
                lambda m: m.register_buffer("a.b", lib.ones(1)), lambda m: m.register_buffer("x", 3),
                lambda m: m.register_parameter("x", lib.ones(1)),
                lambda m: m.register_buffer("weight", lib.ones(1)),
                lambda m: m.add_module("foo", lib.nn.ReLU())]
    for f in attempts:
        m = lib.nn.Linear(1, 1)
        m.foo = 1
        try:
            f(m)
            out.append("ok")
        except Exception as e:
            out.append((type(e).__name__, str(e)))
    return out


@case
def setattr_and_del(lib):
    m = lib.nn.Linear(1, 1)
    out = []
    for value in (lib.ones(1, 1), 3):
        try:
            m.weight = value
        except Exception as e:
            out.append((type(e).__name__, str(e)))
    m.weight = None
    m.foo = lib.ones(1)
    m.bar = lib.nn.Parameter(lib.ones(1))
    m.register_buffer("buf", lib.ones(1))
    m.buf = lib.zeros(1)
    m.sub = lib.nn.ReLU()
    m.sub = None
    out.append(([n for n, _ in m.named_parameters()], list(m.state_dict()), list(m._modules.items())))
    del m.bar, m.buf, m.sub
    try:
        del m.nothing
    except Exception as e:
        out.append((type(e).__name__, str(e)))
    out.append((list(m._parameters), list(m._buffers), list(m._modules), hasattr(m, "sub")))
    return out


@case
def modulelist_ops(lib):
    ml = lib.nn.ModuleList([lib.nn.Linear(1, 1), lib.nn.ReLU(), lib.nn.Tanh()])
    s = ml[1:]
    ml.insert(1, lib.nn.Sigmoid())
    ml.insert(-1, lib.nn.GELU())
    ml.extend([lib.nn.SELU()])
    ml2 = ml + lib.nn.ModuleList([lib.nn.ReLU6()])
    ml[-1] = lib.nn.Softplus()
    del ml[0]
    popped = ml.pop(1)
    errors = []
    for f in (lambda: ml[9], lambda: ml["a"], lambda: ml.extend(lib.nn.ReLU())):
        try:
            f()
        except Exception as e:
            errors.append((type(e).__name__, str(e)))
    return (type(s).__name__, list(s._modules), [type(a).__name__ for a in ml], list(ml._modules),
            type(popped).__name__, list(ml2._modules), repr(ml[::2]), errors)


@case
def lazy_module_loads_checkpoint(lib):
    m = lib.nn.LazyLinear(2)
    m.load_state_dict({"weight": lib.ones(2, 3), "bias": lib.zeros(2)})
    return type(m).__name__, type(m.weight).__name__, m(lib.ones(1, 3)).tolist()


@case
def shared_buffers_and_parameter_dict(lib):
    bn = lib.nn.BatchNorm1d(2)
    m = lib.nn.Sequential(bn, bn)
    pd = lib.nn.ParameterDict({"a": lib.nn.Parameter(lib.ones(1))})
    pd2 = pd | {"b": lib.ones(2)}
    pd.setdefault("c", lib.zeros(1))
    return ([n for n, _ in m.named_buffers(remove_duplicate=False)], list(m.state_dict()),
            list(pd2.keys()), tuple(pd.pop("a").shape), list(reversed(pd)))


@pytest.mark.parametrize("fn", CASES, ids=[f.__name__ for f in CASES])
def test_module_api_like_torch(fn):
    same(fn)
