"""The marks and recorders of ran_functions.py that the guard walks and class_state read:
a method no trace of a compiled function ran is marked in its dynamic set (MARK + the
function's id: guards._walk and guard_walker._walk skip it), and during a trace each
candidate method is replaced in its class by a recorder (recorded: the method it stands
for, which class_state reads in its place)."""
import inspect

MARK = "<not run> "
# names Python looks up in special ways: their functions are not replaced by recorders
KEPT = frozenset(("__new__", "__init_subclass__", "__class_getitem__", "__set_name__",
                  "__getattribute__", "__getattr__", "__setattr__", "__delattr__", "__del__"))
active = []     # the records of the traces under way (ran_functions.recording's)


def mark(f):
    return MARK + str(id(f))


def marks(dynamic):
    """The marks among a compiled function's dynamic set (no paths: guard_walker.py)."""
    return {p for p in dynamic if type(p) is str and p.startswith(MARK)}


def recorder(f, check=None):
    """f, noting its call in the record of every trace under way (of any thread), calling
    check(f) first if given (type_reads.check: f names type())."""
    def recorder(*args, **kwargs):
        for ran in active:
            ran.add(f)
        if check is not None:
            check(f)
        return f(*args, **kwargs)
    recorder.__wrapped__ = f
    recorder.__name__, recorder.__qualname__ = f.__name__, f.__qualname__
    recorder.__doc__, recorder.__module__ = f.__doc__, f.__module__
    return recorder


_CODE = recorder(len).__code__


def recorded(v):
    """The method a recorder stands for (what class_state reads of a class during a
    trace: the walks made inside it see the user's functions), else v."""
    return v.__wrapped__ if inspect.isfunction(v) and v.__code__ is _CODE else v
