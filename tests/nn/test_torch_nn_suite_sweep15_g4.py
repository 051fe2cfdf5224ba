"""Sweep 15 (g4): Embedding / EmbeddingBag (max_norm's in-place renorm, padding_idx,
offsets, modes, per_sample_weights), dropout variants and nn.init (fans, gains, errors),
checked side by side with torch (tests/nn/oracle_sweep15_g.py) after the topics of
PyTorch's test/nn/test_embedding.py, test_dropout.py and test_init.py."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
import oracle_sweep15_g as o  # noqa: E402
from oracle_sweep15_g import check  # noqa: E402


def _w(lib, *shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return lib.tensor(a)


def test_embedding_max_norm_renormalises_weight_rows_in_place():
    def s(lib):
        e = lib.nn.Embedding(5, 3, max_norm=1.0, norm_type=1.5)
        with lib.no_grad():
            e.weight.copy_(_w(lib, 5, 3) * 3)
        idx = lib.tensor([[0, 2], [2, 4]])
        y = e(idx)
        y.pow(2).sum().backward()
        return y, e.weight, e.weight.grad, e.weight._version > 0
    check(s, atol=1e-5)


def test_functional_embedding_max_norm_and_padding_idx():
    def s(lib):
        w = (_w(lib, 4, 2) * 4).requires_grad_()
        F = lib.nn.functional
        with lib.no_grad():
            wc = w.clone()
        y = F.embedding(lib.tensor([1, 3, 3, 0]), w, padding_idx=-1, max_norm=2.0)
        y.sum().backward()
        return y, w, w.grad, wc
    check(s, atol=1e-5)


def test_embedding_padding_idx_row_gets_no_gradient_and_scale_grad_by_freq():
    def s(lib):
        e = lib.nn.Embedding(6, 2, padding_idx=2, scale_grad_by_freq=True)
        y = e(lib.tensor([[2, 1, 1], [5, 2, 1]]))
        (y * _w(lib, 2, 3, 2)).sum().backward()
        return e.weight[2], e.weight.grad
    check(s)


def test_embedding_from_pretrained_and_errors():
    def s(lib):
        out = []
        w = _w(lib, 3, 2)
        e = lib.nn.Embedding.from_pretrained(w, padding_idx=1)
        out += [e.weight.requires_grad, e.padding_idx, e(lib.tensor([1, 0]))]
        e2 = lib.nn.Embedding.from_pretrained(w, freeze=False, max_norm=0.5)
        out += [e2.weight.requires_grad, e2(lib.tensor([2])), w]
        for f in (lambda: lib.nn.Embedding(3, 2, padding_idx=3),
                  lambda: lib.nn.Embedding(3, 2, padding_idx=-4),
                  lambda: lib.nn.Embedding.from_pretrained(lib.ones(3)),
                  lambda: e(lib.tensor([3])),
                  lambda: e(lib.tensor([0.0]))):
            try:
                f()
                out.append("ok")
            except Exception as ex:      # noqa: BLE001
                out.append(type(ex).__name__)
        return out
    check(s)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_offsets_modes_and_padding_idx(mode):
    def s(lib):
        bag = lib.nn.EmbeddingBag(6, 3, mode=mode, padding_idx=0)
        idx = lib.tensor([1, 0, 4, 4, 2, 0, 5])
        out = []
        for offsets, last in ((lib.tensor([0, 2, 2, 5]), False),
                              (lib.tensor([0, 3, 7]), True)):
            out.append(lib.nn.functional.embedding_bag(idx, bag.weight, offsets, mode=mode,
                                                       include_last_offset=last, padding_idx=0))
        y2 = bag(lib.tensor([[1, 2, 0], [0, 0, 0]]))
        (out[0].sum() + (y2 * 2).sum()).backward()
        return out + [y2, bag.weight.grad]
    check(s)


def test_embedding_bag_per_sample_weights_and_errors():
    def s(lib):
        bag = lib.nn.EmbeddingBag(5, 2, mode="sum")
        psw = lib.tensor([0.5, 2.0, -1.0, 3.0], requires_grad=True)
        y = bag(lib.tensor([0, 3, 3, 1]), lib.tensor([0, 1]), per_sample_weights=psw)
        (y * _w(lib, 2, 2)).sum().backward()
        out = [y, psw.grad, bag.weight.grad]
        for f in (lambda: lib.nn.EmbeddingBag(5, 2, mode="mean")(
                      lib.tensor([0, 1]), lib.tensor([0]), per_sample_weights=lib.ones(2)),
                  lambda: bag(lib.tensor([0, 1]), lib.tensor([0]), per_sample_weights=lib.ones(3)),
                  lambda: bag(lib.tensor([[0, 1]]), lib.tensor([0])),
                  lambda: bag(lib.tensor([0, 1]), lib.tensor([1, 0])),
                  lambda: bag(lib.tensor([0, 1]), lib.tensor([0, 3])),
                  lambda: bag(lib.tensor([0, 1])),
                  lambda: lib.nn.EmbeddingBag(5, 2, mode="median")(lib.tensor([0]),
                                                                  lib.tensor([0]))):
            try:
                out.append(f())
            except Exception as ex:      # noqa: BLE001
                out.append(type(ex).__name__)
        return out
    check(s)


def test_embedding_bag_max_norm_and_from_pretrained():
    def s(lib):
        w = _w(lib, 4, 3) * 3
        bag = lib.nn.EmbeddingBag.from_pretrained(w, mode="mean", max_norm=1.0, freeze=False)
        y = bag(lib.tensor([0, 1, 1, 3]), lib.tensor([0, 2]))
        return y, bag.weight, w, bag.weight.requires_grad
    check(s, atol=1e-5)


# ---- dropout ----

@pytest.mark.parametrize("cls,shape", [("AlphaDropout", (3, 5)), ("FeatureAlphaDropout", (2, 4, 3)),
                                       ("Dropout1d", (2, 4, 5)), ("Dropout1d", (4, 5)),
                                       ("Dropout2d", (2, 3, 4, 4)), ("Dropout2d", (3, 4, 4)),
                                       ("Dropout3d", (2, 3, 2, 2, 2)), ("Dropout3d", (3, 2, 2, 2)),
                                       ("Dropout", (4, 6))])
def test_dropout_variants_masks_scaling_and_gradient(cls, shape):
    def s(lib):
        d = getattr(lib.nn, cls)(p=0.4)
        x = _w(lib, *shape).requires_grad_()
        lib.manual_seed(3)
        y = d(x)
        (y * 2).sum().backward()
        d.eval()
        return y, x.grad, d(x), d.extra_repr()
    check(s)


def test_dropout_probability_edges_and_errors():
    def s(lib):
        x = _w(lib, 2, 3, 4)
        F = lib.nn.functional
        out = [F.dropout(x, 0.0), F.dropout(x, 1.0), F.alpha_dropout(x, 1.0, True),
               F.feature_alpha_dropout(x, 0.0, True), F.dropout2d(x, 1.0),
               F.dropout(x, 0.5, training=False)]
        for f in (lambda: lib.nn.Dropout(1.5), lambda: F.dropout(x, -0.1),
                  lambda: F.alpha_dropout(x, 2.0), lambda: F.dropout1d(lib.ones(2, 3, 4, 5), 0.5),
                  lambda: F.dropout3d(lib.ones(2, 3), 0.5)):
            try:
                out.append(f())
            except Exception as ex:      # noqa: BLE001
                out.append(type(ex).__name__)
        return out
    check(s)


def test_dropout_in_place_and_on_views():
    def s(lib):
        x = _w(lib, 4, 4)
        y = x.clone()
        r = lib.nn.functional.dropout(y[:, 1:3], 0.5, inplace=True)
        z = x.clone()
        lib.nn.Dropout2d(0.5, inplace=True)(z[None])
        return r, y, z
    check(s)


@pytest.mark.slow
def test_dropout_training_step_eager_and_compiled():
    def run(lib, compiled):
        lib.manual_seed(0)
        net = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.AlphaDropout(0.3),
                                lib.nn.Linear(8, 2), lib.nn.Dropout(0.2))
        opt = lib.optim.SGD(net.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = net(x).pow(2).mean()
            loss.backward()
            opt.step()
            return loss
        f = llgrad.compile(step) if compiled else step
        x = lib.arange(12.0).reshape(3, 4) / 12
        return [f(x) for _ in range(3)] + list(net.parameters())
    want = o._norm(run(torch, False))
    eager = o._norm(run(llgrad, False))
    comp = o._norm(run(llgrad, True))
    o._same(eager, want, 1e-5, 1e-6, ())
    o._same(comp, eager, 1e-5, 1e-6, ())


# ---- init ----

def test_fan_in_and_fan_out_for_linear_conv_and_errors():
    def s(lib):
        f = lib.nn.init._calculate_fan_in_and_fan_out
        out = [f(lib.empty(s)) for s in ((3, 4), (5, 2, 3, 3), (2, 4, 7), (6, 1, 0, 2))]
        for shape in ((3,), ()):
            try:
                f(lib.empty(shape))
            except Exception as ex:      # noqa: BLE001
                out.append((type(ex).__name__, str(ex)))
        return out
    check(s)


def test_calculate_gain_values_and_errors():
    def s(lib):
        g = lib.nn.init.calculate_gain
        out = [g(n) for n in ("linear", "conv2d", "sigmoid", "tanh", "relu", "selu",
                              "conv_transpose3d")]
        out += [g("leaky_relu"), g("leaky_relu", 0.2), g("leaky_relu", 1)]
        for args in (("leaky_relu", "x"), ("leaky_relu", True), ("swish",)):
            try:
                out.append(g(*args))
            except Exception as ex:      # noqa: BLE001
                out.append((type(ex).__name__, str(ex)))
        return out
    check(s)


@pytest.mark.parametrize("fn,kw", [
    ("kaiming_uniform_", dict(a=0.1, mode="fan_out", nonlinearity="leaky_relu")),
    ("kaiming_normal_", dict(mode="fan_in", nonlinearity="relu")),
    ("xavier_uniform_", dict(gain=2.0)), ("xavier_normal_", dict(gain=0.5)),
    ("trunc_normal_", dict(mean=1.0, std=2.0, a=-1.0, b=3.0)), ("orthogonal_", dict(gain=1.5)),
    ("sparse_", dict(sparsity=0.5, std=0.1)), ("uniform_", dict(a=-2, b=5)),
    ("normal_", dict(mean=3, std=0.5)), ("eye_", {}), ("dirac_", {}), ("zeros_", {}),
    ("constant_", dict(val=2.5)),
])
def test_init_functions_seeded_values(fn, kw):
    def s(lib):
        shape = {"sparse_": (6, 4), "eye_": (3, 5), "dirac_": (4, 2, 3, 3)}.get(fn, (4, 3, 2))
        t = lib.empty(shape)
        r = getattr(lib.nn.init, fn)(t, **kw)
        return r is t, t, lib.rand(2)
    check(s, atol=1e-5)


def test_init_errors_and_generator_argument():
    def s(lib):
        init = lib.nn.init
        out = []
        for f in (lambda: init.kaiming_uniform_(lib.empty(3, 4), mode="fan_avg"),
                  lambda: init.orthogonal_(lib.empty(3)),
                  lambda: init.sparse_(lib.empty(2, 3, 4), 0.5),
                  lambda: init.eye_(lib.empty(2, 2, 2)),
                  lambda: init.dirac_(lib.empty(2, 2)),
                  lambda: init.dirac_(lib.empty(3, 2, 3), groups=2),
                  lambda: init.xavier_uniform_(lib.empty(5))):
            try:
                out.append(f())
            except Exception as ex:      # noqa: BLE001
                out.append(type(ex).__name__)
        g = lib.Generator().manual_seed(7)
        out += [init.uniform_(lib.empty(3), generator=g), init.normal_(lib.empty(2), generator=g),
                init.kaiming_normal_(lib.empty(2, 2), generator=g)]
        out.append(init.dirac_(lib.empty(4, 2, 3), groups=2))
        return out
    check(s, atol=1e-5)


def test_init_of_zero_element_tensor_warns_and_returns_it():
    def s(lib):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            t = lib.nn.init.kaiming_uniform_(lib.empty(0, 3))
            t2 = lib.nn.init.xavier_normal_(lib.empty(3, 0))
        return t.shape, t2.shape, [str(x.message) for x in w]
    check(s)


def test_dropouts_of_integer_and_bool_inputs():
    def s(lib):
        F = lib.nn.functional
        out = []
        for dt in (lib.int64, lib.bool, lib.uint8):
            for p in (0.5, 0.0, 1.0):
                for f in (F.dropout, F.alpha_dropout, F.feature_alpha_dropout, F.dropout1d,
                          F.dropout2d, F.dropout3d):
                    try:
                        out.append(f(lib.ones(2, 2, 2, dtype=dt), p, True))
                    except RuntimeError as e:
                        out.append(str(e))
        return out
    check(s)


def test_dropout_with_p_one_in_place_zeroes_the_input():
    def s(lib):
        out = []
        for f in (lib.nn.functional.dropout, lib.nn.functional.alpha_dropout,
                  lib.nn.functional.dropout2d):
            x = lib.ones(2, 3, 2)
            r = f(x, 1.0, True, inplace=True)
            out += [x, r is x]
        x = lib.ones(4)
        lib.nn.Dropout(1.0, inplace=True)(x)
        return out + [x]
    check(s)


def test_max_pool1d_of_integers_needs_return_indices():
    def s(lib):
        F = lib.nn.functional
        out = []
        for dt in (lib.int32, lib.int64, lib.uint8, lib.bool):
            x = lib.arange(8).reshape(1, 2, 4).to(dt)
            for f in (lambda: F.max_pool1d(x, 2), lambda: F.max_pool1d(x, 2, return_indices=True),
                      lambda: lib.nn.MaxPool1d(3, 1, 1)(x), lambda: F.max_pool2d(x, (1, 2))):
                try:
                    out.append(f())
                except NotImplementedError as e:
                    out.append(str(e))
        return out
    check(s)
