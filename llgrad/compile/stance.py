"""torch.compiler.set_stance: how compiled functions treat their calls, process-wide until
changed again (a context manager or decorator puts the previous stance back):

- "default": trace on a new guard key, run compiled code after;
- "force_eager": every call runs the original function, no trace, no compiled code;
- "eager_on_recompile": a function traced before runs a new guard key eagerly (its
  compiled entries still serve the keys they have);
- "fail_on_recompile": tracing a function traced before raises RuntimeError;
- "eager_then_compile": as "default" (llgrad's first call of a key is an eager run).
`_reset()` puts the default back."""
import functools

from ..runtime import trace_state

STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile",
           "eager_then_compile", "aot_eager_then_compile")


class _State:
    stance = "default"


state = _State()


def _reset():
    state.stance = "default"


def _refuse_in_trace(what):
    if trace_state.state.tracer is not None:
        # (PyTorch's message: its dynamo refuses to trace the stance's functions)
        raise AssertionError(f"Attempt to trace forbidden callable {what}")


class set_stance:
    """Set the compile stance now (a plain call); as a context manager, put the previous
    one back at exit; as a decorator, the stance holds during the decorated function's
    calls only. It cannot change inside a compiled function (AssertionError, as PyTorch)."""

    def __init__(self, stance="default", *, skip_guard_eval_unsafe=False, force_backend=None):
        _refuse_in_trace(set_stance)
        if stance not in STANCES:
            raise RuntimeError(f"invalid torch.compile stance '{stance}'")
        if force_backend is not None and stance != "default":
            raise RuntimeError("non-default stance cannot have force_backend set")
        self.stance, self.prev = stance, state.stance
        state.stance = stance

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        state.stance = self.prev
        return False

    def __call__(self, fn):
        state.stance = self.prev            # (decorating changes nothing until fn runs)
        stance = self.stance

        @functools.wraps(fn)
        def with_stance(*args, **kwargs):
            _refuse_in_trace(fn)
            prev, state.stance = state.stance, stance
            try:
                return fn(*args, **kwargs)
            finally:
                state.stance = prev
        return with_stance


def untraced_call(cf, args, kwargs):
    """A call of a compiled function traced before that the stance keeps from tracing
    again: run eagerly ("eager_on_recompile"), or raise ("fail_on_recompile")."""
    if state.stance == "fail_on_recompile":
        code = getattr(cf.fn, "__code__", None)
        where = (f"filename: '{code.co_filename}', function name: '{code.co_name}', line "
                 f"number: {code.co_firstlineno}") if code is not None else repr(cf.fn)
        raise RuntimeError(f"Detected recompile when torch.compile stance is "
                           f"'fail_on_recompile'. {where}")
    return cf.fn(*args, **kwargs)


def keeps_from_tracing():
    """Whether the stance keeps a function traced before from tracing a new key."""
    return state.stance in ("eager_on_recompile", "fail_on_recompile")
