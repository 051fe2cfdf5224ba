"""llgrad.func: torch.func's function transforms on llgrad tensors.

    grad, grad_and_value, vjp      reverse mode (grad.py, autodiff.py)
    jvp, jacfwd                    forward mode by the double-VJP trick (forward.py)
    jacrev, hessian                jacobians.py
    vmap                           vmap.py; batching rules from the op table (batching.py,
                                   rules_shape.py, rules_nn.py; `batching.path(op)` says
                                   which path an op takes)
    functional_call                functional_call.py
    rearrange                      rearrange.py (einops.rearrange's patterns)
    stack_module_state, linearize, replace_all_batch_norm_modules_, functionalize,
    debug_unwrap                   extras.py

They compose (vmap(grad(f)) gives per-sample gradients, hessian is jacfwd(jacrev(f))),
work under no_grad, never touch .grad, and run eagerly or inside llgrad.compile, which
traces the ordinary ops they issue."""
from .extras import (debug_unwrap, functionalize, linearize,  # noqa: F401
                     replace_all_batch_norm_modules_, stack_module_state)
from .forward import jacfwd, jvp
from .functional_call import functional_call
from .grad import grad, grad_and_value, vjp
from .jacobians import hessian, jacrev
from .vmap import vmap
from .rearrange import rearrange
from . import custom_function  # noqa: F401,E402 (autograd.Function under vmap)

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap",
           "functional_call", "stack_module_state", "replace_all_batch_norm_modules_",
           "linearize", "functionalize", "debug_unwrap", "rearrange"]
