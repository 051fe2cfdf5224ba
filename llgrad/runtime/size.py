"""llgrad.Size: a tensor's shape, as torch.Size (a tuple of ints whose slices, sums and
repeats are Sizes again)."""
from .sym_int import product


class Size(tuple):
    """A tensor's shape: a tuple of ints that prints as llgrad.Size([...]), as torch.Size."""
    def __repr__(self):
        return f"llgrad.Size({list(self)})"

    def numel(self) -> int:
        """The number of elements a tensor of this shape holds, as torch.Size.numel."""
        return product(self)    # (with a trace's SymInts in it: one, its uses watched)

    def __getitem__(self, key):
        out = tuple.__getitem__(self, key)
        return Size(out) if isinstance(key, slice) else out

    def __add__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(self, other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(other, self))

    def __mul__(self, n):
        out = tuple.__mul__(self, n)
        return out if out is NotImplemented else Size(out)

    __rmul__ = __mul__

    def __reduce__(self):
        return (Size, (tuple(self),))
