"""Official autograd tutorials and notes the other files leave out, nearly verbatim (sweep
21b, B): the YouTube series' "The Fundamentals of Autograd" (grad_fn chains, a training loop,
turning autograd off, the autograd profiler, a vector-Jacobian backward, the functional
jacobian and hvp); "Understanding requires_grad, retain_grad, Leaf, and Non-leaf Tensors";
the "Extending PyTorch" note (LinearFunction with setup_context, MulConstant, MyCube with two
outputs and generate_vmap_rule, a Linear module over LinearFunction).
Programs `f(torch, env)`, see tutorial_harness.py."""
import math


def autograd_fundamentals(torch, env):
    a = torch.linspace(0., 2. * math.pi, steps=25, requires_grad=True)
    b = torch.sin(a)
    c = 2 * b
    d = c + 1
    out = d.sum()
    env.rec("grad_fn names", [type(t.grad_fn).__name__ for t in (b, c, d, out)])
    env.rec("d.grad_fn.next_functions", [type(f).__name__ for f, _ in d.grad_fn.next_functions])
    env.rec("a.grad_fn is None", a.grad_fn is None)
    out.backward()
    env.rec("a.grad", a.grad)

    BATCH_SIZE = 16
    DIM_IN = 100
    HIDDEN_SIZE = 20
    DIM_OUT = 10

    class TinyModel(torch.nn.Module):
        def __init__(self):
            super(TinyModel, self).__init__()
            self.layer1 = torch.nn.Linear(DIM_IN, HIDDEN_SIZE)
            self.relu = torch.nn.ReLU()
            self.layer2 = torch.nn.Linear(HIDDEN_SIZE, DIM_OUT)

        def forward(self, x):
            x = self.layer1(x)
            x = self.relu(x)
            x = self.layer2(x)
            return x

    some_input = env.randn(BATCH_SIZE, DIM_IN)
    ideal_output = env.randn(BATCH_SIZE, DIM_OUT)
    model = env.init(TinyModel())
    env.rec("layer2 grad before", model.layer2.weight.grad is None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001)

    def step(some_input, ideal_output):
        prediction = model(some_input)
        loss = (ideal_output - prediction).pow(2).sum()
        loss.backward()
        optimizer.step()
        return loss

    step = env.step(step)
    env.rec("loss 0", step(some_input, ideal_output))
    env.rec("layer2 grad", model.layer2.weight.grad[0][0:10])
    for i in range(0, 5):
        env.rec(f"loss {i + 1}", step(some_input, ideal_output))
    env.rec("accumulated grad", model.layer2.weight.grad[0][0:10])
    optimizer.zero_grad(set_to_none=False)
    env.rec("zeroed grad", model.layer2.weight.grad[0][0:10])

    # Turning autograd off and on
    a = torch.ones(2, 3, requires_grad=True)
    b1 = 2 * a
    a.requires_grad = False
    b2 = 2 * a
    env.rec("requires_grad", (b1.requires_grad, b2.requires_grad))
    a = torch.ones(2, 3, requires_grad=True) * 2
    b = torch.ones(2, 3, requires_grad=True) * 3
    c1 = a + b
    with torch.no_grad():
        c2 = a + b
    c3 = a * b
    env.rec("no_grad", (c1.requires_grad, c2.requires_grad, c3.requires_grad))

    def add_tensors1(x, y):
        return x + y

    @torch.no_grad()
    def add_tensors2(x, y):
        return x + y

    a = torch.ones(2, 3, requires_grad=True) * 2
    b = torch.ones(2, 3, requires_grad=True) * 3
    env.rec("decorated", (add_tensors1(a, b).requires_grad, add_tensors2(a, b).requires_grad))
    x = env.rand(5)
    x.requires_grad_()
    y = x.detach()
    env.rec("detach", (x.requires_grad, y.requires_grad, y))

    # Autograd and in-place operations
    a = torch.linspace(0., 2. * math.pi, steps=25, requires_grad=True)
    try:
        torch.sin_(a)
        env.rec("sin_ on a leaf", "no error")
    except RuntimeError as e:
        env.rec("sin_ on a leaf", "a leaf Variable that requires grad" in str(e))

    # Autograd profiler
    x = env.randn(2, 3)
    x.requires_grad_()
    y = env.rand(2, 3)
    z = torch.ones(2, 3, requires_grad=True)
    with torch.autograd.profiler.profile(use_cuda=False) as prf:
        for _ in range(100):
            z = (z / x) * y
    table = prf.key_averages().table(sort_by='self_cpu_time_total')
    env.rec("profiler table", isinstance(table, str) and "div" in table and "mul" in table)
    env.rec("profiled z", z)

    # Advanced topic: more autograd detail and the high-level API
    x = env.randn(3)
    x.requires_grad_()
    y = x * 2
    while y.norm() < 1000:
        y = y * 2
    env.rec("y", y)
    v = torch.tensor([0.1, 1.0, 0.0001], dtype=torch.float)
    y.backward(v)
    env.rec("x.grad", x.grad)

    def exp_adder(x, y):
        return 2 * x.exp() + 3 * y

    inputs = (env.rand(1), env.rand(1))  # arguments for the function
    env.rec("jacobian", torch.autograd.functional.jacobian(exp_adder, inputs))
    inputs = (env.rand(3), env.rand(3))  # bigger inputs
    env.rec("jacobian 3", torch.autograd.functional.jacobian(exp_adder, inputs))

    def do_some_doubling(x):
        y = x * 2
        while y.data.norm() < 1000:
            y = y * 2
        return y

    inputs = env.randn(3)
    my_gradients = torch.tensor([0.1, 1.0, 0.0001])
    env.rec("vjp", torch.autograd.functional.vjp(do_some_doubling, inputs, v=my_gradients))

    def pow_reducer(x):
        return x.pow(3).sum()

    env.rec("hvp", torch.autograd.functional.hvp(pow_reducer, env.rand(2, 2), env.rand(2, 2)))


def leaf_nonleaf(torch, env):
    F = torch.nn.functional
    # Understanding requires_grad, retain_grad, Leaf, and Non-leaf Tensors
    x = torch.ones(1, 3)                        # input features
    W = torch.ones(3, 2, requires_grad=True)    # weights
    b = torch.ones(1, 2, requires_grad=True)    # bias
    y = torch.ones(1, 2)                        # output
    z = (x @ W) + b                             # pre-activation
    y_pred = F.relu(z)                          # activation
    loss = F.mse_loss(y_pred, y)                # loss

    names = ["x", "W", "b", "y", "z", "y_pred", "loss"]
    tensors = [x, W, b, y, z, y_pred, loss]
    env.rec("before", [(n, t.is_leaf, t.requires_grad, t.retains_grad)
                       for n, t in zip(names, tensors)])

    z.retain_grad()
    y_pred.retain_grad()
    loss.retain_grad()
    loss.backward(retain_graph=True)
    env.rec("after", [(n, t.is_leaf, t.requires_grad, t.retains_grad,
                       t.grad if t.grad is not None else None)
                      for n, t in zip(names, tensors)])
    env.rec("grad_fn", [type(t.grad_fn).__name__ if t.grad_fn is not None else None
                        for t in tensors])
    # a second backward through the retained graph accumulates
    loss.backward()
    env.rec("accumulated", (W.grad, b.grad, z.grad, y_pred.grad, loss.grad))
    # the note's example: a non-leaf reached through an in-place op keeps retains_grad
    c = torch.ones(2, requires_grad=True) * 3
    c.retain_grad()
    env.rec("retains_grad", c.retains_grad)

    # (the tutorial's model fitted: a step over W and b, the retained grads of this call)
    opt = torch.optim.SGD([W, b], lr=0.1)

    def step(x, y):
        opt.zero_grad()
        z = (x @ W) + b
        z.retain_grad()
        loss = F.mse_loss(F.relu(z), y)
        loss.backward()
        opt.step()
        return loss, z.grad

    step = env.step(step)
    for i in range(3):
        env.rec(f"step {i}", step(env.rand(4, 3), env.rand(4, 2)))
    env.rec("W b", (W, b))


def extending_pytorch(torch, env):
    Function = torch.autograd.Function

    class LinearFunction(Function):
        @staticmethod
        def forward(input, weight, bias=None):
            output = input.mm(weight.t())
            if bias is not None:
                output += bias.unsqueeze(0).expand_as(output)
            return output

        @staticmethod
        def setup_context(ctx, inputs, output):
            input, weight, bias = inputs
            ctx.save_for_backward(input, weight, bias)

        @staticmethod
        def backward(ctx, grad_output):
            input, weight, bias = ctx.saved_tensors
            grad_input = grad_weight = grad_bias = None
            if ctx.needs_input_grad[0]:
                grad_input = grad_output.mm(weight)
            if ctx.needs_input_grad[1]:
                grad_weight = grad_output.t().mm(input)
            if bias is not None and ctx.needs_input_grad[2]:
                grad_bias = grad_output.sum(0)
            return grad_input, grad_weight, grad_bias

    linear = LinearFunction.apply

    class MulConstant(Function):
        @staticmethod
        def forward(tensor, constant):
            return tensor * constant

        @staticmethod
        def setup_context(ctx, inputs, output):
            # ctx is a context object that can be used to stash information
            # for backward computation
            tensor, constant = inputs
            ctx.constant = constant

        @staticmethod
        def backward(ctx, grad_output):
            # We return as many input gradients as there were arguments.
            # Gradients of non-Tensor arguments to forward must be None.
            return grad_output * ctx.constant, None

    class MyCube(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            # We wish to save dx for backward. In order to do so, it must
            # be returned as an output.
            dx = 3 * x ** 2
            result = x ** 3
            return result, dx

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, = inputs
            result, dx = output
            ctx.save_for_backward(x, dx)

        @staticmethod
        def backward(ctx, grad_output, grad_dx):
            x, dx = ctx.saved_tensors
            # In order for the autograd.Function to work with higher-order
            # gradients, we must add the gradient contribution of `dx`,
            # which is grad_dx * 6 * x.
            result = grad_output * dx + grad_dx * 6 * x
            return result

    # Wrap MyCube in a function so that it is clearer what the output is
    def my_cube(x):
        result, dx = MyCube.apply(x)
        return result

    gradcheck = torch.autograd.gradcheck
    input = (env.randn(20, 20).double().requires_grad_(),
             env.randn(30, 20).double().requires_grad_())
    env.rec("gradcheck linear", gradcheck(linear, input, eps=1e-6, atol=1e-4))
    x = env.randn(4).double().requires_grad_()
    env.rec("gradcheck mulconstant", gradcheck(lambda t: MulConstant.apply(t, 2.5), (x,)))
    env.rec("gradcheck cube", gradcheck(my_cube, (x,)))
    env.rec("gradgradcheck cube", torch.autograd.gradgradcheck(my_cube, (x,)))
    xf = env.randn(3, 4)
    env.rec("vmap cube", torch.vmap(my_cube)(xf))
    env.rec("grad grad cube", torch.func.grad(torch.func.grad(lambda t: my_cube(t).sum()))(
        torch.tensor(1.5)))

    class Linear(torch.nn.Module):
        def __init__(self, input_features, output_features, bias=True):
            super().__init__()
            self.input_features = input_features
            self.output_features = output_features
            self.weight = torch.nn.Parameter(torch.empty(output_features, input_features))
            if bias:
                self.bias = torch.nn.Parameter(torch.empty(output_features))
            else:
                # You should always register all possible parameters, but the
                # optional ones can be None if you want.
                self.register_parameter('bias', None)
            self.weight.data.uniform_(-0.1, 0.1)
            if self.bias is not None:
                self.bias.data.uniform_(-0.1, 0.1)

        def forward(self, input):
            # See the autograd section for explanation of what happens here.
            return LinearFunction.apply(input, self.weight, self.bias)

        def extra_repr(self):
            # (Optional)Set the extra information about this module. You can test
            # it by printing an object of this class.
            return 'input_features={}, output_features={}, bias={}'.format(
                self.input_features, self.output_features, self.bias is not None
            )

    model = env.init(torch.nn.Sequential(Linear(5, 4), torch.nn.Tanh(), Linear(4, 2, bias=False)))
    env.rec("repr", repr(model))
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.5)

    def step(x, y):
        opt.zero_grad()
        out = MulConstant.apply(model(x), 0.5)
        loss = (my_cube(out) - y).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    step = env.step(step)
    xs, ys = env.randn(6, 5), env.randn(6, 2)
    for i in range(4):
        env.rec(f"loss {i}", step(xs, ys))
    env.rec("params", list(model.parameters()))
