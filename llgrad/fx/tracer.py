"""torch.fx.symbolic_trace: forward run on Proxies records a Graph. llgrad.nn's modules
(but Sequential and the containers) are leaves (call_module); other modules are traced
through; parameters and buffers read from a module are get_attr nodes; llgrad.* and
llgrad.nn.functional.* functions called on a Proxy are call_function nodes (those two
namespaces are wrapped while tracing); a tensor constant becomes an attribute
_tensor_constant<i> of the root."""
import builtins
import functools
import inspect
import sys
import types
import warnings

from ..nn import functional as F
from ..nn.module import Module
from ..runtime.tensor import Tensor
from ._symbolic_trace import PHBase, _assert_is_none
from .graph import Graph
from .graph_module import GraphModule
from .proxy import Proxy, TraceError

_CONTAINERS = ("Sequential", "ModuleList", "ModuleDict")
_ABSENT = object()


def _has_proxy(a):
    found = []

    def walk(x):
        if isinstance(x, Proxy):
            found.append(x)
        elif isinstance(x, (tuple, list)):
            for y in x:
                walk(y)
        elif isinstance(x, dict):
            for y in x.values():
                walk(y)
    walk(a)
    return bool(found)


class Tracer:
    """Records a module's or a function's forward as a Graph (torch.fx.Tracer)."""

    def __init__(self):
        self.graph = None
        self.root = None
        self.tensor_attrs = {}

    def is_leaf_module(self, m, module_qualified_name):
        """Whether m is recorded as one call_module node (llgrad.nn's own modules)."""
        return m.__module__.startswith("llgrad.nn") and \
            type(m).__name__ not in _CONTAINERS

    def path_of_module(self, mod):
        for name, m in self.root.named_modules():
            if m is mod:
                return name
        raise NameError("module is not installed as a submodule")

    def create_arg(self, a):
        """a as a node argument: Proxies become their nodes, tensor constants attributes."""
        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, tuple):
            return tuple(self.create_arg(x) for x in a)
        if isinstance(a, list):
            return [self.create_arg(x) for x in a]
        if isinstance(a, dict):
            return {k: self.create_arg(v) for k, v in a.items()}
        if isinstance(a, slice):
            return slice(self.create_arg(a.start), self.create_arg(a.stop),
                         self.create_arg(a.step))
        if isinstance(a, Tensor):
            for n, p in list(self.root.named_parameters()) + list(self.root.named_buffers()):
                if p is a:
                    return self.graph.get_attr(n)
            if id(a) in self.tensor_attrs:     # (a plain tensor attribute of a module)
                return self.graph.get_attr(self.tensor_attrs[id(a)])
            i = 0
            while hasattr(self.root, f"_tensor_constant{i}"):
                i += 1
            setattr(self.root, f"_tensor_constant{i}", a)
            return self.graph.get_attr(f"_tensor_constant{i}")
        return a

    def create_proxy(self, kind, target, args, kwargs, name=None):
        node = self.graph.create_node(kind, target, self.create_arg(tuple(args)),
                                      self.create_arg(dict(kwargs)), name)
        return Proxy(node, self)

    def trace(self, root, concrete_args=None):
        """The Graph of root's forward (root a Module or a function)."""
        if isinstance(root, Module):
            self.root, fn = root, type(root).forward
        else:
            self.root, fn = Module(), root
        self.graph = Graph()
        self.tensor_attrs = {id(v): (f"{path}.{k}" if path else k)
                             for path, m in self.root.named_modules()
                             for k, v in vars(m).items() if isinstance(v, Tensor)}
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())[1 if isinstance(root, Module) else 0:]
        args = []
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TraceError("llgrad.fx: forward with *args or **kwargs")
            default = () if p.default is p.empty else (p.default,)
            if concrete_args and p.name in concrete_args:
                args.append(self._specialized(p.name, default, concrete_args[p.name]))
                continue
            args.append(self.create_proxy("placeholder", p.name, default, {}))
            if p.annotation is not p.empty:
                args[-1].node.type = p.annotation
        attrs = {}
        with _patched(self, attrs):
            out = fn(root, *args) if isinstance(root, Module) else fn(*args)
        returns = sig.return_annotation
        self.graph.output(self.create_arg(out),
                          type_expr=None if returns is sig.empty else returns)
        return self.graph


    def _specialized(self, name, default, value):
        """An argument concrete_args fixes, as torch.fx's: a placeholder name_1; PH leaves
        it the placeholder; a number, string or bool is checked equal by an _assert in the
        graph, None by _assert_is_none, and the function traced with the value itself (of
        another kind: unchecked, with torch's warning)."""
        count = 0

        def leaf(x):
            nonlocal count
            count += 1
            out = self.create_proxy("placeholder", f"{name}_{count}", default, {})
            if isinstance(x, PHBase):
                return out
            msg = f"{name} has been specialized to have value {x} but got another value"
            if type(x) in (bool, int, float, complex, str):
                self.create_proxy("call_function", sys.modules["llgrad"]._assert,
                                  (out == x, msg), {})
            elif x is None:
                self.create_proxy("call_function", _assert_is_none, (out, msg), {})
            else:
                warnings.warn(f"Was not able to add assertion to guarantee correct input "
                              f"{name} to specialized function. It is up to the user to make "
                              "sure that your inputs match the inputs you specialized the "
                              "function with.")
            return x

        if isinstance(value, (tuple, list, dict)):
            # (torch.fx traces these through its pytree code generator: a forward that
            # flattens its arguments by the trace's spec)
            raise NotImplementedError(f"llgrad.fx: concrete_args[{name!r}] is a "
                                      f"{type(value).__name__}: only single values and PH")
        return leaf(value)


def _namespaces():
    return (sys.modules["llgrad"], F)


def _wrap(tracer, fn):
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        if _has_proxy((args, kwargs)):
            return tracer.create_proxy("call_function", fn, args, kwargs)
        return fn(*args, **kwargs)
    return wrapped


_wrapped = []       # (a module's globals, a function name there) that wrap() named


def wrap(fn_or_name):
    """Record calls of the global function fn_or_name (a name, e.g. "len", or the function)
    of the calling module as call_function nodes when their arguments are Proxies, as
    torch.fx.wrap (called at module scope)."""
    name = fn_or_name if isinstance(fn_or_name, str) else fn_or_name.__name__
    frame = inspect.currentframe().f_back
    if frame.f_code.co_name != "<module>":
        raise NotImplementedError("wrap must be called at the top level of a module")
    _wrapped.append((frame.f_globals, name))
    return fn_or_name


class _patched:
    """While tracing: Module.__call__ and __getattr__ and the two namespaces' functions
    record nodes; all put back after."""

    def __init__(self, tracer, attrs):
        self.tracer, self.attrs, self.saved = tracer, attrs, []

    def __enter__(self):
        tracer, attrs = self.tracer, self.attrs
        call, getattr_ = Module.__call__, Module.__getattr__

        def module_call(mod, *args, **kwargs):
            path = tracer.path_of_module(mod)
            if tracer.is_leaf_module(mod, path):
                return tracer.create_proxy("call_module", path, args, kwargs)
            return type(mod).forward(mod, *args, **kwargs)

        def module_getattr(mod, name):
            value = getattr_(mod, name)
            if isinstance(value, Tensor):
                for n, p in list(tracer.root.named_parameters()) + \
                        list(tracer.root.named_buffers()):
                    if p is value:
                        if n not in attrs:
                            attrs[n] = tracer.create_proxy("get_attr", n, (), {})
                        return attrs[n]
            return value
        self.saved.append((Module, "__call__", call))
        self.saved.append((Module, "__getattr__", getattr_))
        Module.__call__, Module.__getattr__ = module_call, module_getattr
        for g, name in _wrapped:
            fn = g.get(name, getattr(builtins, name, None))
            if fn is not None:
                self.saved.append((g, name, g.get(name, _ABSENT)))
                g[name] = _wrap(tracer, fn)
        for ns in _namespaces():
            for name, fn in list(vars(ns).items()):
                if isinstance(fn, (types.FunctionType, types.BuiltinFunctionType)) and \
                        not name.startswith("_"):
                    self.saved.append((ns, name, fn))
                    setattr(ns, name, _wrap(tracer, fn))
        return self

    def __exit__(self, *exc):
        for owner, name, value in reversed(self.saved):
            if isinstance(owner, dict):     # (a module's globals, from wrap())
                if value is _ABSENT:
                    owner.pop(name, None)
                else:
                    owner[name] = value
            else:
                setattr(owner, name, value)


def symbolic_trace(root, concrete_args=None):
    """A GraphModule recording root's forward (a Module or a function), as
    torch.fx.symbolic_trace."""
    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = type(root).__name__ if isinstance(root, Module) else root.__name__
    return GraphModule(tracer.root, graph, name)
