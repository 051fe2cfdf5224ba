"""Run the `>>>` examples of PyTorch's docstrings with torch and with llgrad; compare values.

Namespace-agnostic API (other sweeps pass other objects):

- examples(objects) -> [(name, source)]: the example block of each object's __doc__ (all its
  `>>>` statements, in order, as one source text), for objects given as (name, obj) pairs;
  identical blocks are kept once;
- run_block(source, lib, seed=0) -> records: executes the block statement by statement in a
  fresh namespace where `torch` (and `import torch...`) means `lib`, after
  lib.manual_seed(seed); records what doctest would show: the value of every expression
  statement that is not None and every print() argument, as comparable snapshots; an
  exception is recorded as ("exc", type name) and the block goes on (as doctest does);
- skip_reason(torch_records, torch_records_again) -> str | None: why the block says nothing
  about llgrad (torch itself cannot run it: undefined names, missing files, CUDA; or torch's
  own two runs differ: uninitialised memory, nondeterminism);
- compare(torch_records, llgrad_records) -> str | None: the first mismatch, described.

Tensors compare by dtype, shape, requires_grad, grad_fn's name and values (floats to ~1e-6
relative, scaled for the dtype's precision; ints and bools exactly; a sparse tensor by its
layout and dense values); Python values by equality; exceptions by type (llgrad's may
subclass torch's); callables as callables; other objects by type name."""
import ast
import builtins
import contextlib
import doctest
import io
import os
import re
import shutil
import signal
import tempfile
import threading
import warnings

import numpy as np

_PARSER = doctest.DocTestParser()


# ---- extraction ----------------------------------------------------------------------------------
def examples(objects):
    out, seen = [], set()
    for name, obj in objects:
        doc = getattr(obj, "__doc__", None)
        if not isinstance(doc, str) or ">>>" not in doc:
            continue
        try:
            exs = _PARSER.get_examples(doc)
        except ValueError:          # malformed docstring (bad indentation of a continuation)
            continue
        src = "".join(e.source for e in exs)
        if not src.strip() or src in seen:
            continue
        seen.add(src)
        out.append((name, src))
    return out


# ---- running -------------------------------------------------------------------------------------
class _Timeout(Exception):
    pass


def _importer(lib):
    real = builtins.__import__
    libname = lib.__name__

    def imp(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and libname != "torch" and (name == "torch" or name.startswith("torch.")):
            name = libname + name[len("torch"):]
        return real(name, globals, locals, fromlist, level)
    return imp


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def snapshot(v, depth=0):
    """A library-independent description of a value doctest would show."""
    if depth > 4:
        return ("opaque", type(v).__name__)
    if v is None or isinstance(v, (bool, int, float, complex, str)):
        return ("py", v)
    t = type(v)
    if hasattr(v, "dtype") and hasattr(v, "shape") and hasattr(v, "detach") \
            and not isinstance(v, np.ndarray):
        d = v.detach()
        layout = str(getattr(v, "layout", "strided")).rsplit(".", 1)[-1]
        if layout != "strided":         # compared as its layout and its dense values
            try:
                return ("sparse", layout, snapshot(d.to_dense(), depth + 1))
            except Exception as e:
                return ("tensor-unreadable", _name(v.dtype), tuple(v.shape), layout)
        try:
            arr = np.array(d.cpu().resolve_conj().tolist() if _name(d.dtype) in ("bfloat16",)
                           else d.cpu().resolve_conj().numpy(), copy=True)
        except Exception as e:      # a tensor of a kind numpy cannot hold
            return ("tensor-unreadable", _name(v.dtype), tuple(v.shape), type(e).__name__)
        grad_fn = type(v.grad_fn).__name__ if v.grad_fn is not None else None
        return ("tensor", _name(v.dtype), tuple(v.shape), (bool(v.requires_grad), grad_fn), arr)
    if isinstance(v, np.ndarray):
        return ("ndarray", str(v.dtype), v.shape, v.copy())
    if t.__name__ == "Size" or (isinstance(v, tuple) and t.__name__ in ("Size",)):
        return ("seq", tuple(snapshot(x, depth + 1) for x in v))
    if isinstance(v, (tuple, list)):        # also torch.return_types (structseqs) and namedtuples
        return ("seq", tuple(snapshot(x, depth + 1) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple((snapshot(k, depth + 1), snapshot(x, depth + 1))
                              for k, x in v.items()))
    if t.__name__ == "dtype":
        return ("dtype", _name(v))
    if t.__name__ in ("device",):
        return ("py", str(v))
    if isinstance(v, np.generic):
        return ("py", v.item())
    if callable(v):         # (a builtin in torch may be a Python function in llgrad)
        return ("callable",)
    return ("opaque", t.__name__)


def prelude(lib):
    """The names PyTorch's docstrings use without importing them (its doctest runner's
    globals): numpy / np, math, io, itertools and F = torch.nn.functional."""
    import itertools
    import math
    names = {"numpy": np, "np": np, "math": math, "io": io, "itertools": itertools}
    nn = getattr(lib, "nn", None)
    if nn is not None and hasattr(nn, "functional"):
        names["F"] = nn.functional
    return names


def without(source, word):
    """source without its top-level statements that mention word (e.g. "cuda": the rest of a
    block that also shows a CUDA line still runs on the CPU)."""
    tree = ast.parse(source)
    keep = [n for n in tree.body if word not in ast.get_source_segment(source, n).lower()]
    return "".join(ast.unparse(n) + "\n" for n in keep)


def run_block(source, lib, seed=0, timeout=20.0):
    records = []
    bi = dict(vars(builtins))
    bi["__import__"] = _importer(lib)
    bi["print"] = lambda *a, **k: records.extend(snapshot(x) for x in a)
    ns = {"__builtins__": bi, "__name__": "__doctest__", "torch": lib}
    ns.update(prelude(lib))
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return [("exc", "SyntaxError", str(e))]
    saved = _global_state(lib)
    cwd, tmp = os.getcwd(), tempfile.mkdtemp(prefix="llgrad-docexample-")
    os.chdir(tmp)               # (examples write files such as 'storage.pt')
    lib.manual_seed(seed)
    use_alarm = timeout and threading.current_thread() is threading.main_thread()
    if use_alarm:
        def on_alarm(*_):
            raise _Timeout()
        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            for node in tree.body:
                try:
                    if isinstance(node, ast.Expr):
                        code = compile(ast.Expression(node.value), "<doc>", "eval")
                        v = eval(code, ns)
                        if v is not None:
                            records.append(snapshot(v))
                    else:
                        code = compile(ast.Module([node], []), "<doc>", "exec")
                        exec(code, ns)
                except _Timeout:
                    records.append(("exc", "Timeout", ""))
                    break
                except Exception as e:      # doctest shows it and goes on
                    records.append(("exc", type(e).__name__, str(e)[:200],
                                    tuple(c.__name__ for c in type(e).__mro__)))
            # and the tensors the block leaves in its names (an in-place op's result)
            for k in sorted(ns):
                v = ns[k]
                if not k.startswith("_") and hasattr(v, "dtype") and hasattr(v, "detach") \
                        and not isinstance(v, (type, np.ndarray)):
                    records.append(("final", k, snapshot(v)))
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        _restore_global_state(lib, saved)
        os.chdir(cwd)
        shutil.rmtree(tmp, ignore_errors=True)
    return records


def _global_state(lib):
    """The process-wide settings an example may change (set_default_dtype, no_grad, ...)."""
    return (lib.get_default_dtype(), lib.is_grad_enabled(),
            getattr(lib, "are_deterministic_algorithms_enabled", lambda: None)(),
            getattr(lib, "get_default_device", lambda: None)())


def _restore_global_state(lib, saved):
    dtype, grad, det, device = saved
    lib.set_default_dtype(dtype)
    if device is not None:
        lib.set_default_device(device)
    lib.set_grad_enabled(grad)
    if det is not None:
        lib.use_deterministic_algorithms(det)
    if hasattr(lib, "set_printoptions"):
        lib.set_printoptions(profile="default")


# ---- judging -------------------------------------------------------------------------------------
_CANNOT_RUN = {"NameError": "undefined name", "ModuleNotFoundError": "missing module",
               "ImportError": "missing module", "FileNotFoundError": "missing file",
               "SyntaxError": "not Python", "Timeout": "too slow",
               "AssertionError": "torch fails its own example",
               "NotImplementedError": "not implemented in torch on CPU"}


def skip_reason(torch_records, torch_records_again=None):
    for r in torch_records:
        if r[0] == "exc":
            msg = r[2] if len(r) > 2 else ""
            if "cuda" in msg.lower() or "CUDA" in msg or "mps" in msg.lower():
                return "needs CUDA/MPS"
            if r[1] in _CANNOT_RUN:
                return f"{_CANNOT_RUN[r[1]]} in torch ({r[1]}: {msg[:80]})"
    if torch_records_again is not None and compare(torch_records, torch_records_again):
        return "nondeterministic in torch"
    return None


def _tol(dtype):
    return {"float64": 1e-6, "complex128": 1e-6, "float32": 1e-5, "complex64": 1e-5,
            "float16": 1e-2, "bfloat16": 2e-2}.get(dtype, 0.0)


def _cmp(a, b, where):
    if a[0] != b[0]:
        return f"{where}: torch gives {a[0]} {a[1:2]}, llgrad gives {b[0]} {b[1:3]}"
    k = a[0]
    if k == "tensor":
        _, dt, sh, rg, x = a
        _, dt2, sh2, rg2, y = b
        if (dt, sh) != (dt2, sh2):
            return f"{where}: torch {dt}{list(sh)}, llgrad {dt2}{list(sh2)}"
        if rg != rg2:
            return f"{where}: (requires_grad, grad_fn) torch {rg}, llgrad {rg2}"
        return _values(x, y, _tol(dt), where)
    if k == "ndarray":
        if a[1:3] != b[1:3]:
            return f"{where}: ndarray torch {a[1:3]}, llgrad {b[1:3]}"
        return _values(a[3], b[3], _tol(a[1]), where)
    if k == "final":
        if a[1] != b[1]:
            return f"{where}: the block leaves tensor {a[1]!r} in torch, {b[1]!r} in llgrad"
        return _cmp(a[2], b[2], f"{where} (variable {a[1]} at the end)")
    if k == "sparse":
        if a[1] != b[1]:
            return f"{where}: layout torch {a[1]}, llgrad {b[1]}"
        return _cmp(a[2], b[2], where)
    if k == "seq" or k == "dict":
        if len(a[1]) != len(b[1]):
            return f"{where}: {k} of {len(a[1])} in torch, {len(b[1])} in llgrad"
        for i, (x, y) in enumerate(zip(a[1], b[1])):
            if k == "dict":
                m = _cmp(x[0], y[0], f"{where} key {i}") or _cmp(x[1], y[1], f"{where}[{i}]")
            else:
                m = _cmp(x, y, f"{where}[{i}]")
            if m:
                return m
        return None
    if k == "py":
        x, y = a[1], b[1]
        if type(x) is not type(y) and not (isinstance(x, (int, float)) and
                                           isinstance(y, (int, float)) and
                                           type(x) is not bool and type(y) is not bool):
            return f"{where}: torch {type(x).__name__} {x!r}, llgrad {type(y).__name__} {y!r}"
        if isinstance(x, (float, complex)) or isinstance(y, float):
            if x == y or (x != x and y != y):
                return None
            if abs(x - y) <= 1e-6 * max(1.0, abs(x)):
                return None
            return f"{where}: torch {x!r}, llgrad {y!r}"
        return None if x == y else f"{where}: torch {x!r}, llgrad {y!r}"
    if k == "exc":
        mro = b[3] if len(b) > 3 else (b[1],)
        return None if a[1] in mro else \
            f"{where}: torch raises {a[1]} ({a[2][:80]}), llgrad raises {b[1]} ({b[2][:120]})"
    return None if a[1:] == b[1:] else f"{where}: torch {a}, llgrad {b}"


def _values(x, y, tol, where):
    if x.shape != y.shape:
        return f"{where}: array shapes {x.shape} vs {y.shape}"
    if tol == 0.0:
        same = np.array_equal(x, y)
    else:
        scale = max(1.0, float(np.nanmax(np.abs(x[np.isfinite(x)]), initial=0.0)))
        same = np.allclose(x, y, rtol=tol, atol=tol * scale, equal_nan=True)
    if same:
        return None
    return f"{where}: values differ: torch {_short(x)}, llgrad {_short(y)}"


def _short(x):
    return np.array2string(np.asarray(x).ravel()[:8], precision=6)


def compare(torch_records, llgrad_records):
    for i, (a, b) in enumerate(zip(torch_records, llgrad_records)):
        m = _cmp(a, b, f"record {i}")
        if m:
            return m
    if len(torch_records) != len(llgrad_records):
        return f"torch records {len(torch_records)} values, llgrad {len(llgrad_records)}"
    return None


def judge(name, source, lib, torch_mod):
    """("skip", reason) | ("equal", None) | ("mismatch", description) for one block."""
    ref = run_block(source, torch_mod)
    why = skip_reason(ref, run_block(source, torch_mod))
    if why == "needs CUDA/MPS":         # try the block without its CUDA statements
        source = without(source, "cuda")
        ref = run_block(source, torch_mod)
        why = skip_reason(ref, run_block(source, torch_mod))
    if why:
        return "skip", why
    got = run_block(source, lib)
    m = compare(ref, got)
    if m and "values differ" in m and re.search(r"\bempty(_like|_strided)?\(|new_empty", source):
        # torch's two runs may reuse the same uninitialised memory; llgrad's is zeros
        return "skip", "reads uninitialised memory (empty) in torch"
    return ("mismatch", m) if m else ("equal", None)


def public_functions(module, prefix):
    """(qualified name, function) for the public callables of a module that are not classes."""
    out = []
    for n in sorted(dir(module)):
        if n.startswith("_"):
            continue
        obj = getattr(module, n, None)
        if obj is None or isinstance(obj, type) or not callable(obj):
            continue
        out.append((f"{prefix}.{n}", obj))
    return out


def public_methods(cls, prefix):
    out = []
    for n in sorted(dir(cls)):
        if n.startswith("_") and not (n.startswith("__") and n.endswith("__")):
            continue
        obj = getattr(cls, n, None)
        if obj is None:
            continue
        out.append((f"{prefix}.{n}", obj))
    return out

