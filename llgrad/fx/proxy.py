"""torch.fx's Proxy: the stand-in value symbolic tracing passes through forward. Its
operators, attribute reads, method calls and indexing record nodes (call_function on
operator.*, builtins.getattr, call_method); using it as a bool, iterating it or taking its
len raise PyTorch's errors."""
import bisect
import dis
import inspect
import operator

from .graph import MAGIC


class TraceError(ValueError):
    """What symbolic tracing cannot record (torch.fx.proxy.TraceError)."""


class Proxy:
    """A value of the traced program: its node in the tracer's graph."""

    def __init__(self, node, tracer=None):
        self.node, self.tracer = node, tracer

    def __repr__(self):
        return f"Proxy({self.node.name})"

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Attribute(self, name)

    def __call__(self, *args, **kwargs):
        return self.tracer.create_proxy("call_method", "__call__", (self,) + args, kwargs)

    def __iter__(self):
        frame = inspect.currentframe().f_back       # (`a, b = proxy`: its items)
        instructions = list(dis.get_instructions(frame.f_code))
        at = bisect.bisect_left(instructions, frame.f_lasti, key=lambda i: i.offset)
        if at < len(instructions) and instructions[at].opname == "UNPACK_SEQUENCE":
            return (self[i] for i in range(instructions[at].argval))
        raise TraceError("Proxy object cannot be iterated. This can be attempted when the "
                         "Proxy is used in a loop or as a *args or **kwargs function "
                         "argument. See the torch.fx docs on pytorch.org for a more detailed "
                         "explanation of what types of control flow can be traced, and check "
                         "out the Proxy docstring for help troubleshooting Proxy iteration "
                         "errors")

    def __bool__(self):
        raise TraceError("symbolically traced variables cannot be used as inputs to control "
                         "flow")

    def __len__(self):
        raise RuntimeError("'len' is not supported in symbolic tracing by default. If you want "
                           "this call to be recorded, please call llgrad.fx.wrap('len') at "
                           "module scope")

    def __getitem__(self, key):
        return self.tracer.create_proxy("call_function", operator.getitem, (self, key), {})


class Attribute(Proxy):
    """proxy.name: a method call when called, else a getattr node (made when used)."""

    def __init__(self, root, attr):
        self.root, self.attr, self.tracer = root, attr, root.tracer
        self._node = None

    @property
    def node(self):
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", getattr,
                                                  (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args, **kwargs):
        return self.tracer.create_proxy("call_method", self.attr, (self.root,) + args, kwargs)


def _binary(fn):
    def method(self, other):
        return self.tracer.create_proxy("call_function", fn, (self, other), {})
    return method


def _reflected(fn):
    def method(self, other):
        return self.tracer.create_proxy("call_function", fn, (other, self), {})
    return method


def _unary(fn):
    def method(self):
        return self.tracer.create_proxy("call_function", fn, (self,), {})
    return method


for _name in MAGIC:
    if _name == "getitem":
        continue
    _fn = getattr(operator, _name)
    _dunder = f"__{_name.rstrip('_')}__"
    if _name in ("neg", "pos", "invert"):
        setattr(Proxy, _dunder, _unary(_fn))
        continue
    setattr(Proxy, _dunder, _binary(_fn))
    if _name not in ("eq", "ne", "lt", "gt", "le", "ge"):
        setattr(Proxy, f"__r{_name.rstrip('_')}__", _reflected(_fn))
Proxy.__hash__ = object.__hash__
