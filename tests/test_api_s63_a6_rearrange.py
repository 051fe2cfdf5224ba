"""torch.func.rearrange (einops patterns): values, shapes, gradients and errors as PyTorch's."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")

X = np.arange(2 * 6 * 4, dtype=np.float32).reshape(2, 6, 4)

CASES = [
    ("b h w -> b h w", {}), ("b h w -> (b h) w", {}), ("b h w -> h (b w)", {}),
    ("b h w -> b w h", {}), ("b h w -> b (w h)", {}),
    ("b (h1 h) w -> (b h1) h w", {"h1": 2}),
    ("b (h h1) (w w1) -> b h w (h1 w1)", {"h1": 3, "w1": 2}),
    ("b h w -> (b 1) w h 1", {}), ("... w -> w ...", {}), ("b ... -> (b ...)", {}),
    ("b h w -> 1 (b h w)", {}), ("(b1 b) h w -> b1 b h w", {"b1": 1}),
    ("b h w -> b h w", {"b": 2, "h": 6, "w": 4}),
]


@pytest.mark.parametrize("pattern,lengths", CASES)
def test_rearrange_values_and_gradients(pattern, lengths):
    out = []
    for lib in (torch, llgrad):
        x = lib.tensor(X, requires_grad=True)
        y = lib.func.rearrange(x, pattern, **lengths)
        w = lib.tensor(np.arange(y.numel(), dtype=np.float32).reshape(tuple(y.shape)))
        (y * w).sum().backward()
        out.append((tuple(y.shape), y.detach().numpy(), x.grad.numpy()))
    assert out[0][0] == out[1][0]
    np.testing.assert_array_equal(out[0][1], out[1][1])
    np.testing.assert_array_equal(out[0][2], out[1][2])


def test_rearrange_stacks_a_list_and_keeps_a_scalar():
    for lib in (torch, llgrad):
        got = lib.func.rearrange([lib.ones(2), lib.zeros(2)], "a b -> b a")
        np.testing.assert_array_equal(got.numpy(), [[1, 0], [1, 0]])
        assert tuple(lib.func.rearrange(lib.ones(()), " -> 1 1").shape) == ()


@pytest.mark.parametrize("pattern,lengths,shape", [
    ("a (b c) d -> a b c d", {"b": 4}, (2, 6, 4)),
    ("a b (c d) -> a b c d", {}, (2, 6, 4)),
    ("a b c -> c b a", {"a": 3}, (2, 6, 4)),
    ("a b c -> a b", {}, (2, 6, 4)),
    ("a b -> a b", {}, (2, 6, 4)),
    ("a b c d e ... -> a", {}, (2, 6, 4)),
    ("a b c -> (a b c)", {"q": 1}, (2, 6, 4)),
    ("a b c", {}, (2, 6, 4)),
    ("a b c -> a b c", {"a": 2.0}, (2, 6, 4)),
    ("a (b (c)) d -> a b c d", {}, (2, 6, 4)),
    ("a b. c -> a b c", {}, (2, 6, 4)),
    ("a b 2 -> a b", {}, (2, 6, 2)),
    ("a _b c -> a _b c", {}, (2, 6, 4)),
    ("a b c -> a b ...", {}, (2, 6, 4)),
    ("a a c -> a c", {}, (2, 6, 4)),
])
def test_rearrange_errors_as_torch(pattern, lengths, shape):
    seen = []
    for lib in (torch, llgrad):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(Exception) as info:
                lib.func.rearrange(lib.zeros(shape), pattern, **lengths)
        seen.append((type(info.value).__name__, str(info.value)))
    assert seen[0][0] == seen[1][0]
    assert seen[0][1] == seen[1][1] or "{" in seen[0][1]     # (set order may differ)
