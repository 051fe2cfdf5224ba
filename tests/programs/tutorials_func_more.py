"""The torch.func and forward-mode AD tutorials: "Per-sample gradients" (functional_call,
vmap over grad), "Model ensembling" (stack_module_state + vmap), "Forward-mode automatic
differentiation" (forward_ad dual numbers, a custom Function's jvp, torch.func.jvp) and
"Jacobians, Hessians, hvp, vhp, and more" (torch.autograd.functional, jacrev, jacfwd,
hessian, vmap over vjp). Small sizes. Programs `f(torch, env)`, see tutorial_harness.py."""
import copy
from functools import partial


def per_sample_grads(torch, env):
    nn, F = torch.nn, torch.nn.functional
    from_func = torch.func

    class SimpleCNN(nn.Module):
        def __init__(self):
            super(SimpleCNN, self).__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, 1)
            self.conv2 = nn.Conv2d(4, 6, 3, 1)
            self.fc1 = nn.Linear(24, 16)
            self.fc2 = nn.Linear(16, 10)

        def forward(self, x):
            x = self.conv1(x)
            x = F.relu(x)
            x = self.conv2(x)
            x = F.relu(x)
            x = F.max_pool2d(x, 2)
            x = torch.flatten(x, 1)
            x = self.fc1(x)
            x = F.relu(x)
            x = self.fc2(x)
            output = F.log_softmax(x, dim=1)
            return output

    def loss_fn(predictions, targets):
        return F.nll_loss(predictions, targets)

    batch_size = 4
    data = env.randn(batch_size, 1, 8, 8)
    targets = env.randint(0, 10, (batch_size,))
    model = env.init(SimpleCNN())

    def compute_grad(sample, target):
        sample = sample.unsqueeze(0)
        target = target.unsqueeze(0)
        prediction = model(sample)
        loss = loss_fn(prediction, target)
        return torch.autograd.grad(loss, list(model.parameters()))

    def compute_sample_grads(data, targets):
        sample_grads = [compute_grad(data[i], targets[i]) for i in range(batch_size)]
        sample_grads = zip(*sample_grads)
        sample_grads = [torch.stack(shards) for shards in sample_grads]
        return sample_grads

    per_sample_grads = compute_sample_grads(data, targets)
    env.rec("loop", per_sample_grads)

    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def compute_loss(params, buffers, sample, target):
        batch = sample.unsqueeze(0)
        targets = target.unsqueeze(0)
        predictions = from_func.functional_call(model, (params, buffers), (batch,))
        loss = loss_fn(predictions, targets)
        return loss

    ft_compute_grad = from_func.grad(compute_loss)
    ft_compute_sample_grad = from_func.vmap(ft_compute_grad, in_dims=(None, None, 0, 0))
    ft_per_sample_grads = ft_compute_sample_grad(params, buffers, data, targets)
    env.rec("vmap", ft_per_sample_grads)
    for per_sample_grad, ft_per_sample_grad in zip(per_sample_grads,
                                                   ft_per_sample_grads.values()):
        assert torch.allclose(per_sample_grad, ft_per_sample_grad, atol=3e-3, rtol=1e-5)

    # a DP-SGD-like step: clip each sample's gradient, average, step (compiled)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def dp_step(data, targets):
        params = {k: v.detach() for k, v in model.named_parameters()}
        grads = ft_compute_sample_grad(params, buffers, data, targets)
        norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()]).norm(dim=0)
        factor = (1.0 / (norms + 1e-6)).clamp(max=1.0)
        for name, p in model.named_parameters():
            g = grads[name]
            p.grad = (g * factor.view(-1, *([1] * (g.dim() - 1)))).mean(0)
        optimizer.step()
        return norms

    dp_step = env.step(dp_step)
    for i in range(3):
        env.rec(f"dp {i}", dp_step(data, targets))
    env.rec("state", model.state_dict())


def ensembling(torch, env):
    nn, F = torch.nn, torch.nn.functional
    from_func = torch.func

    class SimpleMLP(nn.Module):
        def __init__(self):
            super(SimpleMLP, self).__init__()
            self.fc1 = nn.Linear(16, 32)
            self.fc2 = nn.Linear(32, 16)
            self.fc3 = nn.Linear(16, 10)

        def forward(self, x):
            x = x.flatten(1)
            x = self.fc1(x)
            x = F.relu(x)
            x = self.fc2(x)
            x = F.relu(x)
            x = self.fc3(x)
            return x

    num_models = 3
    data = env.randn(10, 4, 1, 4, 4)
    minibatches = data[:num_models]
    minibatch = data[0]
    models = [env.init(SimpleMLP()) for _ in range(num_models)]
    predictions_diff_minibatch_loop = [model(minibatch)
                                       for model, minibatch in zip(models, minibatches)]
    predictions2 = [model(minibatch) for model in models]
    env.rec("loop", (predictions_diff_minibatch_loop, predictions2))

    params, buffers = from_func.stack_module_state(models)
    base_model = copy.deepcopy(models[0])
    # (the tutorial moves base_model .to('meta'): llgrad has no meta device; functional_call
    # takes no notice of the module's own weights either way)

    def fmodel(params, buffers, x):
        return from_func.functional_call(base_model, (params, buffers), (x,))

    env.rec("sizes", [p.size(0) for p in params.values()])
    predictions1_vmap = from_func.vmap(fmodel)(params, buffers, minibatches)
    predictions2_vmap = from_func.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, minibatch)
    env.rec("vmap", (predictions1_vmap, predictions2_vmap))
    assert torch.allclose(predictions1_vmap, torch.stack(predictions_diff_minibatch_loop),
                          atol=1e-3, rtol=1e-5)

    # training the ensemble: the stacked parameters are leaves an optimizer steps
    params = {k: v.detach().requires_grad_() for k, v in params.items()}
    optimizer = torch.optim.Adam(params.values(), lr=0.01)
    targets = env.randint(0, 10, (num_models, 4))

    def ensemble_step(x, y):
        logits = from_func.vmap(fmodel)(params, buffers, x)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    ensemble_step = env.step(ensemble_step)
    for i in range(3):
        env.rec(f"loss {i}", ensemble_step(minibatches, targets))
    env.rec("params", params)


def forward_ad(torch, env):
    """The dual-number half of the tutorial (torch.autograd.forward_ad)."""
    nn = torch.nn
    fwAD = torch.autograd.forward_ad

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
        jvp = fwAD.unpack_dual(dual_output).tangent
        env.rec("jvp", (fwAD.unpack_dual(dual_output).primal, jvp,
                        fwAD.unpack_dual(fn(dual_input_alt, plain_tensor)).tangent))
    assert fwAD.unpack_dual(dual_output).tangent is None

    model = env.init(nn.Linear(5, 5))
    input = env.randn(16, 5)
    params = {name: p for name, p in model.named_parameters()}
    tangents = {name: env.rand(*p.shape) for name, p in params.items()}
    with fwAD.dual_level():
        for name, p in params.items():
            delattr(model, name)
            setattr(model, name, fwAD.make_dual(p, tangents[name]))
        out = model(input)
        env.rec("module jvp", fwAD.unpack_dual(out).tangent)

    model = env.init(nn.Linear(5, 5))
    dual_params = {}
    with fwAD.dual_level():
        for name, p in params.items():
            dual_params[name] = fwAD.make_dual(p, tangents[name])
        out = torch.func.functional_call(model, dual_params, input)
        env.rec("functional_call jvp", fwAD.unpack_dual(out).tangent)

    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, foo):
            result = torch.exp(foo)
            ctx.result = result
            return result

        @staticmethod
        def jvp(ctx, gI):
            gO = gI * ctx.result
            del ctx.result
            return gO

    fn = Fn.apply
    primal = env.randn(10, 10).double().requires_grad_()
    tangent = env.randn(10, 10)
    with fwAD.dual_level():
        dual_input = fwAD.make_dual(primal, tangent)
        dual_output = fn(dual_input)
        env.rec("Function jvp", fwAD.unpack_dual(dual_output).tangent)
    env.rec("gradcheck", torch.autograd.gradcheck(
        Fn.apply, (primal,), check_forward_ad=True, check_backward_ad=False,
        check_undefined_grad=False, check_batched_grad=False))



def func_jvp(torch, env):
    """The torch.func half of the forward-mode AD tutorial: jvp of functions and modules."""
    nn = torch.nn
    from_func = torch.func
    x = env.randn(1)[0]

    def f(x):
        return x * torch.tensor([1., 2., 3])

    value, grad = from_func.jvp(f, (x,), (torch.tensor(1.),))
    env.rec("func.jvp", (value, grad))

    model = env.init(nn.Linear(5, 5))
    input = env.randn(16, 5)
    params = dict(model.named_parameters())
    ptangents = {k: env.rand(*p.shape) for k, p in params.items()}

    def func(params, input):
        return from_func.functional_call(model, params, input)

    def jvp_step(input):
        return from_func.jvp(partial(func, input=input), (params,), (ptangents,))

    jvp_step = env.step(jvp_step)
    for i in range(2):
        out, jvp_out = jvp_step(input * (i + 1))
        env.rec(f"module func.jvp {i}", (out, jvp_out))


def jacobians(torch, env):
    F = torch.nn.functional
    from_func = torch.func

    def predict(weight, bias, x):
        return F.linear(x, weight, bias).tanh()

    D = 6
    weight = env.randn(D, D)
    bias = env.randn(D)
    x = env.randn(D)

    def compute_jac(xp):
        jacobian_rows = [torch.autograd.grad(predict(weight, bias, xp), xp, vec)[0]
                         for vec in unit_vectors]
        return torch.stack(jacobian_rows)

    xp = x.clone().requires_grad_()
    unit_vectors = torch.eye(D)
    jacobian = compute_jac(xp)
    env.rec("loop", jacobian)
    _, vjp_fn = from_func.vjp(partial(predict, weight, bias), x)
    ft_jacobian, = from_func.vmap(vjp_fn)(unit_vectors)
    env.rec("vmap vjp", ft_jacobian)
    env.rec("jacrev", from_func.jacrev(predict, argnums=2)(weight, bias, x))
    env.rec("jacrev 0 1", from_func.jacrev(predict, argnums=(0, 1))(weight, bias, x))
    env.rec("jacfwd", from_func.jacfwd(predict, argnums=2)(weight, bias, x))
    env.rec("hessian", from_func.hessian(predict, argnums=2)(weight, bias, x))
    env.rec("jacfwd jacrev", from_func.jacfwd(from_func.jacrev(predict, argnums=2),
                                              argnums=2)(weight, bias, x))

    batch_size = 3
    xb = env.randn(batch_size, D)
    compute_batch_jacobian = from_func.vmap(from_func.jacrev(predict, argnums=2),
                                            in_dims=(None, None, 0))
    batch_jacobian0 = compute_batch_jacobian(weight, bias, xb)

    def predict_with_output_summed(weight, bias, x):
        return predict(weight, bias, x).sum(0)

    batch_jacobian1 = from_func.jacrev(predict_with_output_summed,
                                       argnums=2)(weight, bias, xb).movedim(1, 0)
    env.rec("batch jacobian", (batch_jacobian0, batch_jacobian1))
    compute_batch_hessian = from_func.vmap(from_func.hessian(predict, argnums=2),
                                           in_dims=(None, None, 0))
    env.rec("batch hessian", compute_batch_hessian(weight, bias, xb))

    def hvp(f, primals, tangents):
        return from_func.jvp(from_func.grad(f), primals, tangents)[1]

    def f(x):
        return x.sin().sum()

    tangent = env.randn(D)
    env.rec("hvp", hvp(f, (x,), (tangent,)))

    # torch.autograd.functional
    AF = torch.autograd.functional

    def exp_reducer(x):
        return x.exp().sum(dim=1)

    inputs = env.rand(2, 2)
    env.rec("AF.jacobian", (AF.jacobian(exp_reducer, inputs),
                            AF.jacobian(exp_reducer, inputs, create_graph=True),
                            AF.jacobian(exp_reducer, inputs, vectorize=True)))

    def pow_reducer(x):
        return x.pow(3).sum()

    env.rec("AF.hessian", AF.hessian(pow_reducer, inputs))

    def pow_adder_reducer(x, y):
        return (2 * x.pow(2) + 3 * y.pow(2)).sum()

    env.rec("AF.hessian 2", AF.hessian(pow_adder_reducer, (inputs, env.rand(2, 2))))
    v = torch.ones(2, 2)
    env.rec("AF.vjp jvp", (AF.vjp(exp_reducer, inputs, torch.ones(2)),
                           AF.jvp(exp_reducer, inputs, v),
                           AF.hvp(pow_reducer, inputs, v), AF.vhp(pow_reducer, inputs, v)))

    # a compiled step: jacobian-regularised regression (the loss uses jacrev's result)
    w = weight.clone().requires_grad_()
    opt = torch.optim.SGD([w], lr=0.05)
    target = env.randn(batch_size, D)

    def jac_step(xb, target):
        out = predict(w, bias, xb)
        jac = from_func.vmap(from_func.jacrev(predict, argnums=2),
                             in_dims=(None, None, 0))(w, bias, xb)
        loss = F.mse_loss(out, target) + 0.01 * jac.pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    jac_step = env.step(jac_step)
    for i in range(3):
        env.rec(f"jac loss {i}", jac_step(xb, target))
    env.rec("w", w)
