"""nn.utils.rnn (pad_sequence, pack_padded_sequence, pad_packed_sequence, pack_sequence,
unpack_sequence, unpad_sequence, invert_permutation) against torch (when installed): layouts,
lengths, permutations, gradients through packing and padding, and PyTorch's errors."""
import numpy as np
import pytest

import llgrad
from llgrad.nn.utils import rnn as R

RNG = np.random.default_rng(2)
SEQS = [RNG.standard_normal((n, 3)) for n in (4, 2, 5, 1)]


def _torch():
    return pytest.importorskip("torch")


def _run(lib, batch_first, enforce_sorted, side="right"):
    M = lib.nn.utils.rnn
    seqs = SEQS if not enforce_sorted else sorted(SEQS, key=lambda s: -len(s))
    ts = [lib.tensor(s, requires_grad=True) for s in seqs]
    lens = [len(s) for s in seqs]
    padded = M.pad_sequence(ts, batch_first=batch_first, padding_value=-1.0, padding_side=side)
    packed = M.pack_padded_sequence(padded, lens, batch_first=batch_first,
                                    enforce_sorted=enforce_sorted)
    back, lengths = M.pad_packed_sequence(packed, batch_first=batch_first, padding_value=0.5,
                                          total_length=7)
    weights = lib.tensor(np.arange(back.numel(), dtype=np.float64).reshape(tuple(back.shape)))
    (back * weights).sum().backward()
    parts = M.unpack_sequence(M.pack_sequence(ts, enforce_sorted=enforce_sorted))
    return dict(padded=padded.detach().numpy(), data=packed.data.detach().numpy(),
                batch_sizes=packed.batch_sizes.tolist(),
                sorted=None if packed.sorted_indices is None else packed.sorted_indices.tolist(),
                unsorted=None if packed.unsorted_indices is None
                else packed.unsorted_indices.tolist(),
                back=back.detach().numpy(), lengths=lengths.tolist(),
                grads=[t.grad.numpy() for t in ts], parts=[p.detach().numpy() for p in parts])


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [False, True])
def test_pack_and_pad_match_torch(batch_first, enforce_sorted):
    torch = _torch()
    ours, theirs = _run(llgrad, batch_first, enforce_sorted), _run(torch, batch_first,
                                                                  enforce_sorted)
    assert ours.keys() == theirs.keys()
    for k in ours:
        if isinstance(ours[k], list) and ours[k] and isinstance(ours[k][0], np.ndarray):
            for a, b in zip(ours[k], theirs[k]):
                np.testing.assert_array_equal(a, b)
        elif isinstance(ours[k], np.ndarray):
            np.testing.assert_array_equal(ours[k], theirs[k])
        else:
            assert ours[k] == theirs[k], k


def test_left_padding_and_unpad_match_torch():
    torch = _torch()
    for side in ("left", "right"):
        a = R.pad_sequence([llgrad.tensor(s) for s in SEQS], True, 0.0, side).numpy()
        b = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in SEQS], True, 0.0,
                                            side).numpy()
        np.testing.assert_array_equal(a, b)
    padded = R.pad_sequence([llgrad.tensor(s) for s in SEQS])
    parts = R.unpad_sequence(padded, llgrad.tensor([4, 2, 5, 1]))
    assert [p.shape[0] for p in parts] == [4, 2, 5, 1]
    np.testing.assert_array_equal(parts[2].numpy(), SEQS[2])


def test_invert_permutation():
    p = llgrad.tensor([2, 0, 3, 1])
    assert R.invert_permutation(p).tolist() == [1, 3, 0, 2]
    assert R.invert_permutation(None) is None


@pytest.mark.parametrize("call,match", [
    (lambda: R.pack_padded_sequence(llgrad.zeros(5, 3, 2), [2, 4, 1]),
     "must be sorted in decreasing order when `enforce_sorted` is True"),
    (lambda: R.pack_padded_sequence(llgrad.zeros(5, 3, 2), [4, 2, 0]),
     "has to be greater than 0"),
    (lambda: R.pack_padded_sequence(llgrad.zeros(5, 3, 2), [4, 2]),
     r"Expected `len\(lengths\)` to be equal to batch_size, but got 2 \(batch_size=3\)"),
    (lambda: R.pad_packed_sequence(R.pack_sequence([llgrad.zeros(3), llgrad.zeros(2)]),
                                   total_length=2),
     "Expected total_length to be at least the length of the longest sequence"),
    (lambda: R.pad_sequence(5), "Expected iterable for input sequences"),
])
def test_errors(call, match):
    with pytest.raises((RuntimeError, ValueError), match=match):
        call()


def test_compiled_packing_equals_eager():
    x = llgrad.tensor(RNG.standard_normal((6, 3, 2)).astype(np.float32), requires_grad=True)

    def f(x):
        packed = R.pack_padded_sequence(x, [6, 4, 3])
        out, _ = R.pad_packed_sequence(packed, padding_value=0.0)
        return (out * out).sum() + packed.data.sum()
    eager = f(x)
    eager.backward()
    g = x.grad.numpy().copy()
    x.grad = None
    compiled = llgrad.compile(f)
    for _ in range(2):
        x.grad = None
        value = compiled(x)
        value.backward()
    assert value.item() == pytest.approx(eager.item(), rel=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), g, rtol=1e-6)
