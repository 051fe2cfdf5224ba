"""Tutorial training-loop idioms (see tutorial_harness.py): one step function for training
and evaluation switched by set_grad_enabled(train), two losses backpropagated with
retain_graph into two optimisers, a tensor learning rate, micro-batches accumulated with
zero_grad(set_to_none=False), autograd.grad with allow_unused / materialize_grads, early
stopping that reloads a deep-copied best state_dict, resuming from an optimiser
state_dict saved with torch.save, and the total norm clip_grad_norm_ returns logged."""
import copy


def shared_train_eval_step(torch, env):
    """The classic run_epoch(model, loader, train) function: `with
    torch.set_grad_enabled(train)`, model.train(train), backward and step only `if train:`;
    the same compiled function called for training and for validation batches."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.0),
                          nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    xt, yt = torch.randn(24, 6), torch.randint(0, 3, (24,))
    xv, yv = torch.randn(10, 6), torch.randint(0, 3, (10,))

    def run_batch(x, y, train):
        model.train(train)
        with torch.set_grad_enabled(train):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            if train:
                opt.zero_grad()
                loss.backward()
                opt.step()
        return loss.detach(), (logits.argmax(1) == y).sum()

    step = env.step(run_batch)
    hist = []
    for _ in range(4):
        tl, _ = step(xt, yt, True)
        vl, correct = step(xv, yv, False)
        hist.append((tl.item(), vl.item(), correct.item()))
    env.rec("hist", hist)
    env.rec("params", list(model.parameters()))
    env.rec("buffers", list(model.buffers()))


def two_losses_retain_graph(torch, env):
    """An actor-critic update written with two backward calls on one graph: the critic's
    loss backward(retain_graph=True) into the critic's optimiser, then the actor's loss
    (through the shared body, the critic's grads zeroed before) with
    torch.autograd.backward([loss_a, aux], [ones, 0.5 * ones]); two optimisers stepped."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    body = nn.Sequential(nn.Linear(4, 16), nn.Tanh())
    actor, critic = nn.Linear(16, 2), nn.Linear(16, 1)
    opt_c = torch.optim.Adam(list(body.parameters()) + list(critic.parameters()), lr=1e-2)
    opt_a = torch.optim.Adam(actor.parameters(), lr=1e-2)
    s, a, ret = torch.randn(12, 4), torch.randint(0, 2, (12,)), torch.randn(12)

    def train_step(s, a, ret):
        h = body(s)
        v = critic(h).squeeze(-1)
        loss_c = F.mse_loss(v, ret)
        opt_c.zero_grad()
        loss_c.backward(retain_graph=True)
        opt_c.step()
        logp = F.log_softmax(actor(h), -1).gather(1, a[:, None]).squeeze(1)
        loss_a = -(logp * (ret - v.detach())).mean()
        aux = (F.softmax(actor(h.detach()), -1) ** 2).sum(-1).mean()
        opt_a.zero_grad()
        torch.autograd.backward([loss_a, aux], [torch.ones(()), torch.full((), 0.5)])
        opt_a.step()
        return loss_c.detach(), loss_a.detach()

    step = env.step(train_step)
    hist = []
    for _ in range(4):
        lc, la = step(s, a, ret)
        hist.append((lc.item(), la.item()))
    env.rec("hist", hist)
    env.rec("params", [p for m in (body, actor, critic) for p in m.parameters()])
    env.rec("body grads", [p.grad for p in body.parameters()])


def tensor_learning_rate(torch, env):
    """Adam and SGD with their learning rates given as 0-d tensors (lr=torch.tensor(...),
    the recipe for changing the lr without recompiling), the tensor updated in place with
    fill_ between steps by a hand-written warmup."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 12), nn.GELU(), nn.Linear(12, 1))
    lr = torch.tensor(0.0)
    opt = torch.optim.Adam(model.parameters(), lr=lr, foreach=False)
    x, y = torch.randn(20, 5), torch.randn(20, 1)

    def train_step(x, y):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = env.step(train_step)
    hist = []
    for k in range(5):
        opt.param_groups[0]["lr"].fill_(1e-2 * min(1.0, (k + 1) / 3))
        hist.append(step(x, y).item())
    env.rec("hist", hist)
    env.rec("params", list(model.parameters()))


def accumulate_set_to_none_false(torch, env):
    """Gradient accumulation over micro-batches as older tutorials write it:
    optimizer.zero_grad(set_to_none=False) (grads kept as zero tensors), a loop over
    torch.chunk of the batch with loss / n_micro backward each time, inside the compiled
    step; clip_grad_norm_ with foreach=True, the norm returned and logged."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(7, 14), nn.ReLU(), nn.Linear(14, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, dampening=0.1)
    x, y = torch.randn(24, 7), torch.randint(0, 4, (24,))

    def train_step(x, y, n_micro):
        opt.zero_grad(set_to_none=False)
        total = 0.0
        for xb, yb in zip(x.chunk(n_micro), y.chunk(n_micro)):
            loss = F.cross_entropy(model(xb), yb) / n_micro
            loss.backward()
            total = total + loss.detach()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 0.5, foreach=True)
        opt.step()
        return total, norm

    step = env.step(train_step)
    hist = []
    for _ in range(4):
        total, norm = step(x, y, 3)
        hist.append((total.item(), norm.item()))
    env.rec("hist", hist)
    env.rec("params", list(model.parameters()))


def grad_allow_unused_materialize(torch, env):
    """A regulariser on the input gradient of only some outputs: torch.autograd.grad over
    all parameters with allow_unused=True and materialize_grads=True (an unused head's
    gradient comes back as zeros, not None), a gradient-norm penalty built from those,
    then backward of the total; one head unused by the penalty."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    body = nn.Linear(5, 10)
    head_a, head_b = nn.Linear(10, 2), nn.Linear(10, 2)
    params = [p for m in (body, head_a, head_b) for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=0.05)
    x, y = torch.randn(16, 5), torch.randint(0, 2, (16,))

    def train_step(x, y):
        h = torch.tanh(body(x))
        la = F.cross_entropy(head_a(h), y)
        grads = torch.autograd.grad(la, params, create_graph=True, allow_unused=True,
                                    materialize_grads=True)
        penalty = sum(g.pow(2).sum() for g in grads)
        loss = la + F.cross_entropy(head_b(h), y) + 0.1 * penalty
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, torch.stack([g.abs().sum() for g in grads])

    step = env.step(train_step)
    hist = []
    for _ in range(4):
        loss, gsum = step(x, y)
        hist.append(loss.item())
    env.rec("hist", hist)
    env.rec("grad sums", gsum)
    env.rec("params", params)


def early_stopping_best_state(torch, env):
    """Early stopping as most notebooks do it: the validation loss each epoch, the best
    state kept as copy.deepcopy(model.state_dict()), a patience counter, and at the end
    model.load_state_dict(best) (in-place copies into the parameters the compiled step
    reads), then one more compiled step from the restored weights."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    xt, yt = torch.randn(16, 4), torch.randn(16, 1)
    xv, yv = torch.randn(8, 4), torch.randn(8, 1)

    def train_step(x, y):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    @torch.no_grad()
    def val_loss(x, y):
        return F.mse_loss(model(x), y)

    step, validate = env.step(train_step), env.step(val_loss)
    best, best_state, bad, hist = float("inf"), None, 0, []
    for epoch in range(8):
        tl = step(xt, yt).item()
        vl = validate(xv, yv).item()
        hist.append((tl, vl))
        if vl < best:
            best, best_state, bad = vl, copy.deepcopy(model.state_dict()), 0
        else:
            bad += 1
            if bad >= 3:
                break
    model.load_state_dict(best_state)
    env.rec("restored val", validate(xv, yv))
    env.rec("after restore", step(xt, yt))
    env.rec("hist", hist)
    env.rec("params", list(model.parameters()))


def resume_from_checkpoint(torch, env):
    """Saving and resuming training: torch.save({'model': ..., 'optimizer': ...,
    'epoch': ...}) to a file, a fresh model and optimiser built, load_state_dict of both
    from torch.load(weights_only=True), and the compiled step continued on the new objects;
    the resumed losses equal an uninterrupted run's."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    def make():
        m = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
        return m, torch.optim.AdamW(m.parameters(), lr=5e-2, weight_decay=0.1)

    model, opt = make()
    x, y = torch.randn(10, 3), torch.randint(0, 2, (10,))

    def make_step(model, opt):
        def train_step(x, y):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return env.step(train_step)

    step = make_step(model, opt)
    hist = [step(x, y).item() for _ in range(3)]
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3},
               env.path("ckpt.pt"))
    hist += [step(x, y).item() for _ in range(2)]
    model2, opt2 = make()
    ck = torch.load(env.path("ckpt.pt"), weights_only=True)
    model2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["optimizer"])
    step2 = make_step(model2, opt2)
    resumed = [step2(x, y).item() for _ in range(2)]
    env.rec("hist", hist)
    env.rec("resumed", resumed)
    env.rec("same", [abs(a - b) < 1e-6 for a, b in zip(resumed, hist[3:])])
    env.rec("epoch", ck["epoch"])
    env.rec("params", list(model2.parameters()))


def freeze_by_grad_none(torch, env):
    """Freezing a layer for some steps by setting its p.grad = None after backward (the
    optimiser then skips it), chosen by a Python flag argument; weight decay in AdamW
    also skipped for those, momentum state made only for the others."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    enc, head = nn.Linear(6, 10), nn.Linear(10, 3)
    opt = torch.optim.AdamW(list(enc.parameters()) + list(head.parameters()), lr=1e-2)
    x, y = torch.randn(14, 6), torch.randint(0, 3, (14,))

    def train_step(x, y, freeze_enc):
        loss = F.cross_entropy(head(F.relu(enc(x))), y)
        opt.zero_grad()
        loss.backward()
        if freeze_enc:
            for p in enc.parameters():
                p.grad = None
        opt.step()
        return loss

    step = env.step(train_step)
    hist = [step(x, y, k < 2).item() for k in range(5)]
    env.rec("hist", hist)
    env.rec("params", list(enc.parameters()) + list(head.parameters()))
    env.rec("steps", [float(opt.state[p]["step"]) for p in enc.parameters()])
