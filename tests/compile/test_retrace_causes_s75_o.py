"""Steps that re-traced without need (s75 task O: the rest of the harness programs).

Truncated BPTT: a module keeps its LSTM state between compiled calls (`self.hidden =
tuple(h.detach() for h in hc)`), None after a reset at each document boundary. The call
that found None and wrote the tuple was traced and not kept (the slot's own guard items,
`model.hidden` None and the new `structure of model.hidden`, counted as an unreplayed
change though the entry replays the whole tuple: attr_writes.Slots._write), so the first
call of every document traced again, up to the recompile limit."""
import numpy as np

import llgrad

V, E, H, B, L = 11, 8, 12, 3, 5


def _lm():
    nn = llgrad.nn
    llgrad.manual_seed(0)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, E)
            self.lstm = nn.LSTM(E, H, batch_first=True)
            self.head = nn.Linear(H, V)
            self.hidden = None

        def forward(self, x):
            out, hc = self.lstm(self.emb(x), self.hidden)
            self.hidden = tuple(h.detach() for h in hc)
            return self.head(out)

    model = LM()
    opt = llgrad.optim.SGD(model.parameters(), lr=0.5)

    def train_step(x, y):
        logits = model(x)
        loss = llgrad.nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return model, train_step


def _run(compiled, docs=4):
    model, step = _lm()
    fn = llgrad.compile(step) if compiled else step
    rng = np.random.default_rng(0)
    out = []
    for _ in range(docs):
        model.hidden = None                 # (a reset at each document boundary)
        stream = llgrad.tensor(rng.integers(0, V, (B, 3 * L + 1)))
        for k in range(3):
            chunk = stream[:, k * L:(k + 1) * L + 1]
            out.append(fn(chunk[:, :-1], chunk[:, 1:]).numpy().copy())
            out.append([h.numpy().copy() for h in model.hidden])
            assert not any(h.requires_grad for h in model.hidden)
    out.append([p.detach().numpy().copy() for p in model.parameters()])
    return fn, out


def _close(a, b):
    if isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)
    else:
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_state_written_where_none_was_is_kept():
    _, eager = _run(False)
    cf, got = _run(True)
    # (the first call reaches a fresh optimiser: untraced; then an entry for the tuple
    # state and one for None, each kept: no document's first call traces again)
    assert cf.n_traces == 2, (cf.n_traces, cf._not_kept, cf.graph_breaks)
    assert len(cf.entries) == 2 and cf._not_kept is None
    _close(eager, got)


# ---- a number passed through *args ------------------------------------------------------
# `def train_step(*args): loss = loss_fn(model, *args)` given a mixup weight `lam` (a new
# float each batch) was guarded by value at every call (`args[3] == 0.51 (now 0.18)`): only
# named parameters' numbers became inputs after a second value (symbolic_args.newly_dynamic
# did not look into the *args tuple), so each batch traced again, up to the recompile limit.

def _mixup(compiled, varargs=True):
    nn, F = llgrad.nn, llgrad.nn.functional
    llgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = llgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def loss_fn(x, y, perm, lam):
        target = lam * F.one_hot(y, 3).float() + (1 - lam) * F.one_hot(y[perm], 3).float()
        return F.cross_entropy(model(lam * x + (1 - lam) * x[perm]), target)

    def step_args(*args):
        loss = loss_fn(*args)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    def step_named(x, y, perm, lam):
        return step_args(x, y, perm, lam)
    step = step_args if varargs else step_named
    fn = llgrad.compile(step) if compiled else step
    rng = np.random.default_rng(0)
    out = []
    for _ in range(7):
        x = llgrad.tensor(rng.standard_normal((8, 6)).astype(np.float32))
        y, perm = llgrad.tensor(rng.integers(0, 3, (8,))), llgrad.tensor(rng.permutation(8))
        out.append(fn(x, y, perm, float(rng.random())).numpy().copy())
    out.append([p.detach().numpy().copy() for p in model.parameters()])
    return fn, out


def test_number_in_varargs_becomes_an_input():
    _, eager = _mixup(False)
    cf, got = _mixup(True)
    named, _ = _mixup(True, varargs=False)
    # (as a named one: the first call untraced (a fresh optimiser) noted the number; the
    # second, another number, traced with it an input; no trace per value)
    assert cf.n_traces == named.n_traces == 1, (cf.n_traces, named.n_traces)
    assert len(cf.entries) == 1 and cf.graph_breaks == []
    _close(eager, got)


def test_varargs_number_read_as_a_python_value_stays_guarded():
    """A *args number used as a Python int (a slice bound) is guarded by value again:
    each value its own trace, results eager's."""
    def f(*args):
        x, n, w = args
        return x[:n] * w

    cf = llgrad.compile(f)
    x = llgrad.arange(6.)
    for n, w in [(2, 0.5), (3, 0.25), (2, 2.0), (4, 1.5), (3, 0.75)]:
        np.testing.assert_allclose(cf(x, n, w).numpy(), f(x, n, w).numpy())
    assert cf.n_traces <= 5 and len(cf.entries) >= 3
