"""llgrad.utils.checkpoint: activation checkpointing as torch.utils.checkpoint -- the forward of
a segment keeps none of its intermediate values; backward runs the segment again (with the
random state it first ran with, so dropout draws the same masks) to get them.

use_reentrant=True (PyTorch's default when it is not given, with its warning): the segment is
one CheckpointFunction node that runs it under no_grad and, in backward, again with grad and
backpropagates through that run; only inputs that require grad bring gradients.
use_reentrant=False: the segment records its graph as usual, but each tensor it saves is
replaced by its position (saved_tensors_hooks); the first read of one in backward runs the
segment again and takes the values from that run, checked against the first run's shapes.

Inside a compiled function's trace a segment is simply called: the compiled code decides what
it keeps, and its results, gradients and random draws are the same; but a segment whose second
run would write outside it or draw anew runs eagerly (_traced)."""
import contextlib
import warnings

from ..amp.autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled
from ..amp.autocast_state import is_autocast_cache_enabled
from ..runtime import trace_state
from ..runtime.autograd_api import _is_checkpoint_valid, backward as _backward
from ..runtime.autograd_function import Function
from ..runtime.generator import get_rng_state, set_rng_state
from ..runtime.grad_mode import enable_grad, is_grad_enabled, no_grad
from ..runtime.saved_hooks import saved_tensors_hooks
from ..runtime.saved_tensor import SavedTensor, user_location
from ..runtime.tensor import Tensor
from ..tracer.errors import ControlFlowError
from ..tracer.pytree import flatten

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "noop_context_fn",
           "detach_variable", "check_backward_validity", "get_device_states",
           "set_device_states", "DefaultDeviceType"]


class CheckpointError(RuntimeError):
    """A recomputation did not reproduce the first run's saved tensors."""


def noop_context_fn():
    return contextlib.nullcontext(), contextlib.nullcontext()


def _autocast_now():
    """The CPU autocast the segment runs under now, to enter again around its recomputation
    (PyTorch's checkpoint does: backward itself runs without autocast)."""
    return autocast("cpu", dtype=get_autocast_dtype("cpu"), enabled=is_autocast_enabled("cpu"),
                    cache_enabled=is_autocast_cache_enabled())


@contextlib.contextmanager
def _rng_as(state):
    """Run the block with the default generator at state (None: as it is), then put the
    generator back where it was."""
    if state is None:
        yield
        return
    now = get_rng_state()
    set_rng_state(state)
    try:
        yield
    finally:
        set_rng_state(now)


class CheckpointFunction(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        ctx.run_function = run_function
        ctx.rng = get_rng_state() if preserve_rng_state else None
        ctx.autocast = _autocast_now()
        ctx.tensor_at = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.others = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*(args[i] for i in ctx.tensor_at))
        with no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        if not _is_checkpoint_valid():
            raise RuntimeError(
                "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or "
                "passing an `inputs` parameter to .backward(). To resolve this error, you can "
                "either set use_reentrant=False, or call .backward() without passing the "
                "`inputs` argument.")
        args = list(ctx.others)
        for i, t in zip(ctx.tensor_at, ctx.saved_tensors):
            args[i] = t.detach().requires_grad_(t.requires_grad)
        with _rng_as(ctx.rng), enable_grad(), ctx.autocast:
            outputs = ctx.run_function(*args)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if isinstance(o, Tensor) and o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is "
                               "not necessary")
        _backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(a.grad if isinstance(a, Tensor) else None for a in args)


class _Recompute:
    """The saved tensors of one non-reentrant segment: positions while forward runs, the
    values of the segment's second run once backward needs one."""

    def __init__(self, fn, args, kwargs, rng, context):
        self.fn, self.args, self.kwargs, self.rng = fn, args, kwargs, rng
        # the positional inputs' versions now: one written in place before the
        # recomputation raises the saved-tensor error, as PyTorch's saved inputs do (it
        # saves no keyword argument)
        self.inputs = [_SavedInput(a) for a in args if isinstance(a, Tensor)]
        self.context = context  # (context_fn's second manager: around the second run)
        self.autocast = _autocast_now()
        self.where = user_location()
        self.meta = []          # (shape, dtype) of each tensor the first run saved
        self.values = None

    def pack(self, t):
        self.meta.append((tuple(t.shape), t.dtype))
        return len(self.meta) - 1

    def unpack(self, k):
        if self.values is None:
            self.values = self._run_again()
        return self.values[k]

    def _run_again(self):
        for s in self.inputs:
            s.unpack(Checkpoint(self.where))
        got = []
        with self.context, _rng_as(self.rng), enable_grad(), self.autocast, \
                saved_tensors_hooks(lambda t: got.append(t), _never_unpacked):
            self.fn(*self.args, **self.kwargs)
        meta = [(tuple(t.shape), t.dtype) for t in got]
        if meta[:len(self.meta)] != self.meta:
            diff = [f"tensor at position {i}:\nsaved metadata: {a}\nrecomputed metadata: {b}"
                    for i, (a, b) in enumerate(zip(self.meta, meta)) if a != b]
            raise CheckpointError(
                "torch.utils.checkpoint: Recomputed values for the following tensors have "
                "different metadata than during the forward pass.\n" + "\n".join(diff) if diff
                else f"torch.utils.checkpoint: A different number of tensors was saved during "
                     f"the original forward and recomputation.\nNumber of tensors saved during "
                     f"forward: {len(self.meta)}\nNumber of tensors saved during "
                     f"recomputation: {len(meta)}")
        return got


class Checkpoint:
    """What the saved-tensor error names as having saved a segment's inputs."""
    __slots__ = ("_where",)

    def __init__(self, where):
        self._where = where


class _SavedInput(SavedTensor):
    """A segment's input, version-checked when the segment runs again (no pack hook: the
    segment's own hooks are not active yet, and an outer one must not see it)."""
    __slots__ = ()

    def __init__(self, t):
        self.is_output, self.output_nr, self.had_history = False, 0, False
        self.tensor, self.version = t, t._storage.version


def _never_unpacked(_):
    raise RuntimeError("a recomputation's own saved tensors are never read")


def _traced(tracer, function, args, kwargs, preserve_rng_state, reentrant):
    """The segment called inside a trace: one run, whose values backward reuses. Eager's
    backward runs it a second time, which a trace cannot be when that second run does
    more than give the same values again: when it writes memory from outside the segment
    (a BatchNorm's running stats, a buffer counting calls: written twice), or, without
    preserve_rng_state, draws random numbers (new ones: another dropout mask, the generator
    advanced twice), or prints or warns (given again), or changes Python state the call
    reaches (a list it appends to, an attribute it counts: changed again). Those calls run
    eagerly. A reentrant segment none of whose inputs requires grad runs under no_grad, as
    eager's CheckpointFunction: its parameters get no gradient."""
    if reentrant and not any(isinstance(a, Tensor) and a.requires_grad for a in args):
        if is_grad_enabled():       # (eager's warning, given again by compiled calls)
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be "
                          "None", stacklevel=3)
        with no_grad():
            return function(*args, **kwargs)
    rng, mark = getattr(tracer, "rng_value", None), tracer.memory_now()
    rendering = trace_state.state.rendering
    given = rendering.given if rendering is not None else 0
    # (compile's watch of the Python state the call reaches: a segment that appends to a
    # list or counts calls on a module does so again when backward recomputes it)
    watch = getattr(tracer, "untaken", None) if is_grad_enabled() else None
    watched = watch("a checkpoint segment", taken=True, fn=getattr(
        function, "forward", function), settles=_set_again(
        tracer, len(tracer.builder.graph.nodes))) if watch is not None else None
    if watched is not None:
        watched.__enter__()
    out = function(*args, **kwargs)
    if watched is not None and _recomputed(out):
        try:
            watched.__exit__(None, None, None)
        except ControlFlowError as e:
            tracer.graph_break("a checkpoint segment that changes Python state (" +
                               str(e).split(" changes ", 1)[-1] + ": the recomputation in "
                               "backward changes it again)")
    if is_grad_enabled():
        if rendering is not None and rendering.given != given:
            tracer.graph_break("a checkpoint segment that prints or warns (the recomputation "
                               "in backward gives it again)")
        if tracer.writes_since(mark):
            tracer.graph_break("a checkpoint segment that writes a tensor from outside it (a "
                               "buffer such as a BatchNorm's running stats: the "
                               "recomputation in backward writes it again)")
        if not preserve_rng_state and getattr(tracer, "rng_value", None) is not rng:
            tracer.graph_break("a checkpoint(preserve_rng_state=False) segment that draws "
                               "random numbers (its recomputation in backward draws new ones)")
    return out


def _set_again(tracer, start):
    """settles(old, new): whether the recomputation in backward sets an attribute the segment
    set from old to new to the same values again: new is a tensor of the trace and no op the
    segment traced (its nodes from start on) read old, which the recomputation would read new
    in place of (prune's forward pre-hook, `module.weight = weight_orig * weight_mask`)."""
    def settles(old, new):
        if not (isinstance(new, Tensor) and tracer.knows(new)):
            return False
        if old is None or isinstance(old, Tensor) and not tracer.knows(old):
            return True
        v = tracer.value_entry(old) if isinstance(old, Tensor) else None
        return v is not None and not any(x is v for node in tracer.builder.graph.nodes[start:]
                                         for x in node.inputs)
    return settles


def _recomputed(out):
    """Whether backward can run the segment again: one of its tensor results has history."""
    return any(isinstance(t, Tensor) and t.requires_grad for _, t in flatten(out)[0])


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn,
               determinism_check="default", debug=False, preserve_rng_state=True,
               early_stop=True, **kwargs):
    """function(*args, **kwargs), keeping none of its intermediate values for backward (see
    the module's docstring), as torch.utils.checkpoint.checkpoint."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
            "Starting in PyTorch 2.9, calling checkpoint without use_reentrant will raise an "
            "exception. use_reentrant=False is recommended, but if you need to preserve the "
            "current default behavior, you can pass use_reentrant=True. Refer to docs for more "
            "details on the differences between the two variants.", stacklevel=2)
        use_reentrant = True
    if use_reentrant:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if context_fn is not noop_context_fn:
            raise ValueError("Passing `context_fn` or `debug` is only supported when "
                             "use_reentrant=False.")
    if trace_state.state.tracer is not None:
        return _traced(trace_state.state.tracer, function, args, kwargs, preserve_rng_state,
                       use_reentrant)
    if use_reentrant:
        if is_grad_enabled() and not any(isinstance(a, Tensor) and a.requires_grad
                                         for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                          stacklevel=2)
        return CheckpointFunction.apply(function, preserve_rng_state, *args)
    if not is_grad_enabled():
        return function(*args, **kwargs)
    first, again = context_fn()
    frame = _Recompute(function, args, kwargs,
                       get_rng_state() if preserve_rng_state else None, again)
    with first, saved_tensors_hooks(frame.pack, frame.unpack):
        return function(*args, **kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run a Sequential (or a list of modules) in `segments` chunks, each but the last
    checkpointed, as torch.utils.checkpoint.checkpoint_sequential."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should "
            "be passed explicitly. In version 2.9 we will raise an exception if use_reentrant "
            "is not passed. use_reentrant=False is recommended, but if you need to preserve "
            "the current default behavior, you can pass use_reentrant=True. Refer to docs for "
            "more details on the differences between the two variants.", stacklevel=2)
        use_reentrant = True
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    size = len(functions) // segments
    end = -1

    def run(start, stop):
        def segment(x):
            for j in range(start, stop + 1):
                x = functions[j](x)
            return x
        return segment

    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, **kwargs)
    return run(end + 1, len(functions) - 1)(input)


# ---- the helpers torch.utils.checkpoint exports for hand-written checkpointing (reversible
# layers keep the forward's random state and re-run it in backward) -----------------------------
def detach_variable(inputs):
    """A tuple of inputs with each tensor detached, keeping its requires_grad (non-tensors
    kept), as torch.utils.checkpoint.detach_variable; anything but a tuple is an error."""
    if not isinstance(inputs, tuple):
        raise RuntimeError("Only tuple of tensors is supported. Got Unsupported input type: "
                           f"{type(inputs).__name__}")
    out = []
    for inp in inputs:
        if not isinstance(inp, Tensor):
            out.append(inp)
            continue
        x = inp.detach()
        x.requires_grad = inp.requires_grad
        out.append(x)
    return tuple(out)


def check_backward_validity(inputs):
    """Warns, as PyTorch, when no tensor among inputs requires grad."""
    if not any(inp.requires_grad for inp in inputs if isinstance(inp, Tensor)):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                      stacklevel=2)


def get_device_states(*args):
    """([], []): the ids and generator states of the accelerator devices args' tensors are
    on; llgrad's tensors are all on the CPU, which has none."""
    return [], []


def set_device_states(devices, states, *, device_type=None):
    """Sets each device's generator state, as torch.utils.checkpoint.set_device_states;
    there are no accelerator devices, so a state for one is an error."""
    if device_type is None:
        device_type = DefaultDeviceType.get_device_type()
    if device_type == "meta":
        return
    for device, state in zip(devices, states):
        raise RuntimeError(f"llgrad runs on the CPU only: no {device_type} device {device} "
                           "to set a generator state for")


class DefaultDeviceType:
    """The device type checkpointing saves generator states of when no input is on an
    accelerator, as torch.utils.checkpoint.DefaultDeviceType: 'cpu' without one."""
    _default_device_type = None

    @staticmethod
    def set_device_type(device="cuda"):
        DefaultDeviceType._default_device_type = device

    @staticmethod
    def get_device_type():
        if not DefaultDeviceType._default_device_type:
            DefaultDeviceType._default_device_type = "cpu"
        return DefaultDeviceType._default_device_type
