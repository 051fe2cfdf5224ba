"""Lazy modules (torch.nn.modules.lazy): parameters whose shape the first input decides.
UninitializedParameter / UninitializedBuffer (parameter.py) hold no data until
`materialize(shape)` fills the same tensor object in place (so an optimiser made before the
first call holds the real parameters); LazyModuleMixin's forward pre-hook runs
initialize_parameters on the first call and then turns the module into its cls_to_become
(LazyLinear becomes a Linear), as PyTorch does. load_state_dict materialises from the checkpoint's shapes (module.py)."""
from ..runtime import trace_state
from ..runtime.tensor import Tensor
from .layers import Linear
from .layers_conv import Conv2d
from .layers_conv_more import Conv1d, ConvTranspose1d, ConvTranspose2d
from .layers_norm import BatchNorm1d, BatchNorm2d
from .parameter import (Parameter, UninitializedBuffer,  # noqa: F401
                        UninitializedParameter, UninitializedTensorMixin, is_lazy)

__all__ = ["UninitializedParameter", "UninitializedBuffer", "LazyModuleMixin", "LazyLinear",
           "LazyConv1d", "LazyConv2d", "LazyConvTranspose1d", "LazyConvTranspose2d",
           "LazyBatchNorm1d", "LazyBatchNorm2d"]


class LazyModuleMixin:
    """The first call infers the parameters' shapes (initialize_parameters), then the module
    becomes cls_to_become."""
    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters,
                                                               with_kwargs=True)

    def initialize_parameters(self, *args, **kwargs):
        """Make the parameters from the first call's arguments (each lazy module's own)."""
        raise NotImplementedError(f"initialize_parameters is not implemented for "
                                  f"{type(self).__name__}")

    def has_uninitialized_params(self):
        """Whether a parameter or buffer is still uninitialised."""
        return any(is_lazy(t) for t in (*self._parameters.values(), *self._buffers.values()))

    @staticmethod
    def _infer_parameters(module, args, kwargs=None):
        tracer = trace_state.state.tracer
        if tracer is not None:      # (the parameters the trace has read would change shape)
            tracer.graph_break(f"{type(module).__name__}'s first call, which makes its "
                               "parameters (call the model once before compiling)")
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {type(module).__name__} has not been fully initialized")
        module._initialize_hook.remove()
        delattr(module, "_initialize_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become


class LazyLinear(LazyModuleMixin, Linear):
    """Linear whose in_features is input.shape[-1] of the first call."""
    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, 0, False, device, dtype)
        self.weight = UninitializedParameter(dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        """in_features from input.shape[-1]; the weight and bias made and initialised."""
        if self.has_uninitialized_params():
            self.in_features = input.shape[-1]
            self.weight.materialize((self.out_features, self.in_features))
            if self.bias is not None:
                self.bias.materialize((self.out_features,))
            self.reset_parameters()
        if self.in_features == 0:       # (parameters loaded by load_state_dict, as torch)
            if input.shape[-1] != self.weight.shape[-1]:
                raise AssertionError(f"The in_features inferred from input: {input.shape[-1]} "
                                     f"is not equal to in_features from self.weight: "
                                     f"{self.weight.shape[-1]}")
            self.in_features = input.shape[-1]


class _LazyConvMixin(LazyModuleMixin):
    def _lazy_init(self, out_channels, bias, dtype):
        self.weight = UninitializedParameter(dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _get_in_channels(self, input):
        n = len(self.kernel_size)
        if input.dim() not in (n + 1, n + 2):
            raise ValueError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to "
                             f"{type(self).__name__}, but got input of size: {list(input.shape)}")
        return input.shape[0] if input.dim() == n + 1 else input.shape[1]

    def initialize_parameters(self, input, *args, **kwargs):
        """in_channels from the input's channel dim; the weight and bias made."""
        if self.has_uninitialized_params():
            self.in_channels = self._get_in_channels(input)
            if self.in_channels % self.groups != 0:
                raise ValueError("in_channels must be divisible by groups")
            if self.transposed:
                shape = (self.in_channels, self.out_channels // self.groups)
            else:
                shape = (self.out_channels, self.in_channels // self.groups)
            self.weight.materialize(shape + tuple(self.kernel_size))
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()


def _lazy_conv(base, name):
    class LazyConv(_LazyConvMixin, base):
        cls_to_become = base

        def __init__(self, out_channels, kernel_size, *args, bias=True, device=None, dtype=None,
                     **kwargs):
            super().__init__(0, 0, kernel_size, *args, bias=False, device=device, dtype=dtype,
                             **kwargs)
            self._lazy_init(out_channels, bias, dtype)
    LazyConv.__name__ = LazyConv.__qualname__ = name
    LazyConv.__doc__ = f"{base.__name__} whose in_channels the first input decides."
    return LazyConv


LazyConv1d = _lazy_conv(Conv1d, "LazyConv1d")
LazyConv2d = _lazy_conv(Conv2d, "LazyConv2d")
LazyConvTranspose1d = _lazy_conv(ConvTranspose1d, "LazyConvTranspose1d")
LazyConvTranspose2d = _lazy_conv(ConvTranspose2d, "LazyConvTranspose2d")


class _LazyNormMixin(LazyModuleMixin):
    def _lazy_init(self, affine, track_running_stats, dtype, bias=True):
        if affine:
            self.weight = UninitializedParameter(dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(dtype=dtype)
            self.running_var = UninitializedBuffer(dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        """num_features from the input's channel dim; parameters and statistics made."""
        if self.has_uninitialized_params():
            self.num_features = input.shape[1] if input.dim() > 1 else input.shape[0]
            for t in (self.weight, self.bias, self.running_mean, self.running_var):
                if t is not None and is_lazy(t):
                    t.materialize((self.num_features,))
            self.reset_parameters()


def _lazy_norm(base, name):
    class LazyNorm(_LazyNormMixin, base):
        cls_to_become = base

        def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                     device=None, dtype=None, *, bias=True):
            super().__init__(0, eps, momentum, affine, track_running_stats, device, dtype,
                             bias=bias)
            self._lazy_init(affine, track_running_stats, dtype, bias)
    LazyNorm.__name__ = LazyNorm.__qualname__ = name
    LazyNorm.__doc__ = f"{base.__name__} whose num_features the first input decides."
    return LazyNorm


LazyBatchNorm1d = _lazy_norm(BatchNorm1d, "LazyBatchNorm1d")
LazyBatchNorm2d = _lazy_norm(BatchNorm2d, "LazyBatchNorm2d")
