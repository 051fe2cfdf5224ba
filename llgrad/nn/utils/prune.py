"""torch.nn.utils.prune: pruning a module's tensor by a mask, with PyTorch's mechanics.

Pruning the parameter `name` of a module moves it to the Parameter `name_orig`, registers
the buffer `name_mask` (so state_dict has `weight_orig` and `weight_mask`, as PyTorch's)
and makes `name` a plain attribute `name_mask * name_orig`, recomputed before every call
by a forward pre-hook: the pruning method itself, in module._forward_pre_hooks. Pruning the
same tensor again combines the masks through a PruningContainer (the new method sees only
the entries the old mask keeps); remove() makes the pruning permanent. Inside
llgrad.compile the mask buffer and `name_orig` are inputs of the graph and the pre-hook's
product is traced (its write of module.<name> is an output the compiled call puts back).

Selection: L1Unstructured prunes the entries of topk(|t|, k, largest=False) and
LnStructured keeps the channels of topk(norm, k, largest=True), as PyTorch does, so masks
equal PyTorch's, among tied importances too (topk picks among equal values as PyTorch's
CPU kernel does). The random
methods draw from llgrad's generator (masks differ from PyTorch's, as any two generators'
draws do)."""
import numbers
from collections.abc import Iterable

from ...runtime.creation import ones_like, rand, rand_like, zeros_like
from ...runtime.functions import abs as _abs, norm as _norm, topk
from ...runtime.functions_reduce import kthvalue
from .convert_parameters import parameters_to_vector
from .prune_base import BasePruningMethod, PruningContainer, contiguous_format

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured",
           "L1Unstructured", "RandomStructured", "LnStructured", "CustomFromMask", "identity",
           "random_unstructured", "l1_unstructured", "random_structured", "ln_structured",
           "global_unstructured", "custom_from_mask", "remove", "is_pruned"]


class Identity(BasePruningMethod):
    """Prunes nothing (the mask is all ones)."""
    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


def _unstructured_mask(amount, t, default_mask, scores, largest):
    """default_mask with `amount` of t's entries zeroed: those topk picks from scores()
    (largest or smallest), as PyTorch's unstructured methods pick them."""
    tensor_size = t.nelement()
    nparams_toprune = _compute_nparams_toprune(amount, tensor_size)
    _validate_pruning_amount(nparams_toprune, tensor_size)
    mask = default_mask.clone(memory_format=contiguous_format)
    if nparams_toprune != 0:
        picked = topk(scores().view(-1), k=nparams_toprune, largest=largest)
        mask.view(-1)[picked.indices] = 0
    return mask


class RandomUnstructured(BasePruningMethod):
    """Prunes `amount` (a fraction, or a number) of the entries at random."""
    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        return _unstructured_mask(self.amount, t, default_mask, lambda: rand_like(t), True)

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prunes `amount` of the entries, those of the smallest absolute value."""
    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        return _unstructured_mask(self.amount, t, default_mask, lambda: _abs(t), False)

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Prunes `amount` of the channels along dim at random."""
    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        tensor_size = t.shape[self.dim]
        nparams_toprune = _compute_nparams_toprune(self.amount, tensor_size)
        _validate_pruning_amount(nparams_toprune, tensor_size)
        if nparams_toprune == 0:
            return default_mask
        prob = rand(tensor_size)
        threshold = kthvalue(prob, k=nparams_toprune).values
        mask = _channel_mask(t, self.dim, prob > threshold)
        mask *= default_mask.to(dtype=mask.dtype)
        return mask

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Prunes `amount` of the channels along dim, those of the smallest L`n` norm."""
    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1):
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        tensor_size = t.shape[self.dim]
        nparams_toprune = _compute_nparams_toprune(self.amount, tensor_size)
        nparams_tokeep = tensor_size - nparams_toprune
        _validate_pruning_amount(nparams_toprune, tensor_size)
        norm = _compute_norm(t, self.n, self.dim)
        kept = topk(norm, k=nparams_tokeep, largest=True)
        if nparams_toprune == 0:
            return default_mask
        mask = _channel_mask(t, self.dim, kept.indices)
        mask *= default_mask.to(dtype=mask.dtype)
        return mask

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes by a given mask (multiplied into the earlier one)."""
    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if default_mask.shape != self.mask.shape:
            raise AssertionError(f"default_mask shape {default_mask.shape} must match "
                                 f"self.mask shape {self.mask.shape}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


def _channel_mask(t, dim, channels):
    mask = zeros_like(t)
    slc = [slice(None)] * len(t.shape)
    slc[dim] = channels
    mask[tuple(slc)] = 1
    return mask


def identity(module, name):
    """Reparametrise module.<name> with a mask of ones (prunes nothing)."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    """Prune `amount` of module.<name>'s entries at random."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    """Prune `amount` of module.<name>'s entries of the smallest |importance|."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    """Prune `amount` of module.<name>'s channels along dim at random."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Prune `amount` of module.<name>'s channels along dim of the smallest Ln norm."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune the (module, name) tensors of parameters together, by one unstructured
    pruning_method(**kwargs) over all their entries (each gets a CustomFromMask)."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    relevant_importance_scores = parameters_to_vector(
        [importance_scores.get((module, name), getattr(module, name))
         for (module, name) in parameters])
    default_mask = parameters_to_vector(
        [getattr(module, name + "_mask", ones_like(getattr(module, name)))
         for (module, name) in parameters])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f'Only "unstructured" PRUNING_TYPE supported for the '
                        f"`pruning_method`. Found method {pruning_method} of type "
                        f"{method.PRUNING_TYPE}")
    container.add_pruning_method(method)
    final_mask = container.compute_mask(relevant_importance_scores, default_mask)
    pointer = 0
    for module, name in parameters:
        param = getattr(module, name)
        num_param = param.numel()
        param_mask = final_mask[pointer:pointer + num_param].view_as(param)
        custom_from_mask(module, name, mask=param_mask)
        pointer += num_param


def custom_from_mask(module, name, mask):
    """Prune module.<name> by mask."""
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module, name):
    """Make the pruning of module.<name> permanent and drop its hook, <name>_orig and
    <name>_mask."""
    hooks = module._forward_pre_hooks
    for k, hook in hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del hooks[k]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning "
                     "can be removed")


def is_pruned(module):
    """Whether module or one of its submodules has a pruning pre-hook."""
    for _, submodule in module.named_modules():
        for hook in submodule._forward_pre_hooks.values():
            if isinstance(hook, BasePruningMethod):
                return True
    return False


def _validate_pruning_amount_init(amount):
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral)
            and (float(amount) > 1.0 or float(amount) < 0.0)):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a "
                         "non-negative integer")


def _validate_pruning_amount(amount, tensor_size):
    if isinstance(amount, numbers.Integral) and amount > tensor_size:
        raise ValueError(f"amount={amount} should be smaller than the number of parameters to "
                         f"prune={tensor_size}")


def _validate_structured_pruning(t):
    shape = t.shape
    if len(shape) <= 1:
        raise ValueError(f"Structured pruning can only be applied to multidimensional tensors. "
                         f"Found tensor of shape {shape} with {len(shape)} dims")


def _compute_nparams_toprune(amount, tensor_size):
    if isinstance(amount, numbers.Integral):
        return amount
    return round(amount * tensor_size)


def _validate_pruning_dim(t, dim):
    if dim >= t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")


def _compute_norm(t, n, dim):
    dims = list(range(t.dim()))
    if dim < 0:
        dim = dims[dim]
    dims.remove(dim)
    return _norm(t, p=n, dim=dims)
