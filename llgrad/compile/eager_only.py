"""What makes every compiled call run eagerly while it lasts: state outside the call that
native code cannot honour at each call."""
from ..runtime import (anomaly, autocast_cast, dispatch, global_module_hooks,
                       global_optimizer_hooks, saved_hooks)


def eager_only_reason():
    """Why calls must run eagerly now (the warning's words), or None."""
    if saved_hooks.state.stack:             # (pack/unpack hooks see each saved tensor)
        return "saved_tensors_hooks are active"
    if anomaly._state["enabled"]:          # (its errors name each node of eager's graph)
        return "anomaly detection is on (torch.autograd.detect_anomaly)"
    if dispatch.forward_ad is not None:
        return "a forward AD dual level is active"
    if autocast_cast.state.dtype is not None:   # (graphs traced without it do not cast)
        return "CPU autocast is on (torch.autocast)"
    if global_module_hooks.any_hooks():     # (a trace would run them once, not per call)
        return ("global module hooks are registered (torch.nn.modules.module."
                "register_module_*_hook)")
    if global_optimizer_hooks.any_hooks():  # (likewise: a step's hooks run at each call)
        return ("global optimizer step hooks are registered (torch.optim.optimizer."
                "register_optimizer_step_*_hook)")
    return None
