"""zeros / ones / empty / rand / randn take their size as the keyword size= too (as torch's
do: `torch.empty(size=(n, m))` in pyGAT), and reject a size given both ways."""
import pytest

import llgrad


@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
def test_size_keyword(name):
    fn = getattr(llgrad, name)
    assert fn(size=(2, 3)).shape == (2, 3)
    assert fn(size=[4]).shape == (4,)
    assert fn(size=(2, 3), dtype=llgrad.float64).dtype == llgrad.float64
    with pytest.raises(TypeError):
        fn(2, size=(2,))


def test_size_keyword_matches_torch():
    torch = pytest.importorskip("torch")
    for lib in (llgrad, torch):
        assert tuple(lib.zeros(size=(3, 1)).shape) == (3, 1)
        with pytest.raises(TypeError):
            lib.ones(2, size=(2,))
