"""PyTorch's deprecated argument orders that older tutorials and optimisers still use:
x.add_(-lr, grad) (add/sub with the number first) and exp_avg_sq.addcmul_(1 - beta2, g, g)
(addcmul/addcdiv with the value first). PyTorch still runs them, with one warning per
process for all of them (one TORCH_WARN_ONCE in its argument parser)."""
from .functions_settings import warn_once
from .tensor import Tensor

_NUMBER = (bool, int, float)


def _warn(name, old, new):
    warn_once("deprecated overload", f"This overload of {name} is deprecated:\n\t{name}({old})\n"
              f"Consider using one of the following signatures instead:\n\t{name}({new})",
              stacklevel=5)


def alpha_first(name, other, alpha):
    """(other, alpha) of add/sub/add_/sub_, swapped when called as (Number alpha, Tensor
    other). (A compiled function's dynamic number as alpha becomes its 0-d tensor in
    methods_alpha, beside PyTorch's check of its value.)"""
    if isinstance(alpha, Tensor) and isinstance(other, _NUMBER):
        _warn(name, "Number alpha, Tensor other", "Tensor other, *, Number alpha = 1")
        return alpha, other
    return other, alpha


def value_first(name, tensor1, tensor2, rest, value):
    """(tensor1, tensor2, value) of addcmul/addcdiv(_), called either as (tensor1, tensor2,
    *, value) or as (Number value, Tensor tensor1, Tensor tensor2)."""
    if not rest:
        return tensor1, tensor2, value
    if len(rest) == 1 and isinstance(tensor1, _NUMBER) and isinstance(tensor2, Tensor) \
            and isinstance(rest[0], Tensor):
        _warn(name, "Number value, Tensor tensor1, Tensor tensor2",
              "Tensor tensor1, Tensor tensor2, *, Number value = 1")
        return tensor2, rest[0], tensor1
    raise TypeError(f"{name}() takes 2 positional arguments but {2 + len(rest)} were given")
