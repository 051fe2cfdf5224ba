"""Reductions, scans, indexing, shape ops, matrix products, losses and activations compiled
on every dtype and layout against eager and torch (sweep23_harness.py), the zero-divisor
errors of integer division (PyTorch raises ZeroDivisionError for //, % and fmod by an
integer 0, not for true division), and float -> integer casts of values out of range.

Default run: one layout per case, by turns; slow: every layout, with and without special
values."""
import numpy as np
import pytest

import llgrad
import sweep23_harness as H

torch = pytest.importorskip("torch")


def _d(f, ndim=1):
    """f on operands with at least ndim dims (3 x 4 ones for ndim 3); others pass through."""
    return lambda m, x: f(m, x) if x.dim() >= ndim and (ndim < 3 or x.shape == (3, 4)) \
        else x + 0


IDX = [[0, 3], [1, 1], [2, 0]]
CASES = {
    "sum_dim": _d(lambda m, x: x.sum(-1)), "sum_keepdim": _d(lambda m, x: x.sum(0, True)),
    "sum_all": lambda m, x: x.sum(), "prod_dim": _d(lambda m, x: x.prod(-1)),
    "mean_float": lambda m, x: x.to(m.int8).float().mean(),   # (exact sums: any order) "amax": _d(lambda m, x: m.amax(x, -1)),
    "amin": _d(lambda m, x: m.amin(x, 0)), "max_dim": _d(lambda m, x: x.max(-1)[0]),
    "max_index": _d(lambda m, x: x.max(-1)[1]), "min_index": _d(lambda m, x: x.min(0)[1]),
    "argmin": _d(lambda m, x: x.argmin(-1)), "any": _d(lambda m, x: x.any(-1)),
    "all": _d(lambda m, x: x.all(0)), "cumsum": _d(lambda m, x: x.cumsum(-1)),
    "cumprod": _d(lambda m, x: x.cumprod(-1)),
    "sum_int32": _d(lambda m, x: x.sum(-1, dtype=m.int32)),
    "gather": _d(lambda m, x: m.gather(x, -1, m.tensor(IDX)), 3),
    "index_select": _d(lambda m, x: x.index_select(-1, m.tensor([3, 0, 0]) % x.shape[-1])
                       if x.shape[-1] else x + 0),
    "index": _d(lambda m, x: x[m.tensor([2, 0]) % x.shape[0]] if x.shape[0] else x + 0),
    "scatter": _d(lambda m, x: m.zeros(3, 5, dtype=x.dtype).scatter(
        1, m.tensor([[0, 4], [1, 1], [3, 0]]), x[:, :2]), 3),
    "scatter_add": _d(lambda m, x: m.zeros(3, 5, dtype=x.dtype).scatter_add(
        1, m.tensor([[0, 4], [1, 1], [3, 0]]), x[:, :2]), 3),
    "index_add": _d(lambda m, x: m.zeros(5, 4, dtype=x.dtype).index_add(
        0, m.tensor([4, 0, 4]), x), 3),
    "index_put_acc": _d(lambda m, x: x.index_put((m.tensor([0, 2]),), x[1], accumulate=True),
                        3),
    "cat": _d(lambda m, x: m.cat([x, x], -1)), "stack": lambda m, x: m.stack([x, x]),
    "flip": _d(lambda m, x: x.flip(-1)), "roll": _d(lambda m, x: x.roll(1, -1)),
    "repeat": _d(lambda m, x: x.repeat(2, 1), 2),
    "triu": _d(lambda m, x: x.triu(1), 2), "diagonal": _d(lambda m, x: x.diagonal() + 0, 2),
    "unfold": _d(lambda m, x: x.unfold(-1, 2, 1) + 0, 3), "reshape": lambda m, x: x.reshape(-1) * 1,
    "permute": _d(lambda m, x: x.permute(1, 0).contiguous(), 2),
    "sort": _d(lambda m, x: x.sort(-1, descending=True)[0]),
    "sort_stable_index": _d(lambda m, x: x.sort(dim=-1, stable=True)[1]),
    "topk": _d(lambda m, x: x.topk(2, -1)[0], 3),
    "where": lambda m, x: m.where(x > 1, x, x * 2),
    "mm": _d(lambda m, x: x @ x.t(), 3), "mv": _d(lambda m, x: x @ x[0], 3),
    "bmm": _d(lambda m, x: m.bmm(x.unsqueeze(0), x.t().unsqueeze(0)), 3),
    "dot": _d(lambda m, x: m.dot(x[0], x[1]), 3),
    "eq_flipped": _d(lambda m, x: x == x.flip(-1)),
    "pairwise_eq_count": _d(lambda m, x: (x.unsqueeze(-1) == x.unsqueeze(-2)).sum(-1)),
    "std": _d(lambda m, x: x.std(-1), 3), "var": _d(lambda m, x: x.var(0), 3),
    "logsumexp": _d(lambda m, x: m.logsumexp(x, -1)), "softmax": _d(lambda m, x: x.softmax(-1)),
    "log_softmax": _d(lambda m, x: x.log_softmax(-1)),
    "vector_norm": _d(lambda m, x: m.linalg.vector_norm(x, dim=-1)),
    "addcdiv": lambda m, x: m.addcdiv(x, x, x.abs() + 1),
    "nll_loss": _d(lambda m, x: m.nn.functional.nll_loss(x, m.tensor([1, 0, 3])), 3),
    "mse_loss": lambda m, x: m.nn.functional.mse_loss(x, x * 0.5),
    "smooth_l1_loss": lambda m, x: m.nn.functional.smooth_l1_loss(x, x * 0.5),
    "huber_loss": lambda m, x: m.nn.functional.huber_loss(x, x * 0.5),
    "bce_logits": lambda m, x: m.nn.functional.binary_cross_entropy_with_logits(x, x.sigmoid()),
    "gelu": lambda m, x: m.nn.functional.gelu(x), "silu": lambda m, x: m.nn.functional.silu(x),
    "elu": lambda m, x: m.nn.functional.elu(x),
    "softplus": lambda m, x: m.nn.functional.softplus(x),
    "mish": lambda m, x: m.nn.functional.mish(x),
    "hardswish": lambda m, x: m.nn.functional.hardswish(x),
    "hardtanh": lambda m, x: m.nn.functional.hardtanh(x, 0, 2),
    "threshold": lambda m, x: m.nn.functional.threshold(x, 1, 2),
    "pad": _d(lambda m, x: m.nn.functional.pad(x, (1, 2)), 2),
    "logsigmoid": lambda m, x: m.nn.functional.logsigmoid(x),
    "glu": _d(lambda m, x: m.nn.functional.glu(x, -1), 3),
    "layer_norm": _d(lambda m, x: m.nn.functional.layer_norm(x, x.shape[-1:])),
    "lgamma": lambda m, x: m.lgamma(x), "digamma": lambda m, x: m.digamma(x),
    "erfinv": lambda m, x: m.erfinv(x.clamp(-0.9, 0.9)), "cos": lambda m, x: m.cos(x),
    "round_decimals": lambda m, x: m.round(x, decimals=1), "log2": lambda m, x: m.log2(x),
    "sinh": lambda m, x: m.sinh(x), "xlogy": lambda m, x: m.xlogy(x, x.abs()),
}

# gelu(inf): torch's float32 vector loop gives nan (its scalar loop, and llgrad, inf)
TORCH_DIFFERS = ("gelu[",)
FALLBACK = {"cumsum": "0-d", "cumprod": "0-d", "pad": "ints", "hardtanh": "ints",
            "threshold": "ints", "smooth_l1_loss": "ints", "mse_loss": "ints", "std": "empty", "var": "empty",
            "scatter_add": "bool", "index_add": "bool"}
# (PyTorch returns an empty tensor where its kernel would refuse the dtype; llgrad refuses)
EMPTY_REFUSED = ("softmax", "log_softmax", "mm", "bmm")


def _falls_back(dtype):
    def f(name):
        op, rest = name.split("[", 1)
        why = FALLBACK.get(op)
        return (why == "0-d" and ",zero_d," in rest or why == "empty" and ",zero_size," in rest
                or why == "ints" and dtype not in H.FLOATS or why == "bool" and dtype == "bool")
    return f


def cases(dtype, layouts, special):
    seed = H.DTYPES.index(dtype)
    out = []
    for k, (name, f) in enumerate(CASES.items()):
        layout = layouts[(k + seed) % len(layouts)]
        if layout == "zero_size" and name in EMPTY_REFUSED and dtype not in H.FLOATS:
            layout = "contiguous"
        sp = special if special is not None else bool((k + seed) % 2)
        a = H.values(dtype, H.SHAPE, seed=7 + k, special=sp)
        out.append((f"{name}[{dtype},{layout},{sp}]", f, [(dtype, layout, a)]))
    return out


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("dtype", H.DTYPES)
def test_reductions_indexing_nn_layouts_by_turns(dtype):
    problems = H.run_batch(torch, cases(dtype, tuple(H.LAYOUTS), None), [dtype],
                           torch_differs=TORCH_DIFFERS, falls_back=_falls_back(dtype))
    assert problems == []


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("layout", list(H.LAYOUTS))
@pytest.mark.parametrize("dtype", H.DTYPES)
def test_reductions_indexing_nn_every_layout(dtype, layout, special):
    problems = H.run_batch(torch, cases(dtype, (layout,), special), [dtype],
                           torch_differs=TORCH_DIFFERS, falls_back=_falls_back(dtype))
    assert problems == []


def test_nll_loss_and_threshold_refuse_dtypes_as_torch():
    """PyTorch's nll_loss kernels are float-only (a wrong target dtype is reported first),
    its threshold kernel refuses bool."""
    for m in (torch, llgrad):
        F = m.nn.functional
        with pytest.raises(NotImplementedError, match="nll_loss_out_frame.*'Int'"):
            F.nll_loss(m.zeros(3, 4, dtype=m.int32), m.tensor([1, 0, 3]))
        with pytest.raises(RuntimeError, match="target dtype to be Long or Byte"):
            F.nll_loss(m.zeros(3, 4, dtype=m.int32), m.tensor([1, 0, 3], dtype=m.int32))
        with pytest.raises(NotImplementedError, match="nll_loss2d_forward_out_frame.*'Long'"):
            F.nll_loss(m.zeros(2, 3, 5, dtype=m.int64), m.zeros(2, 5).long())
        with pytest.raises(NotImplementedError, match="threshold_cpu.*'Bool'"):
            F.threshold(m.ones(3, dtype=m.bool), 0, 1)
        assert F.nll_loss(m.zeros(3, 4), m.tensor([1, 0, 3])).item() == 0.0


def test_zero_size_integer_softmax_as_torch():
    # (PyTorch gives an empty result where its kernel would refuse the dtype: none runs)
    x = llgrad.zeros(0, 4, dtype=llgrad.int64)
    assert llgrad.softmax(x, -1).shape == torch.softmax(torch.zeros(0, 4).long(), -1).shape


# ---- zero divisors and casts ---------------------------------------------------------------

DIVISIONS = {"//": lambda m, x, y: x // y, "%": lambda m, x, y: x % y,
             "fmod": lambda m, x, y: m.fmod(x, y), "/": lambda m, x, y: x / y,
             "trunc": lambda m, x, y: m.div(x, y, rounding_mode="trunc")}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("op", list(DIVISIONS))
@pytest.mark.parametrize("dtype", ["int64", "int8", "uint8"])
def test_integer_zero_divisor_raises_as_torch_after_tracing_without_one(op, dtype):
    """Traced on nonzero divisors, the compiled call given a zero one raises PyTorch's error
    (true division gives inf/nan), not a crash or a silent number."""
    f = DIVISIONS[op]
    cf = llgrad.compile(lambda x, y: f(llgrad, x, y) * 1)
    x = [llgrad.tensor([5, -7, 3], dtype=getattr(llgrad, dtype))]
    for _ in range(2):
        cf(x[0], llgrad.tensor([1, 2, 3], dtype=x[0].dtype))
    cf.wait()
    zero = [m.tensor([0, 2, 3], dtype=getattr(m, dtype)) for m in (torch, llgrad)]
    tx = torch.tensor(x[0].numpy())
    try:
        want = f(torch, tx, zero[0]).numpy()
    except RuntimeError as e:
        assert "ZeroDivisionError" in str(e)
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            cf(x[0], zero[1])
        return
    np.testing.assert_array_equal(cf(x[0], zero[1]).numpy(), want)


BIG = [1e10, -1e10, 3e9, -3e9, 2.0 ** 31, -2.0 ** 31, 2.0 ** 63, -2.0 ** 63, 1e19, 255.9, 256.0,
       -1.5, -0.5, 127.5, -128.7, 65536.0, 1e30, 70000.0, float("nan"), float("inf"),
       float("-inf")]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("src", ["float64", "float32"])
def test_float_to_int_casts_of_large_values_as_torch(src):
    dsts = ("int64", "int32", "int16", "int8", "uint8", "bool")
    cf = llgrad.compile(lambda x: tuple(x.to(getattr(llgrad, d)) + 0 if d != "bool"
                                        else x.to(llgrad.bool) | False for d in dsts))
    x = llgrad.tensor(np.array(BIG, dtype=src))
    cf(x)
    outs = cf(x)
    assert all(isinstance(k, H.Kernel) for e in cf.entries for k in e.kernels.values())
    tx = torch.tensor(np.array(BIG, dtype=src))
    for d, o in zip(dsts, outs):
        np.testing.assert_array_equal(o.numpy(), tx.to(getattr(torch, d)).numpy(), err_msg=d)
        np.testing.assert_array_equal(o.numpy(), x.to(getattr(llgrad, d)).numpy(), err_msg=d)
