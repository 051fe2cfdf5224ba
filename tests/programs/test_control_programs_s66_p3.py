"""Sweep 66 (p3), programs whose compiled training step branches or loops on tensor values
or carries state between calls, run with PyTorch, with llgrad eagerly and with llgrad
compiling the training step (tutorial_harness.py):

- adaptive computation time (PonderNet-style): a recurrent cell applied while the
  accumulated halting probability of every row stays under 1 - eps and a step budget
  remains (a `while` on a tensor condition), the remainder taken at the stop, the ponder
  cost in the loss;
- a seq2seq decoder with per-step teacher forcing decided by a tensor coin (`if coin[t] <
  ratio:` feeds the gold token, else the detached argmax), the loss over every step;
- truncated BPTT: an LSTM language model whose hidden state the module keeps between
  compiled calls (`self.hidden = tuple(h.detach() for h in hc)`, None at the first call
  and after a reset at each "document" boundary);
- a GAN whose discriminator's parameters are switched off (requires_grad_(False)) inside
  the generator's compiled step and on again inside the discriminator's, with a gradient
  penalty on the interpolates (autograd.grad with create_graph=True);
- a Trainer class: its bound method compiled, a dict batch, lists its __init__ made that
  the step appends to (`self.history.append(loss.item())`), the best loss kept, a dict of
  metrics returned, a no_grad evaluate method compiled beside it.

teacher_forcing_coin found the decoder's `if` left as Python (value guards) with a warning:
the argmax's detach() counted as a stop of the gradient inside the branch, though an integer
tensor has none (tests/compile/test_int_detach_in_branch_s66_p3.py).

trainer_class found the Trainer's lists traced again at every call and the ninth call run
eagerly with a recompile-limit warning: the store in __init__ counted as a rebinding
(tests/compile/test_appended_init_lists_s66_p3.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def act_ponder(torch, env):
    nn, F = torch.nn, torch.nn.functional
    D, H, EPS, MAX_STEPS = 5, 12, 0.05, 6

    class ACT(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.GRUCell(D, H)
            self.halt = nn.Linear(H, 1)
            self.out = nn.Linear(H, 2)

        def forward(self, x):
            h = torch.zeros(x.shape[0], H)
            acc = torch.zeros(x.shape[0])
            out = torch.zeros(x.shape[0], 2)
            n = torch.zeros(x.shape[0])
            steps = 0
            while bool((acc < 1 - EPS).any()) and steps < MAX_STEPS:
                h = self.cell(x, h)
                p = torch.sigmoid(self.halt(h)).squeeze(1)
                running = (acc < 1 - EPS).float()
                p = torch.minimum(p, 1 - acc) * running
                out = out + p[:, None] * self.out(h)
                acc = acc + p
                n = n + running
                steps += 1
            rem = (1 - acc).clamp(min=0)
            out = out + rem[:, None] * self.out(h)
            return out, n + rem

    model = env.init(ACT())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(x, y):
        out, ponder = model(x)
        loss = F.cross_entropy(out, y) + 0.01 * ponder.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), ponder.detach()

    step = env.step(train_step)
    for it in range(4):
        loss, ponder = step(env.randn(8, D) * (1 + it), env.randint(0, 2, (8,)))
        env.rec(f"loss {it}", loss)
        env.rec(f"ponder {it}", ponder)
    env.rec("params", dict(model.state_dict()))


def teacher_forcing_coin(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, H, T, BOS = 7, 10, 4, 0

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, H)
            self.cell = nn.GRUCell(H, H)
            self.out = nn.Linear(H, V)

    enc = env.init(nn.Linear(V, H))
    dec = env.init(Decoder())
    opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=1e-2)

    def train_step(src, tgt, coin, ratio):
        h = torch.tanh(enc(F.one_hot(src, V).float().mean(1)))
        inp = torch.full((src.shape[0],), BOS, dtype=torch.long)
        loss = 0.0
        for t in range(T):
            h = dec.cell(dec.emb(inp), h)
            logits = dec.out(h)
            loss = loss + F.cross_entropy(logits, tgt[:, t])
            if coin[t] < ratio:
                inp = tgt[:, t]
            else:
                inp = logits.argmax(-1).detach()
        loss = loss / T
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for it in range(5):
        src = env.randint(1, V, (6, 5))
        env.rec(f"loss {it}", step(src, src[:, :T].flip(1), env.rand(T), 0.5))
    env.rec("params", (dict(enc.state_dict()), dict(dec.state_dict())))


def tbptt_hidden(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, E, H, B, L = 11, 8, 12, 3, 5

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, E)
            self.lstm = nn.LSTM(E, H, batch_first=True)
            self.head = nn.Linear(H, V)
            self.hidden = None

        def reset(self):
            self.hidden = None

        def forward(self, x):
            out, hc = self.lstm(self.emb(x), self.hidden)
            self.hidden = tuple(h.detach() for h in hc)
            return self.head(out)

    model = env.init(LM())
    opt = torch.optim.SGD(model.parameters(), lr=0.5)

    def train_step(x, y):
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        return loss.detach()

    step = env.step(train_step)
    for doc in range(2):
        model.reset()
        stream = env.randint(0, V, (B, 3 * L + 1))
        for k in range(3):
            chunk = stream[:, k * L:(k + 1) * L + 1]
            env.rec(f"loss {doc} {k}", step(chunk[:, :-1], chunk[:, 1:]))
            env.rec(f"hidden {doc} {k}", model.hidden)
    env.rec("params", dict(model.state_dict()))


def gan_toggle_gp(torch, env):
    nn = torch.nn
    Z, D = 3, 2
    G = env.init(nn.Sequential(nn.Linear(Z, 16), nn.ReLU(), nn.Linear(16, D)))
    Dn = env.init(nn.Sequential(nn.Linear(D, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1)))
    opt_g = torch.optim.Adam(G.parameters(), lr=1e-3, betas=(0.5, 0.9))
    opt_d = torch.optim.Adam(Dn.parameters(), lr=1e-3, betas=(0.5, 0.9))

    def d_step(real, z, alpha):
        for p in Dn.parameters():
            p.requires_grad_(True)
        fake = G(z).detach()
        mix = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
        grad, = torch.autograd.grad(Dn(mix).sum(), mix, create_graph=True)
        gp = ((grad.norm(2, dim=1) - 1) ** 2).mean()
        loss = Dn(fake).mean() - Dn(real).mean() + 10 * gp
        opt_d.zero_grad()
        loss.backward()
        opt_d.step()
        return loss.detach(), gp.detach()

    def g_step(z):
        for p in Dn.parameters():
            p.requires_grad_(False)
        loss = -Dn(G(z)).mean()
        opt_g.zero_grad()
        loss.backward()
        opt_g.step()
        return loss.detach()

    d_step, g_step = env.step(d_step), env.step(g_step)
    for it in range(4):
        for k in range(2):
            real = env.randn(16, D) * 0.5 + 2.0
            loss_d, gp = d_step(real, env.randn(16, Z), env.rand(16, 1))
            env.rec(f"d {it} {k}", (loss_d, gp))
        env.rec(f"g {it}", g_step(env.randn(16, Z)))
        env.rec(f"d grad {it}", [p.grad for p in Dn.parameters()])
    env.rec("params", (dict(G.state_dict()), dict(Dn.state_dict())))


def trainer_class(torch, env):
    """A Trainer object whose compiled bound method takes a dict batch, logs into lists its
    __init__ made, keeps the best loss and returns a dict of metrics; an evaluate method
    under no_grad compiled beside it switches the model to eval and back."""
    nn, F = torch.nn, torch.nn.functional

    class Trainer:
        # (its functions do not name `env`: the guard walk follows what a class's functions
        # read, and the harness's helpers name `type`, which keeps every number the step
        # counts (global_step, the scheduler's) guarded by value: symbolic_args._reads_types)
        def __init__(self, model, make_step):
            self.model = model
            self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-2, weight_decay=0.05)
            self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=12)
            self.history, self.lrs = [], []
            self.best, self.global_step = float("inf"), 0
            self.train_step = make_step(self._train_step)
            self.evaluate = make_step(self._evaluate)

        def _train_step(self, batch):
            self.model.train()
            logits = self.model(batch["x"])
            loss = F.cross_entropy(logits, batch["y"], label_smoothing=0.1)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.opt.step()
            self.sched.step()
            self.global_step += 1
            self.history.append(loss.item())
            self.lrs.append(self.sched.get_last_lr()[0])
            if loss.item() < self.best:
                self.best = loss.item()
            return {"loss": loss.detach(), "grad_norm": grad_norm}

        @torch.no_grad()
        def _evaluate(self, x, y):
            self.model.eval()
            logits = self.model(x)
            acc = (logits.argmax(-1) == y).float().mean()
            self.model.train()
            return F.cross_entropy(logits, y), acc

    tr = Trainer(env.init(nn.Sequential(nn.Linear(6, 16), nn.LayerNorm(16), nn.GELU(),
                                        nn.Linear(16, 4))), env.step)
    x_val, y_val = env.randn(16, 6), env.randint(0, 4, (16,))
    for it in range(12):
        out = tr.train_step({"x": env.randn(8, 6), "y": env.randint(0, 4, (8,))})
        env.rec(f"metrics {it}", out)
        if it % 4 == 3:
            env.rec(f"eval {it}", tr.evaluate(x_val, y_val))
    env.rec("history", tr.history)
    env.rec("lrs", tr.lrs)
    env.rec("state", (tr.best, tr.global_step, tr.model.training))
    env.rec("params", dict(tr.model.state_dict()))


PROGRAMS = {
    "act_ponder": act_ponder,
    "teacher_forcing_coin": teacher_forcing_coin,
    "tbptt_hidden": tbptt_hidden,
    "gan_toggle_gp": gan_toggle_gp,
    "trainer_class": trainer_class,
}
FAST = ()


@pytest.mark.parametrize("name,program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
