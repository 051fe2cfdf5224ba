"""torch.nn.utils.rnn: PackedSequence, pack_padded_sequence / pad_packed_sequence,
pad_sequence / unpad_sequence, pack_sequence / unpack_sequence and invert_permutation, with
PyTorch's layout (time-major packed data, batch_sizes per step, the sort permutation) and
errors. Packing and padding are slices, cats and index_selects, so gradients flow through
them eagerly and compiled."""
from collections.abc import Iterable
from typing import NamedTuple

from ...runtime.creation import arange, full, tensor
from ...runtime.dtypes import float64, int64
from ...runtime.functions import cat, stack
from ...runtime.node_names import rename
from ...runtime.shapes import broadcast_shapes
from ...runtime.tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence",
           "pad_packed_sequence", "pad_sequence", "unpad_sequence", "pack_sequence",
           "unpack_sequence"]


class _PackedSequenceBase(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(_PackedSequenceBase):
    """A batch of variable-length sequences packed time step by time step: data holds step
    0 of every sequence, then step 1 of those that have one, ...; batch_sizes[t] how many
    sequences have step t; sorted_indices the order (longest first) of the original batch."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """The same sequences with data converted (.to's arguments)."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def cpu(self):
        return self

    def double(self):
        return self.to(dtype=float64)

    def float(self):
        return self.to(dtype=self.data.float().dtype)

    def long(self):
        return self.to(dtype=int64)

    # (the other casts of PyTorch's PackedSequence, through the data's own)
    def half(self):
        return self.to(dtype=self.data.half().dtype)

    def int(self):
        return self.to(dtype=self.data.int().dtype)

    def short(self):
        return self.to(dtype=self.data.short().dtype)

    def char(self):
        return self.to(dtype=self.data.char().dtype)

    def byte(self):
        return self.to(dtype=self.data.byte().dtype)

    def cuda(self, *args, **kwargs):
        return self.to("cuda")

    def pin_memory(self):
        return type(self)(self.data.pin_memory(), self.batch_sizes, self.sorted_indices,
                          self.unsorted_indices)

    @property
    def is_cuda(self):
        return False

    def is_pinned(self):
        return False


def invert_permutation(permutation):
    """The inverse of a permutation tensor (None stays None)."""
    if permutation is None:
        return None
    out = permutation.new_zeros(permutation.shape)
    out.scatter_(0, permutation, arange(permutation.numel(), dtype=permutation.dtype))
    return out


def _lengths_list(lengths):
    if isinstance(lengths, Tensor):
        return [int(v) for v in lengths.to(int64).tolist()]
    return [int(v) for v in lengths]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch (T x B x *, or B x T x * with batch_first) of the given lengths."""
    if isinstance(lengths, Tensor) and lengths.dim() != 1:
        kind = {"float32": "Float", "float64": "Double", "int32": "Int"}.get(lengths.dtype.name,
                                                                           "Long")
        raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got "
                           f"{lengths.dim()}D cpu {kind} tensor")
    lens = _lengths_list(lengths)
    sorted_indices = None
    batch_dim = 0 if batch_first else 1
    if len(lens) != input.shape[batch_dim]:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{len(lens)} (batch_size={input.shape[batch_dim]})")
    if not enforce_sorted:
        order = sorted(range(len(lens)), key=lambda i: -lens[i])     # (stable, as torch.sort)
        sorted_indices = tensor(order, dtype=int64)
        lens = [lens[i] for i in order]
        input = input.index_select(batch_dim, sorted_indices)
    elif any(a < b for a, b in zip(lens, lens[1:])):
        raise RuntimeError("`lengths` array must be sorted in decreasing order when "
                           "`enforce_sorted` is True. You can pass `enforce_sorted=False` to "
                           "pack_padded_sequence and/or pack_sequence to sidestep this "
                           "requirement if you do not need ONNX exportability.")
    if lens and lens[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element "
                           "in 'lengths' that is <= 0")
    if batch_first:
        input = input.transpose(0, 1)
    if lens and lens[0] > input.shape[0]:
        raise RuntimeError(f"Expected sequence length to be at most {input.shape[0]}, but got "
                           f"{lens[0]}")
    if not lens:
        raise RuntimeError("Cannot pack empty tensors.")
    steps = lens[0]
    batch_sizes = [sum(1 for n in lens if n > t) for t in range(steps)]
    # one gather of the packed rows (step t's first batch_sizes[t] sequences, in step
    # order), not a slice per step: those made a node each, and each one's backward a
    # zero-filled gradient of the whole input (quadratic in the steps); the same values
    at = [(t, i) for t, b in enumerate(batch_sizes) for i in range(b)]
    data = rename(input[tensor([t for t, _ in at], dtype=int64),
                        tensor([i for _, i in at], dtype=int64)], "PackPaddedSequenceBackward0")
    return PackedSequence(data, tensor(batch_sizes, dtype=int64), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """(padded batch, lengths) of a PackedSequence, in the batch's original order."""
    batch_sizes = _lengths_list(sequence.batch_sizes)
    max_len = len(batch_sizes)
    if total_length is not None:
        if total_length < max_len:
            raise ValueError("Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {max_len}")
        max_len = total_length
    data = sequence.data
    batch = batch_sizes[0] if batch_sizes else 0
    feat = tuple(data.shape[1:])
    if max_len:
        # one gather from the packed rows and a padding row after them (row len(data)):
        # position (t, i) takes row offset_t + i where sequence i has step t (as the
        # packing loop's slices, each row once: the same values forward and backward)
        where, start = [], 0
        for t in range(max_len):
            b = batch_sizes[t] if t < len(batch_sizes) else 0
            where.append([start + i if i < b else data.shape[0] for i in range(batch)])
            start += b
        rows = cat([data, full((1,) + feat, padding_value, dtype=data.dtype,
                               device=data.device)], 0)
        # (PyTorch copies each step into a fresh padded tensor: CopySlices)
        padded = rename(rows[tensor(where, dtype=int64)], "CopySlices")
    else:
        padded = data.new_zeros((0, batch) + feat)
    lengths = tensor([sum(1 for b in batch_sizes if b > i) for i in range(batch)], dtype=int64)
    if batch_first:
        padded = padded.transpose(0, 1)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(0 if batch_first else 1, sequence.unsorted_indices)
        lengths = lengths[sequence.unsorted_indices]
    return padded, lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack sequences of different lengths (L_i x *) into L x B x * (B x L x * with
    batch_first), padding with padding_value on the right or the left."""
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    if not isinstance(sequences, Iterable):
        raise RuntimeError("pad_sequence: Expected iterable for input sequences, but got arg of "
                           f"type: {type(sequences)}")
    sequences = tuple(sequences)
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got "
                           f"{padding_side}.")
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    max_len = max(s.shape[0] for s in sequences)
    trailing = tuple(sequences[0].shape[1:])
    out = []
    for s in sequences:
        n = s.shape[0]
        if tuple(s.shape[1:]) != trailing:      # (PyTorch copies it into the first's shape)
            target = (n,) + trailing
            if broadcast_shapes(target, tuple(s.shape)) != target:
                raise RuntimeError(f"output with shape {list(target)} doesn't match the "
                                   f"broadcast shape {list(broadcast_shapes(target, s.shape))}")
            s = s.expand(target)
        if n == max_len:
            out.append(s)
            continue
        fill = full((max_len - n,) + trailing, padding_value, dtype=s.dtype, device=s.device)
        out.append(cat([s, fill] if padding_side == "right" else [fill, s], 0))
    # (PyTorch copies each sequence into a filled result: its node is CopySlices)
    return rename(stack(out, 0 if batch_first else 1), "CopySlices")


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences pad_sequence padded (each cut to its length). As PyTorch's,
    without batch_first it transposes padded_sequences in place (the caller's tensor)."""
    if not batch_first:
        padded_sequences.transpose_(0, 1)
    # (PyTorch selects each sequence's steps with a boolean mask: IndexBackward0)
    return [rename(seq[:n], "IndexBackward0")
            for seq, n in zip(padded_sequences, _lengths_list(lengths))]


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of sequences (L_i x *) into a PackedSequence."""
    lengths = [v.size(0) for v in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences a PackedSequence holds, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)

