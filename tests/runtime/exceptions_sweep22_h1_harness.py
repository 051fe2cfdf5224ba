"""The harness of the test_exceptions_sweep22_h1*.py tables: a case is fn(L) run with L =
torch and L = llgrad. Where torch raises, llgrad must raise the same class or a subclass
of it (of the nearest built-in class for torch's own ones, such as torch's
AcceleratorError), with torch's first line (llgrad read as torch) unless the case is in the
table's own-words set, where llgrad's words must still be there and not an internal error;
where torch does not raise, llgrad must not either. The user warnings each one gives
(DeprecationWarnings aside) must be of the same classes."""
import builtins
import warnings

import llgrad

_INTERNAL = ("object has no attribute", "object is not subscriptable", "unhashable type",
             "referenced before assignment", "is not defined", "not supported between",
             "object is not iterable", "ufunc", "truth value of an")


def outcome(fn, lib):
    """(exception class or None, its message, the names of the warnings' classes)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            fn(lib)
            err = None
        except Exception as e:      # noqa: BLE001 (the exception is what is compared)
            err = e
    names = {w.category.__name__ for w in seen if issubclass(w.category, UserWarning)}
    if err is None:
        return None, "", names
    return type(err), str(err), names


def catchable_as(cls):
    """The class a test written against torch would catch: cls itself unless it is one of
    torch's own classes, then its nearest built-in base."""
    if not cls.__module__.startswith("torch"):
        return cls
    return next(c for c in cls.__mro__ if getattr(builtins, c.__name__, None) is c)


def first_line(msg, lib_name):
    line = (msg.splitlines() or [""])[0]
    return line.replace("llgrad", "torch") if lib_name == "llgrad" else line


def check(fn, torch, own_words=False):
    t_cls, t_msg, t_warn = outcome(fn, torch)
    l_cls, l_msg, l_warn = outcome(fn, llgrad)
    if t_cls is None:
        assert l_cls is None, f"torch does not raise; llgrad raised {l_cls.__name__}: {l_msg}"
    else:
        assert l_cls is not None, f"torch raised {t_cls.__name__}: {t_msg}; llgrad did not"
        want = catchable_as(t_cls)
        assert issubclass(l_cls, want), \
            f"llgrad raised {l_cls.__name__} ({l_msg}); torch {t_cls.__name__} ({t_msg})"
        if own_words:       # (torch's own AttributeErrors read as internal ones too)
            assert l_msg.strip(), l_msg
            assert t_cls is AttributeError or not any(s in l_msg for s in _INTERNAL), l_msg
        else:
            assert first_line(l_msg, "llgrad") == first_line(t_msg, "torch"), (l_msg, t_msg)
    assert l_warn == t_warn, (l_warn, t_warn)


def rounded(v):
    """Tensors as lists and floats to 6 digits (a gradient an ulp apart is the same state)."""
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return [rounded(x) for x in v]
    return float(f"{v:.6g}") if isinstance(v, float) else v
