"""Programs of tests/programs/test_tutorials_autograd_s76_b.py (stop 76, file b):
forward-mode AD, double backward with custom Functions and the fused convolution + batch
norm Function, written as pytorch.org's autograd / torch.func tutorials write them, against the
module parameter `torch` (tutorial_harness.py)."""
import math


def forward_ad(torch, env):
    fwAD = torch.autograd.forward_ad
    functional_call, jvp, jacfwd = torch.func.functional_call, torch.func.jvp, torch.func.jacfwd

    primal = env.randn(10, 10)
    tangent = env.randn(10, 10)

    def fn(x, y):
        return x ** 2 + y ** 2

    with fwAD.dual_level():
        dual_input = fwAD.make_dual(primal, tangent)
        assert fwAD.unpack_dual(dual_input).tangent is tangent
        dual_input_alt = fwAD.make_dual(primal, tangent.T)
        assert fwAD.unpack_dual(dual_input_alt).tangent is not tangent
        plain_tensor = env.randn(10, 10)
        dual_output = fn(dual_input, plain_tensor)
        jvp_ = fwAD.unpack_dual(dual_output).tangent
        env.rec("dual output", fwAD.unpack_dual(dual_output))
        env.rec("unpack names", tuple(type(fwAD.unpack_dual(dual_output))._fields))
    assert fwAD.unpack_dual(dual_output).tangent is None
    env.rec("jvp", jvp_)

    model = env.init(torch.nn.Linear(5, 5))
    input = env.randn(16, 5)
    params = {name: p for name, p in model.named_parameters()}
    tangents = {name: env.randn(*p.shape) for name, p in params.items()}
    with fwAD.dual_level():
        for name, p in params.items():
            delattr(model, name)
            setattr(model, name, fwAD.make_dual(p, tangents[name]))
        out = model(input)
        jvp_ = fwAD.unpack_dual(out).tangent
    env.rec("module jvp (setattr)", jvp_)

    model2 = env.init(torch.nn.Linear(5, 5))
    dual_params = {}
    with fwAD.dual_level():
        for name, p in params.items():
            dual_params[name] = fwAD.make_dual(p, tangents[name])
        out = functional_call(model2, dual_params, input)
        jvp2 = fwAD.unpack_dual(out).tangent
    assert torch.allclose(jvp_, jvp2)
    env.rec("module jvp (functional_call)", jvp2)

    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(foo):
            result = torch.exp(foo)
            return result

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.result = output

        @staticmethod
        def jvp(ctx, gI):
            gO = gI * ctx.result
            del ctx.result
            return gO

    fn = Fn.apply
    primal = env.randn(10, 10).double().requires_grad_()
    tangent = env.randn(10, 10).double()
    with fwAD.dual_level():
        dual_input = fwAD.make_dual(primal, tangent)
        dual_output = fn(dual_input)
        jvp_ = fwAD.unpack_dual(dual_output).tangent
    env.rec("custom jvp", jvp_)
    env.rec("gradcheck fwd", torch.autograd.gradcheck(
        Fn.apply, (primal,), check_forward_ad=True, check_backward_ad=False,
        check_undefined_grad=False, check_batched_grad=False))

    x, t = env.randn(5), env.randn(5)
    f = lambda x: x.sin().exp()
    step = env.step(lambda x, t: jvp(f, (x,), (t,)))
    env.rec("func.jvp", step(x, t))
    env.rec("func.jvp again", step(x + 1, t))
    env.rec("jacfwd", jacfwd(f)(x))
    env.rec("jacfwd has_aux", jacfwd(lambda x: (f(x), x.cos()), has_aux=True)(x))


def double_backward_custom(torch, env):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 2

        @staticmethod
        def backward(ctx, grad_out):
            x, = ctx.saved_tensors
            return grad_out * 2 * x

    x = env.rand(3, 3).double().requires_grad_()
    env.rec("square gradcheck", torch.autograd.gradcheck(Square.apply, x))
    env.rec("square gradgradcheck", torch.autograd.gradgradcheck(Square.apply, x))

    class Exp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            result = torch.exp(x)
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad_out):
            result, = ctx.saved_tensors
            return result * grad_out

    x = env.randn(1).double().requires_grad_()
    env.rec("exp gradcheck", torch.autograd.gradcheck(Exp.apply, x))
    env.rec("exp gradgradcheck", torch.autograd.gradgradcheck(Exp.apply, x))
    y = Exp.apply(x)
    env.rec("exp grad_fn", type(y.grad_fn).__name__)
    (gx,) = torch.autograd.grad(y, x, create_graph=True)
    env.rec("exp gx", (gx, type(gx.grad_fn).__name__ if gx.grad_fn is not None else None))

    class Sinh(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            expx = torch.exp(x)
            expnegx = torch.exp(-x)
            ctx.save_for_backward(expx, expnegx)
            return (expx - expnegx) / 2, expx, expnegx

        @staticmethod
        def backward(ctx, grad_out, _grad_out_exp, _grad_out_negexp):
            expx, expnegx = ctx.saved_tensors
            grad_input = grad_out * (expx + expnegx) / 2
            grad_input += _grad_out_exp * expx
            grad_input -= _grad_out_negexp * expnegx
            return grad_input

    def sinh(x):
        return Sinh.apply(x)[0]

    x = env.rand(3, 3).double().requires_grad_()
    env.rec("sinh gradcheck", torch.autograd.gradcheck(sinh, x))
    env.rec("sinh gradgradcheck", torch.autograd.gradgradcheck(sinh, x))

    class SinhBad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            expx = torch.exp(x)
            expnegx = torch.exp(-x)
            ctx.expx = expx
            ctx.expnegx = expnegx
            return (expx - expnegx) / 2

        @staticmethod
        def backward(ctx, grad_out):
            expx = ctx.expx
            expnegx = ctx.expnegx
            grad_input = grad_out * (expx + expnegx) / 2
            return grad_input

    x = env.rand(2, 2).double().requires_grad_()
    out = SinhBad.apply(x)
    (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    env.rec("sinh bad grad requires_grad", (g.requires_grad, g.grad_fn is not None))
    try:
        torch.autograd.gradgradcheck(SinhBad.apply, x)
        env.rec("sinh bad gradgradcheck", "passed")
    except Exception as e:
        env.rec("sinh bad gradgradcheck", type(e).__name__)
    env.rec("sinh bad gradgradcheck raise_exception=False",
            torch.autograd.gradgradcheck(SinhBad.apply, x, raise_exception=False))

    # a training step through the Functions (compiled)
    w = env.randn(4).requires_grad_()
    opt = torch.optim.SGD([w], lr=0.05)
    target = env.randn(4)

    def train_step(t):
        opt.zero_grad()
        loss = (sinh(Exp.apply(w) * 0.3) - t).pow(2).sum() + Square.apply(w).mean()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("custom train", [step(target).item() for _ in range(4)])
    env.rec("custom w", w)


def fused_conv_bn(torch, env):
    once_differentiable = torch.autograd.function.once_differentiable
    F = torch.nn.functional

    def convolution_backward(grad_out, X, weight):
        grad_input = F.conv2d(X.transpose(0, 1), grad_out.transpose(0, 1)).transpose(0, 1)
        grad_X = torch.nn.functional.conv_transpose2d(grad_out, weight)
        return grad_X, grad_input

    class Conv2D(torch.autograd.Function):
        @staticmethod
        def forward(ctx, X, weight):
            ctx.save_for_backward(X, weight)
            return F.conv2d(X, weight)

        @staticmethod
        @once_differentiable
        def backward(ctx, grad_out):
            X, weight = ctx.saved_tensors
            return convolution_backward(grad_out, X, weight)

    weight = env.rand(2, 2, 2, 2).double().requires_grad_()
    X = env.rand(1, 2, 4, 4).double().requires_grad_()
    env.rec("conv gradcheck", torch.autograd.gradcheck(Conv2D.apply, (X, weight)))

    def unsqueeze_all(t):
        return t[None, :, None, None]

    def batch_norm_backward(grad_out, X, sum, sqrt_var, N, eps):
        tmp = ((X - unsqueeze_all(sum) / N) * grad_out).sum(dim=(0, 2, 3))
        tmp *= -1
        d_denom = tmp / (sqrt_var + eps)**2
        d_var = d_denom / (2 * sqrt_var)
        d_mean_dx = grad_out / unsqueeze_all(sqrt_var + eps)
        d_mean_dx = unsqueeze_all(-d_mean_dx.sum(dim=(0, 2, 3)) / N)
        grad_input = X * unsqueeze_all(d_var * N)
        grad_input += unsqueeze_all(-d_var * sum)
        grad_input *= 2 / ((N - 1) * N)
        grad_input += d_mean_dx
        grad_input *= unsqueeze_all(sqrt_var + eps)
        grad_input += grad_out
        grad_input /= unsqueeze_all(sqrt_var + eps)
        return grad_input

    class BatchNorm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, X, eps=1e-3):
            sum = X.sum(dim=(0, 2, 3))
            var = X.var(unbiased=True, dim=(0, 2, 3))
            N = X.numel() / X.size(1)
            sqrt_var = torch.sqrt(var)
            ctx.save_for_backward(X)
            ctx.eps = eps
            ctx.sum = sum
            ctx.N = N
            ctx.sqrt_var = sqrt_var
            mean = sum / N
            denom = sqrt_var + eps
            out = X - unsqueeze_all(mean)
            out /= unsqueeze_all(denom)
            return out

        @staticmethod
        @once_differentiable
        def backward(ctx, grad_out):
            X, = ctx.saved_tensors
            return batch_norm_backward(grad_out, X, ctx.sum, ctx.sqrt_var, ctx.N, ctx.eps)

    a = env.rand(1, 2, 3, 4).double().requires_grad_()
    env.rec("bn gradcheck", torch.autograd.gradcheck(BatchNorm.apply, (a,), fast_mode=False))

    class FusedConvBN2DFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, X, conv_weight, eps=1e-3):
            assert X.ndim == 4
            ctx.save_for_backward(X, conv_weight)
            X = F.conv2d(X, conv_weight)
            sum = X.sum(dim=(0, 2, 3))
            var = X.var(unbiased=True, dim=(0, 2, 3))
            N = X.numel() / X.size(1)
            sqrt_var = torch.sqrt(var)
            ctx.eps = eps
            ctx.sum = sum
            ctx.N = N
            ctx.sqrt_var = sqrt_var
            mean = sum / N
            denom = sqrt_var + eps
            X.sub_(unsqueeze_all(mean))
            X.div_(unsqueeze_all(denom))
            return X

        @staticmethod
        def backward(ctx, grad_out):
            X, conv_weight, = ctx.saved_tensors
            X_conv_out = F.conv2d(X, conv_weight)
            grad_out = batch_norm_backward(grad_out, X_conv_out, ctx.sum, ctx.sqrt_var,
                                           ctx.N, ctx.eps)
            grad_X, grad_input = convolution_backward(grad_out, X, conv_weight)
            return grad_X, grad_input, None, None, None, None, None

    weight = env.rand(3, 2, 2, 2).double().requires_grad_()
    X = env.rand(2, 2, 3, 3).double().requires_grad_()
    env.rec("fused gradcheck", torch.autograd.gradcheck(FusedConvBN2DFunction.apply, (X, weight)))

    class FusedConvBN(torch.nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, exp_avg_factor=0.1,
                     eps=1e-3, device=None, dtype=None):
            super(FusedConvBN, self).__init__()
            factory_kwargs = {'device': device, 'dtype': dtype}
            weight_shape = (out_channels, in_channels, kernel_size, kernel_size)
            self.conv_weight = torch.nn.Parameter(torch.empty(*weight_shape, **factory_kwargs))
            self.eps = eps
            self.reset_parameters()

        def forward(self, X):
            return FusedConvBN2DFunction.apply(X, self.conv_weight, self.eps)

        def reset_parameters(self) -> None:
            torch.nn.init.kaiming_uniform_(self.conv_weight, a=math.sqrt(5))

    class Net(torch.nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.convbn1 = FusedConvBN(1, 4, 3)
            self.convbn2 = FusedConvBN(4, 6, 3)
            self.fc1 = torch.nn.Linear(24, 10)

        def forward(self, x):
            x = self.convbn1(x)
            x = F.relu(x)
            x = self.convbn2(x)
            x = F.relu(x)
            x = F.max_pool2d(x, 2)
            x = torch.flatten(x, 1)
            x = self.fc1(x)
            output = F.log_softmax(x, dim=1)
            return output

    model = env.init(Net())
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    data, target = env.randn(8, 1, 8, 8), env.randint(0, 10, (8,))

    def train_step(data, target):
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        return loss

    step = env.step(train_step)
    env.rec("fused losses", [step(data, target).item() for _ in range(3)])
    env.rec("fused params", dict(model.state_dict()))


def forward_ad_in_step(torch, env):
    # the tutorial's "Usage with Modules" as a function called for many tangents (compiled)
    fwAD = torch.autograd.forward_ad
    functional_call = torch.func.functional_call
    model = env.init(torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh()))
    input = env.randn(6, 5)
    params = {name: p.detach() for name, p in model.named_parameters()}

    def directional_derivative(tangents):
        with fwAD.dual_level():
            dual_params = {name: fwAD.make_dual(p, tangents[name]) for name, p in params.items()}
            out = functional_call(model, dual_params, input)
            return fwAD.unpack_dual(out).tangent

    step = env.step(directional_derivative)
    for i in range(3):
        tangents = {name: env.randn(*p.shape) for name, p in params.items()}
        env.rec(f"jvp {i}", step(tangents))
