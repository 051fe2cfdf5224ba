"""`repr(tensor)` exactly as PyTorch 2.x prints it (torch/_tensor_str.py, with the print
options of set_printoptions), computed on the tensor's NumPy payload and spelling dtypes
`llgrad.<name>`."""
import math

import numpy as np

from ..ir.promotion import complex_of, default_float
from . import rendered_text, trace_state

PRECISION, THRESHOLD, EDGEITEMS, LINEWIDTH = 4, 1000, 3, 80
SCI_MODE = None     # None: chosen from the values; True / False: forced (set_printoptions)
_DEFAULT_DTYPES = ("int64", "bool")   # dtypes PyTorch leaves unprinted (and the default float)
# a dual tensor's tangent, or None (llgrad/autograd/forward_ad.py installs it)
tangent_of = None
_PROFILES = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80),
             "full": (4, math.inf, 3, 80)}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """As torch.set_printoptions: the digits after the point (precision), the element count
    above which a tensor is summarised (threshold) by edgeitems at each end, the characters
    per line (linewidth), a profile ("default", "short", "full") set first, and sci_mode
    (True / False force scientific notation on or off; None, the default, lets the values
    decide; every call sets it)."""
    global PRECISION, THRESHOLD, EDGEITEMS, LINEWIDTH, SCI_MODE
    if profile in _PROFILES:
        PRECISION, THRESHOLD, EDGEITEMS, LINEWIDTH = _PROFILES[profile]
    if precision is not None:
        PRECISION = precision
    if threshold is not None:
        THRESHOLD = threshold
    if edgeitems is not None:
        EDGEITEMS = edgeitems
    if linewidth is not None:
        LINEWIDTH = linewidth
    SCI_MODE = sci_mode


class _Formatter:
    """Chooses one layout (int / fixed / scientific) and one column width for all elements
    (torch/_tensor_str.py's _Formatter, step for step)."""

    def __init__(self, arr, floating):
        self.floating, self.int_mode, self.sci_mode, self.max_width = floating, True, False, 1
        flat = arr.reshape(-1)
        if not floating:
            self.max_width = max([1] + [len(f"{v}") for v in flat.tolist()])
            return
        vals = flat[np.isfinite(flat) & (flat != 0)]
        if vals.size == 0:              # only zeros / nan / inf: "0.", "nan", "inf" (torch
            return                      # returns before its sci_mode option applies)
        absv = np.abs(vals).astype(np.float64)
        lo, hi = absv.min(), absv.max()
        self.int_mode = bool(np.all(vals == np.ceil(vals)))
        with np.errstate(over="ignore"):
            self.sci_mode = bool(hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4) \
                if SCI_MODE is None else bool(SCI_MODE)
        pyvals = vals.tolist()
        if self.sci_mode:
            widths = [len(f"{v:.{PRECISION}e}") for v in pyvals]
        elif self.int_mode:             # +1 for the trailing "." of integer-valued floats
            widths = [len(f"{v:.0f}") + 1 for v in pyvals]
        else:
            widths = [len(f"{v:.{PRECISION}f}") for v in pyvals]
        self.max_width = max([1] + widths)

    def format(self, v):
        if not self.floating:
            s = f"{v}"
        elif self.sci_mode:
            s = f"{v:{self.max_width}.{PRECISION}e}"
        elif self.int_mode:
            s = f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
        else:
            s = f"{v:.{PRECISION}f}"
        return s.rjust(self.max_width)


class _ComplexFormatter:
    """Complex elements as torch prints them: the real parts with one formatter, the
    imaginary parts with another, joined as "1.0000+2.0000j"."""

    def __init__(self, arr):
        self.re, self.im = _Formatter(arr.real, True), _Formatter(arr.imag, True)
        self.max_width = self.re.max_width + 1 + self.im.max_width    # (torch's line packing)

    def format(self, v):
        im = (self.im.format(v.imag) + "j").lstrip()
        return self.re.format(v.real) + ("" if im[0] in "+-" else "+") + im


def _summarized(arr):
    """Only the edge items along every long axis (what the formatter gets to see)."""
    for axis, n in enumerate(arr.shape):
        if n > 2 * EDGEITEMS:
            idx = list(range(EDGEITEMS)) + list(range(n - EDGEITEMS, n))
            arr = np.take(arr, idx, axis=axis)
    return arr


def _body(a, indent, summarize, fmt):
    if a.ndim == 0:
        return fmt.format(a.item())
    n = a.shape[0]
    cut = summarize and n > 2 * EDGEITEMS
    if a.ndim == 1:
        if summarize and not EDGEITEMS:     # (torch: edgeitems=0 shows no element)
            data = ["..."]
        elif cut:
            data = ([fmt.format(v) for v in a[:EDGEITEMS].tolist()] + [" ..."]
                    + [fmt.format(v) for v in a[n - EDGEITEMS:].tolist()])
        else:
            data = [fmt.format(v) for v in a.tolist()]
        per_line = max(1, (LINEWIDTH - indent) // (fmt.max_width + 2))
        lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    rows = list(range(EDGEITEMS)) + [None] + list(range(n - EDGEITEMS, n)) if cut else range(n)
    slices = ["..." if i is None else _body(a[i], indent + 1, summarize, fmt) for i in rows]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def add_suffixes(text, suffixes, indent):
    """text + ", suffix" for each suffix (a line broken where torch breaks it) + ")"."""
    out = [text]
    last_line_len = len(text) - text.rfind("\n") + 1   # torch's own (off-by-two) measure
    for suffix in suffixes:
        # Measure as torch spells it ("torch." is one shorter than "llgrad.") so that lines
        # break exactly where torch's do: output == repr(torch_tensor) with the prefix swapped.
        n = len(suffix.replace("llgrad.", "torch."))
        if last_line_len + n + 2 > LINEWIDTH:
            out.append(",\n" + " " * indent + suffix)
            last_line_len = indent + n
        else:
            out.append(", " + suffix)
            last_line_len += n + 2
    return "".join(out) + ")"


def array_text(data, dtype, indent):
    """The bracketed values of a NumPy array of llgrad dtype `dtype` as torch prints them
    at column `indent` (summarised past the threshold); "[]" when empty."""
    if data.size == 0:
        return "[]"
    summarize = data.size > THRESHOLD
    shown = _summarized(data) if summarize else data
    fmt = _ComplexFormatter(shown) if data.dtype.kind == "c" else \
        _Formatter(shown, dtype.is_floating_point)
    return _body(data, indent, summarize, fmt)


def tensor_repr(t):
    tracer = trace_state.state.tracer
    try:
        grad_fn = t.grad_fn
        grad_fn_name = None if grad_fn is None else type(grad_fn).__name__
    except RuntimeError:                # as torch: an invalidated view's grad_fn
        grad_fn_name = "Invalid"
    requires_grad = t.requires_grad
    tangent = tangent_of(t) if tangent_of is not None else None
    tangent_text = None if tangent is None else tensor_repr(tangent)
    dtype = t._dtype
    text = repr_text(np.asarray(t._data), dtype, grad_fn_name, requires_grad, tangent_text)
    if tracer is not None and tracer.knows(t):
        # (the text shows this call's values: compiled calls print their own, or read them;
        # under print options the function set itself, read them: each call formats with
        # the options in force when it prints)
        rendering = rendered_text.active() if tangent is None else None
        if rendering is None or rendering.options != print_options():
            tracer.reads_out(t, "printing a tensor (its repr)")
        else:
            return rendering.add(t, lambda a: repr_text(a, dtype, grad_fn_name, requires_grad),
                                 text, lambda at: tracer.reads_out(
                                     t, f"printing a tensor (its repr) at {at}, the text then "
                                        "kept or read,", guard=True))
    return text


def print_options():
    """The print options now (set_printoptions')."""
    return PRECISION, THRESHOLD, EDGEITEMS, LINEWIDTH, SCI_MODE


def repr_text(data, dtype, grad_fn_name, requires_grad, tangent_text=None):
    """The repr of a tensor of these values (a NumPy array), llgrad dtype and autograd
    state, as torch prints it."""
    name = dtype.name
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    if data.size == 0:
        if data.ndim != 1:
            suffixes.append(f"size={tuple(int(d) for d in data.shape)}")
        if name != default_float():     # nothing to infer an integer dtype from
            suffixes.append(f"dtype=llgrad.{name}")
        body = "[]"
    else:
        if not EDGEITEMS:               # (torch names the size when no edge item shows)
            suffixes.append(f"size={tuple(int(d) for d in data.shape)}")
        if name not in _DEFAULT_DTYPES and name not in (default_float(),
                                                        complex_of(default_float())):
            suffixes.append(f"dtype=llgrad.{name}")
        body = array_text(data, dtype, indent)
    if grad_fn_name is not None:
        suffixes.append(f"grad_fn=<{grad_fn_name}>")
    elif requires_grad:
        suffixes.append("requires_grad=True")
    if tangent_text is not None:
        suffixes.append(f"tangent={tangent_text}")
    return add_suffixes(prefix + body, suffixes, indent)
