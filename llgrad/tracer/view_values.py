"""The values of views whose memory changed: a view read after a write through another view
of its memory, derived again from its root's value, and the root's new value after a write
through a view (the trace's functionalised writes, trace.py).

The tracer's geometry of a tensor is in its own elements. A view of another dtype than its
root's is the real view of a complex tensor (view_as_real, what the optimisers update a
complex parameter through) or the complex view of a real one (view_as_complex): its memory
is read in real elements, a complex value through view_as_real, as its real and imaginary
parts side by side (shape + (2,), strides and offset doubled). Any other change of dtype
stops the trace (a write would convert values where eager reinterprets bits)."""
from ..ir.geometry import geometry_span
from .bindings import geometry

_PARTS = {"complex64": "float32", "complex128": "float64"}


def read(tr, t, rv, geom):
    """t's value, read out of its root's value rv (of geometry geom)."""
    kind, tgeom, flat, _ = _memory(tr, t, rv, geom)
    v = tr.add("strided_gather", [flat], {"geom": tgeom})
    return tr.add("view_as_complex", [v], {}, view_of=v) if kind == "view" else v


def write(tr, t, new, rv, geom):
    """The root's new value (rv before, of geometry geom) after t became new."""
    kind, tgeom, flat, rgeom = _memory(tr, t, rv, geom)
    if kind == "view":
        new = tr.add("view_as_real", [new], {}, view_of=new)
    flat = tr.add("strided_put", [flat, new], {"geom": tgeom})
    out = tr.add("strided_gather", [flat], {"geom": rgeom})
    return tr.add("view_as_complex", [out], {}, view_of=out) if kind == "root" else out


def _real_geometry(geom):
    shape, strides, offset = geom
    return tuple(shape) + (2,), tuple(2 * s for s in strides) + (1,), 2 * offset


def _memory(tr, t, rv, geom):
    """(kind, t's geometry, the root's memory flat, the root's geometry), geometries in
    the flat memory's elements. kind: "same" dtype, "root" (t the real view of a complex
    root), "view" (t the complex view of a real root)."""
    tgeom = geometry(t)
    if rv.type.dtype == t._dtype.name:
        kind = "same"
    elif _PARTS.get(rv.type.dtype) == t._dtype.name:
        kind = "root"
        rv = tr.add("view_as_real", [rv], {}, view_of=rv)
        geom = _real_geometry(geom)
    elif _PARTS.get(t._dtype.name) == rv.type.dtype:
        kind, tgeom = "view", _real_geometry(tgeom)
    else:
        tr.graph_break(f"a view as {t._dtype.name} of {rv.type.dtype} memory")
    span = max(geometry_span(*geom), geometry_span(*tgeom))
    return kind, tgeom, tr._root_memory(geom, rv, span), geom
