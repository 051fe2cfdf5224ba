"""Programs of tests/programs/test_tutorials_autograd_s76_b.py (stop 76, file b):
per-sample gradients, model ensembling, Jacobians / Hessians / hvp and neural tangent kernels,
written as pytorch.org's autograd / torch.func tutorials write them, against the
module parameter `torch` (tutorial_harness.py)."""
import copy


def per_sample_grads(torch, env):
    nn, F = torch.nn, torch.nn.functional
    functional_call, vmap, grad = torch.func.functional_call, torch.func.vmap, torch.func.grad

    class SimpleCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, 1)
            self.conv2 = nn.Conv2d(4, 6, 3, 1)
            self.fc1 = nn.Linear(6 * 2 * 2, 16)
            self.fc2 = nn.Linear(16, 10)

        def forward(self, x):
            x = F.relu(self.conv1(x))
            x = F.relu(self.conv2(x))
            x = F.max_pool2d(x, 2)
            x = torch.flatten(x, 1)
            x = F.relu(self.fc1(x))
            output = F.log_softmax(self.fc2(x), dim=1)
            return output

    def loss_fn(predictions, targets):
        return F.nll_loss(predictions, targets)

    model = env.init(SimpleCNN())
    batch_size = 8
    data, targets = env.randn(batch_size, 1, 8, 8), env.randint(0, 10, (batch_size,))

    def compute_grad(sample, target):
        sample, target = sample.unsqueeze(0), target.unsqueeze(0)
        loss = loss_fn(model(sample), target)
        return torch.autograd.grad(loss, list(model.parameters()))

    def compute_sample_grads(data, targets):
        sample_grads = [compute_grad(data[i], targets[i]) for i in range(batch_size)]
        sample_grads = zip(*sample_grads)
        return [torch.stack(shards) for shards in sample_grads]

    per_sample_grads = compute_sample_grads(data, targets)
    env.rec("loop grad shapes", [tuple(g.shape) for g in per_sample_grads])

    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def compute_loss(params, buffers, sample, target):
        batch = sample.unsqueeze(0)
        targets = target.unsqueeze(0)
        predictions = functional_call(model, (params, buffers), (batch,))
        return loss_fn(predictions, targets)

    ft_compute_grad = grad(compute_loss)
    ft_compute_sample_grad = vmap(ft_compute_grad, in_dims=(None, None, 0, 0))
    step = env.step(lambda p, b, d, t: ft_compute_sample_grad(p, b, d, t))
    for _ in range(2):
        ft_per_sample_grads = step(params, buffers, data, targets)
    for per_sample_grad, ft_per_sample_grad in zip(per_sample_grads, ft_per_sample_grads.values()):
        assert torch.allclose(per_sample_grad, ft_per_sample_grad, atol=3e-3, rtol=1e-5)
    env.rec("ft grads", dict(ft_per_sample_grads))
    env.rec("loop grads", per_sample_grads)


def model_ensembling(torch, env):
    nn, F = torch.nn, torch.nn.functional
    stack_module_state = torch.func.stack_module_state
    functional_call = torch.func.functional_call
    vmap = torch.func.vmap

    class SimpleMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(16, 12)
            self.fc2 = nn.Linear(12, 8)
            self.fc3 = nn.Linear(8, 4)

        def forward(self, x):
            x = x.flatten(1)
            x = self.fc1(x)
            x = F.relu(x)
            x = self.fc2(x)
            x = F.relu(x)
            x = self.fc3(x)
            return x

    num_models = 5
    data = env.randn(10, 6, 1, 4, 4)
    targets = env.randint(0, 4, (6,))
    models = [env.init(SimpleMLP()) for _ in range(num_models)]
    minibatches = data[:num_models]
    predictions_diff_minibatch_loop = [model(minibatch)
                                       for model, minibatch in zip(models, minibatches)]
    minibatch = data[0]
    predictions2 = [model(minibatch) for model in models]

    params, buffers = stack_module_state(models)
    env.rec("stacked", {k: (tuple(v.shape), v.requires_grad, v.is_leaf) for k, v in params.items()})
    base_model = copy.deepcopy(models[0])
    base_model = base_model.to('meta')
    env.rec("meta", (base_model.fc1.weight.is_meta, str(base_model.fc1.weight.device)))

    def fmodel(params, buffers, x):
        return functional_call(base_model, (params, buffers), (x,))

    step1 = env.step(lambda p, b, x: vmap(fmodel, in_dims=(0, 0, 0))(p, b, x))
    predictions1_vmap = step1(params, buffers, minibatches)
    assert torch.allclose(predictions1_vmap, torch.stack(predictions_diff_minibatch_loop),
                          atol=1e-3, rtol=1e-5)
    step2 = env.step(lambda p, b, x: vmap(fmodel, in_dims=(0, 0, None))(p, b, x))
    predictions2_vmap = step2(params, buffers, minibatch)
    assert torch.allclose(predictions2_vmap, torch.stack(predictions2), atol=1e-3, rtol=1e-5)
    env.rec("vmap same", predictions2_vmap)
    env.rec("vmap diff", predictions1_vmap)

    # training the ensemble: a loss summed over the models, backward into the stacked leaves
    opt = torch.optim.SGD(list(params.values()), lr=0.1)

    def train_step(x, t):
        opt.zero_grad()
        out = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x)
        loss = F.cross_entropy(out.reshape(-1, 4), t.repeat(num_models))
        loss.backward()
        opt.step()
        return loss

    step3 = env.step(train_step)
    env.rec("ensemble losses", [step3(data[0], targets).item() for _ in range(4)])
    env.rec("ensemble params", dict(params))


def jacobians_hessians(torch, env):
    F = torch.nn.functional
    jacrev = torch.func.jacrev
    jacfwd = torch.func.jacfwd
    vmap = torch.func.vmap
    hessian = torch.func.hessian
    jvp = torch.func.jvp
    grad = torch.func.grad
    vjp = torch.func.vjp

    def predict(weight, bias, x):
        return F.linear(x, weight, bias).tanh()

    D = 8
    weight = env.randn(D, D)
    bias = env.randn(D)
    x = env.randn(D)
    xp = x.clone().requires_grad_()
    unit_vectors = torch.eye(D)

    def compute_jac(xp):
        jacobian_rows = [torch.autograd.grad(predict(weight, bias, xp), xp, vec)[0]
                         for vec in unit_vectors]
        return torch.stack(jacobian_rows)

    jacobian = compute_jac(xp)
    env.rec("loop jac", jacobian)
    jacobian = jacrev(predict, argnums=2)(weight, bias, x)
    env.rec("jacrev", jacobian)
    ft_jacobian, ft_jac_bias = jacrev(predict, argnums=(0, 1))(weight, bias, x)
    env.rec("jacrev w,b", (ft_jacobian, ft_jac_bias))
    env.rec("jacfwd", jacfwd(predict, argnums=2)(weight, bias, x))
    ft_jw, ft_jb = jacfwd(predict, argnums=(0, 1))(weight, bias, x)
    env.rec("jacfwd w,b shapes", (tuple(ft_jw.shape), tuple(ft_jb.shape)))
    env.rec("jacfwd w,b", (ft_jw, ft_jb))

    hess_api = hessian(predict, argnums=2)(weight, bias, x)
    hess_fwdfwd = jacfwd(jacfwd(predict, argnums=2), argnums=2)(weight, bias, x)
    hess_revrev = jacrev(jacrev(predict, argnums=2), argnums=2)(weight, bias, x)
    env.rec("hessian", hess_api)
    assert torch.allclose(hess_api, hess_fwdfwd, atol=1e-5)
    assert torch.allclose(hess_api, hess_revrev, atol=1e-5)

    batch_size = 4
    Dout = 5
    weight2 = env.randn(Dout, D)
    bias2 = env.randn(Dout)
    xb = env.randn(batch_size, D)

    def predict_batched(x):
        return predict(weight2, bias2, x)

    batch_jacobian0 = env.step(lambda x: vmap(jacrev(predict, argnums=2), in_dims=(None, None, 0))(
        weight2, bias2, x))(xb)
    env.rec("batch jac", batch_jacobian0)
    batch_jacobian1 = jacrev(lambda x: predict(weight2, bias2, x).sum(0))(xb).movedim(1, 0)
    assert torch.allclose(batch_jacobian0, batch_jacobian1, atol=1e-6)
    compute_batch_hessian = vmap(hessian(predict, argnums=2), in_dims=(None, None, 0))
    batch_hess = compute_batch_hessian(weight2, bias2, xb)
    env.rec("batch hess", batch_hess)

    def hvp(f, primals, tangents):
        return jvp(grad(f), primals, tangents)[1]

    def f(x):
        return x.sin().sum()

    x3, tangent = env.randn(16), env.randn(16)
    result = env.step(lambda a, b: hvp(f, (a,), (b,)))(x3, tangent)
    assert torch.allclose(result, tangent * -x3.sin(), atol=1e-6)
    env.rec("hvp", result)

    def hvp_revrev(f, primals, tangents):
        _, vjp_fn = vjp(grad(f), *primals)
        return vjp_fn(*tangents)

    env.rec("hvp revrev", hvp_revrev(f, (x3,), (tangent,)))
    v, out = torch.autograd.functional.vhp(f, x3, tangent)
    env.rec("autograd vhp", (v, out))
    v2, out2 = torch.autograd.functional.hvp(f, x3, tangent)
    env.rec("autograd hvp", (v2, out2))
    env.rec("autograd jacobian", torch.autograd.functional.jacobian(
        lambda w, b: predict(w, b, x), (weight, bias), vectorize=True))


def neural_tangent_kernels(torch, env):
    nn, F = torch.nn, torch.nn.functional
    functional_call = torch.func.functional_call
    vmap = torch.func.vmap
    vjp = torch.func.vjp
    jvp = torch.func.jvp
    jacrev = torch.func.jacrev

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 4, (3, 3))
            self.conv2 = nn.Conv2d(4, 4, (3, 3))
            self.conv3 = nn.Conv2d(4, 4, (3, 3))
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            x = self.conv1(x)
            x = x.relu()
            x = self.conv2(x)
            x = x.relu()
            x = self.conv3(x)
            x = x.mean((-2, -1))
            x = self.fc(x)
            return x

    x_train = env.randn(5, 3, 8, 8)
    x_test = env.randn(3, 3, 8, 8)
    net = env.init(CNN())
    params = {k: v.detach() for k, v in net.named_parameters()}

    def fnet_single(params, x):
        return functional_call(net, params, (x.unsqueeze(0),)).squeeze(0)

    def empirical_ntk_jacobian_contraction(fnet_single, params, x1, x2, compute='full'):
        jac1 = vmap(jacrev(fnet_single), (None, 0))(params, x1)
        jac1 = jac1.values()
        jac1 = [j.flatten(2) for j in jac1]
        jac2 = vmap(jacrev(fnet_single), (None, 0))(params, x2)
        jac2 = jac2.values()
        jac2 = [j.flatten(2) for j in jac2]
        if compute == 'full':
            einsum_expr = 'Naf,Mbf->NMab'
        elif compute == 'trace':
            einsum_expr = 'Naf,Maf->NM'
        elif compute == 'diagonal':
            einsum_expr = 'Naf,Maf->NMa'
        else:
            assert False
        result = torch.stack([torch.einsum(einsum_expr, j1, j2) for j1, j2 in zip(jac1, jac2)])
        result = result.sum(0)
        return result

    ntk = env.step(lambda p, a, b: empirical_ntk_jacobian_contraction(fnet_single, p, a, b))
    result = ntk(params, x_train, x_test)
    env.rec("ntk full", result)
    for compute in ('trace', 'diagonal'):
        env.rec(f"ntk {compute}", empirical_ntk_jacobian_contraction(fnet_single, params, x_train,
                                                                     x_test, compute))

    def empirical_ntk_ntk_vps(func, params, x1, x2, compute='full'):
        def get_ntk(x1, x2):
            def func_x1(params):
                return func(params, x1)

            def func_x2(params):
                return func(params, x2)

            output, vjp_fn = vjp(func_x1, params)

            def get_ntk_slice(vec):
                vjps = vjp_fn(vec)
                _, jvps = jvp(func_x2, (params,), vjps)
                return jvps

            basis = torch.eye(output.numel(), dtype=output.dtype, device=output.device).view(
                output.numel(), -1)
            return vmap(get_ntk_slice)(basis)

        result = vmap(vmap(get_ntk, (None, 0)), (0, None))(x1, x2)
        if compute == 'full':
            return result
        if compute == 'trace':
            return torch.einsum('NMKK->NM', result)
        if compute == 'diagonal':
            return torch.einsum('NMKK->NMK', result)

    result_from_ntk_vps = empirical_ntk_ntk_vps(fnet_single, params, x_train, x_test)
    assert torch.allclose(result, result_from_ntk_vps, atol=1e-4)
    env.rec("ntk vps", result_from_ntk_vps)
    env.rec("ntk vps trace", empirical_ntk_ntk_vps(fnet_single, params, x_train, x_test, 'trace'))
