"""Tutorial programs on newer PyTorch features (see tutorial_harness.py): a physics model
under torch.set_default_dtype(torch.float64), grouped-query attention through
scaled_dot_product_attention(enable_gqa=True) with nn.RMSNorm, an RNN whose recurrent
weight is kept orthogonal by nn.utils.parametrizations.orthogonal, activation checkpointing
around dropout (the recomputation must replay the same mask), an autograd.Function with
setup_context and generate_vmap_rule used under torch.func.vmap, and the "hooks for saved
tensors" tutorial's saved_tensors_hooks."""


def default_dtype_float64(torch, env):
    """Scientific-computing scripts start with torch.set_default_dtype(torch.float64): the
    modules, torch.tensor of Python floats, torch.linspace and torch.zeros are then float64;
    an MLP fitting a damped oscillator's ODE residual with autograd.grad(create_graph=True)
    (a PINN), LBFGS-free: Adam. The default is restored at the end."""
    nn = torch.nn
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
        opt = torch.optim.Adam(net.parameters(), lr=1e-2)
        t = torch.linspace(0, 2, 20).unsqueeze(1)
        t0 = torch.zeros(1, 1)

        def train_step(t, t0):
            opt.zero_grad()
            t = t.clone().requires_grad_(True)
            u = net(t)
            (du,) = torch.autograd.grad(u.sum(), t, create_graph=True)
            (ddu,) = torch.autograd.grad(du.sum(), t, create_graph=True)
            residual = ddu + 0.2 * du + 4.0 * u
            ic = (net(t0) - 1.0) ** 2
            loss = residual.pow(2).mean() + ic.sum()
            loss.backward()
            opt.step()
            return loss, u.dtype

        step = env.step(train_step)
        hist = []
        for _ in range(5):
            loss, dt = step(t, t0)
            hist.append(loss.item())
        env.rec("hist", hist)
        env.rec("dtypes", (dt, torch.tensor(1.5).dtype, net[0].weight.dtype))
        env.rec("params", list(net.parameters()))
    finally:
        torch.set_default_dtype(old)


def gqa_rmsnorm_block(torch, env):
    """A Llama-3-style block: nn.RMSNorm (eps=1e-6), 4 query heads sharing 2 key / value
    heads via F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
    SwiGLU F.silu(w1(x)) * w3(x); SGD with Nesterov momentum (Adam's first steps turn a
    few key-projection weights' near-zero gradients from rounding noise into full steps)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    V, D, HQ, HKV = 12, 16, 4, 2
    hd = D // HQ

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.n1, self.n2 = nn.RMSNorm(D, eps=1e-6), nn.RMSNorm(D, eps=1e-6)
            self.wq = nn.Linear(D, HQ * hd, bias=False)
            self.wkv = nn.Linear(D, 2 * HKV * hd, bias=False)
            self.wo = nn.Linear(D, D, bias=False)
            self.w1, self.w3 = nn.Linear(D, 24, bias=False), nn.Linear(D, 24, bias=False)
            self.w2 = nn.Linear(24, D, bias=False)
            self.out = nn.Linear(D, V, bias=False)

        def forward(self, idx):
            b, t = idx.shape
            x = self.emb(idx)
            h = self.n1(x)
            q = self.wq(h).view(b, t, HQ, hd).transpose(1, 2)
            k, v = self.wkv(h).view(b, t, 2, HKV, hd).unbind(2)
            a = F.scaled_dot_product_attention(q, k.transpose(1, 2), v.transpose(1, 2),
                                               is_causal=True, enable_gqa=True)
            x = x + self.wo(a.transpose(1, 2).reshape(b, t, D))
            h = self.n2(x)
            x = x + self.w2(F.silu(self.w1(h)) * self.w3(h))
            return self.out(x)

    model = Block()
    opt = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.9, nesterov=True)
    seq = torch.randint(0, V, (3, 9))

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(seq[:, :-1], seq[:, 1:]).item() for _ in range(5)])
    env.rec("params", list(model.parameters()))


def orthogonal_rnn(torch, env):
    """An RNN on the copy-memory task whose weight_hh_l0 is registered with
    nn.utils.parametrizations.orthogonal (default map: the matrix exponential / Cayley
    chosen by PyTorch), trained with RMSprop; W^T W = I checked after training and the
    parametrization's original parameters compared."""
    nn, F = torch.nn, torch.nn.functional
    P = nn.utils.parametrizations
    torch.manual_seed(0)
    rnn = nn.RNN(3, 6, batch_first=True)
    P.orthogonal(rnn, "weight_hh_l0")
    head = nn.Linear(6, 3)
    params = list(rnn.parameters()) + list(head.parameters())
    opt = torch.optim.RMSprop(params, lr=1e-2)
    seq = torch.randint(0, 3, (4, 5))
    x = torch.cat([F.one_hot(seq, 3).float(), torch.zeros(4, 5, 3)], 1)

    def train_step(x, y):
        opt.zero_grad()
        out, _ = rnn(x)
        loss = F.cross_entropy(head(out[:, -5:]).reshape(-1, 3), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, seq).item() for _ in range(5)])
    w = rnn.weight_hh_l0
    env.rec("orthogonal", torch.allclose(w.T @ w, torch.eye(6), atol=1e-5))
    env.rec("params", [p for n, p in rnn.named_parameters()] + list(head.parameters()))


def checkpoint_dropout_rng(torch, env):
    """Checkpointing a block with dropout: torch.utils.checkpoint.checkpoint(block, h,
    use_reentrant=False, preserve_rng_state=True) must recompute the forward with the same
    dropout mask in backward; the gradients equal an uncheckpointed copy's given the same
    seed (compared within each library: dropout's stream is the library's)."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Dropout(0.3), nn.Linear(12, 6))
    head = nn.Linear(6, 2)
    params = list(block.parameters()) + list(head.parameters())
    opt = torch.optim.SGD(params, lr=0.1)
    x, y = torch.randn(10, 6), torch.randint(0, 2, (10,))

    def grads_of(x, y, ckpt):
        for p in params:
            p.grad = None
        h = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False,
                                              preserve_rng_state=True) if ckpt else block(x)
        loss = F.cross_entropy(head(h), y)
        loss.backward()
        return loss, [p.grad.clone() for p in params]

    def train_step(x, y):
        loss, _ = grads_of(x, y, True)
        opt.step()
        return loss

    g = env.step(grads_of)
    torch.manual_seed(1)
    l1, g1 = g(x, y, True)
    torch.manual_seed(1)
    l2, g2 = g(x, y, False)
    env.rec("same", (l1.item() == l2.item(),
                     all(torch.allclose(a, b, atol=1e-6) for a, b in zip(g1, g2))))
    env.rec("grads", g1, cross=False)
    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(4)], cross=False)
    env.rec("params", params, cross=False)


def function_vmap_rule(torch, env):
    """An autograd.Function written in the torch.func style: forward without ctx,
    setup_context(ctx, inputs, output) saving tensors, generate_vmap_rule = True, used
    inside torch.func.vmap over a batch of inputs and under torch.func.grad; a custom
    softplus with a hand-written backward."""
    nn = torch.nn
    tf = torch.func
    torch.manual_seed(0)

    class SoftPlus(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return torch.log1p(torch.exp(-x.abs())) + x.clamp(min=0)

        @staticmethod
        def setup_context(ctx, inputs, output):
            (x,) = inputs
            ctx.save_for_backward(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * torch.sigmoid(x)

    lin = nn.Linear(4, 3)
    opt = torch.optim.Adam(lin.parameters(), lr=1e-2)
    x = torch.randn(8, 4)
    y = torch.randn(8, 3).abs()

    def per_sample(xi, yi):
        return ((SoftPlus.apply(lin(xi)) - yi) ** 2).sum()

    def train_step(x, y):
        opt.zero_grad()
        losses = tf.vmap(per_sample)(x, y)
        loss = losses.mean()
        loss.backward()
        opt.step()
        return loss, tf.grad(lambda v: SoftPlus.apply(v).sum())(x[0])

    step = env.step(train_step)
    hist = []
    for _ in range(5):
        loss, g = step(x, y)
        hist.append(loss.item())
    env.rec("hist", hist)
    env.rec("grad", g)
    env.rec("params", list(lin.parameters()))


def saved_tensors_hooks_fp16(torch, env):
    """The "Hooks for saved tensors" tutorial: inside torch.autograd.graph.
    saved_tensors_hooks(pack, unpack) the forward's saved tensors are packed to float16 and
    unpacked to float32 for backward (memory compression); counting packs in a list."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    x, y = torch.randn(12, 6), torch.randint(0, 2, (12,))

    def pack(t):
        return t.to(torch.float16) if t.dtype == torch.float32 else t

    def unpack(t):
        return t.to(torch.float32) if t.dtype == torch.float16 else t

    def train_step(x, y):
        opt.zero_grad()
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    env.rec("hist", [step(x, y).item() for _ in range(5)])
    env.rec("params", list(model.parameters()))
