"""The user's allowlist for weights_only loads (PyTorch's add_safe_globals and friends):
classes and functions a checkpoint may name beyond the default table. Process-wide, as in
PyTorch; each load takes a copy when it starts."""
import contextlib
import threading

_user_globals = {}
_user_lock = threading.Lock()


def _global_name(obj):
    return f"{obj.__module__}.{obj.__qualname__}"


def add_safe_globals(safe_globals):
    """Allow these classes and functions (or (obj, "module.name") pairs) in
    weights_only loads. Only allow what you trust: an allowed class can be built and an
    allowed function called with arguments from the file."""
    with _user_lock:
        for item in safe_globals:
            if isinstance(item, tuple):
                obj, name = item
            else:
                obj, name = item, _global_name(item)
            _user_globals[name] = obj


def get_safe_globals():
    """The user's allowed globals (as add_safe_globals was given them)."""
    with _user_lock:
        return [obj if _global_name(obj) == name else (obj, name)
                for name, obj in _user_globals.items()]


def clear_safe_globals():
    """Forget every global allowed with add_safe_globals."""
    with _user_lock:
        _user_globals.clear()


@contextlib.contextmanager
def safe_globals(safe_globals):
    """A context manager that allows these globals for weights_only loads inside it."""
    with _user_lock:
        saved = dict(_user_globals)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        with _user_lock:
            _user_globals.clear()
            _user_globals.update(saved)


def user_globals():
    """A copy of the allowed globals, {"module.name": obj}, as one load sees them."""
    with _user_lock:
        return dict(_user_globals)
