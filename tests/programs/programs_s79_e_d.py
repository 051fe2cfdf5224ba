"""Training programs (s79, E, d): a ReduceLROnPlateau checkpointed and resumed through
torch.save; a three-stage SequentialLR with foreach clipping; a DQN-style target network
(hard copies with load_state_dict, Huber loss on a detached bootstrap target);
token-weighted accumulation of a sum-reduced loss over variable-length micro-batches."""


def plateau_checkpoint(torch, env):
    """ReduceLROnPlateau, the optimizer (SGD momentum) and the model saved at epoch 12 and
    loaded into fresh objects; both continuations log the same lr and losses."""
    nn, F = torch.nn, torch.nn.functional
    x, y, vx, vy = env.randn(12, 3), env.randn(12, 1), env.randn(6, 3), env.randn(6, 1)

    def make():
        model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, dampening=0.1)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.3, patience=1)
        return model, opt, sched

    def run(model, opt, sched, epochs, tag):
        def train_step(xb, yb):
            opt.zero_grad()
            loss = F.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()
            return loss.detach()
        step = env.step(train_step)
        for e in epochs:
            loss = step(x, y)
            with torch.no_grad():
                val = F.mse_loss(model(vx), vy)
            sched.step(val)
            env.rec(f"{tag} {e}", (loss, val, opt.param_groups[0]["lr"]))

    model, opt, sched = make()
    env.init(model)
    run(model, opt, sched, range(12), "a")
    path = env.path("plateau.pt")
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                "sched": sched.state_dict()}, path)
    run(model, opt, sched, range(12, 30), "a")
    ckpt = torch.load(path)
    model2, opt2, sched2 = make()
    model2.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["opt"])
    sched2.load_state_dict(ckpt["sched"])
    env.rec("sched state", {k: v for k, v in sched2.state_dict().items()
                            if k in ("best", "num_bad_epochs", "last_epoch")})
    run(model2, opt2, sched2, range(12, 30), "b")
    env.rec("params", (model.state_dict(), model2.state_dict()))


def three_stage_sequential(torch, env):
    """SequentialLR of ConstantLR, ExponentialLR and PolynomialLR; clip_grad_norm_ with
    foreach=True; Adamax."""
    nn, F = torch.nn, torch.nn.functional
    sch = torch.optim.lr_scheduler
    model = env.init(nn.Sequential(nn.Linear(4, 10), nn.Softplus(), nn.Linear(10, 3)))
    opt = torch.optim.Adamax(model.parameters(), lr=2e-2)
    scheduler = sch.SequentialLR(opt, [sch.ConstantLR(opt, factor=0.5, total_iters=5),
                                       sch.ExponentialLR(opt, gamma=0.9),
                                       sch.PolynomialLR(opt, total_iters=15, power=2.0)],
                                 milestones=[5, 15])

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.3, foreach=True)
        opt.step()
        return loss.detach(), norm
    step = env.step(train_step)
    x, y = env.randn(10, 4), env.randint(0, 3, (10,))
    for t in range(32):
        env.rec(f"step {t}", step(x, y))
        scheduler.step()
        env.rec(f"lr {t}", scheduler.get_last_lr())
    env.rec("params", model.state_dict())


def dqn_target_network(torch, env):
    """Q-learning on fixed transitions: the bootstrap target from a target network under
    no_grad (max over actions, masked by done), smooth_l1 on the taken action's Q
    (gather), the target copied with load_state_dict every 5 steps."""
    import copy
    nn, F = torch.nn, torch.nn.functional
    q = env.init(nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3)))
    target = copy.deepcopy(q)
    target.requires_grad_(False)
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    gamma = 0.9

    def train_step(s, a, r, s2, done):
        with torch.no_grad():
            boot = r + gamma * target(s2).max(1).values * (1 - done)
        q_sa = q(s).gather(1, a[:, None]).squeeze(1)
        loss = F.smooth_l1_loss(q_sa, boot)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(q.parameters(), 10.0)
        opt.step()
        return loss.detach(), q_sa.detach().mean()
    step = env.step(train_step)
    s, s2 = env.randn(16, 4), env.randn(16, 4)
    a, r = env.randint(0, 3, (16,)), env.randn(16)
    done = (env.rand(16) < 0.2).float()
    for t in range(40):
        env.rec(f"step {t}", step(s, a, r, s2, done))
        if (t + 1) % 5 == 0:
            target.load_state_dict(q.state_dict())
    if env.compiled:
        assert step.n_traces == 1, step.n_traces
    env.rec("q", q.state_dict())
    env.rec("target", target.state_dict())


def token_weighted_accum(torch, env):
    """An LM-style accumulation: each micro-batch's summed token loss (ignore_index for
    padding) divided by the step's total token count, micro-batches of different lengths."""
    nn, F = torch.nn, torch.nn.functional
    V, PAD = 9, -100
    emb = env.init(nn.Embedding(V, 6))
    head = env.init(nn.Linear(6, V))
    params = list(emb.parameters()) + list(head.parameters())
    opt = torch.optim.Adam(params, lr=1e-2)

    def micro(tokens, targets, n_tokens):
        logits = head(torch.relu(emb(tokens)))
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=PAD,
                               reduction="sum") / n_tokens
        loss.backward()
        return loss.detach()
    micro = env.step(micro)
    batches = []
    for length in (5, 3, 5):
        tok = env.randint(0, V, (2, length))
        tgt = env.randint(0, V, (2, length))
        tgt[1, length - 2:] = PAD
        batches.append((tok, tgt))
    n_tokens = sum(int((tgt != PAD).sum()) for _, tgt in batches)
    env.rec("n tokens", n_tokens)
    for t in range(30):
        opt.zero_grad()
        total = sum(micro(tok, tgt, n_tokens) for tok, tgt in batches)
        opt.step()
        env.rec(f"loss {t}", total)
    env.rec("params", params)


PROGRAMS = {
    "plateau_checkpoint": plateau_checkpoint,
    "three_stage_sequential": three_stage_sequential,
    "dqn_target_network": dqn_target_network,
    "token_weighted_accum": token_weighted_accum,
}
