"""llgrad.library: torch.library's Python custom operators (custom_op, register_fake,
register_autograd, register_kernel, opcheck) and torch.ops.<namespace>.<name>.

A custom op runs its Python kernel as an opaque function (NumPy, PIL, anything), with grad
mode off; with a formula from register_autograd it gets a backward node as an
autograd.Function would, without one a backward through it raises (PyTorch's "no autograd
formula"). Under llgrad.compile a kernel that reads tensors' values out (Tensor.numpy())
makes the call run eagerly, with the compile's warning. Ops are registered per process, as
PyTorch's dispatcher has them; `_reset()` forgets them all."""
import inspect

from .runtime import grad_mode
from .runtime.autograd_function import Function
from .runtime.tensor import Tensor

_ops = {}       # "namespace::name" -> CustomOpDef


def _reset():
    """Forget every registered custom op."""
    _ops.clear()


class OpCheckError(Exception):
    """What opcheck raises for an op registered wrongly."""


def _tensors(value):
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, Tensor)]
    return []


def _detached(value):
    if isinstance(value, Tensor):
        return value.detach()
    if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) for v in value):
        return type(value)(v.detach() if isinstance(v, Tensor) else v for v in value)
    return value


class CustomOpDef:
    """A Python function registered as the operator namespace::name (what custom_op
    returns): call it as the function; register_fake, register_autograd, register_kernel
    attach the rest."""

    def __init__(self, qualname, fn, mutates_args):
        self._qualname = qualname
        self._namespace, self._name = qualname.split("::")
        self._init_fn = fn
        self._kernel = fn
        self._signature = inspect.signature(fn)
        self._mutates = mutates_args
        self._fake = None
        self._backward = self._setup_context = None
        self._function = _function_for(self)
        self.__name__ = self._name
        self.__doc__ = fn.__doc__

    def __repr__(self):
        return f"<CustomOpDef({self._qualname})>"

    @property
    def default(self):
        """The op's only overload (torch.ops.ns.name.default)."""
        return self

    def register_fake(self, fn):
        """fn(*args) -> outputs with the right shapes and dtypes, made without computing."""
        self._fake = fn
        return fn

    def register_kernel(self, device_types, fn=None):
        """Replace the kernel (llgrad runs on the CPU: any device type's kernel is the one)."""
        def register(f):
            self._kernel = f
            return f
        return register if fn is None else register(fn)

    def register_autograd(self, backward, /, *, setup_context=None):
        """backward(ctx, *grads) -> one gradient (or None) per input; setup_context(ctx,
        inputs, output) saves what backward needs."""
        if self._mutates:
            raise RuntimeError(f"Attempted to register an autograd formula for a non-functional "
                               f"operator {self._qualname}: autograd for mutable custom ops "
                               "is not supported")
        self._backward, self._setup_context = backward, setup_context

    def _bind(self, args, kwargs):
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return bound.args

    def _run(self, args):
        """The kernel on the bound arguments, with PyTorch's checks of what it returns."""
        with grad_mode.no_grad():   # (the kernel sees tensors without autograd, as PyTorch's)
            out = self._kernel(*[_detached(a) for a in args])
        ins = [t for a in args for t in _tensors(a)]
        outs = _tensors(out)
        storages = {id(t._storage) for t in ins}
        seen = set()
        for o in outs:
            if id(o._storage) in storages or id(o._storage) in seen:
                raise RuntimeError(
                    f"{self._name}: The output of this custom operator (1) must not also be an "
                    "input to this custom operator and (2) may not alias any inputs to this "
                    "custom operator or other returns. The most common way to trigger this "
                    "error is if we have y = custom_op(x) and y and x are the same Tensor. "
                    "Please instead return a clone of the offending output tensor(s) (e.g. "
                    "return x.clone()) or refactor the custom operator to not return y.")
            seen.add(id(o._storage))
        for name, a in zip(self._signature.parameters, args):
            if name in self._mutates:
                for t in _tensors(a):
                    t._storage.version += 1     # (a kernel writing through NumPy bumps none)
        return out

    def __call__(self, *args, **kwargs):
        args = self._bind(args, kwargs)
        needs = grad_mode.is_grad_enabled() and any(
            t.requires_grad for a in args for t in _tensors(a))
        if not needs or self._mutates:
            return self._run(args)
        return self._function.apply(*args)


def _function_for(op):
    """The autograd.Function of a custom op, named as PyTorch names the op's backward node."""
    def forward(*args):
        return op._run(args)

    def setup_context(ctx, inputs, output):
        if op._setup_context is not None:
            op._setup_context(ctx=ctx, inputs=inputs, output=output)

    def backward(ctx, *grads):
        if op._backward is None:
            raise RuntimeError(f"Trying to backward through {op._namespace}.{op._name}.default "
                               "but no autograd formula was registered. Please use "
                               "register_autograd to add one.")
        res = op._backward(ctx, *grads)
        return res if isinstance(res, tuple) else (res,)

    return type(f"GeneratedBackwardFor_{op._namespace}_{op._name}_default", (Function,),
                {"forward": staticmethod(forward), "setup_context": staticmethod(setup_context),
                 "backward": staticmethod(backward)})


def _infer_schema_check(fn):
    sig = inspect.signature(fn)
    for name, p in sig.parameters.items():
        if p.annotation is inspect.Parameter.empty:
            raise ValueError(f"infer_schema(func): Parameter {name} must have a type "
                             f"annotation. Got func with signature {sig})")
    if sig.return_annotation is inspect.Signature.empty:
        raise ValueError("infer_schema(func): No return type annotation was provided. Please "
                         f"add one. Got func with signature {sig})")
    return sig


def custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None):
    """Register fn as the operator name ("namespace::opname"), as torch.library.custom_op
    (a decorator without fn); mutates_args names the arguments the kernel writes."""
    if not isinstance(name, str) or name.count("::") != 1:
        raise ValueError(f"Expected name to be of the form 'namespace::opname', got {name!r}")

    def register(f):
        sig = _infer_schema_check(f) if schema is None else inspect.signature(f)
        if mutates_args == "unknown":
            mutated = frozenset(sig.parameters)
        else:
            mutated = frozenset([mutates_args] if isinstance(mutates_args, str) else mutates_args)
            for m in mutated:
                if m not in sig.parameters:
                    raise ValueError(f"{m} in mutates_args were not found in the custom op's "
                                     "signature.")
        op = _ops[name] = CustomOpDef(name, f, mutated)
        return op
    return register if fn is None else register(fn)


def _lookup(op):
    if isinstance(op, CustomOpDef):
        return op
    if op not in _ops:
        raise ValueError(f"no custom op named {op!r} is registered")
    return _ops[op]


def register_fake(op, func=None, /):
    """torch.library.register_fake(op, fn) (or as a decorator): the op's fake kernel."""
    def register(f):
        return _lookup(op).register_fake(f)
    return register if func is None else register(func)


def register_autograd(op, backward, /, *, setup_context=None):
    """torch.library.register_autograd: the op's backward formula."""
    _lookup(op).register_autograd(backward, setup_context=setup_context)


def register_kernel(op, device_types, func=None, /):
    """torch.library.register_kernel: the op's kernel (llgrad's device is the CPU)."""
    return _lookup(op).register_kernel(device_types, func)


def _clone_args(args):
    return tuple(a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, Tensor)
                 else a for a in args)


def opcheck(op, args, kwargs=None, *, test_utils=None, raise_exception=True, atol=None,
            rtol=None):
    """Check a custom op's registration as torch.library.opcheck: it runs, leaves the
    arguments it does not declare mutated unchanged, returns no alias of its inputs, and
    its fake kernel gives the real outputs' shapes and dtypes. -> {test name: "SUCCESS" or
    the exception} (raises OpCheckError unless raise_exception=False)."""
    op = _lookup(op)
    results = {}

    def run(test, check):
        try:
            check()
            results[test] = "SUCCESS"
        except Exception as e:      # (every failure is reported under its test's name)
            if raise_exception:
                raise OpCheckError(f"opcheck(op, ...): {test} failed with {e}") from e
            results[test] = e

    bound = op._bind(tuple(args), kwargs or {})

    def schema():
        given = _clone_args(bound)
        before = [a.detach().clone() if isinstance(a, Tensor) else None for a in given]
        op(*given)
        for name, a, b in zip(op._signature.parameters, given, before):
            if b is not None and name not in op._mutates and not a.detach().equal(b):
                raise RuntimeError(f"argument {name} is mutated but not in mutates_args")

    def autograd():
        given = _clone_args(bound)
        out = [o for o in _tensors(op(*given)) if o.requires_grad]
        if out and op._backward is not None:
            sum(o.sum() for o in out).backward()

    def fake():
        real = op._run(_clone_args(bound))
        if not _tensors(real):
            return
        if op._fake is None:
            raise RuntimeError(f"There was no fake impl registered for {op}.")
        with grad_mode.no_grad():
            guess = op._fake(*_clone_args(bound))
        for r, g in zip(_tensors(real), _tensors(guess)):
            if tuple(r.shape) != tuple(g.shape) or r.dtype != g.dtype:
                raise RuntimeError(f"the fake kernel gives {tuple(g.shape)} {g.dtype}, the "
                                   f"kernel {tuple(r.shape)} {r.dtype}")

    run("test_schema", schema)
    run("test_autograd_registration", autograd)
    run("test_faketensor", fake)
    run("test_aot_dispatch_dynamic", autograd)
    return results


class _Namespace:
    def __init__(self, name):
        self._ns = name

    def __getattr__(self, name):
        op = _ops.get(f"{self._ns}::{name}")
        if op is None:
            raise AttributeError(f"'_OpNamespace' '{self._ns}' object has no attribute "
                                 f"'{name}'")
        return op


class _Ops:
    """torch.ops: torch.ops.<namespace>.<name> is the custom op registered so."""

    def __getattr__(self, ns):
        if ns.startswith("__"):
            raise AttributeError(ns)
        return _Namespace(ns)


ops = _Ops()
