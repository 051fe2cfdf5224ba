"""Strided geometry: a geometry is (shape, strides, offset) in elements over a flat buffer,
as a tensor view addresses its storage. Shared by the strided ops, view VJPs, the tracer's
alias handling and native code's addressing."""


def contiguous_strides(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def geometry_overlaps(shape, strides):
    dims = sorted((abs(s), n) for n, s in zip(shape, strides) if n > 1)
    extent = 1
    for s, n in dims:
        if s < extent:
            return True
        extent = s * (n - 1) + extent
    return False


def geometry_span(shape, strides, offset):
    if any(n == 0 for n in shape):
        return offset
    return offset + 1 + sum((n - 1) * s for n, s in zip(shape, strides))
