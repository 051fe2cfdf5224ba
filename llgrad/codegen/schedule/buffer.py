"""A plan's buffers (plan.py places them; a slice is a block of another: concat.py)."""
from ..lowerings.scalar import ITEMSIZE


class Buffer:
    """role: input | output | scratch | temp | constant | stack (stacks.py) | slice (concat.py)."""

    def __init__(self, role, dtype, numel, value=None, index=None):
        self.role, self.dtype, self.numel = role, dtype, numel
        self.value = value          # the root Value (None for temps)
        self.index = index          # graph input index (inputs)
        self.slot = None            # index in the entry's pointer array
        self.first = self.last = None
        self.offset = None          # arena byte offset (scratch, temp)
        self.parent = self.base = self.strides = None   # a slice's: where it is, its layout

    @property
    def nbytes(self):
        return self.numel * ITEMSIZE[self.dtype]

    def __repr__(self):
        at = f" in slot {self.parent.slot}+{self.base}{self.strides or ''}" if self.parent else ""
        return f"<{self.role} buffer {self.dtype}[{self.numel}] slot={self.slot}{at}>"
