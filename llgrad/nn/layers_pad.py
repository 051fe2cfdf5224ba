"""The padding modules: ZeroPad, ConstantPad, ReflectionPad, ReplicationPad and CircularPad,
each in 1, 2 and 3 dims (PyTorch's constructors, input checks and extra_repr) over F.pad."""
from . import functional as F
from .module import Module

__all__ = [f"{kind}Pad{n}d" for kind in ("Zero", "Constant", "Reflection", "Replication",
                                          "Circular") for n in (1, 2, 3)]


def _ntuple(x, n):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,) * n


class _ConstantPadNd(Module):
    def __init__(self, value):
        super().__init__()
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class _ModePadNd(Module):
    mode = None
    dims = ()           # the input ranks CircularPad accepts

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, 2 * self.n)

    def forward(self, input):
        if self.dims and input.dim() not in self.dims:
            raise ValueError(f"expected {self.dims[0]}D or {self.dims[1]}D input (got "
                             f"{input.dim()}D input)")
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self):
        return f"{self.padding}"


def _constant(n):
    def __init__(self, padding, value):
        _ConstantPadNd.__init__(self, value)
        self.padding = _ntuple(padding, 2 * n)
    name = f"ConstantPad{n}d"
    return type(name, (_ConstantPadNd,), {"__init__": __init__, "__module__": __name__,
                                          "__doc__": f"As torch.nn.{name}."})


ConstantPad1d, ConstantPad2d, ConstantPad3d = (_constant(n) for n in (1, 2, 3))


def _zero(base, n):
    def __init__(self, padding):
        base.__init__(self, padding, 0.0)

    def extra_repr(self):
        """The padding, as PyTorch prints it."""
        return f"{self.padding}"
    return type(f"ZeroPad{n}d", (base,), {"__init__": __init__, "__module__": __name__,
                                          "extra_repr": extra_repr,
                                          "__doc__": f"As torch.nn.ZeroPad{n}d."})


ZeroPad1d, ZeroPad2d, ZeroPad3d = (_zero(b, n) for b, n in ((ConstantPad1d, 1),
                                                            (ConstantPad2d, 2),
                                                            (ConstantPad3d, 3)))


def _mode(kind, mode, n, dims=()):
    return type(f"{kind}Pad{n}d", (_ModePadNd,), {"mode": mode, "n": n, "dims": dims,
                                                  "__module__": __name__,
                                                  "__doc__": f"As torch.nn.{kind}Pad{n}d."})


ReflectionPad1d, ReflectionPad2d, ReflectionPad3d = (_mode("Reflection", "reflect", n)
                                                     for n in (1, 2, 3))
ReplicationPad1d, ReplicationPad2d, ReplicationPad3d = (_mode("Replication", "replicate", n)
                                                        for n in (1, 2, 3))
CircularPad1d, CircularPad2d, CircularPad3d = (_mode("Circular", "circular", n, (n + 1, n + 2))
                                               for n in (1, 2, 3))
