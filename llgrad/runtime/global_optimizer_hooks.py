"""torch.optim.optimizer's global step hooks (register_optimizer_step_pre_hook / post_hook),
kept here, below optim and compile: optim registers and runs them (optim/_hooks.py); a
compiled function runs eagerly while any is registered (a trace would run them once, at
trace time, and calls of an entry traced before one was registered would run none)."""
from collections import OrderedDict

step_pre = OrderedDict()
step_post = OrderedDict()


def any_hooks():
    """Whether a global optimizer step hook is registered."""
    return bool(step_pre or step_post)
