"""PackedSequence inputs of nn.RNN, nn.LSTM and nn.GRU (layers_rnn.py), as PyTorch takes
them: the packed batch is unpacked to a time-major padded batch in its original order, each
step updates only the sequences that have that step (the others keep their state, so h_n is
each sequence's state after its own last step, and a reverse direction starts at each
sequence's own end), and the output is packed again with the input's batch_sizes and
permutation. hx and the returned h_n / c_n are in the original batch order, as PyTorch's."""
from ..runtime.creation import arange
from ..runtime.dtypes import int64
from ..runtime.functions import cat, where
from .functional import dropout
from .utils.rnn import PackedSequence, pad_packed_sequence

__all__ = ["unpack_input", "step_masks", "masked", "pack_output", "packed_dropout"]


def unpack_input(packed):
    """(time-major padded input, per-sequence lengths as a list)."""
    padded, lengths = pad_packed_sequence(packed, batch_first=False)
    return padded, [int(n) for n in lengths.tolist()]


def step_masks(lengths, steps, device=None):
    """For each step t, a (B, 1) bool tensor (on the input's device): which sequences have
    step t; None where all of them have it (the shortest sequence's steps): a where over an
    all-True mask gives `new` itself, and its backward only a zero gradient for `old` (two
    ops a step, forward and backward, on every step before the first sequence ends)."""
    lens = arange(0).new_tensor(lengths, dtype=int64, device=device).unsqueeze(1)
    every = min(lengths, default=0)
    return [None if t < every else lens > t for t in range(steps)]


def masked(mask, new, old):
    """new where the sequence has this step, else old (the state carried over)."""
    return new if mask is None else where(mask, new, old)


def pack_output(padded, packed):
    """The time-major padded output as a PackedSequence shaped as the input `packed`."""
    order = packed.sorted_indices
    sizes = [int(b) for b in packed.batch_sizes.tolist()]
    rows = []
    for t, b in enumerate(sizes):
        step = padded[t] if order is None else padded[t].index_select(0, order)
        rows.append(step[:b])
    return PackedSequence(cat(rows, 0), packed.batch_sizes, packed.sorted_indices,
                          packed.unsorted_indices)


def packed_dropout(padded, packed, p):
    """The dropout between layers, drawn as PyTorch draws it: over the packed rows (the
    steps' batches one after another), then padded again."""
    data = dropout(pack_output(padded, packed).data, p, True)
    return pad_packed_sequence(PackedSequence(data, packed.batch_sizes, packed.sorted_indices,
                                              packed.unsorted_indices))[0]
