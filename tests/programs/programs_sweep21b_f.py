"""Official tutorials the other files leave out, nearly verbatim (sweep 21b, F): "Extending
torch.func with autograd.Function" (NumpySort / NumpyTake through NumPy with setup_context,
grad of grad, a vmap staticmethod); the "Extending PyTorch" note's "Extending torch with a
Tensor-like type" (ScalarTensor and __torch_function__). Programs `f(torch, env)`, see
tutorial_harness.py."""
import functools

import numpy as np


def func_numpy_sort(torch, env):
    def to_numpy(tensor):
        return tensor.cpu().numpy()

    class NumpySort(torch.autograd.Function):
        # Note that forward does not take ctx
        @staticmethod
        def forward(x, dim):
            device = x.device
            x = to_numpy(x)
            ind = np.argsort(x, axis=dim)
            ind_inv = np.argsort(ind, axis=dim)
            result = np.take_along_axis(x, ind, axis=dim)
            # Any intermediates to be saved in backward must be returned as
            # outputs.
            return (
                # The desired output
                torch.tensor(result, device=device),
                # intermediate to save for backward
                torch.tensor(ind, device=device),
                # intermediate to save for backward
                torch.tensor(ind_inv, device=device),
            )

        # setup_context is responsible for calling methods and/or assigning to
        # the ctx object. Please do not do additional compute (e.g. add
        # Tensors together) in setup_context.
        @staticmethod
        def setup_context(ctx, inputs, output):
            x, dim = inputs
            # Note that output is whatever you returned from forward.
            # If you returned multiple values, then output is a Tuple of multiple values.
            # If you returned a single Tensor, then output is a Tensor.
            # If you returned a Tuple with a single Tensor, then output is a
            # Tuple with a single Tensor.
            _, ind, ind_inv = output
            ctx.mark_non_differentiable(ind, ind_inv)
            # Tensors must be saved via ctx.save_for_backward. Please do not
            # assign them directly onto the ctx object.
            ctx.save_for_backward(ind, ind_inv)
            # Non-tensors may be saved by assigning them as attributes on the ctx object.
            ctx.dim = dim

        @staticmethod
        def backward(ctx, grad_output, _0, _1):
            # For the autograd.Function to be arbitrarily composable with function
            # transforms, all staticmethod other than forward and setup_context
            # must be implemented in a "transformable" way; that is, they must
            # only consist of PyTorch operations or autograd.Function.
            #
            # For example, this allows us to do double backwards and/or compute
            # second order gradients.
            #
            # We've written the backward pass of NumpySort in terms of another
            # autograd.Function, NumpyTake.
            ind, ind_inv = ctx.saved_tensors
            return NumpyTake.apply(grad_output, ind_inv, ind, ctx.dim), None

        @staticmethod
        def vmap(info, in_dims, x, dim):
            x_bdim, _ = in_dims
            # wrap dim so that it is positive
            x = x.movedim(x_bdim, 0)
            dim = dim if dim >= 0 else dim + x.dim() - 1
            result = NumpySort.apply(x, dim + 1)
            return result, (0, 0, 0)

    class NumpyTake(torch.autograd.Function):
        @staticmethod
        def forward(x, ind, ind_inv, dim):
            device = x.device
            x = to_numpy(x)
            ind = to_numpy(ind)
            return torch.tensor(np.take_along_axis(x, ind, dim), device=device)

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, ind, ind_inv, dim = inputs
            ctx.save_for_backward(ind, ind_inv)
            ctx.dim = dim

        @staticmethod
        def backward(ctx, grad_output):
            ind, ind_inv = ctx.saved_tensors
            result = NumpyTake.apply(grad_output, ind_inv, ind, ctx.dim)
            return result, None, None, None

        @staticmethod
        def vmap(info, in_dims, x, ind, ind_inv, dim):
            x_bdim, ind_bdim, ind_inv_bdim, _ = in_dims
            # The strategy is: expand {x, ind, ind_inv} to all have the dimension
            # being vmapped over.
            # Then, call back into NumpyTake(expanded_x, expanded_ind, expanded_ind_inv, new_dim).
            # Handle negative dims by wrapping them to be positive
            logical_dim = x.dim() if x_bdim is None else x_bdim - 1
            dim = dim if dim >= 0 else dim + logical_dim

            def maybe_expand_bdim_at_front(x, x_bdim):
                if x_bdim is None:
                    return x.expand(info.batch_size, *x.shape)
                return x.movedim(x_bdim, 0)

            # If the Tensor doesn't have the dimension being vmapped over,
            # expand it out. Otherwise, move it to the front of the Tensor
            x = maybe_expand_bdim_at_front(x, x_bdim)
            ind = maybe_expand_bdim_at_front(ind, ind_bdim)
            ind_inv = maybe_expand_bdim_at_front(ind_inv, ind_inv_bdim)
            # The return is a tuple (output, out_dims). Since output is a Tensor,
            # then out_dims is an Optional[int] (instead of being a Tuple).
            return NumpyTake.apply(x, ind, ind_inv, dim + 1), 0

    def numpy_sort(x, dim=-1):
        result, _, _ = NumpySort.apply(x, dim)
        return result

    x = env.randn(2, 3)
    env.rec("sorted", numpy_sort(x))
    grad_x = torch.func.grad(lambda x: numpy_sort(x).sum())(x)
    env.rec("grad", grad_x)
    env.rec("allclose ones", torch.allclose(grad_x, torch.ones_like(x)))
    w = env.randn(2, 3)
    env.rec("weighted grad", torch.func.grad(lambda x: (numpy_sort(x) * w).sum())(x))
    xr = x.clone().requires_grad_()
    (numpy_sort(xr) * w).sum().backward()
    env.rec("backward grad", xr.grad)
    x = env.randn(2, 3)
    result = torch.vmap(numpy_sort)(x)
    env.rec("vmap", (result, torch.allclose(result, numpy_sort(x, 1))))
    env.rec("vmap in_dims=1", torch.vmap(numpy_sort, in_dims=1)(x))
    env.rec("vmap grad", torch.vmap(torch.func.grad(lambda t: (numpy_sort(t) * w[0]).sum()))(x))


def tensor_like_type(torch, env):
    HANDLED_FUNCTIONS = {}

    class ScalarTensor(object):
        def __init__(self, N, value):
            self._N = N
            self._value = value

        def __repr__(self):
            return "ScalarTensor(N={}, value={})".format(self._N, self._value)

        def tensor(self):
            return self._value * torch.eye(self._N)

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if kwargs is None:
                kwargs = {}
            if func not in HANDLED_FUNCTIONS or not all(
                issubclass(t, (torch.Tensor, ScalarTensor))
                for t in types
            ):
                return NotImplemented
            return HANDLED_FUNCTIONS[func](*args, **kwargs)

    def implements(torch_function):
        """Register a torch function override for ScalarTensor"""
        def decorator(func):
            functools.update_wrapper(func, torch_function)
            HANDLED_FUNCTIONS[torch_function] = func
            return func
        return decorator

    @implements(torch.mean)
    def mean(input):
        return float(input._value) / input._N

    def ensure_tensor(data):
        if isinstance(data, ScalarTensor):
            return data.tensor()
        return torch.as_tensor(data)

    @implements(torch.add)
    def add(input, other):
        try:
            if input._N == other._N:
                return ScalarTensor(input._N, input._value + other._value)
            else:
                raise ValueError("Shape mismatch!")
        except AttributeError:
            return torch.add(ensure_tensor(input), ensure_tensor(other))

    d = ScalarTensor(5, 2)
    env.rec("repr", repr(d))
    env.rec("tensor", d.tensor())
    env.rec("mean", torch.mean(d))
    s = torch.add(d, d)
    env.rec("add", (s._N, s._value))
    env.rec("add tensor", torch.add(d, torch.ones(5, 5)))
    try:
        torch.mul(d, 2)
        env.rec("unhandled", "no error")
    except TypeError as e:
        env.rec("unhandled", "ScalarTensor" in str(e))
