"""Sweep 5 of llgrad.utils.data and llgrad.nn.utils.rnn against torch: IterableDataset is
abstract (a subclass without __iter__ cannot be made), and the grad_fn names of the packing
helpers (pack_padded_sequence's data, pad_sequence, unpad_sequence / unpack_sequence, and
the final hidden state of a recurrent layer run on an unsorted PackedSequence), and the
pickling of hook handles (so of lazy modules, which hold theirs)."""
import pickle
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _run(lib, fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            out = fn(lib)
        except Exception as e:      # noqa: BLE001 (compared with torch's)
            out = (type(e).__name__, str(e).split("\n")[0].replace("torch", "llgrad"))
    return out, [(x.category.__name__, str(x.message)) for x in w]


def _same(fn):
    got, want = _run(llgrad, fn), _run(torch, fn)
    assert got == want
    return got


def test_iterable_dataset_is_abstract():
    D = lambda lib: lib.utils.data      # noqa: E731
    _same(lambda lib: D(lib).IterableDataset())
    _same(lambda lib: len(D(lib).DataLoader(D(lib).IterableDataset(), batch_size=2)))
    _same(lambda lib: D(lib).ConcatDataset([D(lib).IterableDataset()]))

    def subclass_without_iter(lib):
        class I(D(lib).IterableDataset):
            pass
        return I()
    _same(subclass_without_iter)

    def subclass(lib):
        class I(D(lib).IterableDataset):
            def __iter__(self):
                return iter(range(5))
        ds = I()
        chained = ds + I()
        return ([b.tolist() for b in D(lib).DataLoader(ds, batch_size=2)],
                list(chained), isinstance(ds, D(lib).Dataset))
    _same(subclass)


def _names(*ts):
    return [None if t.grad_fn is None else type(t.grad_fn).__name__ for t in ts]


def test_packing_helpers_grad_fn_names():
    x = np.random.RandomState(0).randn(3, 2, 2).astype(np.float32)

    def f(lib):
        R = lib.nn.utils.rnn
        t = lib.tensor(x, requires_grad=True)
        p1 = R.pack_padded_sequence(t, [3, 1])
        p2 = R.pack_padded_sequence(t, [1, 3], enforce_sorted=False)
        padded, lengths = R.pad_packed_sequence(p2, batch_first=True, total_length=4)
        seqs = [t[:, 0], t[:2, 1]]
        s1 = R.pad_sequence(seqs)
        s2 = R.pad_sequence(seqs, batch_first=True, padding_side="left", padding_value=2.0)
        s3 = R.pad_sequence([t[:, 0], t[:, 1]])
        un = R.unpad_sequence(s1, lib.tensor([3, 2]))
        up = R.unpack_sequence(R.pack_sequence(seqs, enforce_sorted=False))
        loss = sum((a * (1 + lib.arange(a.numel()).reshape(a.shape))).sum()
                   for a in [p1.data, padded, s1, s2, s3] + un + up)
        loss.backward()
        return (_names(p1.data, p2.data, padded, s1, s2, s3, *un, *up),
                [np.round(a.detach().numpy(), 5).tolist() for a in [padded, s2] + un + up],
                np.round(t.grad.numpy(), 5).tolist(), lengths.tolist())
    _same(f)
    with llgrad.no_grad():
        t = llgrad.ones(3, 2, requires_grad=True)
        assert llgrad.nn.utils.rnn.pad_sequence([t, t[:1]]).grad_fn is None


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_hidden_state_of_a_packed_batch(kind, enforce_sorted):
    x = np.random.RandomState(1).randn(4, 3, 2).astype(np.float32)
    lengths = [4, 3, 1] if enforce_sorted else [3, 4, 1]

    def f(lib):
        lib.manual_seed(0)
        m = getattr(lib.nn, kind)(2, 3, num_layers=2)
        for p in m.parameters():
            with lib.no_grad():
                p.copy_(lib.linspace(-0.5, 0.5, p.numel()).reshape(p.shape))
        packed = lib.nn.utils.rnn.pack_padded_sequence(lib.tensor(x), lengths,
                                                       enforce_sorted=enforce_sorted)
        out, h = m(packed)
        hs = h if isinstance(h, tuple) else (h,)
        return (_names(out.data, *hs),
                [np.round(t.detach().numpy(), 5).tolist() for t in (out.data,) + hs])
    _same(f)


def _hook(module, args, out):
    return out * 2


def test_removable_handle_pickles_with_its_module():
    def f(lib):
        m = lib.nn.Linear(2, 2)
        h = m.register_forward_hook(_hook)
        m2, h2 = pickle.loads(pickle.dumps((m, h)))
        before = len(m2._forward_hooks)
        h2.remove()
        lone = pickle.loads(pickle.dumps(h))      # (its dict is gone: a dead reference)
        lone.remove()
        return before, len(m2._forward_hooks), len(m._forward_hooks)
    _same(f)


def test_lazy_module_pickles_and_materialises():
    def f(lib):
        m = pickle.loads(pickle.dumps(lib.nn.LazyConv2d(2, 3)))
        first = (repr(m), type(m.weight).__name__)
        out = m(lib.ones(1, 4, 5, 5))
        return first, tuple(out.shape), m.in_channels, type(m).__name__
    _same(f)
