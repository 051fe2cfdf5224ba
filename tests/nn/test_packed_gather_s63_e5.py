"""pack_padded_sequence / pad_packed_sequence as one gather each (nn/utils/rnn.py): the same
values and gradients as PyTorch's, bit for bit (they only move data), over layouts (batch
first, a transposed input, trailing feature dims), dtypes, unsorted batches, padding values
and total_length; through a packed bidirectional GRU; and compiled equal to eager."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _pair(shape, dtype, seed, transposed=False):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    if transposed:          # the same values, a non-contiguous layout (dims 0 and 1 swapped)
        base = np.ascontiguousarray(np.swapaxes(a, 0, 1))
        return (llgrad.tensor(base, requires_grad=True).transpose(0, 1),
                torch.tensor(base, requires_grad=True).transpose(0, 1))
    return llgrad.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _leaf(x):
    return x if x.is_leaf else x._base if hasattr(x, "_base") and x._base is not None else x


CASES = [   # shape (T, B, *feat) or (B, T, *feat), lengths, batch_first, enforce_sorted, transposed
    ((7, 4, 3), [7, 5, 5, 2], False, True, False),
    ((4, 7, 3), [7, 6, 3, 1], True, True, False),
    ((6, 3, 2, 5), [2, 6, 4], False, False, False),
    ((3, 6, 2), [1, 6, 4], True, False, True),
    ((5, 5, 4), [5, 4, 3, 2, 1], False, True, True),
    ((1, 1, 3), [1], False, True, False),
]


@pytest.mark.parametrize("shape,lengths,batch_first,enforce_sorted,transposed", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pack_pad_round_trip_matches_torch(shape, lengths, batch_first, enforce_sorted,
                                           transposed, dtype):
    xl, xt = _pair(shape, dtype, 0, transposed)
    outs = []
    for lib, x in ((llgrad, xl), (torch, xt)):
        rnn = lib.nn.utils.rnn
        p = rnn.pack_padded_sequence(x, lib.tensor(lengths), batch_first=batch_first,
                                     enforce_sorted=enforce_sorted)
        total = max(lengths) + 2
        y, lens = rnn.pad_packed_sequence(p, batch_first=batch_first, padding_value=-1.5,
                                          total_length=total)
        w = lib.tensor(np.random.default_rng(1).standard_normal(tuple(y.shape)).astype(dtype))
        (y * w).sum().backward()
        outs.append((p.data.detach().numpy(), p.batch_sizes.numpy(), y.detach().numpy(),
                     lens.numpy(), type(p.data.grad_fn).__name__, type(y.grad_fn).__name__))
    grads = [np.array(_leaf(x).grad.numpy()) for x in (xl, xt)]
    for a, b in zip(outs[0][:4], outs[1][:4]):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    assert outs[0][4] == "PackPaddedSequenceBackward0"
    np.testing.assert_array_equal(grads[0], grads[1])


def test_packed_data_gradient_through_pad_matches_torch():
    # a PackedSequence built by hand (leaf data): pad's gradient to every packed row
    rng = np.random.default_rng(2)
    data = rng.standard_normal((9, 3, 2)).astype(np.float32)
    sizes = [4, 3, 1, 1]
    grads = []
    for lib in (llgrad, torch):
        d = lib.tensor(data, requires_grad=True)
        p = lib.nn.utils.rnn.PackedSequence(d, lib.tensor(sizes))
        y, _ = lib.nn.utils.rnn.pad_packed_sequence(p, batch_first=True)
        (y.pow(2) * 0.5 + y).sum().backward()
        grads.append((y.detach().numpy(), d.grad.numpy()))
    np.testing.assert_array_equal(grads[0][0], grads[1][0])
    np.testing.assert_array_equal(grads[0][1], grads[1][1])


def test_int_padding_of_an_integer_sequence():
    data = np.arange(7, dtype=np.int64)
    got = [lib.nn.utils.rnn.pad_packed_sequence(lib.nn.utils.rnn.PackedSequence(
        lib.tensor(data), lib.tensor([3, 2, 2])), padding_value=-1)[0].numpy()
        for lib in (llgrad, torch)]
    np.testing.assert_array_equal(got[0], got[1])


def _gru_step(lib, m, x, lengths):
    p = lib.nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
    out, h = m(p)
    y, _ = lib.nn.utils.rnn.pad_packed_sequence(out)
    return (y.sum(2) ** 2).mean() + h.pow(2).sum()


def _gru_pair():
    torch.manual_seed(0)
    tm = torch.nn.GRU(5, 6, bidirectional=True)
    lm = llgrad.nn.GRU(5, 6, bidirectional=True)
    lm.load_state_dict({k: llgrad.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = np.random.default_rng(3).standard_normal((6, 4, 5)).astype(np.float32)
    return tm, lm, x, [3, 6, 1, 4]


def test_packed_bidirectional_gru_matches_torch():
    tm, lm, x, lengths = _gru_pair()
    lt = _gru_step(torch, tm, torch.tensor(x), torch.tensor(lengths))
    lt.backward()
    ll = _gru_step(llgrad, lm, llgrad.tensor(x), llgrad.tensor(lengths))
    ll.backward()
    np.testing.assert_allclose(ll.item(), lt.item(), rtol=1e-5)
    for (n, p), (_, q) in zip(lm.named_parameters(), tm.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=n)


def _compiled_and_eager(exact):
    _, lm, x, lengths = _gru_pair()
    ll = _gru_step(llgrad, lm, llgrad.tensor(x), llgrad.tensor(lengths))
    ll.backward()
    eager = {n: p.grad.numpy().copy() for n, p in lm.named_parameters()}
    step = llgrad.compile(lambda xx: _gru_step(llgrad, lm, xx, llgrad.tensor(lengths)))
    check = np.testing.assert_array_equal if exact else \
        lambda a, b, err_msg="": np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7,
                                                            err_msg=err_msg)
    for _ in range(2):
        lm.zero_grad()
        lc = step(llgrad.tensor(x))
        step.wait()     # (the second call runs native code in the background mode too)
        lc.backward()
        check(lc.item(), ll.item())
        for n, p in lm.named_parameters():
            check(p.grad.numpy(), eager[n], err_msg=n)


def test_packed_gru_compiled_close_to_eager():
    _compiled_and_eager(exact=False)


@pytest.mark.xfail(strict=True, reason="compiled packed bidirectional GRU step rounds apart "
                   "from eager (loss 3.7771132 vs 3.7771134 with LLGRAD_COMPILE=sync; also "
                   "with the per-step packing before s63 e5): target compiled == eager")
def test_packed_gru_compiled_equals_eager():
    _compiled_and_eager(exact=True)


def test_packing_an_empty_batch_raises_torch_error():
    for lib in (llgrad, torch):
        with pytest.raises(RuntimeError, match="Cannot pack empty tensors"):
            lib.nn.utils.rnn.pack_padded_sequence(lib.zeros(3, 0, 2),
                                                  lib.tensor([], dtype=lib.int64))
