"""torch.fx.GraphModule: a Module holding a Graph and the submodules, parameters and
buffers its nodes name (copied from the root), whose forward is the graph's Python source
(recompile() after changing the graph); printed as the root's children and that source."""
import builtins
import math
import operator
import sys

from ..nn.module import Module
from ..nn.parameter import Parameter
from ..runtime.tensor import Tensor
from .graph import qualified_name


def _copy_attr(from_module, to_module, target):
    *prefix, field = target.split(".")
    for item in prefix:
        f = getattr(from_module, item)
        t = getattr(to_module, item, None)
        if f is t:
            return
        if t is None:
            t = Module()
            setattr(to_module, item, t)
        from_module, to_module = f, t
    orig = getattr(from_module, field)
    if isinstance(orig, Tensor) and not isinstance(orig, Parameter):
        to_module.register_buffer(field, orig)
    else:
        setattr(to_module, field, orig)


class GraphModule(Module):
    """GraphModule(root, graph, class_name='GraphModule'), as torch.fx.GraphModule: each
    instance is of its own subclass named class_name, so its forward is its own."""

    def __new__(cls, *args, **kwargs):
        while cls.__name__ == "GraphModuleImpl":
            cls = cls.__mro__[1]
        impl = type("GraphModuleImpl", (cls,), {})
        return super().__new__(impl)

    def __init__(self, root, graph, class_name="GraphModule"):
        super().__init__()
        type(self).__name__ = type(self).__qualname__ = class_name
        if isinstance(root, Module):
            if hasattr(root, "training"):
                self.training = root.training
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    _copy_attr(root, self, node.target)
        else:
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    *prefix, field = node.target.split(".")
                    to = self
                    for item in prefix:
                        if getattr(to, item, None) is None:
                            setattr(to, item, Module())
                        to = getattr(to, item)
                    value = root[node.target]
                    if isinstance(value, Tensor) and not isinstance(value, Parameter):
                        to.register_buffer(field, value)
                    else:
                        setattr(to, field, value)
        self.graph = graph

    @property
    def graph(self):
        """The Graph (setting it recompiles forward)."""
        return self.__dict__["_graph"]

    @graph.setter
    def graph(self, g):
        self.__dict__["_graph"] = g
        g.owning_module = self
        self.recompile()

    @property
    def code(self):
        """The Python source of forward."""
        return self.__dict__["_code"]

    def recompile(self):
        """Regenerate forward from the graph (after the graph was changed)."""
        code = self.graph.python_code("self")
        src = code.src
        scope = {**code.globals, "llgrad": sys.modules["llgrad"], "operator": operator, "builtins": builtins,
                 "inf": math.inf, "nan": math.nan, "NoneType": type(None)}
        for node in self.graph.nodes:     # (other functions: their modules in scope)
            if node.op == "call_function":
                head = qualified_name(node.target).split(".")[0]
                if head not in scope:
                    scope[head] = sys.modules[node.target.__module__.split(".")[0]]
        self.__dict__["_code"] = src
        exec(compile(src, f"<eval_with_key>.{id(self)}", "exec"), scope)
        type(self).forward = scope["forward"]
        return src

    def __str__(self):
        return "\n".join([Module.__repr__(self), self.code,
                          "# To see more debug info, please use "
                          "`graph_module.print_readable()`"])

    __repr__ = __str__
