"""Printed text of modules, optimizers, lr schedulers' state and of values printed inside an
llgrad.compile'd function, against PyTorch's (s75, L; test_printing_s75_l.py has tensors).
The texts must be equal with "torch." spelled "llgrad."."""
import contextlib
import io
import math
import warnings
from collections import OrderedDict

import pytest

import llgrad


def _torch():
    return pytest.importorskip("torch")


def _same(make):
    want = make(_torch()).replace("torch.", "llgrad.")
    assert make(llgrad) == want


def _modules(*makers):
    return lambda T: "\n".join(repr(m(T.nn)) for m in makers)


class _Net:
    """A nested module, built for either library."""

    @staticmethod
    def build(T):
        nn = T.nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16),
                                              nn.ReLU(inplace=True), nn.MaxPool2d(2))
                self.head = nn.ModuleList([nn.Linear(16, 10), nn.Identity()])
                self.d = nn.ModuleDict({"a": nn.Tanh(), "b": nn.GELU()})
                self.flat = nn.Flatten()

            def extra_repr(self):
                return "classes=10"
        return Net()


MODULES = {
    "sequential": _modules(lambda nn: nn.Sequential(
        nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.25), nn.Linear(8, 2, bias=False),
        nn.Softmax(dim=1))),
    "sequential_named_repeated_empty": _modules(
        lambda nn: nn.Sequential(OrderedDict([("fc1", nn.Linear(2, 2)), ("act", nn.ReLU())])),
        lambda nn: nn.Sequential(*[nn.Linear(4, 4) for _ in range(5)], nn.ReLU()),
        lambda nn: nn.Sequential(), lambda nn: nn.ModuleList(), lambda nn: nn.Module()),
    "nested_with_extra_repr": lambda T: repr(_Net.build(T)),
    "conv_options": _modules(
        lambda nn: nn.Conv2d(3, 8, kernel_size=(3, 5), stride=2, padding=(1, 2), dilation=2,
                             bias=False, padding_mode="reflect"),
        lambda nn: nn.Conv1d(4, 4, 3, groups=2), lambda nn: nn.Conv2d(1, 1, 3, padding="same"),
        lambda nn: nn.ConvTranspose2d(4, 2, 3, stride=2, output_padding=1),
        lambda nn: nn.Conv3d(1, 2, 3)),
    "norm_options": _modules(
        lambda nn: nn.BatchNorm1d(10),
        lambda nn: nn.BatchNorm2d(3, eps=1e-3, momentum=None, affine=False,
                                  track_running_stats=False),
        lambda nn: nn.LayerNorm([4, 5], elementwise_affine=False),
        lambda nn: nn.LayerNorm(8, eps=1e-6, bias=False), lambda nn: nn.GroupNorm(2, 4),
        lambda nn: nn.InstanceNorm2d(3)),
    "recurrent_options": _modules(
        lambda nn: nn.LSTM(10, 20),
        lambda nn: nn.LSTM(10, 20, num_layers=2, batch_first=True, dropout=0.1,
                           bidirectional=True),
        lambda nn: nn.GRU(3, 4, bias=False), lambda nn: nn.RNN(3, 4, nonlinearity="relu"),
        lambda nn: nn.LSTMCell(3, 4), lambda nn: nn.LSTM(4, 8, proj_size=2)),
    "transformer_layers": _modules(
        lambda nn: nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32,
                                              batch_first=True),
        lambda nn: nn.MultiheadAttention(8, 2, kdim=4, vdim=4)),
    "embedding_options": _modules(
        lambda nn: nn.Embedding(10, 3),
        lambda nn: nn.Embedding(10, 3, padding_idx=0, max_norm=1.0, sparse=True),
        lambda nn: nn.Embedding(5, 2, scale_grad_by_freq=True, norm_type=1.0, max_norm=2.),
        lambda nn: nn.EmbeddingBag(10, 3, mode="sum")),
    "activations_pools_losses": _modules(
        lambda nn: nn.LeakyReLU(0.2), lambda nn: nn.GELU(approximate="tanh"),
        lambda nn: nn.Threshold(0.1, 20), lambda nn: nn.Dropout2d(0.3, inplace=True),
        lambda nn: nn.Unflatten(1, (2, 2)), lambda nn: nn.MaxPool2d(3, 2, 1, ceil_mode=True),
        lambda nn: nn.AdaptiveAvgPool2d((1, 1)),
        lambda nn: nn.Upsample(size=(4, 4), mode="bilinear", align_corners=False),
        lambda nn: nn.ConstantPad1d((1, 2), 3.5),
        lambda nn: nn.CrossEntropyLoss(label_smoothing=0.1),
        lambda nn: nn.KLDivLoss(reduction="batchmean"), lambda nn: nn.Bilinear(2, 3, 4)),
    "parameter_containers": _modules(
        lambda nn: nn.ParameterList([nn.Parameter(nn.init.zeros_(nn.Linear(2, 3).weight))]),
        lambda nn: nn.ParameterDict({"w": nn.Parameter(nn.init.ones_(nn.Linear(1, 2).bias))})),
}


@pytest.mark.parametrize("name", list(MODULES))
def test_module_text(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _same(MODULES[name])


# ---- optimizers and lr schedulers ---------------------------------------------------------
def _linear(T):
    m = T.nn.Linear(2, 2)
    with T.no_grad():
        m.weight.copy_(T.tensor([[0.5, -1.], [2., 0.25]]))
        m.bias.fill_(0.125)
    return m


def _optimizers(T):
    m, o = _linear(T), T.optim
    return "\n".join(repr(x) for x in [
        o.SGD(m.parameters(), lr=0.01, momentum=0.9, nesterov=True, weight_decay=1e-4),
        o.Adam(m.parameters()), o.AdamW(m.parameters(), lr=3e-4, betas=(0.9, 0.98)),
        o.RMSprop(m.parameters()), o.Adagrad(m.parameters()), o.LBFGS(m.parameters()),
        o.Adam(m.parameters(), amsgrad=True, foreach=False),
        o.SGD([{"params": [m.weight]}, {"params": [m.bias], "lr": 1e-3}], lr=0.1)])


def _scheduled(T):
    m = _linear(T)
    opt = T.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    ls = T.optim.lr_scheduler
    out = []
    for make in (lambda: ls.StepLR(opt, step_size=1, gamma=0.5),
                 lambda: ls.CosineAnnealingLR(opt, T_max=10),
                 lambda: ls.MultiStepLR(opt, [2, 4], 0.1),
                 lambda: ls.OneCycleLR(opt, max_lr=1.0, total_steps=10)):
        sched = make()
        for _ in range(3):
            opt.zero_grad()
            m(T.ones(1, 2)).sum().backward()
            opt.step()
            sched.step()
        state = {k: v for k, v in sched.state_dict().items()
                 if k not in ("anneal_func", "_anneal_func_type")}
        out += [str(sched.get_last_lr()), str(state)]
    sd = opt.state_dict()
    return "\n".join(out + [repr(opt), str(sd["param_groups"]), str(sd["state"][0])])


def test_optimizer_text():
    _same(_optimizers)


def test_optimizer_and_scheduler_state_text():
    _same(_scheduled)


# ---- values printed inside a compiled function ---------------------------------------------
def _capture(fn, make_args, compiled, calls=3):
    f = llgrad.compile(fn) if compiled else fn
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings():
        warnings.simplefilter("ignore")         # (some of these run eagerly: the text counts)
        for i in range(calls):
            f(*make_args(i))
    return out.getvalue()


def _compiled_same(body, make_args):
    torch = _torch()
    want = _capture(lambda *a: body(torch, *a), lambda i: make_args(torch, i), False)
    want = want.replace("torch.", "llgrad.")
    assert _capture(lambda *a: body(llgrad, *a), lambda i: make_args(llgrad, i), False) == want
    assert _capture(lambda *a: body(llgrad, *a), lambda i: make_args(llgrad, i), True) == want


def _x(T, i):
    return (T.arange(6.).reshape(2, 3) * (i + 1) / 4,)     # (sums exact in float32)


def _b_basic(T, x):
    y = x * 2 + 1
    print(y, y.sum(), f"{y.mean():.4f}", f"{y.sum().item():>10.3f}", "{}".format(y.max()))
    print(x.shape, x.dtype, x.device, x.size(0), tuple(x.shape), x.shape[1:], type(x))
    return y


def _b_dtypes(T, x):
    print(x.long() * 3, x > 0.5, x.to(T.int8), x.double().exp(), x.half(),
          T.complex(x, -x), x[:, :0], x.new_zeros(2, 0, 3), x[0, 0])
    return x


def _b_sci_nonfinite(T, x):
    print(x * 1e-6 + 1e3, (x + 1) * 1e10, x / 0, -(x * 0), x.reshape(-1).repeat(200))
    return x


def _b_format(T, x):
    loss = (x ** 2).mean()
    print(f"loss={loss:.4f} acc={(x > 0.5).float().mean().item():.2%} {x.sum():e}")
    print("%.3f" % loss.item(), "%s" % loss, format(loss, ".2f"), str(x * 2).upper())
    print([x[0], x[1].sum()], (x.max(),), {"k": x.min()}, x.tolist())
    return loss


def _b_options(T, x):
    T.set_printoptions(precision=2, linewidth=30, sci_mode=True)
    print(x / 3)
    T.set_printoptions(profile="default", sci_mode=None)
    print(x / 3)
    T.set_printoptions(edgeitems=0, threshold=3)
    print(x, x[0, :2])
    T.set_printoptions(profile="default")
    return x


def _req(T, i):
    return (T.tensor([1., 2.], requires_grad=True) * (i + 1),)


def _b_grad(T, x):
    y = x.view(-1)[1:]
    print(x, (x * 3).sum(), y, x.unsqueeze(0)[0], x.detach(), T.nn.Parameter(x.detach() * 2))
    return y.sum()


@pytest.mark.parametrize("body, make_args", [
    (_b_basic, _x), (_b_dtypes, _x), (_b_sci_nonfinite, _x), (_b_format, _x),
    (_b_options, _x), (_b_grad, _req)], ids=["basic", "dtypes", "sci_nonfinite", "format",
                                             "options", "grad"])
def test_printed_inside_compiled_function(body, make_args):
    _compiled_same(body, make_args)


# ---- findings left open -------------------------------------------------------------------
@pytest.mark.xfail(strict=True, reason="nn.Module classes live in llgrad.nn.layers*, not in "
                   "torch's llgrad.nn.modules.<file> (the alias modules re-export them); "
                   "tests/runtime/test_torch_utilities.py asserts the present typename and "
                   "pickled whole models name the class path")
def test_module_class_paths():
    _same(lambda T: "\n".join(str(type(m)) for m in [
        T.nn.Linear(1, 1), T.nn.Sequential(), T.nn.Conv2d(1, 1, 1), T.nn.LSTM(1, 1)]))


@pytest.mark.xfail(strict=True, reason="float32 sum: llgrad sums as NumPy (pairwise), torch's "
                   "vectorised reduction rounds differently at some lengths (6, 7, 16, 17), so "
                   "print(x.sum().item()) differs in the last digits")
def test_float32_sum_item_text():
    _same(lambda T: "\n".join(str((T.arange(float(n)) * 2 / 7).sum().item())
                              for n in (6, 7, 16, 17)))


@pytest.mark.xfail(strict=True, reason="float32 sum (as above): torch's sum of arange(7.) * 2 / 7 "
                   "is 6.0000005 and prints tensor(6.0000); llgrad's is 6.0: tensor(6.)")
def test_float32_sum_repr_integer_valued():
    _same(lambda T: repr((T.arange(7.) * 2 / 7).sum()))


def test_float32_sum_text_at_print_precision():
    # (where the last bits differ but neither sum is integer-valued the 4 digits agree)
    _same(lambda T: "\n".join(repr((T.arange(float(n)) * 2 / 7).sum()) for n in (6, 16, 17)))


def test_math_text_constants():
    _same(lambda T: repr(T.tensor([math.pi, math.e, -math.inf, math.tau])))
