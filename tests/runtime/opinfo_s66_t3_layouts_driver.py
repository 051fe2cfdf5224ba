"""OpInfo parity over non-contiguous inputs (not collected by pytest: run it by hand).

    python tests/runtime/opinfo_s66_t3_layouts_driver.py [--ops a,b] [--prefix nn.functional.]
           [--exclude P] [--after OP] [--dtypes float64] [--layouts C,T,step,expand]
           [--strides] [--alias] [--variants] [--list] [--out FILE]

The s65 driver (opinfo_s65_t2_driver.py) converts every sample tensor to a contiguous llgrad
copy, so no OpInfo sample ever reached llgrad with a strided layout.  This driver re-lays each
sample's tensors before running it in both libraries, with llgrad's tensor built over a copy
of the same storage with the same strides and offset (as_strided), so torch and llgrad see the
same layout:

- C:      the sample as it is (with --alias / --variants: checks the s65 driver lacks);
- T:      stored transposed (last two dims swapped in memory), values unchanged;
- step:   every other element of a buffer twice as long in the last dim, values unchanged;
- expand: the first slice along dim 0 broadcast over dim 0 (stride 0), floating tensors only
          (values change, the same in both libraries).

Leaves stay leaves (detach, then requires_grad_).  --strides compares output strides (lower
priority: it matters to a later .view()); --alias checks that an output shares memory with an
input exactly where torch's does (a view where torch returns a new tensor lets a write
through); --variants runs the Tensor method and in-place forms.  --list prints the op_db
entries skipped (SKIP: random or not comparable) or mapped to nothing (missing).  EXTRA maps
entries the s65 driver could not (__rdiv__, slice, cdouble, cfloat); masked.* are left
unmapped (llgrad has no torch.masked: the s65 driver ran them as Tensor.sum etc.).

Results of the s66 t3 run and what was fixed: tests/runtime/test_op_parity_s66_t3.py."""
import argparse
import json
import signal
import sys
import warnings

import numpy as np

import opinfo_s65_t2_driver as base    # sets up the expecttest stub, imports torch and op_db

import llgrad   # noqa: E402

torch = base.torch
_contig_to_l = base.to_l


def to_l(x):
    """base.to_l, keeping a torch tensor's strides and storage offset."""
    if isinstance(x, torch.Tensor) and x.layout == torch.strided and x.dtype != torch.bfloat16 \
            and x.numel() > 0 and not x.is_conj() and not x.is_neg() \
            and min(x.stride(), default=0) >= 0 \
            and (not x.is_contiguous() or x.storage_offset() or
                 x.untyped_storage().nbytes() != x.numel() * x.element_size()):
        # (the whole storage: an as_strided of a partial view reads beyond the view)
        t = x.detach()
        size = t.untyped_storage().nbytes() // t.element_size()
        flat = torch.as_strided(t, (size,), (1,), 0).numpy().copy()
        r = llgrad.tensor(flat).as_strided(tuple(t.shape), t.stride(), t.storage_offset())
        r = r.detach()
        if x.requires_grad:
            r.requires_grad_(True)
        return r
    if isinstance(x, (list, tuple)) and type(x) in (list, tuple):
        return type(x)(to_l(v) for v in x)
    if isinstance(x, dict):
        return {k: to_l(v) for k, v in x.items()}
    return _contig_to_l(x)


base.to_l = to_l     # run_sample / run_errors look the name up in their module


def _slice(x, dim=0, start=None, end=None, step=1):
    idx = [slice(None)] * x.dim()
    idx[dim] = slice(start, end, step)
    return x[tuple(idx)]


# op_db entries the s65 driver maps to nothing, given their llgrad spelling
EXTRA = {"__rdiv__": lambda x, other: x.__rtruediv__(other), "slice": _slice,
         "cdouble": lambda x, *a, **k: x.cdouble(*a, **k),     # (llgrad.cdouble: the dtype)
         "cfloat": lambda x, *a, **k: x.cfloat(*a, **k)}
_resolve = base.resolve


def resolve(op):
    if op.name in EXTRA:
        return EXTRA[op.name]
    if op.name.startswith("masked."):   # (no llgrad.masked: would map to Tensor.sum etc.)
        return None
    return _resolve(op)


base.resolve = resolve


def relayout(t, kind):
    """t re-laid as kind (a new leaf with t's requires_grad), or t when kind does not apply."""
    if not isinstance(t, torch.Tensor) or t.ndim == 0 or t.numel() == 0 \
            or t.layout != torch.strided:
        return t
    d = t.detach()
    if kind == "C":
        return t
    if kind == "T":
        if d.ndim < 2 or d.shape[-1] == 1 and d.shape[-2] == 1:
            return t
        v = d.transpose(-1, -2).contiguous().transpose(-1, -2)
    elif kind == "step":
        buf = torch.zeros(d.shape[:-1] + (2 * d.shape[-1],), dtype=d.dtype)
        buf[..., ::2] = d
        v = buf[..., ::2]
    elif kind == "expand":
        if not d.dtype.is_floating_point or d.shape[0] < 2:
            return t
        v = d[:1].expand(d.shape)
    else:
        raise ValueError(kind)
    return v.requires_grad_(t.requires_grad) if t.requires_grad else v


def relayout_all(x, kind):
    if isinstance(x, torch.Tensor):
        return relayout(x, kind)
    if type(x) in (list, tuple):
        return type(x)(relayout_all(v, kind) for v in x)
    if isinstance(x, dict):
        return {k: relayout_all(v, kind) for k, v in x.items()}
    return x


class Sample:
    def __init__(self, s, kind):
        self.input = relayout_all(s.input, kind)
        self.args = relayout_all(tuple(s.args), kind)
        self.kwargs = relayout_all(dict(s.kwargs), kind)

    def __repr__(self):
        def d(x):
            if isinstance(x, torch.Tensor) and x.layout == torch.strided:
                return f"T{tuple(x.shape)}s{x.stride()}{'g' if x.requires_grad else ''}"
            return repr(x)[:40]
        kw = {k: d(v) for k, v in self.kwargs.items()}
        return f"S({d(self.input)}, {[d(a) for a in self.args]}, {kw})"


def changed(s, r):
    a = [s.input, *s.args, *s.kwargs.values()]
    b = [r.input, *r.args, *r.kwargs.values()]
    return any(x is not y for x, y in zip(base.flat(a), base.flat(b)))


def strides_of(op, fl, s):
    try:
        t_out = op(s.input, *s.args, **s.kwargs)
        l_out = fl(*to_l([s.input, *s.args]), **to_l(s.kwargs))
    except Exception:
        return None
    for i, (a, b) in enumerate(zip(base.flat(t_out), base.flat(l_out))):
        if isinstance(a, torch.Tensor) and isinstance(b, llgrad.Tensor) and a.numel() > 1 \
                and tuple(a.shape) == tuple(b.shape) and a.stride() != tuple(b.stride()):
            return f"out{i} strides {tuple(b.stride())} vs {a.stride()}"
    return None


def _storages(xs, key):
    return {key(x) for x in base.flat(xs) if hasattr(x, "numel") and x.numel() > 0
            and getattr(x, "layout", None) in (None, torch.strided, "strided")}


def aliases_of(op, fl, s):
    """Which outputs share memory with an input: the same in both libraries (a view where
    torch gives a new tensor lets a write through; a copy where torch views, the reverse)."""
    with torch.no_grad():
        try:
            t_in = [s.input, *s.args, *s.kwargs.values()]
            l_in = to_l([s.input, *s.args])
            l_kw = to_l(s.kwargs)
            t_out = op(s.input, *s.args, **s.kwargs)
            with llgrad.no_grad():
                l_out = fl(*l_in, **l_kw)
        except Exception:
            return None
    ts = _storages(t_in, lambda x: x.untyped_storage().data_ptr())
    ls = _storages([l_in, list(l_kw.values())], lambda x: x.untyped_storage().data_ptr())
    for i, (a, b) in enumerate(zip(base.flat(t_out), base.flat(l_out))):
        if isinstance(a, torch.Tensor) and isinstance(b, llgrad.Tensor) and a.numel() > 0 \
                and a.layout == torch.strided:
            ta = a.untyped_storage().data_ptr() in ts
            la = b.untyped_storage().data_ptr() in ls
            if ta != la:
                return f"out{i} aliases an input: llgrad {la} torch {ta}"
    return None


def listing():
    for op in base.op_db:
        if op.name in base.SKIP:
            print(json.dumps({"op": op.name, "variant": op.variant_test_name, "msg": "SKIP"}))
        elif base.resolve(op) is None:
            print(json.dumps({"op": op.name, "variant": op.variant_test_name, "msg": "missing"}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="")
    ap.add_argument("--prefix", default="")
    ap.add_argument("--dtypes", default="float64")
    ap.add_argument("--layouts", default="T,step,expand")
    ap.add_argument("--strides", action="store_true")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--variants", action="store_true", help="also method / in-place forms")
    ap.add_argument("--alias", action="store_true", help="outputs must alias inputs as torch's")
    ap.add_argument("--after", default="", help="start at this op")
    ap.add_argument("--exclude", default="", help="skip ops whose name starts with this")
    ap.add_argument("--out", default="")
    ap.add_argument("--timeout", type=int, default=60)
    a = ap.parse_args()
    if a.list:
        return listing()
    want = set(a.ops.split(",")) if a.ops else None
    out = open(a.out, "w") if a.out else sys.stdout
    warnings.simplefilter("ignore")
    signal.signal(signal.SIGALRM, base._alarm)
    started = not a.after
    for op in base.op_db:
        started = started or op.name == a.after
        if not started:
            continue
        if a.exclude and op.name.startswith(a.exclude):
            continue
        if op.name in base.SKIP or (want and op.name not in want) or \
                not op.name.startswith(a.prefix):
            continue
        fl = base.resolve(op)
        if fl is None:
            continue
        print(op.name, op.variant_test_name, file=sys.stderr, flush=True)
        signal.alarm(a.timeout)
        try:
            for dn in a.dtypes.split(","):
                dt = getattr(torch, dn)
                if dt not in op.supported_dtypes("cpu"):
                    continue
                grad = op.supports_autograd and dt.is_floating_point
                torch.manual_seed(0)
                try:
                    samples = list(op.sample_inputs("cpu", dt, requires_grad=grad))
                except Exception:
                    continue
                for k, s0 in enumerate(samples):
                    for kind in a.layouts.split(","):
                        try:
                            s = Sample(s0, kind)
                        except Exception:
                            continue
                        if kind != "C" and not changed(s0, s):
                            continue
                        try:
                            m = base.run_sample(op, fl, s, grad)
                            if not m and a.strides:
                                m = strides_of(op, fl, s)
                            if not m and a.variants:
                                m = "; ".join(base.run_variants(op, s))
                            if not m and a.alias:
                                m = aliases_of(op, fl, s)
                        except base.Timeout:
                            raise
                        except Exception as e:
                            m = f"driver: {type(e).__name__}: {str(e)[:150]}"
                        if m:
                            print(json.dumps({"op": op.name, "variant": op.variant_test_name,
                                              "dtype": dn, "layout": kind, "k": k, "msg": m,
                                              "sample": repr(s)[:300]}), file=out, flush=True)
        except base.Timeout:
            print(json.dumps({"op": op.name, "msg": "timeout"}), file=out, flush=True)
        finally:
            signal.alarm(0)


if __name__ == "__main__":
    main()
