"""Compiled functions whose inputs change shape, layout or dtype between calls (sweep 10 E):
each scenario runs with torch (the oracle), llgrad eagerly and llgrad.compile, and every
call must give torch's results, gradients, .grad, optimiser state, running statistics and
random numbers; a size seen before costs no new trace; past the recompile limit, calls run
eagerly with one warning attributed to the user's line."""
import warnings

import numpy as np
import pytest
from contract_harness_sweep7 import runs

import llgrad

torch = pytest.importorskip("torch")

SIZES = [3, 6, 1, 8, 0, 5, 2, 6, 3, 0, 1]


def _call(g, *args):
    try:
        return g(*args)
    except (RuntimeError, ValueError, IndexError) as e:
        return e


# ---- Python branches and numbers taken from sizes --------------------------------------------
def branches_on_sizes(lib, wrap, see):
    w = lib.ones(2, 3, requires_grad=True)

    def f(x):
        y = x @ w
        if x.shape[0] > 4:
            y = y * 2
        if x.size(0) % 2 == 0:
            y = y - 1
        if x.numel() > 9:
            y = y.tanh()
        loss = y.pow(2).sum() / max(x.shape[0], 1) + len(x)
        loss.backward()
        return loss, y.mean(0), float(x.shape[0]) ** 0.5, x.new_full((len(x),), x.size(0))
    g = wrap(f)
    for n in SIZES:
        w.grad = None
        see(g(lib.arange(n * 2.).reshape(n, 2) / 5), w.grad)


def sizes_steer_indexing_and_new_tensors(lib, wrap, see):
    def f(x):
        b = x.shape[0]
        return (x[b // 2], x[: b - 1], lib.tensor(x.shape), lib.arange(b).float() @ x,
                lib.full((), b * 1.5), x.narrow(0, 0, max(b - 2, 0)), len(x.split(2)))
    g = wrap(f)
    for n in [4, 6, 1, 3, 4, 9, 2]:
        see(_call(g, lib.arange(n * 3.).reshape(n, 3)))


@pytest.mark.parametrize("scenario", [branches_on_sizes, sizes_steer_indexing_and_new_tensors])
def test_sizes_steering_python_are_never_reused_for_another_size(scenario):
    runs(scenario, torch)


# ---- layouts and dtypes ----------------------------------------------------------------------
def layouts_of_one_shape_alternate(lib, wrap, see):
    # the same shape as contiguous, transposed, stepped, offset and broadcast views, again
    # and again: each call must take its own layout's kernel
    def f(x, y):
        x.mul_(2).add_(y)
        return x.sum(1) * x[0]
    g = wrap(f)
    for _ in range(2):
        base = lib.arange(64.).reshape(8, 8)
        for x in [base[:4, :4], base[:4, :4].t(), base[::2, ::2], base[4:, 4:],
                  base.t()[::2, 1::2], base[1:5, 1:5]]:
            see(g(x, lib.arange(4.)))
        see(base)


def dtypes_switch(lib, wrap, see):
    lib.manual_seed(0)
    m = lib.nn.Linear(4, 3)
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)

    def step(x, y):
        opt.zero_grad()
        # (int32 labels: torch's losses take int64 only; indexing takes either)
        loss = -lib.log_softmax(m(x), 1)[lib.arange(len(y)), y].mean()
        loss.backward()
        opt.step()
        return loss
    g = wrap(step)
    for n, lt in [(5, lib.int64), (3, lib.int64), (5, lib.int32), (3, lib.int32), (5, lib.int64)]:
        x = lib.arange(n * 4.).reshape(n, 4).cos()
        see(g(x, (lib.arange(n) % 3).to(lt)), m.weight, opt.state_dict()["state"])
    m.double()
    for n in [5, 2, 5]:
        see(g(lib.arange(n * 4.).reshape(n, 4).double(), lib.arange(n) % 3), m.weight)


def zero_dim_and_broadcast(lib, wrap, see):
    def f(x, y):
        return x * y + x, (x + y).shape
    g = wrap(f)
    for x, y in [(lib.tensor(2.), lib.ones(3)), (lib.ones(1), lib.ones(3)),
                 (lib.tensor(3.), lib.tensor(4.)), (lib.ones(3), lib.tensor(2.)),
                 (lib.arange(3.)[1], lib.ones(3)), (lib.arange(3.).expand(2, 3), lib.ones(1))]:
        see(g(x, y))


@pytest.mark.parametrize("scenario", [layouts_of_one_shape_alternate, zero_dim_and_broadcast,
                                      pytest.param(dtypes_switch, marks=pytest.mark.slow)])
def test_layouts_and_dtypes_changing_between_calls(scenario):
    runs(scenario, torch)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", [layouts_of_one_shape_alternate, dtypes_switch])
def test_layouts_and_dtypes_changing_between_calls_natively(scenario):
    runs(scenario, torch, backend=None)         # (native kernels: each layout its own)


# ---- training loops over changing batch and sequence sizes -----------------------------------
def dataloader_with_a_ragged_last_batch(lib, wrap, see):
    lib.manual_seed(0)
    data = lib.utils.data
    ds = data.TensorDataset(lib.arange(23 * 4.).reshape(23, 4).sin(), (lib.arange(23) * 7) % 3)
    loader = data.DataLoader(ds, batch_size=5, shuffle=True, drop_last=False)
    # (no bias before the BatchNorm: its gradient is rounding noise, which Adam magnifies)
    m = lib.nn.Sequential(lib.nn.Linear(4, 6, bias=False), lib.nn.BatchNorm1d(6),
                          lib.nn.ReLU(), lib.nn.Dropout(0.2), lib.nn.Linear(6, 3))
    opt = lib.optim.Adam(m.parameters(), lr=1e-2)

    def step(x, y):
        opt.zero_grad()
        out = m(x)
        loss = lib.nn.functional.cross_entropy(out, y, reduction="sum") / x.shape[0]
        loss.backward()
        opt.step()
        return loss, (out.argmax(1) == y).sum()
    g = wrap(step)
    for _ in range(2):
        m.train()
        for x, y in loader:
            see(g(x, y))
        see(m[1].running_mean, m[1].running_var, m[1].num_batches_tracked, m[4].weight)
        m.eval()
        with lib.no_grad():
            see(wrap(m)(ds.tensors[0][:7]))


def train_and_eval_calls_of_one_compiled_module(lib, wrap, see):
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.BatchNorm1d(8), lib.nn.ReLU(),
                          lib.nn.Dropout(0.3), lib.nn.Linear(8, 2))
    opt = lib.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    cm = wrap(m)
    for n, train in [(5, True), (3, False), (5, True), (7, True), (3, False), (2, False),
                     (7, True), (5, False), (1, False), (2, True)]:
        m.train(train)
        x = lib.arange(n * 4.).reshape(n, 4).sin()
        if train:
            opt.zero_grad()
            y = cm(x)
            y.pow(2).mean().backward()
            opt.step()
            see(y, m[1].running_mean, m[1].running_var, m[1].num_batches_tracked, m[0].weight)
        else:
            with lib.no_grad():
                see(cm(x))


def lstm_over_changing_sequence_lengths(lib, wrap, see):
    lib.manual_seed(0)
    rnn = lib.nn.LSTM(3, 4, batch_first=True)
    head = lib.nn.Linear(4, 2)
    opt = lib.optim.SGD(list(rnn.parameters()) + list(head.parameters()), lr=0.1)

    def step(x):
        opt.zero_grad()
        out, _ = rnn(x)
        loss = head(out[:, -1]).pow(2).sum() / x.size(1)
        loss.backward()
        opt.step()
        return loss, out
    g = wrap(step)
    for b, t in [(2, 5), (2, 3), (3, 5), (2, 5), (1, 1), (2, 3)]:
        see(g(lib.arange(b * t * 3.).reshape(b, t, 3).sin()), rnn.weight_hh_l0)


def random_draws_sized_by_the_batch(lib, wrap, see):
    def f(x):
        noise = lib.randn(x.shape) * 0.1
        perm = lib.randperm(x.shape[0])
        idx = lib.randint(0, max(x.shape[0], 1), (3,))
        return x[perm] + noise, idx, lib.nn.functional.dropout(x, 0.5), lib.rand(1)
    g = wrap(f)
    for n in [4, 6, 4, 1, 0, 6, 9, 4]:
        see(g(lib.ones(n, 3)), lib.rand(2))


@pytest.mark.parametrize("scenario", [
    random_draws_sized_by_the_batch,
    pytest.param(train_and_eval_calls_of_one_compiled_module, marks=pytest.mark.slow),
    pytest.param(dataloader_with_a_ragged_last_batch, marks=pytest.mark.slow),
    pytest.param(lstm_over_changing_sequence_lengths, marks=pytest.mark.slow)])
def test_training_over_changing_sizes(scenario):
    runs(scenario, torch)


def backwards_run_later_in_another_order(lib, wrap, see):
    # each call's backward node must run its own size's backward graph
    w = lib.ones(3, requires_grad=True)

    def f(x):
        return (x * w).tanh().sum(1) * x.shape[0]
    g = wrap(f)
    outs = []
    for n in [2, 5, 2, 1, 5, 0]:
        x = lib.arange(n * 3.).reshape(n, 3).div(7).requires_grad_()
        outs.append((x, g(x)))
    for x, y in reversed(outs):
        w.grad = None
        y.sum().backward(retain_graph=True)
        see(x.grad, w.grad)
    for x, y in outs:
        y.pow(2).sum().backward()
        see(x.grad, w.grad)


def hidden_state_reset_when_the_batch_changes(lib, wrap, see):
    lib.manual_seed(0)

    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = lib.nn.GRU(3, 4, batch_first=True)
            self.h = None

        def forward(self, x):
            if self.h is None or self.h.shape[1] != x.shape[0]:
                self.h = lib.zeros(1, x.shape[0], 4)
            out, h = self.rnn(x, self.h)
            self.h = h.detach()
            return out.sum(-1)
    m = M()
    opt = lib.optim.SGD(m.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = (m(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        return loss
    g = wrap(step)
    for b, t in [(2, 3), (2, 3), (2, 3), (3, 3), (3, 2), (2, 3), (1, 3)]:
        x = lib.arange(b * t * 3.).reshape(b, t, 3).sin()
        see(g(x, lib.arange(b * t * 1.).reshape(b, t).cos()), m.h, m.rnn.weight_hh_l0)


@pytest.mark.parametrize("scenario", [
    backwards_run_later_in_another_order,
    pytest.param(hidden_state_reset_when_the_batch_changes, marks=pytest.mark.slow)])
def test_state_across_calls_of_different_sizes(scenario):
    runs(scenario, torch)


# ---- torch._dynamo.mark_dynamic ---------------------------------------------------------------
def _mark_calls(lib):
    d = lib._dynamo
    return [lambda t: d.mark_dynamic(t, 0, min=1, max=64),
            lambda t: d.mark_dynamic(t, [0, 1], hint_override=8),      # (a TypeError before)
            lambda t: d.mark_dynamic(t, 0, specialize_on=[lambda s: s == 1]),
            lambda t: d.mark_dynamic(t, 0, 1, 64),          # min and max are keyword-only
            lambda t: d.maybe_mark_dynamic(t, 1), lambda t: d.mark_static(t, 0),
            lambda t: d.mark_static_address(t)]


def _outcome(call, t):
    try:
        return call(t)
    except TypeError:
        return TypeError


@pytest.mark.slow                   # (importing torch._dynamo takes seconds)
def test_mark_dynamic_takes_torchs_arguments():
    got = [_outcome(c, llgrad.ones(2, 3)) for c in _mark_calls(llgrad)]
    assert got == [_outcome(c, torch.ones(2, 3)) for c in _mark_calls(torch)], got


def test_mark_dynamic_with_torchs_keywords_and_sizes_still_specialise():
    def f(x):
        return x.sum(0) / x.shape[0] if x.shape[0] > 3 else x.cumsum(0)[-1] * x.size(0)
    cf = llgrad.compile(f, backend="interpret")
    for n in [2, 5, 3, 5, 2]:
        x = llgrad.arange(n * 2.).reshape(n, 2)
        llgrad._dynamo.mark_dynamic(x, 0, hint_override=4, specialize_on=[lambda s: s == 1])
        want = f(torch.arange(n * 2.).reshape(n, 2))
        np.testing.assert_allclose(cf(x).numpy(), want.numpy(), rtol=1e-6)
    # (it reads its size and branches on it: a trace per size, one of them traced again
    # with ints after its SymInt took the other branch; size_templates.py)
    assert cf.n_traces == 4


# ---- counters and the recompile limit --------------------------------------------------------
@pytest.mark.slow                       # (three LLVM builds)
def test_sizes_seen_before_cost_no_trace_and_no_build(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")   # (in the background an entry is built at once)
    cf = llgrad.compile(lambda x: (x.sin() * 3).sum(0))
    counts = []
    for n in [3, 5, 3, 5, 0, 3, 5, 0]:
        x = np.linspace(-1, 1, n * 4, dtype=np.float32).reshape(n, 4)
        np.testing.assert_allclose(cf(llgrad.tensor(x)).numpy(),
                                   (np.sin(x) * 3).sum(0), rtol=1e-6, atol=1e-6)
        counts.append((cf.n_traces, cf.n_llvm_compiles))
    # (a module is built when a call runs its entry again)
    assert counts == [(1, 0), (2, 0), (2, 1), (2, 2), (3, 2), (3, 2), (3, 2), (3, 3)], counts


def _limited_calls(call):
    torch.manual_seed(0)
    lin = torch.nn.Linear(2, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in [1, 2, 3, 4, 5, 2, 6]:
            out = call(n)                               # (the user's line)
            want = lin(torch.ones(n, 2))
            np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    return [w for w in caught if "recompile limit" in str(w.message)]


def _linear():
    llgrad.manual_seed(0)
    return llgrad.nn.Linear(2, 3)


class _Net(llgrad.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = _linear()

    @llgrad.compile(recompile_limit=3, backend="interpret", dynamic=False)
    def forward(self, x):       # (dynamic=False: a trace per size, size_templates.py)
        return self.lin(x)


@pytest.mark.parametrize("how", ["function", "module", "method"])
def test_the_recompile_limit_warning_names_the_users_line(how):
    # (from a compiled module or a compiled forward the warning named llgrad's own
    # compile/module.py or nn/module.py)
    if how == "function":
        lin = _linear()
        cf = llgrad.compile(lambda x: lin(x), recompile_limit=3, backend="interpret",
                            dynamic=False)
    elif how == "module":
        cf = llgrad.compile(_linear(), recompile_limit=3, backend="interpret", dynamic=False)
    else:
        cf = _Net()
    caught = _limited_calls(lambda n: cf(llgrad.ones(n, 2)))
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert caught[0].filename == __file__, caught[0].filename
    assert caught[0].category is RuntimeWarning
    line = open(__file__).read().splitlines()[caught[0].lineno - 1]
    assert "cf(llgrad.ones(n, 2))" in line or "(the user's line)" in line, line
    if how == "module":
        assert "llgrad.compile(Linear)" in str(caught[0].message)


def test_a_limit_of_zero_runs_every_call_eagerly_and_says_why():
    # (the warning showed the call's raw guard items: "x: None -> ('float32', (1,), ...)")
    cf = llgrad.compile(lambda x: x * 2, recompile_limit=0, backend="interpret")
    with pytest.warns(RuntimeWarning, match="recompile limit") as rec:
        outs = [cf(llgrad.ones(n)).tolist() for n in [1, 2, 1]]
    assert outs == [[2.0], [2.0, 2.0], [2.0]] and cf.n_traces == 0
    msgs = [str(w.message) for w in rec if "recompile limit" in str(w.message)]
    assert len(msgs) == 1 and "the guard that changed: none: no call traced yet" in msgs[0], msgs
