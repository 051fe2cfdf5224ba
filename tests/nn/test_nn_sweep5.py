"""Sweep 5 of llgrad.nn against torch.nn: Parameter of an integer tensor, Module.to with an
integer dtype, dir() of a Sequential, embedding_bag's grad_fn, the warn-once of
padding='same' with an even kernel, nn.init on integer tensors, the broadcast error's
dimension (through a parametrization), parametrizations.orthogonal (values, gradients,
state_dict, repr, errors, compiled), F.linear of a 0-d operand, batch_norm's per-channel
size checks, ConvTranspose's output_size message, flatten of a 0-d tensor, GRUCell's
grad_fn, and a lazy module's state_dict and copies."""
import copy
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime import functions_settings

torch = pytest.importorskip("torch")


def _run(lib, fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            out = fn(lib)
        except Exception as e:      # noqa: BLE001 (compared with torch's)
            out = (type(e).__name__, str(e).split("\n")[0].replace("torch", "llgrad"))
    return out, [(x.category.__name__, str(x.message).split(" (Triggered internally")[0])
                 for x in w]


def _same(fn):
    got, want = _run(llgrad, fn), _run(torch, fn)
    assert got == want
    return got


def test_parameter_of_an_integer_tensor():
    _same(lambda lib: lib.nn.Parameter(lib.zeros(2, dtype=lib.int64)))
    _same(lambda lib: lib.nn.ParameterDict({"y": lib.zeros(3, dtype=lib.int64)}))
    _same(lambda lib: lib.nn.Parameter(lib.zeros(2, dtype=lib.int64), requires_grad=False)
          .tolist())
    _same(lambda lib: lib.zeros(2, dtype=lib.int64).requires_grad_())     # (lower-case 'only')


@pytest.mark.parametrize("dt", ["int64", "bool", "float64", "float16"])
def test_module_to_dtype(dt):
    def f(lib):
        m = lib.nn.Linear(2, 2).to(getattr(lib, dt))
        return str(m.weight.dtype).replace("torch", "llgrad")
    _same(f)
    _same(lambda lib: str(lib.nn.Linear(2, 2).to(dtype=getattr(lib, dt)).bias.dtype)
          .replace("torch", "llgrad"))


def test_dir_of_a_sequential_leaves_out_indices():
    def f(lib):
        m = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.ReLU())
        m.add_module("head", lib.nn.Tanh())
        d = dir(m)
        return [k for k in d if k[0].isdigit()], "head" in d, "forward" in d, "weight" in dir(m[0])
    _same(f)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_grad_fn(mode):
    def f(lib):
        lib.manual_seed(0)
        e = lib.nn.EmbeddingBag(10, 3, mode=mode)
        out = e(lib.tensor([1, 2, 4, 5, 4, 3]), lib.tensor([0, 2, 2]))
        fn = lib.nn.functional.embedding_bag(lib.tensor([[1, 2], [3, 3]]), e.weight, mode=mode)
        return type(out.grad_fn).__name__, type(fn.grad_fn).__name__
    _same(f)
    with llgrad.no_grad():
        assert llgrad.nn.EmbeddingBag(4, 2)(llgrad.tensor([[1, 2]])).grad_fn is None


def test_embedding_bag_per_sample_weights_grad_fn_and_values():
    w = np.random.RandomState(0).randn(10, 3).astype(np.float32)
    psw = np.array([0.5, -1.0, 2.0, 1.5, 0.25], np.float32)

    def f(lib):
        weight = lib.tensor(w, requires_grad=True)
        p = lib.tensor(psw, requires_grad=True)
        out = lib.nn.functional.embedding_bag(lib.tensor([1, 2, 4, 5, 4]), weight,
                                              lib.tensor([0, 2]), mode="sum",
                                              per_sample_weights=p)
        (out * lib.arange(6.).reshape(2, 3)).sum().backward()
        return (type(out.grad_fn).__name__, np.round(out.detach().numpy(), 5).tolist(),
                np.round(p.grad.numpy(), 5).tolist())
    _same(f)


def _conv_same(lib, kind):
    if kind == "conv1d":
        m = lib.nn.Conv1d(2, 2, 4, padding="same")
        x = lib.ones(1, 2, 6)
    elif kind == "conv2d":
        m = lib.nn.Conv2d(2, 2, (3, 2), padding="same")
        x = lib.ones(1, 2, 5, 5)
    elif kind == "conv3d":
        m = lib.nn.Conv3d(1, 1, (2, 1, 1), padding="same")
        x = lib.ones(1, 1, 3, 3, 3)
    elif kind == "odd":
        m = lib.nn.Conv2d(2, 2, 3, padding="same")
        x = lib.ones(1, 2, 5, 5)
    elif kind == "even dilation":
        m = lib.nn.Conv1d(2, 2, 4, padding="same", dilation=2)
        x = lib.ones(1, 2, 9)
    else:                           # a padding_mode: the module pads, the conv does not
        m = lib.nn.Conv1d(2, 2, 4, padding="same", padding_mode="reflect")
        x = lib.ones(1, 2, 6)
    return tuple(m(x).shape)


@pytest.mark.parametrize("kind", ["conv1d", "conv2d", "conv3d", "odd", "even dilation",
                                  "reflect"])
def test_padding_same_even_kernel_warns(kind):
    torch.set_warn_always(True)         # (PyTorch's warning is once per process)
    functions_settings.set_warn_always(True)
    try:
        (_, warns) = _same(lambda lib: _conv_same(lib, kind))
    finally:
        torch.set_warn_always(False)
        functions_settings.set_warn_always(False)
    assert len(warns) == (kind in ("conv1d", "conv2d", "conv3d"))


def test_padding_same_even_kernel_warns_once():
    functions_settings._Settings.warned_once.discard("conv_same_odd")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(2):
            _conv_same(llgrad, "conv1d")
            _conv_same(llgrad, "conv3d")
    assert len(w) == 1 and "even kernel lengths and odd dilation" in str(w[0].message)


@pytest.mark.parametrize("name", ["uniform_", "normal_", "trunc_normal_", "kaiming_uniform_",
                                  "kaiming_normal_", "xavier_uniform_", "xavier_normal_"])
@pytest.mark.parametrize("dt", ["int64", "bool"])
def test_init_refuses_integer_tensors(name, dt):
    _same(lambda lib: getattr(lib.nn.init, name)(lib.zeros(3, 3, dtype=getattr(lib, dt)))
          and None)


@pytest.mark.parametrize("a, b", [((4, 3), (3, 4)), ((4, 3, 2), (3, 4, 2)), ((2, 3), (4,)),
                                  ((5, 1, 3), (2, 4)), ((3,), (2, 3)), ((0,), (2,))])
def test_broadcast_error_names_the_rightmost_mismatch(a, b):
    _same(lambda lib: tuple((lib.ones(*a) + lib.ones(*b)).shape))
    _same(lambda lib: tuple(lib.broadcast_shapes(a, b)))


def test_broadcast_error_of_three_shapes():
    _same(lambda lib: tuple(lib.broadcast_shapes((3,), (4,), (2, 1, 1))))
    _same(lambda lib: tuple(lib.broadcast_shapes((2, 1), (1, 3), (4, 2, 5))))
    _same(lambda lib: tuple(lib.broadcast_shapes((2, 1), (1, 3), (4, 1, 1))))


def test_parametrization_of_a_non_square_matrix_error():
    def f(lib):
        class Sym(lib.nn.Module):
            def forward(self, X):
                return X.triu() + X.triu(1).transpose(-1, -2)
        lib.nn.utils.parametrize.register_parametrization(lib.nn.Linear(3, 4), "weight", Sym())
    _same(f)


_RNG = np.random.RandomState(0)
_W = {"square": _RNG.randn(4, 4), "tall": _RNG.randn(5, 3), "wide": _RNG.randn(3, 5)}


def _orthogonal(lib, shape, **kw):
    w = _W[shape]
    m = lib.nn.Linear(w.shape[1], w.shape[0], dtype=lib.float64)
    with lib.no_grad():
        m.weight.copy_(lib.tensor(w))
        m.bias.fill_(0.5)
    lib.nn.utils.parametrizations.orthogonal(m, **kw)
    x = lib.tensor(np.arange(w.shape[1] * 2, dtype=np.float64).reshape(2, -1))
    (m(x) ** 2 * lib.arange(w.shape[0], dtype=lib.float64)).sum().backward()
    g = m.parametrizations.weight.original.grad
    sd = m.state_dict()
    return (m.weight.detach().numpy(), g.numpy(), list(sd),
            [sd[k].numpy() for k in sd], type(m.weight.grad_fn).__name__,
            repr(m).replace("torch", "llgrad"), type(m).__name__)


@pytest.mark.parametrize("shape, kw", [
    ("square", {}), ("square", dict(orthogonal_map="cayley")),
    ("square", dict(orthogonal_map="householder")),
    ("square", dict(orthogonal_map="householder", use_trivialization=False)),
    ("square", dict(orthogonal_map="matrix_exp", use_trivialization=False)),
    ("square", dict(orthogonal_map="cayley", use_trivialization=False)),
    ("tall", dict(orthogonal_map="householder", use_trivialization=False)),
    ("wide", dict(orthogonal_map="householder", use_trivialization=False))])
def test_orthogonal_parametrization(shape, kw):
    got, want = _orthogonal(llgrad, shape, **kw), _orthogonal(torch, shape, **kw)
    for a, b in zip(got[:2], want[:2]):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)
    assert got[2] == want[2]
    for a, b in zip(got[3], want[3]):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)
    assert got[4:] == want[4:]


@pytest.mark.parametrize("shape", ["tall", "wide"])
@pytest.mark.parametrize("kw", [{}, dict(orthogonal_map="cayley")])
def test_orthogonal_of_a_rectangular_matrix_with_its_random_base(shape, kw):
    got = _orthogonal(llgrad, shape, **kw)
    want = _orthogonal(torch, shape, **kw)
    assert got[2] == want[2] and got[4:] == want[4:]
    q = got[0] if shape == "tall" else got[0].T
    np.testing.assert_allclose(q.T @ q, np.eye(3), atol=1e-12)


def test_orthogonal_batched_and_assigned():
    wb = np.random.RandomState(1).randn(2, 3, 3)

    def f(lib, **kw):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = lib.nn.Parameter(lib.tensor(wb))
        m = M()
        lib.nn.utils.parametrizations.orthogonal(m, "w", **kw)
        before = m.w.detach().numpy().copy()
        m.w = lib.linalg.qr(lib.tensor(wb[::-1].copy()))[0]
        return before, m.w.detach().numpy()

    for kw in ({}, dict(orthogonal_map="householder", use_trivialization=False)):
        for a, b in zip(f(llgrad, **kw), f(torch, **kw)):
            np.testing.assert_allclose(a, b, atol=1e-10)


def test_orthogonal_errors():
    _same(lambda lib: lib.nn.utils.parametrizations.orthogonal(lib.nn.BatchNorm1d(3)))
    _same(lambda lib: lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(3, 3), "foo"))
    _same(lambda lib: lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(3, 3),
                                                               orthogonal_map="bad"))

    def assign(lib):
        m = lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(3, 3),
                                                     use_trivialization=False)
        m.weight = lib.eye(3)
    _same(assign)

    def wrong_shape(lib):
        m = lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(3, 3))
        m.weight = lib.eye(4)
    _same(wrong_shape)


def test_orthogonal_compiled_training_step_matches_eager():
    def make():
        llgrad.manual_seed(0)
        m = llgrad.nn.Linear(4, 3)
        llgrad.nn.utils.parametrizations.orthogonal(m)
        return m, llgrad.optim.SGD(m.parameters(), lr=0.1)

    def step(m, opt, x):
        opt.zero_grad()
        loss = (m(x) ** 2).sum()
        loss.backward()
        opt.step()
        return loss

    x = llgrad.randn(5, 4)
    m, opt = make()
    eager = [step(m, opt, x).item() for _ in range(3)]
    m, opt = make()
    cstep = llgrad.compile(step, backend="interpret")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled = [cstep(m, opt, x).item() for _ in range(3)]
    assert compiled == eager


@pytest.mark.parametrize("shapes", [((), (2, 3)), ((), (2,)), ((3,), ()), ((2, 3), (2, 3))])
def test_linear_of_a_0d_operand(shapes):
    a, b = shapes
    _same(lambda lib: tuple(lib.nn.functional.linear(lib.ones(a), lib.ones(b)).shape))
    _same(lambda lib: tuple(lib.nn.functional.linear(lib.ones(a), lib.ones(b),
                                                     lib.ones(b[:1])).shape))


@pytest.mark.parametrize("kw", [
    dict(running_mean=3, running_var=3), dict(running_mean=3, running_var=3, training=True),
    dict(running_mean=2, running_var=3, weight=3, bias=3), dict(running_mean=2, running_var=2,
                                                                weight=3, bias=3),
    dict(weight=2, bias=3, training=True), dict(weight=3, training=True)])
def test_batch_norm_parameter_sizes(kw):
    def f(lib):
        args = {k: (lib.ones(v) if isinstance(v, int) and k != "training" else v)
                for k, v in kw.items()}
        args.setdefault("running_mean", None)
        args.setdefault("running_var", None)
        return tuple(lib.nn.functional.batch_norm(lib.ones(4, 2), **args).shape)
    _same(f)
    _same(lambda lib: lib.nn.BatchNorm1d(3)(lib.ones(4, 2)))


@pytest.mark.parametrize("size", [(20, 20), [20, 20], (1, 2, 20, 20), [9, 10]])
def test_conv_transpose_output_size_message(size):
    def f(lib):
        lib.manual_seed(0)
        m = lib.nn.ConvTranspose2d(2, 2, 3, stride=2)
        return tuple(m(lib.ones(1, 2, 4, 4), output_size=size).shape)
    _same(f)


@pytest.mark.parametrize("dims", [(), (0,), (1,), (-1,), (0, -1), (1, -1), (-2, -1)])
def test_flatten_of_a_0d_tensor(dims):
    _same(lambda lib: tuple(lib.ones(()).flatten(*dims).shape))
    _same(lambda lib: tuple(lib.nn.Flatten(*dims)(lib.ones(())).shape) if dims else
          tuple(lib.nn.Flatten()(lib.ones(())).shape))


def test_gru_cell_grad_fn():
    def f(lib):
        lib.manual_seed(0)
        x = lib.ones(2, 3)
        cells = (lib.nn.GRUCell(3, 4), lib.nn.GRUCell(3, 4, bias=False))
        return [(type(c(x).grad_fn).__name__, type(c(x[0]).grad_fn).__name__) for c in cells]
    _same(f)


def test_lazy_module_state_dict_holds_uninitialized_entries():
    _same(lambda lib: [type(v).__name__ for v in lib.nn.LazyLinear(4).state_dict().values()])
    _same(lambda lib: lib.nn.Linear(3, 4).load_state_dict(lib.nn.LazyLinear(4).state_dict()))
    _same(lambda lib: lib.nn.LazyLinear(4).load_state_dict(lib.nn.LazyLinear(4).state_dict())
          and None)

    def copied(lib):
        m = copy.deepcopy(lib.nn.LazyLinear(4, dtype=lib.float64))
        first = (type(m.weight).__name__, str(m.weight.dtype).replace("torch", "llgrad"),
                 m.weight.requires_grad)
        return first, tuple(m(lib.ones(2, 3, dtype=lib.float64)).shape)
    _same(copied)
