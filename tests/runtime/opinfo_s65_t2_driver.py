"""Op parity driver over PyTorch's own OpInfo database (not collected by pytest: run it by hand).

    python tests/runtime/opinfo_s65_t2_driver.py [--ops a,b,...] [--prefix nn.functional.]
           [--dtypes float64,float32,int64] [--errors] [--out FILE]

Each OpInfo's samples (sample_inputs, or reference_inputs with --reference) are converted to
llgrad (torch.X -> llgrad.X, nn.functional.X -> llgrad.nn.functional.X, else Tensor methods)
and run eagerly; outputs are compared by dtype, shape and value, and, for differentiable
floating ops, the gradients of the sum of the floating outputs.  With --errors the
error_inputs must raise the same exception type.  One JSON line per mismatch."""
import argparse
import json
import signal
import sys
import traceback
import types
import warnings

import numpy as np

if "expecttest" not in sys.modules:     # torch's testing package imports it; not installed
    _m = types.ModuleType("expecttest")
    _m.TestCase = type("TestCase", (), {})
    sys.modules["expecttest"] = _m

import torch    # noqa: E402
from torch.testing._internal.common_methods_invocations import op_db    # noqa: E402

import llgrad   # noqa: E402

# random or otherwise not comparable value-for-value
SKIP = {"nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
        "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout", "nn.functional.rrelu",
        "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
        "bernoulli", "multinomial", "normal", "uniform", "randn", "rand", "randint", "randn_like",
        "rand_like", "randint_like", "empty", "empty_like", "empty_strided", "new_empty",
        "new_empty_strided", "empty_permuted", "cauchy", "exponential", "geometric", "log_normal",
        "bernoulli", "nn.functional.multi_head_attention_forward", "nn.functional.scaled_dot_product_attention",
        "svd_lowrank", "pca_lowrank", "item", "data_ptr", "storage_offset"}


def to_l(x):
    if isinstance(x, torch.Tensor):
        t = x.detach()
        if t.dtype == torch.bfloat16:
            r = llgrad.tensor(t.float().numpy()).to(llgrad.bfloat16)
        else:
            r = llgrad.tensor(t.resolve_conj().resolve_neg().numpy().copy())
        if x.requires_grad:
            r.requires_grad_(True)
        return r
    if isinstance(x, torch.dtype):
        return getattr(llgrad, str(x).split(".")[1])
    if isinstance(x, torch.device):
        return str(x)
    if isinstance(x, torch.Size):
        return tuple(x)
    if isinstance(x, torch.memory_format):
        return getattr(llgrad, str(x).split(".")[1])
    if isinstance(x, (list, tuple)):
        return type(x)(to_l(v) for v in x) if type(x) in (list, tuple) else tuple(to_l(v) for v in x)
    if isinstance(x, dict):
        return {k: to_l(v) for k, v in x.items()}
    if isinstance(x, torch.Generator) or callable(x) and not isinstance(x, (int, float)):
        raise NotImplementedError("unconvertible " + type(x).__name__)
    return x


def resolve(op):
    f = op.op
    if getattr(f, "__module__", "").startswith("torch.testing") and hasattr(f, "__code__"):
        # the OpInfo's own wrapper (argument order, a method call), run over llgrad
        g = dict(f.__globals__, torch=llgrad, F=llgrad.nn.functional)
        return types.FunctionType(f.__code__, g, f.__name__, f.__defaults__, f.__closure__)
    names = [op.name]
    if op.aten_name and op.aten_name != op.name:
        names.append(op.aten_name)
    for n in names:
        obj = llgrad
        try:
            for part in n.split("."):
                obj = getattr(obj, part)
            return obj
        except AttributeError:
            pass
    meth = op.name.split(".")[-1]
    if hasattr(llgrad.Tensor, meth):
        return lambda x, *a, **k: getattr(x, meth)(*a, **k)
    return None


def flat(o):
    if isinstance(o, (list, tuple)):
        out = []
        for v in o:
            out += flat(v)
        return out
    if hasattr(o, "_fields"):
        return flat(tuple(o))
    return [o]


def tol(dt):
    return {torch.float16: (1e-2, 1e-2), torch.bfloat16: (5e-2, 5e-2), torch.float32: (1e-4, 1e-5),
            torch.complex64: (1e-4, 1e-5)}.get(dt, (1e-7, 1e-9))


def cmp(t, l, where):
    """None if same, else a description."""
    if isinstance(t, torch.Tensor):
        if not isinstance(l, llgrad.Tensor):
            return f"{where}: type {type(l).__name__} vs Tensor"
        if str(l.dtype).split(".")[1] != str(t.dtype).split(".")[1]:
            return f"{where}: dtype {l.dtype} vs {t.dtype}"
        if tuple(l.shape) != tuple(t.shape):
            return f"{where}: shape {tuple(l.shape)} vs {tuple(t.shape)}"
        if t.dtype == torch.bfloat16:
            u, v = t.detach().float().numpy(), l.detach().float().numpy()
        else:
            u, v = t.detach().resolve_conj().resolve_neg().numpy(), l.detach().numpy()
        rt, at = tol(t.dtype)
        if u.dtype.kind in "fc":
            ok = np.allclose(v, u, rtol=rt, atol=at, equal_nan=True)
        else:
            ok = np.array_equal(v, u)
        if not ok:
            d = np.abs(v.astype(np.complex128) - u.astype(np.complex128)) if u.size else 0
            return f"{where}: values differ (max abs {np.nanmax(d) if u.size else 0:.3g})"
        return None
    if isinstance(t, (bool, int, float, complex)):
        if isinstance(l, llgrad.Tensor):
            return f"{where}: Tensor vs {type(t).__name__}"
        if not (t == l or (t != t and l != l) or (isinstance(t, float) and abs(t - l) <= 1e-6 * abs(t))):
            return f"{where}: {l!r} vs {t!r}"
        return None
    return None


class Timeout(Exception):
    pass


def _alarm(*_):
    raise Timeout()


def run_sample(op, fl, s, grad):
    t_in = [s.input] + list(s.args)
    try:
        l_in, l_kw = to_l(t_in), to_l(s.kwargs)
    except NotImplementedError as e:
        return None
    try:
        t_out = op(s.input, *s.args, **s.kwargs)
    except Exception:
        return None
    try:
        l_out = fl(*l_in, **l_kw)
    except Timeout:
        raise
    except Exception as e:
        return f"llgrad raised {type(e).__name__}: {str(e)[:200]}"
    tf, lf = flat(t_out), flat(l_out)
    if len(tf) != len(lf):
        return f"{len(lf)} outputs vs {len(tf)}"
    for i, (a, b) in enumerate(zip(tf, lf)):
        m = cmp(a, b, f"out{i}")
        if m:
            return m
    if not grad:
        return None
    t_leaves = [x for x in flat([t_in, list(s.kwargs.values())]) if isinstance(x, torch.Tensor)
                and x.requires_grad]
    l_leaves = [x for x in flat([l_in, list(l_kw.values())]) if isinstance(x, llgrad.Tensor)
                and x.requires_grad]
    if not t_leaves or len(t_leaves) != len(l_leaves):
        return None
    t_outs = [(a, b) for a, b in zip(tf, lf) if isinstance(a, torch.Tensor) and a.requires_grad
              and a.dtype.is_floating_point]
    if not t_outs:
        return None
    try:
        tg = torch.autograd.grad(sum(a.sum() for a, _ in t_outs), t_leaves, allow_unused=True)
    except Exception:
        return None
    try:
        lg = llgrad.autograd.grad(sum(b.sum() for _, b in t_outs), l_leaves, allow_unused=True)
    except Exception as e:
        return f"llgrad grad raised {type(e).__name__}: {str(e)[:200]}"
    for i, (a, b) in enumerate(zip(tg, lg)):
        if a is None and b is None:
            continue
        if a is None:
            a = torch.zeros_like(t_leaves[i])
        if b is None:
            return f"grad{i}: None vs tensor"
        m = cmp(a, b, f"grad{i}")
        if m:
            return m
    return None


def run_variants(op, s):
    """The Tensor method and in-place variants of one sample, without grad: same values, or
    both raise (the in-place form raises where the result cannot be cast to self's dtype)."""
    out = []
    name = op.name.split(".")[-1]
    if not isinstance(s.input, torch.Tensor):
        return out
    for kind, tv, lname in (("method", op.method_variant, name),
                            ("inplace", op.inplace_variant, name + "_")):
        if tv is None or not hasattr(llgrad.Tensor, lname):
            continue
        ti = s.input.detach().clone()
        try:
            l_in, l_kw = to_l([ti] + [a.detach() if isinstance(a, torch.Tensor) else a
                                      for a in s.args]), to_l(s.kwargs)
        except NotImplementedError:
            continue
        t_args = [a.detach() if isinstance(a, torch.Tensor) else a for a in s.args]
        try:
            tr, terr = getattr(ti, lname)(*t_args, **s.kwargs), None
        except Exception as e:
            tr, terr = None, e
        try:
            lr, lerr = getattr(l_in[0], lname)(*l_in[1:], **l_kw), None
        except Timeout:
            raise
        except Exception as e:
            lr, lerr = None, e
        if (terr is None) != (lerr is None):
            out.append(f"{kind}: torch {type(terr).__name__ if terr else 'ok'} llgrad "
                       f"{type(lerr).__name__ + ': ' + str(lerr)[:120] if lerr else 'ok'}")
            continue
        if terr is None:
            for i, (a, b) in enumerate(zip(flat(tr), flat(lr))):
                m = cmp(a, b, f"{kind} out{i}")
                if m:
                    out.append(m)
                    break
            if kind == "inplace":
                m = cmp(ti, l_in[0], "inplace self")
                if m:
                    out.append(m)
    return out


def run_errors(op, fl):
    res = []
    try:
        eis = list(op.error_inputs("cpu"))
    except Exception:
        return res
    for ei in eis:
        s = ei.sample_input
        try:
            l_in, l_kw = to_l([s.input] + list(s.args)), to_l(s.kwargs)
        except Exception:
            continue
        try:
            fl(*l_in, **l_kw)
            res.append(f"no error, torch {ei.error_type.__name__}: {ei.error_regex[:80]}")
        except Timeout:
            raise
        except Exception as e:
            if not isinstance(e, ei.error_type):
                res.append(f"{type(e).__name__} vs {ei.error_type.__name__}: {str(e)[:120]}")
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="")
    ap.add_argument("--prefix", default="")
    ap.add_argument("--dtypes", default="float64,float32,int64")
    ap.add_argument("--errors", action="store_true")
    ap.add_argument("--reference", action="store_true")
    ap.add_argument("--variants", action="store_true", help="also Tensor method / in-place forms")
    ap.add_argument("--out", default="")
    ap.add_argument("--timeout", type=int, default=60)
    a = ap.parse_args()
    want = set(a.ops.split(",")) if a.ops else None
    out = open(a.out, "w") if a.out else sys.stdout
    warnings.simplefilter("ignore")
    signal.signal(signal.SIGALRM, _alarm)
    for op in op_db:
        if op.name in SKIP or (want and op.name not in want) or not op.name.startswith(a.prefix):
            continue
        fl = resolve(op)
        if fl is None:
            print(json.dumps({"op": op.name, "variant": op.variant_test_name, "msg": "missing"}),
                  file=out, flush=True)
            continue
        print(op.name, op.variant_test_name, file=sys.stderr, flush=True)
        signal.alarm(a.timeout)
        try:
            for dn in a.dtypes.split(","):
                dt = getattr(torch, dn)
                if dt not in op.supported_dtypes("cpu"):
                    continue
                grad = op.supports_autograd and dt == torch.float64
                gen = op.reference_inputs if a.reference else op.sample_inputs
                torch.manual_seed(0)
                try:
                    samples = list(gen("cpu", dt, requires_grad=grad))
                except Exception:
                    continue
                for k, s in enumerate(samples):
                    try:
                        m = run_sample(op, fl, s, grad)
                    except Timeout:
                        raise
                    except Exception as e:
                        m = f"driver: {type(e).__name__}: {str(e)[:150]}"
                    if a.variants and not m:
                        try:
                            m = "; ".join(run_variants(op, s))
                        except Timeout:
                            raise
                        except Exception as e:
                            m = f"driver: {type(e).__name__}: {str(e)[:150]}"
                    if m:
                        print(json.dumps({"op": op.name, "variant": op.variant_test_name, "dtype": dn,
                                          "k": k, "msg": m, "sample": repr(s)[:300]}),
                              file=out, flush=True)
            if a.errors:
                for m in run_errors(op, fl):
                    print(json.dumps({"op": op.name, "variant": op.variant_test_name,
                                      "msg": "error_inputs: " + m}), file=out, flush=True)
        except Timeout:
            print(json.dumps({"op": op.name, "msg": "timeout"}), file=out, flush=True)
        finally:
            signal.alarm(0)


if __name__ == "__main__":
    main()
