"""What the user's classes hold, as guards: an object's methods read its class's attributes
(`self.SCALE`, a class-level `ACT = staticmethod(F.relu)`, a property), which live on the
class, not in the object's __dict__ that the guard walk enters. Each of the user's classes
in an object's MRO is guarded by the identity of every value in its __dict__, so
`Model.SCALE = 5.0` or a method replaced between calls traces again (guards.py, and
guard_walker.py's check of the same). Library classes (nn.Linear, Module) are taken as
fixed: monkeypatching them between calls is not seen."""
import functools
import inspect
import weakref

import numpy as np

from ..runtime.tensor import Tensor
from .method_marks import recorded

LIBRARIES = ("llgrad", "numpy", "torch", "jax")


class Same:
    """A value compared and hashed by identity (a class attribute in a guard key: a tensor
    or an object of the user's with its own __eq__ is never compared by value)."""
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return type(other) is Same and other.v is self.v

    def __hash__(self):
        return id(self.v)

    def __repr__(self):
        v = self.v
        return repr(v) if isinstance(v, (int, float, str, bool, type(None))) else \
            f"<{type(v).__name__} {getattr(v, '__qualname__', hex(id(v)))}>"


@functools.lru_cache(maxsize=1024)
def user_classes(cls):
    """The user's classes in cls's MRO (not a library's, not builtins)."""
    return tuple(c for c in cls.__mro__ if not (getattr(c, "__module__", None) or "builtins")
                 .startswith(LIBRARIES + ("builtins",)))


def routine(v):
    """Whether v is a function or method: an object of the user's class that is a
    descriptor (a __get__ makes inspect call it a routine) is an object the walk enters."""
    return inspect.isroutine(v) and not user_classes(type(v))


# what Python itself caches on a class, not the user's state: copy.deepcopy(model) and
# pickling set __slotnames__ (copyreg) on the model's class the first time
_CACHES = frozenset(("__slotnames__",))


def _held(c):
    # (a method's recorder during a trace: the method, method_marks.py)
    return ((k, recorded(v)) for k, v in vars(c).items() if k not in _CACHES)


def class_state(cls):
    """A guard value of what cls's user classes hold (None when it has none)."""
    classes = user_classes(cls)
    if not classes:
        return None
    return tuple((c, tuple((k, Same(v)) for k, v in _held(c))) for c in classes)


def class_key(cls):
    """The functions cls's user classes define (methods, static and class methods' functions,
    property accessors), in order: a cache key of them. It holds the functions, not their
    ids: a key of ids would give a new object at a dead one's address (a property replaced)
    the dead one's functions, and the walk would follow what those read."""
    return tuple(f for c in user_classes(cls) for _, v in _held(c) for f in _functions(v))


def _functions(v):
    fs = (v.fget, v.fset, v.fdel) if isinstance(v, property) else (getattr(v, "__func__", v),)
    return tuple(f for f in fs if inspect.isfunction(f))


def class_containers(cls, path, done):
    """[(path, value)] of the tensors, NumPy arrays, lists, dicts, tuples, objects of the
    user's classes, partials, bound methods, weak references and modules that cls's user classes
    hold (`Config.sizes = [..]`, `Model.BIAS = torch.ones(3)`, `Model.CFG = Config()`), the
    first time `done` (a set) meets cls, else []: walked when the class is a value the
    function reads or the class of an object it reaches (`self.SCALES[0]`), since writing
    into one leaves what class_state guards (the identities) as it was."""
    if cls in done:
        return []
    done.add(cls)
    return [(f"{path}.{k}", v) for c in user_classes(cls) for k, v in vars(c).items()
            if (type(v) in (list, dict, tuple, np.ndarray, functools.partial)
                or isinstance(v, Tensor) or bound(v) or inspect.ismodule(v) or
                (hasattr(v, "__dict__") and user_classes(type(v)) and not isinstance(v, type)))
            and not k.startswith("__")]


def slotted(v):
    """Whether v is an object of the user's whose attributes are __slots__."""
    return not hasattr(v, "__dict__") and bool(user_classes(type(v))) and \
        any("__slots__" in vars(c) for c in user_classes(type(v)))


def bound(v):
    """Whether v is a method bound to what the walk enters (m.forward in a closure, a
    partial of m.run, a callback list's d.get) or a weak reference: what it is bound to, or
    refers to, holds state a call reads (a module's flags and tensors), not in a __dict__."""
    if isinstance(v, weakref.ref):
        return True
    s = getattr(v, "__self__", None) if inspect.isroutine(v) else None
    if s is None or inspect.ismodule(s) or hasattr(type(s), "_traced_fn"):
        return False        # (a function, a module's builtin, a compiled function's call)
    return inspect.ismethod(v) or isinstance(s, (list, tuple, dict, np.ndarray, Tensor)) or (
        hasattr(s, "__dict__") and not inspect.isclass(s))


def held(v, path):
    """[(path, value)] of what a functools.partial, a slotted object, a bound method or a
    weak reference v holds (a method's function is guarded by its identity)."""
    if type(v) is functools.partial:
        return [(f"{path}_func", v.func), (f"{path}_args", v.args),
                (f"{path}_keywords", v.keywords)]
    if isinstance(v, weakref.ref):
        return [(f"{path}_referent", v())]
    if bound(v):
        return [(f"{path}_func", getattr(v, "__func__", getattr(v, "__name__", None))),
                (f"{path}_self", v.__self__)]
    names = [n for c in user_classes(type(v)) for n in (
        (vars(c)["__slots__"],) if isinstance(vars(c).get("__slots__"), str)
        else vars(c).get("__slots__", ()))]
    return [(f"{path}_{n}", getattr(v, n)) for n in names if hasattr(v, n)]
