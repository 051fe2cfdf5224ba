"""Tutorial programs with data-dependent steps (see tutorial_harness.py): the Lovasz-softmax
segmentation loss (sort, cumsum, classes present), class-balanced weights from
torch.bincount per batch, online hard example mining with a finite-loss check, the empirical
neural tangent kernel of the official torch.func tutorial, the official "optimizer step in
backward" recipe with register_post_accumulate_grad_hook, and lazy modules materialised by
the first (compiled) call."""


def lovasz_softmax(torch, env):
    """Berman et al.'s Lovasz-softmax as its reference code writes it: per class, the
    foreground mask, errors sorted descending (torch.sort), the Lovasz extension's gradient
    from cumsums of the sorted foreground (gts - cumsum, 1 - intersection / union,
    jaccard[1:] - jaccard[:-1]), dot with the errors; classes absent from the batch skipped
    by `if fg.sum() == 0: continue` ('present' mode)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    C = 3
    model = nn.Sequential(nn.Conv2d(2, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, C, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    img = torch.randn(2, 2, 6, 6)
    target = (img[:, 0] > 0.3).long() + (img[:, 1] > 1.0).long()

    def lovasz_grad(gt_sorted):
        gts = gt_sorted.sum()
        intersection = gts - gt_sorted.float().cumsum(0)
        union = gts + (1 - gt_sorted).float().cumsum(0)
        jaccard = 1.0 - intersection / union
        jaccard[1:] = jaccard[1:] - jaccard[:-1]
        return jaccard

    def lovasz(probas, labels):
        losses = []
        for c in range(C):
            fg = (labels == c).float()
            if fg.sum() == 0:
                continue
            errors = (fg - probas[:, c]).abs()
            errors_sorted, perm = torch.sort(errors, 0, descending=True)
            losses.append(torch.dot(errors_sorted, lovasz_grad(fg[perm])))
        return torch.stack(losses).mean()

    def train_step(img, target):
        opt.zero_grad()
        probs = model(img).softmax(1).permute(0, 2, 3, 1).reshape(-1, C)
        loss = lovasz(probs, target.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    hist = [step(img, target).item() for _ in range(4)]
    hist += [step(img, target.clamp(max=1)).item() for _ in range(2)]
    env.rec("hist", hist)
    env.rec("params", list(model.parameters()))


def bincount_class_weights(torch, env):
    """Re-weighting by the batch's class frequencies: counts = torch.bincount(y,
    minlength=C), weights = counts.sum() / (C * counts.clamp(min=1)), classes absent
    weighted 0 with torch.where, F.cross_entropy(weight=...); batches from a shuffled
    DataLoader over a TensorDataset (torch.Generator seeded)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    C = 4
    X = torch.randn(48, 5)
    Y = torch.clamp((X[:, 0] * 2).long() + 1, 0, C - 1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=12,
                                         shuffle=True, generator=torch.Generator().manual_seed(1))
    model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, C))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def train_step(x, y):
        counts = torch.bincount(y, minlength=C)
        w = counts.sum() / (C * counts.clamp(min=1).float())
        w = torch.where(counts > 0, w, torch.zeros_like(w))
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y, weight=w)
        loss.backward()
        opt.step()
        return loss, counts

    step = env.step(train_step)
    hist, counts = [], []
    for _ in range(2):
        for x, y in loader:
            loss, c = step(x, y)
            hist.append(loss.item())
            counts.append(c.tolist())
    env.rec("hist", hist)
    env.rec("counts", counts)
    env.rec("params", list(model.parameters()))


def ohem_finite_check(torch, env):
    """Online hard example mining: per-sample losses (reduction="none"), the hardest half
    by loss.topk(k), and the guard that training scripts add, `if not
    torch.isfinite(loss): return None` before backward (one batch carries an inf)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 12), nn.ReLU(), nn.Linear(12, 3))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))

    def train_step(x, y):
        opt.zero_grad()
        losses = F.cross_entropy(model(x), y, reduction="none")
        hard, idx = losses.topk(8)
        loss = hard.mean()
        if not torch.isfinite(loss):
            return None
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    hist = []
    for i in range(6):
        xb = x.clone()
        if i == 3:
            xb[0, 0] = float("inf")
        out = step(xb, y)
        hist.append(None if out is None else out.item())
    env.rec("hist", hist)
    env.rec("params", list(model.parameters()))


def empirical_ntk(torch, env):
    """The official "Neural Tangent Kernels" tutorial: jacobians of a model's outputs w.r.t.
    its parameters by torch.func.vmap(torch.func.jacrev(fnet_single), (None, 0)) with
    functional_call on detached parameters, the NTK as the einsum of the flattened
    jacobians ('Naf,Mbf->NMab'); then kernel regression with the NTK and torch.linalg.solve."""
    nn = torch.nn
    tf = torch.func
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
    params = {k: v.detach() for k, v in net.named_parameters()}

    def fnet_single(params, x):
        return tf.functional_call(net, params, (x.unsqueeze(0),)).squeeze(0)

    def ntk(x1, x2):
        j1 = tf.vmap(tf.jacrev(fnet_single), (None, 0))(params, x1)
        j1 = [j.flatten(2) for j in j1.values()]
        j2 = tf.vmap(tf.jacrev(fnet_single), (None, 0))(params, x2)
        j2 = [j.flatten(2) for j in j2.values()]
        return torch.stack([torch.einsum("Naf,Mbf->NMab", a, b)
                            for a, b in zip(j1, j2)]).sum(0)

    kernel = env.step(ntk)
    xtr, xte = torch.randn(6, 3), torch.randn(3, 3)
    ytr = torch.sin(xtr[:, 0])
    k_tr = kernel(xtr, xtr)
    k_te = kernel(xte, xtr)
    env.rec("ntk", k_tr)
    k = k_tr[:, :, 0, 0] + 1e-3 * torch.eye(6)
    alpha = torch.linalg.solve(k, ytr)
    env.rec("pred", k_te[:, :, 0, 0] @ alpha)
    env.rec("trace check", torch.allclose(k_tr.diagonal(0, 2, 3).sum(-1),
                                          kernel(xtr, xtr).diagonal(0, 2, 3).sum(-1)))


def optimizer_in_backward(torch, env):
    """The official "How to save memory by fusing the optimizer step into the backward
    pass" recipe: one Adam per parameter in a dict, p.register_post_accumulate_grad_hook(
    hook) where the hook runs optimizer_dict[p].step() and .zero_grad(); the training step
    is only forward and loss.backward()."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 10), nn.GELU(), nn.Linear(10, 1))
    optimizer_dict = {p: torch.optim.Adam([p], lr=1e-2) for p in model.parameters()}

    def optimizer_hook(parameter):
        optimizer_dict[parameter].step()
        optimizer_dict[parameter].zero_grad()

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(optimizer_hook)
    x = torch.randn(16, 5)
    y = x[:, :1] * x[:, 1:2]

    def train_step(x, y):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(5)])
    env.rec("grads", [p.grad is None for p in model.parameters()])
    env.rec("params", list(model.parameters()))


def lazy_modules_first_call(torch, env):
    """Lazy modules: nn.LazyConv2d and nn.LazyLinear infer in_features / in_channels at the
    first forward, a dry run made eagerly before the optimiser as the docs require (compile
    runs a lazy module's first call eagerly, with a warning); then the compiled training
    step on the materialised modules, whose classes have become Conv2d / Linear."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.LazyConv2d(4, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(3))
    x, y = torch.randn(5, 2, 6, 6), torch.randint(0, 3, (5,))

    env.rec("dry", model(x))
    env.rec("shapes", [tuple(p.shape) for p in model.parameters()])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(4)])
    env.rec("kinds", [type(m).__name__ for m in model])
    env.rec("params", list(model.parameters()))
