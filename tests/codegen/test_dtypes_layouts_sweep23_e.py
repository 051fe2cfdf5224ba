"""In-place ops compiled on every dtype, writing through a view of an input (transposed, stepped,
at a storage offset, a row, a column, the whole tensor; the operand expanded) against eager and
torch: the input's written elements and its others (untouched), and the errors torch raises
(an int tensor += float, a float result into an integer view, ...) raised compiled too with
nothing written. Then float64/float32 gradients of compiled functions of strided leaves
(transposed, stepped, expanded, offset) against eager's and torch's."""
import warnings

import numpy as np
import pytest

import llgrad
import sweep23_harness as H

torch = pytest.importorskip("torch")

VIEWS = {"transposed": (lambda t: t.t(), (4, 3)), "stepped": (lambda t: t[1::2, ::2], (7, 8)),
         "offset": (lambda t: t[1:, 1:], (4, 5)), "whole": (lambda t: t, (3, 4)),
         "row": (lambda t: t[1], (3, 4)), "column": (lambda t: t[:, 2], (3, 4))}

INPLACE = {
    "add_": lambda v, y: v.add_(y), "sub_": lambda v, y: v.sub_(y), "mul_": lambda v, y: v.mul_(y),
    "div_": lambda v, y: v.div_(y), "floor_divide_": lambda v, y: v.floor_divide_(y),
    "remainder_": lambda v, y: v.remainder_(y), "iadd_int": lambda v, y: v.__iadd__(2),
    "iadd_float": lambda v, y: v.__iadd__(1.5), "imul_float": lambda v, y: v.__imul__(0.5),
    "clamp_": lambda v, y: v.clamp_(-1, 1), "fill_": lambda v, y: v.fill_(3),
    "zero_": lambda v, y: v.zero_(), "copy_": lambda v, y: v.copy_(y),
    "neg_": lambda v, y: v.neg_(), "abs_": lambda v, y: v.abs_(),
    "masked_fill_": lambda v, y: v.masked_fill_(y > 0, 5),
    "bitwise_and_": lambda v, y: v.bitwise_and_(y), "ilshift": lambda v, y: v.__ilshift__(1),
    "relu_": lambda v, y: v.relu_(), "exp_": lambda v, y: v.exp_(),
    "addcmul_": lambda v, y: v.addcmul_(y, y), "lerp_": lambda v, y: v.lerp_(y, 0.5),
    "clamp_min_tensor_": lambda v, y: v.clamp_(min=y), "pow_": lambda v, y: v.pow_(2),
    "sqrt_": lambda v, y: v.sqrt_(), "add_alpha_": lambda v, y: v.add_(y, alpha=2),
    "setitem": lambda v, y: v.__setitem__(Ellipsis, y),
    "setitem_first": lambda v, y: v.__setitem__(0, 7),
    "expanded_operand": lambda v, y: v.add_(y.reshape(-1)[:1].expand(v.shape)),
}

PAIRS = [(d, d) for d in H.NATIVE] + [("int32", "float32"), ("bool", "int8"),
                                      ("float64", "float32"), ("float16", "float32")]
MORE_PAIRS = [("int64", "float64"), ("float32", "int64"), ("float32", "bool"),
              ("uint8", "int8"), ("int8", "int64"), ("bfloat16", "float32")]
FALLBACK_OPS = {"pow_": ("bool",), "clamp_": ("bool",), "clamp_min_tensor_": ("bool",),
                "add_alpha_": ("bool",)}


def _inputs(m, dv, dy, view_name, k):
    view, shape = VIEWS[view_name]
    vshape = tuple(view(torch.zeros(shape)).shape)
    a = H.values(dv, shape, seed=k)
    b = H.values(dy, vshape, seed=k + 1)
    b = b if dy in H.FLOATS else np.where(b == 0, 1, b)
    return H.make(m, dv, "contiguous", a), H.make(m, dy, "contiguous", b)


def _run(m, op, view_name, base, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op(VIEWS[view_name][0](base), y)


def _eager(m, pair, name, view_name, k):
    base, y = _inputs(m, *pair, view_name, k)
    try:
        _run(m, INPLACE[name], view_name, base, y)
    except Exception as e:    # noqa: BLE001 (compared with torch's)
        return type(e)
    return H.as_numpy(base)


def check(pair, view_names):
    problems, ok = [], []
    for k, name in enumerate(INPLACE):
        vn = view_names[k % len(view_names)]
        want, got = _eager(torch, pair, name, vn, k), _eager(llgrad, pair, name, vn, k)
        label = f"{name}[{pair[0]}<-{pair[1]},{vn}]"
        if isinstance(want, type) or isinstance(got, type):
            if not (isinstance(want, type) and isinstance(got, type)):
                problems.append(f"{label}: torch {want} / eager {got}")
            elif want is not got:
                problems.append(f"{label}: torch raises {want.__name__}, eager {got.__name__}")
            else:                                   # compiled: the same error, nothing written
                cf = llgrad.compile(lambda b, y, n=name, v=vn: _run(llgrad, INPLACE[n], v, b, y))
                base, y = _inputs(llgrad, *pair, vn, k)
                before = H.as_numpy(base)
                with pytest.raises(got):
                    cf(base, y)
                d = H.close(H.as_numpy(base), before, f"{label} written before raising")
                problems += [d] if d else []
            continue
        d = H.close(got, want, f"{label} eager~torch")
        problems += [d] if d else []
        ok.append((label, name, vn, k, got))
    problems += _compiled(pair, ok, fallback=False) + _compiled(pair, ok, fallback=True)
    return problems


def _compiled(pair, ok, fallback):
    cases = [c for c in ok if (pair[0] in FALLBACK_OPS.get(c[1], ())) == fallback]
    if not cases:
        return []

    def batch(*xs):
        for j, (_, name, vn, _, _) in enumerate(cases):
            _run(llgrad, INPLACE[name], vn, xs[2 * j], xs[2 * j + 1])

    cf = llgrad.compile(batch)
    for _ in range(2):                  # trace, then native code
        xs = [t for _, _, vn, k, _ in cases for t in _inputs(llgrad, *pair, vn, k)]
        cf(*xs)
        cf.wait()
    problems = [H.close(H.as_numpy(xs[2 * j]), want, f"{label} compiled~eager")
                for j, (label, _, _, _, want) in enumerate(cases)]
    notes = H.native_ran(cf)
    if notes and all(d in H.NATIVE for d in pair) and \
            (not fallback or not all(H._allowed(n) for n in notes)):
        problems.append(f"not native ({[c[0] for c in cases]}): {notes}")
    return [p for p in problems if p]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("pair", PAIRS, ids="-".join)
def test_inplace_through_views_views_by_turns(pair):
    assert check(pair, list(VIEWS)) == []


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("pair", PAIRS + MORE_PAIRS, ids="-".join)
def test_inplace_through_every_view(pair, view):
    assert check(pair, [view]) == []


def test_int_tensor_iadd_float_raises_compiled_as_torch():
    for m in (torch, llgrad):
        x = m.arange(6, dtype=m.int32).reshape(2, 3)
        with pytest.raises(RuntimeError, match="result type Float can't be cast to the "
                                               "desired output type Int"):
            x.t().__iadd__(m.ones(3, 2))
    cf = llgrad.compile(lambda x, y: x.t().add_(y))
    x = llgrad.arange(6, dtype=llgrad.int32).reshape(2, 3)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Int"):
        cf(x, llgrad.ones(3, 2))
    assert x.tolist() == [[0, 1, 2], [3, 4, 5]]
