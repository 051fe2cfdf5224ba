"""t.numpy() inside llgrad.compile: a small tensor's values become value guards (as
t.tolist()'s) and the step stays compiled (NVIDIA tacotron2's encoder packs its batch by
input_lengths.cpu().numpy()); a write through the array, or an in-place write to the tensor
after the array was taken, runs eagerly with a warning naming the line, with eager's numbers."""
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _encoder(lib):
    lib.manual_seed(0)
    emb, lstm = lib.nn.Embedding(7, 4), lib.nn.LSTM(4, 3, batch_first=True, bidirectional=True)

    def step(text, lengths):
        x = lib.nn.utils.rnn.pack_padded_sequence(emb(text), lengths.cpu().numpy(), batch_first=True)
        out, _ = lib.nn.utils.rnn.pad_packed_sequence(lstm(x)[0], batch_first=True)
        loss = out.pow(2).mean()
        loss.backward()
        return loss
    return step, [emb.weight, *lstm.parameters()]


def _then_wait(step, value):
    """value, once step's native build (if any) is done: the next call runs native code,
    in the background mode too."""
    if hasattr(step, "wait"):
        step.wait()
    return value


def test_packed_lengths_from_numpy_compile_as_torch():
    text = [[1, 2, 3, 4], [5, 6, 1, 0], [2, 3, 0, 0]]
    got = {}
    for name, lib, wrap in (("torch", torch, None), ("eager", llgrad, None),
                            ("compiled", llgrad, llgrad.compile)):
        step, params = _encoder(lib)
        step = wrap(step) if wrap else step
        with warnings.catch_warnings():
            warnings.simplefilter("error")          # (no fallback warning)
            losses = [_then_wait(step, step(lib.tensor(text), lib.tensor(n)).item())
                      for n in ([4, 3, 2], [4, 3, 2], [4, 2, 1], [4, 3, 2])]
        got[name] = losses, [p.grad.numpy().copy() for p in params]
        if wrap:
            # (the first call (no .grad yet), the second, the new lengths; the last call reuses)
            assert step.n_traces == 3 and not step.graph_breaks
    for name in ("eager", "compiled"):
        np.testing.assert_allclose(got[name][0], got["torch"][0], rtol=1e-6)
        for g, want in zip(got[name][1], got["torch"][1]):
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-7)


def _writes_through(x, n):
    a = n.numpy()
    a[0] = 7
    return x * n[0]


def _writes_after(x, n, k):
    a = n.numpy()
    n.add_(k)
    return x * float(a[0])


@pytest.mark.parametrize("fn, line, extra", [
    (_writes_through, "a write into the array Tensor.numpy() gave", ()),
    (_writes_after, "an in-place write to a tensor whose Tensor.numpy() array", ([1], [5]))])
def test_writes_run_eagerly_with_a_warning(fn, line, extra):
    x = llgrad.randn(3)
    compiled = llgrad.compile(fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in (extra or [None, None]):       # (a second call: eager again)
            ks = () if k is None else (llgrad.tensor(k),)
            n, n2 = llgrad.tensor([1, 2]), llgrad.tensor([1, 2])
            got, want = compiled(x, n, *ks), fn(x, n2, *ks)
            assert got.tolist() == want.tolist() and n.tolist() == n2.tolist()
    assert any(line in str(w.message) and "test_numpy_reads_s67_u3.py" in str(w.message)
               for w in caught), [str(w.message) for w in caught]
