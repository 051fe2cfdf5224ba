"""The binary ops' operands by torch's names: torch.mul(x, other=y), x.eq(other=y),
x.mul_(other=2), torch.maximum(input=a, other=b); eager and compiled against torch."""
import pytest

import llgrad

torch = pytest.importorskip("torch")

NAMES = ["mul", "multiply", "eq", "ne", "lt", "less", "le", "gt", "greater", "ge",
         "logical_and", "logical_or", "logical_xor", "maximum", "minimum"]


def _calls(L, name):
    a = L.tensor([1.0, -2.0, 3.0])
    b = L.tensor([2.0, -2.0, 0.5])
    return [getattr(L, name)(a, other=b), getattr(L, name)(input=a, other=b),
            getattr(a, name)(other=b)]


@pytest.mark.parametrize("name", NAMES)
def test_other_by_name_matches_torch(name):
    for got, want in zip(_calls(llgrad, name), _calls(torch, name)):
        assert got.tolist() == want.tolist() and str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]


def test_inplace_other_by_name():
    got = llgrad.tensor([1.0, 2.0]).mul_(other=3)
    assert got.tolist() == torch.tensor([1.0, 2.0]).mul_(other=3).tolist()


@pytest.mark.parametrize("call", [lambda L, x: x.mul(foo=1), lambda L, x: x.mul(2, other=3),
                                  lambda L, x: L.eq(x, x, other=x)])
def test_bad_names_raise_type_error(call):
    for L in (llgrad, torch):
        with pytest.raises(TypeError):
            call(L, L.ones(2))


def test_compiled_equals_eager():
    def f(x, y):
        return llgrad.mul(x, other=y) + x.maximum(other=y) * llgrad.lt(x, other=y)

    g = llgrad.compile(f)
    x, y = llgrad.tensor([1.0, -2.0, 3.0]), llgrad.tensor([2.0, -2.0, 0.5])
    for _ in range(2):
        assert g(x, y).tolist() == f(x, y).tolist()
