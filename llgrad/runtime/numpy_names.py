"""PyTorch's NumPy-style keyword names: its argument parser takes axis= for dim= and
keepdims= for keepdim= in every function and method it binds (x.sum(axis=1),
torch.cat(ts, axis=1), x.max(axis=0, keepdims=True)). The llgrad.<name> functions and those
of llgrad.linalg / special / fft, and the Tensor.<name> methods, with a dim or keepdim
parameter are wrapped once, after every module has defined them (functions that pass their
keywords on to a method need no wrapper).
Methods that take their sizes or dims as *args take them as one keyword too, as PyTorch's
do: x.flip(dims=[0]), x.permute(dims=...), x.view(size=...)."""
import functools
import inspect

from . import functions
from .tensor import Tensor

_ALIASES = (("axis", "dim"), ("keepdims", "keepdim"))
# PyTorch's parser takes x= / a= / x1= for input= and x2= for other= too: in the linalg,
# special and fft namespaces, whose documentation names some inputs x (linalg.vector_norm),
# but not in llgrad.*, where a wrapper on every function of an input would cost each
# call ~0.2 us for spellings no one writes (torch.exp(x=t))
_INPUT_ALIASES = _ALIASES + (("x", "input"), ("a", "input"), ("x1", "input"), ("x2", "other"))
_ALIAS_NAMES = frozenset(a for a, _ in _INPUT_ALIASES)
# methods of *args -> PyTorch's keyword for the whole sequence
_SEQUENCES = {"flip": "dims", "permute": "dims", "view": "size", "reshape": "shape",
              "expand": "size", "repeat": "repeats", "new_zeros": "size", "new_ones": "size",
              "new_empty": "size", "sum_to_size": "size"}


def param_names(fn):
    """The names fn (unwrapped) takes by keyword, read from its code object (inspect's
    signature costs ~50x more, and every function is read at import)."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    return () if code is None else code.co_varnames[:code.co_argcount +
                                                     code.co_kwonlyargcount]


def _pairs(fn, aliases=_ALIASES):
    """The (alias, name) pairs fn takes: a parameter of the name without the alias."""
    params = param_names(fn)
    return tuple((a, n) for a, n in aliases if n in params and a not in params)


def _rename(fn, pairs, kwargs):
    for alias, name in pairs:
        if alias in kwargs:
            if name in kwargs:
                raise TypeError(f"{fn.__name__}() got multiple values for argument '{name}'")
            kwargs[name] = kwargs.pop(alias)


def _wrap(fn, pairs):
    @functools.wraps(fn)
    def f(*args, **kwargs):
        if kwargs and not _ALIAS_NAMES.isdisjoint(kwargs):     # (the cheap test first)
            _rename(fn, pairs, kwargs)
        return fn(*args, **kwargs)
    return f


def _wrap_sequence(fn, key):
    @functools.wraps(fn)
    def f(self, *args, **kwargs):
        if key in kwargs and not args:
            return fn(self, kwargs.pop(key), **kwargs)
        return fn(self, *args, **kwargs)
    return f


def wrap_numpy_names():
    for name, key in _SEQUENCES.items():
        fn = vars(Tensor).get(name)
        param = inspect.signature(fn).parameters.get(key) if inspect.isfunction(fn) else None
        if fn is not None and (param is None or param.kind is param.VAR_POSITIONAL):
            setattr(Tensor, name, _wrap_sequence(fn, key))
    for name, fn in list(vars(Tensor).items()):
        if inspect.isfunction(fn) and not name.startswith("_"):
            pairs = _pairs(fn)
            if pairs:
                setattr(Tensor, name, _wrap(fn, pairs))
    wrap_namespace(functions.__dict__, functions.__all__, functions.export, _ALIASES)


def wrap_namespace(namespace, names, export=None, aliases=_INPUT_ALIASES):
    """Wrap the functions names of namespace (a module's globals) that take an aliased name;
    export(fn, name) sets one (llgrad.*'s keeps its __all__), else namespace[name] = fn."""
    done = {}           # (an aliased function gets one wrapper under all its names)
    for name in list(names):
        fn = namespace.get(name)
        if not inspect.isfunction(fn):
            continue
        if id(fn) not in done:
            pairs = _pairs(fn, aliases)
            done[id(fn)] = _wrap(fn, pairs) if pairs else fn
        if done[id(fn)] is not fn:
            if export is None:
                namespace[name] = done[id(fn)]
            else:
                export(done[id(fn)], name)
