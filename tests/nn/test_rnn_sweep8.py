"""Sweep 8: RNN, LSTM and GRU built with the generators seeded alike (each library's own
initialisation), over num_layers, bidirectional, batch_first, proj_size and dropout in
train mode (the masks between layers drawn as torch draws them), on padded and packed
inputs (sorted and unsorted), against torch (tests/nn/oracle_sweep8.py)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from oracle_sweep8 import check  # noqa: E402

CONFIGS = [dict(), dict(num_layers=2), dict(bidirectional=True),
           dict(num_layers=2, bidirectional=True, batch_first=True),
           dict(num_layers=2, dropout=0.5), dict(num_layers=3, dropout=0.3, bidirectional=True),
           dict(num_layers=2, dropout=0.5, batch_first=True),
           dict(proj_size=2, bidirectional=True), dict(num_layers=2, dropout=0.5, proj_size=2), dict(proj_size=3)]


def _x(*shape):
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)


def _cases():
    return [(cls, kw) for cls in ("RNN", "LSTM", "GRU") for kw in CONFIGS
            if cls == "LSTM" or "proj_size" not in kw]


def _ids():
    return [f"{c}-{kw}" for c, kw in _cases()]


@pytest.mark.parametrize("cls,kw", _cases(), ids=_ids())
def test_seeded_rnn(cls, kw):
    shape = (3, 5, 4) if kw.get("batch_first") else (5, 3, 4)
    check(lambda lib: getattr(lib.nn, cls)(4, 3, **kw), [_x(*shape)])


def _packed(enforce_sorted, lengths, batch_first):
    def fwd(m, xs, lib):
        utils = lib.nn.utils.rnn
        p = utils.pack_padded_sequence(xs[0], lib.tensor(lengths), batch_first=batch_first,
                                       enforce_sorted=enforce_sorted)
        out, h = m(p)
        padded, lens = utils.pad_packed_sequence(out, batch_first=batch_first, total_length=6)
        return padded, h, lens, out.data, out.batch_sizes
    return fwd


@pytest.mark.parametrize("cls,kw", _cases(), ids=_ids())
def test_seeded_rnn_packed(cls, kw):
    """(with dropout, torch draws the masks between layers over the packed rows; the padded
    output of a sorted time-major batch comes from CopySlices)"""
    bf = kw.get("batch_first", False)
    shape = (3, 5, 4) if bf else (5, 3, 4)
    for enforce_sorted, lengths in ((True, [5, 3, 2]), (False, [2, 5, 3])):
        check(lambda lib: getattr(lib.nn, cls)(4, 3, **kw), [_x(*shape)],
              _packed(enforce_sorted, lengths, bf))


def test_pack_pad_sequence_helpers():
    def fwd(m, xs, lib):
        utils = lib.nn.utils.rnn
        seqs = [xs[0][:3], xs[0][:5], xs[0][:1]]
        p = utils.pack_sequence(seqs, enforce_sorted=False)
        out, h = m(p)
        pad = utils.pad_sequence(seqs, batch_first=True, padding_value=-1.0)
        return (out.data, h, pad, utils.pad_sequence(seqs, padding_side="left"),
                utils.unpad_sequence(pad, lib.tensor([3, 5, 1]), batch_first=True),
                utils.unpack_sequence(out))
    check(lambda lib: lib.nn.GRU(4, 3), [_x(6, 4)], fwd)


@pytest.mark.parametrize("shapes", [((3, 2), (2, 3)), ((3, 2), (2, 1)), ((3, 1), (2, 3)),
                                    ((3, 2, 2), (2, 2)), ((3, 2), (2, 2, 2)), ((3,), (2, 3))],
                         ids=str)
def test_pad_sequence_trailing_shapes(shapes):
    """Each sequence is copied into a result shaped by the first one's trailing dims, so it
    broadcasts into them, or raises copy_'s errors (llgrad concatenated: cat's error)."""
    check(lambda lib: lib.nn.Identity(), [_x(*s) for s in shapes],
          lambda m, xs, lib: lib.nn.utils.rnn.pad_sequence(xs))
