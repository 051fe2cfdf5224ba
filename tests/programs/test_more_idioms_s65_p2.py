"""Sweep 65 (p2), more idioms in compiled training steps, run with PyTorch, with llgrad
eagerly and with llgrad compiling the training step (tutorial_harness.py):

- GradScaler on CPU meeting an overflow: the step skipped, the scale backed off, then
  growing again (growth_interval=1), get_scale() returned by the step and compared before
  and after the step to tell a skipped step (a number that changes every call: compiled,
  not run eagerly after a trace per value; and the scaler's defaultdict of per-optimizer
  states stays a defaultdict when compiled calls write it back);
- a PINN by torch.func: vmap(grad(grad(u))) of a functional_call over the collocation
  points, inside the compiled step;
- a packed BiLSTM classifier (pack_padded_sequence with enforce_sorted=False) with
  frozen Embedding.from_pretrained and cross_entropy(label_smoothing, weight, ignore_index);
- spectral_norm / weight_norm parametrizations in a GAN-style critic step (power
  iteration buffers updated in training mode);
- validation inside the step: model.eval(), a no_grad forward, model.train() again, with
  dropout p=0.0 and BatchNorm running stats;
- DeepAR trained through Normal.rsample (library stream: eager vs compiled only) and
  a LogNormal likelihood."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def gradscaler_overflow(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16, growth_interval=1)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.detach(), scaler.get_scale()

    step = env.step(train_step)
    for it in range(5):
        x = env.randn(6, 4) * (3e38 if it == 1 else 1.0)
        env.rec(f"step {it}", step(x, env.randint(0, 2, (6,))))
    env.rec("params", dict(model.state_dict()))


def scaler_skipped_step(torch, env):
    """The forums' way to tell a skipped step (an lr scheduler stepped only after a real
    optimizer step): the scale before and after; the scale changes every call."""
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16, growth_interval=1)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scale_before = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        skipped = scale_before > scaler.get_scale()
        if not skipped:
            sched.step()
        return loss.detach(), skipped

    step = env.step(train_step)
    for it in range(9):
        x = env.randn(6, 4) * (3e38 if it in (1, 4) else 1.0)
        env.rec(f"step {it}", step(x, env.randint(0, 2, (6,))))
        env.rec(f"lr {it}", sched.get_last_lr())
        env.rec(f"scale {it}", scaler.get_scale())
    env.rec("params", dict(model.state_dict()))


def pinn_func(torch, env):
    nn = torch.nn
    functional_call, grad, vmap = torch.func.functional_call, torch.func.grad, torch.func.vmap
    model = env.init(nn.Sequential(nn.Linear(1, 12), nn.Tanh(), nn.Linear(12, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def u(params, x):
        return functional_call(model, params, (x.reshape(1, 1),)).squeeze()

    def train_step(xs):
        params = dict(model.named_parameters())
        uxx = vmap(grad(grad(u, argnums=1), argnums=1), in_dims=(None, 0))(params, xs)
        ux = vmap(grad(u, argnums=1), in_dims=(None, 0))(params, xs)
        loss = ((uxx + ux - torch.cos(xs)) ** 2).mean() + u(params, torch.zeros(1)) ** 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(3):
        env.rec(f"loss {it}", step(env.rand(8)))
    env.rec("params", dict(model.state_dict()))


def packed_bilstm(torch, env):
    nn, F = torch.nn, torch.nn.functional
    pack_padded_sequence = torch.nn.utils.rnn.pack_padded_sequence
    pad_packed_sequence = torch.nn.utils.rnn.pad_packed_sequence
    V, D = 11, 6
    emb = nn.Embedding.from_pretrained(env.randn(V, D), freeze=True, padding_idx=0)
    lstm = env.init(nn.LSTM(D, 5, bidirectional=True, batch_first=True))
    head = env.init(nn.Linear(10, 4))
    opt = torch.optim.Adam(list(lstm.parameters()) + list(head.parameters()), lr=1e-2)
    weight = torch.tensor([1.0, 2.0, 0.5, 1.0])

    def train_step(tokens, lengths, y):
        packed = pack_padded_sequence(emb(tokens), lengths, batch_first=True,
                                      enforce_sorted=False)
        out, (h, _) = lstm(packed)
        padded, lens = pad_packed_sequence(out, batch_first=True)
        pooled = padded.sum(1) / lens[:, None].float()
        logits = head(pooled) + head(torch.cat([h[0], h[1]], dim=1))
        loss = F.cross_entropy(logits, y, weight=weight, ignore_index=3, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    lengths = torch.tensor([3, 6, 2, 5])
    for it in range(3):
        tokens = env.randint(1, V, (4, 6))
        for i, n in enumerate(lengths.tolist()):
            tokens[i, n:] = 0
        env.rec(f"loss {it}", step(tokens, lengths, env.randint(0, 4, (4,))))
    env.rec("lstm", dict(lstm.state_dict()))


def spectral_critic(torch, env):
    nn, F = torch.nn, torch.nn.functional
    P = nn.utils.parametrizations
    critic = nn.Sequential(P.spectral_norm(nn.Linear(3, 16)), nn.LeakyReLU(0.2),
                           P.weight_norm(nn.Linear(16, 1)))
    env.init(critic)
    opt = torch.optim.Adam(critic.parameters(), lr=2e-3, betas=(0.0, 0.9))

    def train_step(real, fake):
        loss = F.relu(1 - critic(real)).mean() + F.relu(1 + critic(fake)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"loss {it}", step(env.randn(8, 3) + 1, env.randn(8, 3)))
    env.rec("state", dict(critic.state_dict()))


def validate_in_step(torch, env):
    nn, F = torch.nn, torch.nn.functional
    model = env.init(nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(),
                                   nn.Dropout(0.0), nn.Linear(8, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_step(x, y, vx, vy):
        model.train()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            val = F.cross_entropy(model(vx), vy)
            acc = (model(vx).argmax(1) == vy).float().mean()
        model.train()
        return loss.detach(), val, acc

    step = env.step(train_step)
    for it in range(4):
        env.rec(f"step {it}", step(env.randn(6, 4), env.randint(0, 2, (6,)),
                                   env.randn(5, 4), env.randint(0, 2, (5,))))
    env.rec("training", model.training)
    env.rec("state", dict(model.state_dict()))


def deepar_rsample(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    net = env.init(nn.Sequential(nn.Linear(3, 10), nn.Tanh(), nn.Linear(10, 2)))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)

    def train_step(x, y):
        out = net(x)
        loc, scale = out[:, 0], F.softplus(out[:, 1]) + 1e-3
        nll = -D.LogNormal(loc, scale).log_prob(y).mean()
        draw = D.Normal(loc, scale).rsample((4,))
        crps_like = (draw - y.log()).abs().mean()
        loss = nll + 0.1 * crps_like
        opt.zero_grad()
        loss.backward()
        opt.step()
        return nll.detach(), loss.detach()

    step = env.step(train_step)
    for it in range(3):
        nll, loss = step(env.randn(6, 3), env.rand(6) + 0.5)
        env.rec(f"nll {it}", nll, cross=it == 0)
        env.rec(f"loss {it}", loss, cross=False)
    env.rec("params", dict(net.state_dict()), cross=False)


PROGRAMS = {"gradscaler_overflow": gradscaler_overflow,
            "scaler_skipped_step": scaler_skipped_step, "pinn_func": pinn_func,
            "packed_bilstm": packed_bilstm, "spectral_critic": spectral_critic,
            "validate_in_step": validate_in_step, "deepar_rsample": deepar_rsample}

# (the default run keeps the quickest; the others are marked slow)
FAST = ("gradscaler_overflow", "scaler_skipped_step")


@pytest.mark.parametrize("name, program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)


def test_dict_types_kept():
    """A compiled call returns (and writes back into attributes) an OrderedDict or a
    defaultdict as eager does, not a plain dict (a plain dict raises KeyError for a missing
    key, and compares equal regardless of order)."""
    import collections

    import llgrad
    m = llgrad.nn.Linear(2, 2)
    holder = type("Holder", (), {})()

    def f(x):
        d = collections.defaultdict(list)
        d["a"].append(x * 2)
        holder.states = collections.defaultdict(int)
        return m.state_dict(), d, collections.OrderedDict(b=x + 1, a=x)

    cf = llgrad.compile(f)
    for i in range(3):
        sd, d, od = cf(llgrad.ones(2) * i)
        cf.wait()
        assert type(sd) is collections.OrderedDict and list(sd) == ["weight", "bias"]
        assert type(d) is collections.defaultdict and d.default_factory is list
        assert type(od) is collections.OrderedDict and list(od) == ["b", "a"]
        assert type(holder.states) is collections.defaultdict and \
            holder.states.default_factory is int
        assert float(od["b"][0]) == i + 1
    assert cf.entries, cf.graph_breaks
