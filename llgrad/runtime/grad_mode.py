"""Thread-local grad modes: no_grad, enable_grad, set_grad_enabled, inference_mode.

Each is a context manager and a decorator, as in PyTorch. The state lives in one
threading.local; `_reset()` restores the defaults of the calling thread.
"""
import functools
import inspect
import sys
import threading
import warnings

from . import trace_state


class _State(threading.local):
    def __init__(self):
        self.grad_enabled = True        # whether ops record (never in inference mode)
        self.inference = False
        # grad mode as enable_grad / set_grad_enabled set it inside inference mode, where
        # PyTorch reports it (is_grad_enabled) but records nothing
        self.inference_grad = False


state = _State()


def _reset():
    state.grad_enabled = True
    state.inference = state.inference_grad = False


def _save():
    return state.grad_enabled, state.inference_grad


def _restore(prev):
    state.grad_enabled, state.inference_grad = prev


def _set(mode):
    trace_state.stops_gradient("a grad-mode switch")
    state.grad_enabled = mode and not state.inference
    state.inference_grad = mode


def is_grad_enabled() -> bool:
    """Whether grad mode is on in this thread, as torch.is_grad_enabled."""
    return state.grad_enabled or state.inference and state.inference_grad


def is_inference_mode_enabled() -> bool:
    """Whether inference mode is on in this thread, as torch.is_inference_mode_enabled."""
    return state.inference


class _DecoratorContext:
    """Base: a context manager that can also decorate a function (PyTorch semantics:
    a fresh context object is used for every call). `@no_grad` works without parentheses."""

    def __new__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and cls is not set_grad_enabled:
            return cls()(args[0])
        return super().__new__(cls)

    def __call__(self, fn):
        clone = self._clone
        if inspect.isclass(fn):         # (PyTorch's warning; the class is called in the mode)
            warnings.warn("Decorating classes is deprecated and will be disabled in future "
                          "versions. You should only decorate functions or methods. To "
                          "preserve the current behavior of class decoration, you can directly "
                          "decorate the `__init__` method and nothing else.", FutureWarning,
                          stacklevel=2)
        if inspect.isgeneratorfunction(fn):
            return _wrap_generator(clone, fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with clone():
                return fn(*args, **kwargs)
        return wrapper

    def _clone(self):
        return type(self)()


def _wrap_generator(clone, fn):
    """A generator function whose every step (each resumption of fn's generator) runs in
    the mode, as PyTorch's decorators wrap them; the caller's mode holds between steps."""
    @functools.wraps(fn)
    def generator(*args, **kwargs):
        gen = fn(*args, **kwargs)
        try:
            with clone():
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with clone():
                        gen.close()
                    raise
                except BaseException:   # (thrown in: passed on to fn's generator)
                    with clone():
                        response = gen.throw(*sys.exc_info()[1:2])
                else:
                    with clone():
                        response = gen.send(request)
        except StopIteration as e:
            return e.value
    return generator


class no_grad(_DecoratorContext):
    """Context manager and decorator that turns off gradient recording, as torch.no_grad."""
    def __enter__(self):
        self.prev = _save()
        _set(False)

    def __exit__(self, *exc):
        _restore(self.prev)


class enable_grad(_DecoratorContext):
    """Context manager and decorator that turns gradient recording on, as torch.enable_grad."""
    def __enter__(self):
        self.prev = _save()
        _set(True)

    def __exit__(self, *exc):
        _restore(self.prev)


class set_grad_enabled(_DecoratorContext):
    """Takes effect when called (PyTorch: `set_grad_enabled(False)` as a statement works)."""

    def __init__(self, mode):
        if type(mode) is not bool:      # (PyTorch's words; 1, np.True_ and tensors too)
            kind = type(mode)
            name = f"numpy.{kind.__name__}" if kind.__module__ == "numpy" else kind.__name__
            raise TypeError("set_grad_enabled(): argument 'enabled' (position 1) must be "
                            f"bool, not {name}")
        self.prev = _save()
        self.mode = mode
        _set(self.mode)

    def _clone(self):
        return set_grad_enabled(self.mode)

    def __call__(self, fn):
        _restore(self.prev)             # used as decorator: undo the eager switch
        return super().__call__(fn)

    def __enter__(self):
        _set(self.mode)

    def __exit__(self, *exc):
        _restore(self.prev)


class inference_mode(_DecoratorContext):
    """Context manager and decorator for inference mode (no recording, inference tensors),
    as torch.inference_mode."""
    def __init__(self, mode=True):
        self.mode = bool(mode)

    def _clone(self):
        return inference_mode(self.mode)

    def __enter__(self):
        # (PyTorch's InferenceMode(enabled) sets grad mode to `not enabled`)
        trace_state.stops_gradient("inference_mode")
        self.prev = (state.grad_enabled, state.inference, state.inference_grad)
        state.grad_enabled = not self.mode
        state.inference = self.mode
        state.inference_grad = False

    def __exit__(self, *exc):
        state.grad_enabled, state.inference, state.inference_grad = self.prev


_multithreading = threading.local()


def _is_multithreading_enabled():
    """Whether backward may run on per-device worker threads (torch's flag, thread-local)."""
    return getattr(_multithreading, "enabled", True)


class set_multithreading_enabled(_DecoratorContext):
    """As torch.autograd.set_multithreading_enabled: sets the (thread-local) flag allowing
    backward on device worker threads, at once, until the context exits. llgrad's backward
    always runs on the calling thread (there are no device threads), so only the flag
    changes."""

    def __new__(cls, mode):
        return object.__new__(cls)

    def __init__(self, mode):
        self.prev = _is_multithreading_enabled()
        _multithreading.enabled = bool(mode)
        self.mode = mode

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _multithreading.enabled = self.prev

    def clone(self):
        """A new context of the same mode (as PyTorch's clone: a decorated function's calls
        each enter one)."""
        return type(self)(self.mode)

    _clone = clone
