"""parameters_to_vector / vector_to_parameters (torch.nn.utils.convert_parameters)."""
from ...runtime.functions import cat
from ...runtime.tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters):
    """The parameters flattened and concatenated into one 1-D tensor (a copy, differentiable
    with respect to them)."""
    vec = []
    for p in parameters:
        _ = p.device        # (PyTorch reads each one's device first: its error for a non-tensor)
        vec.append(p.view(-1))
    return cat(vec)


def vector_to_parameters(vec, parameters):
    """Point each parameter's data at its slice of vec (reshaped to it): the parameters then
    share vec's memory, as in PyTorch."""
    if not isinstance(vec, Tensor):
        module = type(vec).__module__
        name = type(vec).__qualname__
        raise TypeError("expected torch.Tensor, but got: "
                        + (name if module in ("", "builtins") else f"{module}.{name}"))
    pointer = 0
    for param in parameters:
        num_param = param.numel()
        param.data = vec[pointer:pointer + num_param].view_as(param).data
        pointer += num_param
