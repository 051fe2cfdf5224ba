"""Official tutorials the other files leave out, nearly verbatim (sweep 22, H2 part A): the
"Fusing Convolution and Batch Norm using Custom Function" tutorial (Conv2D and BatchNorm as
autograd.Functions with hand-written backwards, gradcheck, FusedConvBN2DFunction recomputing
the convolution in backward, trained in the tutorial's Net against the unfused nn modules);
the "Compiled Autograd" tutorial (a compiled train function calling loss.backward(), a
tensor hook adding 10 inside it); the torch.func "whirlwind tour" (grad of grad, vmap of a
model closing over weights, vjp, jvp, jacrev with argnums, vmap(jacrev), jacfwd, hessian).
Synthetic data. Programs `f(torch, env)`, see tutorial_harness.py."""
import math


def fused_conv_bn(torch, env):
    nn = torch.nn
    F = torch.nn.functional
    init = torch.nn.init
    once_differentiable = torch.autograd.function.once_differentiable

    def convolution_backward(grad_out, X, weight):
        grad_input = F.conv2d(X.transpose(0, 1), grad_out.transpose(0, 1)).transpose(0, 1)
        grad_X = F.conv_transpose2d(grad_out, weight)
        return grad_X, grad_input

    class Conv2D(torch.autograd.Function):
        @staticmethod
        def forward(ctx, X, weight):
            ctx.save_for_backward(X, weight)
            return F.conv2d(X, weight)

        # Use @once_differentiable by default unless we intend to double backward
        @staticmethod
        @once_differentiable
        def backward(ctx, grad_out):
            X, weight = ctx.saved_tensors
            return convolution_backward(grad_out, X, weight)

    weight = env.rand(5, 3, 3, 3).double().requires_grad_()
    X = env.rand(10, 3, 7, 7).double().requires_grad_()
    env.rec("gradcheck conv", torch.autograd.gradcheck(Conv2D.apply, (X, weight)))

    def unsqueeze_all(t):
        # Helper function to ``unsqueeze`` all the dimensions that we reduce over
        return t[None, :, None, None]

    def batch_norm_backward(grad_out, X, sum, sqrt_var, N, eps):
        tmp = ((X - unsqueeze_all(sum) / N) * grad_out).sum(dim=(0, 2, 3))
        tmp *= -1
        d_denom = tmp / (sqrt_var + eps)**2  # ``d_denom = -num / denom**2``
        d_var = d_denom / (2 * sqrt_var)  # ``denom = torch.sqrt(var) + eps``
        # Compute ``d_mean_dx`` before allocating the final NCHW-sized grad_input buffer
        d_mean_dx = grad_out / unsqueeze_all(sqrt_var + eps)
        d_mean_dx = unsqueeze_all(-d_mean_dx.sum(dim=(0, 2, 3)) / N)
        # (1) unbiased_var(x) = ((X - unsqueeze_all(mean))**2).sum(dim=(0, 2, 3)) / (N - 1)
        grad_input = X * unsqueeze_all(d_var * N)
        grad_input += unsqueeze_all(-d_var * sum)
        grad_input *= 2 / ((N - 1) * N)
        # (2) mean (see above)
        grad_input += d_mean_dx
        # (3) Add 'grad_out / <factor>' without allocating an extra buffer
        grad_input *= unsqueeze_all(sqrt_var + eps)
        grad_input += grad_out
        grad_input /= unsqueeze_all(sqrt_var + eps)  # ``sqrt_var + eps > 0!``
        return grad_input

    class BatchNorm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, X, eps=1e-3):
            # Don't save ``keepdim`` values for backward
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
    env.rec("gradcheck bn", torch.autograd.gradcheck(BatchNorm.apply, (a,), fast_mode=False))

    class FusedConvBN2DFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, X, conv_weight, eps=1e-3):
            assert X.ndim == 4  # N, C, H, W
            # (1) Only need to save this single buffer for backward!
            ctx.save_for_backward(X, conv_weight)

            # (2) Exact same Conv2D forward from example above
            X = F.conv2d(X, conv_weight)
            # (3) Exact same BatchNorm2D forward from example above
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
            out = X - unsqueeze_all(mean)
            out /= unsqueeze_all(denom)
            return out

        @staticmethod
        def backward(ctx, grad_out):
            X, conv_weight, = ctx.saved_tensors
            # (4) Batch norm backward
            # (5) We need to recompute conv
            X_conv_out = F.conv2d(X, conv_weight)
            grad_out = batch_norm_backward(grad_out, X_conv_out, ctx.sum, ctx.sqrt_var,
                                           ctx.N, ctx.eps)
            # (6) Conv2d backward
            grad_X, grad_input = convolution_backward(grad_out, X, conv_weight)
            return grad_X, grad_input, None, None, None, None, None

    weight = env.rand(5, 3, 3, 3).double().requires_grad_()
    X = env.rand(2, 3, 4, 4).double().requires_grad_()
    env.rec("gradcheck fused",
            torch.autograd.gradcheck(FusedConvBN2DFunction.apply, (X, weight)))

    class FusedConvBN(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, exp_avg_factor=0.1,
                     eps=1e-3, device=None, dtype=None):
            super(FusedConvBN, self).__init__()
            factory_kwargs = {'device': device, 'dtype': dtype}
            # Conv parameters
            weight_shape = (out_channels, in_channels, kernel_size, kernel_size)
            self.conv_weight = nn.Parameter(torch.empty(*weight_shape, **factory_kwargs))
            # Batch norm parameters
            num_features = out_channels
            self.num_features = num_features
            self.eps = eps
            # Initialize
            self.reset_parameters()

        def forward(self, X):
            return FusedConvBN2DFunction.apply(X, self.conv_weight, self.eps)

        def reset_parameters(self) -> None:
            init.kaiming_uniform_(self.conv_weight, a=math.sqrt(5))

    class Net(nn.Module):
        def __init__(self, fused=True):
            super(Net, self).__init__()
            self.fused = fused
            if fused:
                self.convbn1 = FusedConvBN(1, 4, 3)
                self.convbn2 = FusedConvBN(4, 8, 3)
            else:
                self.conv1 = nn.Conv2d(1, 4, 3, 1, bias=False)
                self.bn1 = nn.BatchNorm2d(4, affine=False, track_running_stats=False)
                self.conv2 = nn.Conv2d(4, 8, 3, 1, bias=False)
                self.bn2 = nn.BatchNorm2d(8, affine=False, track_running_stats=False)
            self.fc1 = nn.Linear(128, 16)
            self.dropout = nn.Dropout(0.5)
            self.fc2 = nn.Linear(16, 10)

        def forward(self, x):
            if self.fused:
                x = self.convbn1(x)
            else:
                x = self.conv1(x)
                x = self.bn1(x)
            F.relu_(x)
            if self.fused:
                x = self.convbn2(x)
            else:
                x = self.conv2(x)
                x = self.bn2(x)
            F.relu_(x)
            x = F.max_pool2d(x, 2)
            F.relu_(x)
            x = x.flatten(1)
            x = self.fc1(x)
            x = self.dropout(x)
            F.relu_(x)
            x = self.fc2(x)
            output = F.log_softmax(x, dim=1)
            return output

    data = env.randn(8, 1, 12, 12)
    target = env.randint(0, 10, (8,))
    torch.manual_seed(1)
    for fused in (True, False):
        model = Net(fused=fused)
        optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)

        def train(data, target):
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            return loss.detach()

        train = env.step(train)
        for epoch in range(3):
            env.rec(f"fused={fused} loss {epoch}", train(data, target))
            scheduler.step()
        env.rec(f"fused={fused} state", model.state_dict())


def compiled_autograd(torch, env):
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(10, 10)

        def forward(self, x):
            return self.linear(x)

    def train(model, x):
        loss = model(x).sum()
        loss.backward()

    torch.manual_seed(0)
    model = Model()
    x = torch.randn(10)
    torch._dynamo.config.compiled_autograd = True
    try:
        train = env.step(train)
        train(model, x)
        env.rec("grads 1", [p.grad for p in model.parameters()])

        # the tutorial's second function: a hook on an intermediate, inside the compiled fn
        def train_hook(model, x):
            x = x * 2
            x.register_hook(lambda grad: grad + 10)
            loss = model(x).sum()
            loss.backward()
            return x.detach()

        train_hook = env.step(train_hook)
        x = torch.randn(10, requires_grad=True)
        for i in range(2):
            model.zero_grad()
            train_hook(model, x)
            env.rec(f"hook grads {i}", [p.grad for p in model.parameters()] + [x.grad])
    finally:
        torch._dynamo.config.compiled_autograd = False


def whirlwind_tour(torch, env):
    grad, hessian, jacfwd, jacrev = (torch.func.grad, torch.func.hessian, torch.func.jacfwd,
                                     torch.func.jacrev)
    jvp, vjp, vmap = torch.func.jvp, torch.func.vjp, torch.func.vmap

    x = env.randn(1).squeeze()
    cos_x = grad(lambda x: torch.sin(x))(x)
    assert torch.allclose(cos_x, x.cos())
    neg_sin_x = grad(grad(lambda x: torch.sin(x)))(x)
    assert torch.allclose(neg_sin_x, -x.sin())
    env.rec("grad grad", (cos_x, neg_sin_x))

    batch_size, feature_size = 3, 5
    weights = env.randn(feature_size).requires_grad_()

    def model(feature_vec):
        # Very simple linear model with activation
        assert feature_vec.dim() == 1
        return feature_vec.dot(weights).relu()

    examples = env.randn(batch_size, feature_size)
    result = vmap(model)(examples)
    env.rec("vmap model", result)

    def f(x):
        return x.sin().sum()

    x = env.randn(5)
    output, vjp_fn = vjp(f, x)
    (grad_x,) = vjp_fn(torch.tensor(1.))
    env.rec("vjp", (output, grad_x))

    x = env.randn(5)
    y = env.randn(5)
    f = lambda x, y: (x * y)  # noqa: E731
    _, out_tangent = jvp(f, (x, y), (torch.ones(5), torch.ones(5)))
    assert torch.allclose(out_tangent, x + y)

    x = env.randn(5)
    jacobian = jacrev(torch.sin)(x)
    expected = torch.diag(torch.cos(x))
    assert torch.allclose(jacobian, expected)

    def f(x, y):
        return x + y ** 2

    x, y = env.randn(5), env.randn(5)
    jacobian = jacrev(f, argnums=1)(x, y)
    expected = torch.diag(2 * y)
    assert torch.allclose(jacobian, expected)
    jac_x, jac_y = jacrev(f, argnums=(0, 1))(x, y)
    env.rec("jacrev argnums", (jac_x, jac_y))
    jacobian = jacfwd(torch.sin)(x)
    assert torch.allclose(jacobian, torch.diag(torch.cos(x)))

    def f(x):
        return x.sin().sum()

    x = env.randn(5)
    hess = hessian(f)(x)
    env.rec("hessian", hess)

    # the tour's pieces together, compiled: batched jacobians of a small MLP's output with
    # respect to its input, the jvp of its loss, and a gradient step on the weights
    W1, W2 = env.randn(5, 8, scale=0.5), env.randn(8, 3, scale=0.5)
    params = [W1.requires_grad_(), W2.requires_grad_()]
    opt = torch.optim.SGD(params, lr=0.1)

    def mlp(x):
        return torch.tanh(x @ params[0]) @ params[1]

    def step(xb, yb):
        jac = vmap(jacrev(mlp))(xb)
        _, t = jvp(lambda v: ((mlp(v) - yb) ** 2).sum(), (xb,), (torch.ones_like(xb),))
        opt.zero_grad()
        loss = ((mlp(xb) - yb) ** 2).mean() + 1e-3 * jac.pow(2).mean()
        loss.backward()
        opt.step()
        return loss.detach(), jac.detach(), t.detach()

    step = env.step(step)
    xb, yb = env.randn(4, 5), env.randn(4, 3)
    for i in range(3):
        env.rec(f"step {i}", step(xb, yb))
    env.rec("params", [p.detach() for p in params])
