"""New batch sizes without a trace each (compile/size_templates.py): two traces at two sizes
fit one template, later sizes are made from it; results equal eager's at every size, and
what the template cannot stand for (a comparison that comes out otherwise, a size used as a
plain number, a slice clamped at a small size, a size read by len()) traces again."""
import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F

SIZES = [16, 16, 24, 24, 40, 7, 2, 100, 33, 5, 16, 40]


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    monkeypatch.delenv("LLGRAD_DYNAMIC_SIZES", raising=False)   # (same: set where probed)


def _run(make_step, sizes, compiled, make_batch, **options):
    llgrad.manual_seed(0)
    step, params = make_step()
    if compiled:
        step = llgrad.compile(step, **options)
    rng = np.random.default_rng(0)
    outs = []
    for b in sizes:
        out = step(*make_batch(rng, b))
        outs.append([o.item() if isinstance(o, llgrad.Tensor) else o
                     for o in (out if isinstance(out, tuple) else (out,))])
    return outs, [p.detach().numpy().copy() for p in params], step


def _same(make_step, make_batch, sizes=SIZES, **options):
    eager, eager_params, _ = _run(make_step, sizes, False, make_batch)
    got, got_params, step = _run(make_step, sizes, True, make_batch, **options)
    np.testing.assert_allclose(np.array(got, dtype=float), np.array(eager, dtype=float),
                               rtol=2e-5, atol=1e-6)
    for p, q in zip(got_params, eager_params):
        np.testing.assert_allclose(p, q, rtol=1e-4, atol=1e-5)
    return step


def _mlp_step():
    model = nn.Sequential(nn.Linear(13, 26), nn.Tanh(), nn.Linear(26, 3))
    opt = llgrad.optim.SGD(model.parameters(), 0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step, list(model.parameters())


def _mlp_batch(rng, b):
    return (llgrad.tensor(rng.standard_normal((b, 13)).astype(np.float32)),
            llgrad.tensor(rng.integers(0, 3, b)))


def test_a_training_step_at_many_batch_sizes_traces_twice():
    step = _same(_mlp_step, _mlp_batch)
    # (the first call meets a fresh optimiser: eager; then 16 and 24 trace, every later
    # size, 2 included, is made from their template)
    assert step.n_traces == 2
    assert sum(t.uses for t in step._sizes.templates) == 6


class _Attention(nn.Module):
    def __init__(self, width, heads, gate=None):
        super().__init__()
        self.qkv, self.proj, self.heads, self.gate = (nn.Linear(width, 3 * width),
                                                      nn.Linear(width, width), heads, gate)

    def forward(self, x):
        B, T, C = x.shape           # (read by the user's code: SymInts in the second trace)
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.reshape(B, T, self.heads, C // self.heads).transpose(1, 2)
                   for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if self.gate is not None and B > self.gate:     # (a comparison the template checks)
            y = 2.0 * y
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


def _gpt_step(gate=None):
    def make():
        emb, pos = nn.Embedding(11, 16), nn.Embedding(8, 16)
        attn, head = _Attention(16, 2, gate), nn.Linear(16, 11)
        params = [*emb.parameters(), *pos.parameters(), *attn.parameters(), *head.parameters()]
        opt = llgrad.optim.SGD(params, 0.1, momentum=0.9)

        def step(idx, targets):
            T = idx.shape[1]
            x = emb(idx) + pos(llgrad.arange(T))
            logits = head(x + attn(x))
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step, params
    return make


def _gpt_batch(rng, b):
    return (llgrad.tensor(rng.integers(0, 11, (b, 8))),
            llgrad.tensor(rng.integers(0, 11, (b, 8))))


def test_sizes_the_users_code_reads_and_reshapes_by(monkeypatch):
    step = _same(_gpt_step(), _gpt_batch)
    assert step.n_traces == 2                   # (B a SymInt in the second trace)
    monkeypatch.setenv("LLGRAD_DYNAMIC_SIZES", "same")  # (the reads must be equal)
    step = _same(_gpt_step(), _gpt_batch)
    assert step.n_traces == len(set(SIZES))     # (it reads B: a trace per size)


def test_a_comparison_of_a_size_that_comes_out_otherwise_traces_again(monkeypatch):
    # B > 10 at 16 and 24: sizes 7, 2 and 5 compute without the doubling
    step = _same(_gpt_step(gate=10), _gpt_batch)
    # 16, 24; 7: the check fails, its trace with SymInts does not fit 24's (no doubling),
    # so it is traced again with ints (SymInts are not ints to every library); 2 is handed
    # a SymInt against 7 and fits it (no doubling at either): 40, 100 and 33 are made from
    # the first template, 5 from the second
    assert step.n_traces == 5
    assert [t.uses for t in step._sizes.templates] == [3, 1]


def _counting_step(use):
    def make():
        model = nn.Linear(5, 1)
        opt = llgrad.optim.SGD(model.parameters(), 0.05)
        state = {"seen": 0}

        def step(x):
            n = x.shape[0]
            loss = model(x).pow(2).sum()
            if use == "float":
                loss = loss * (1.0 / float(n))
            elif use == "returned":
                loss = loss / n
            elif use == "len":
                loss = loss / len(x)
            elif use == "text":
                state["tag"] = f"batch of {n}"
            opt.zero_grad()
            loss.backward()
            opt.step()
            return (loss, n) if use == "returned" else loss
        return step, list(model.parameters())
    return make


def _x_batch(rng, b):
    return (llgrad.tensor(rng.standard_normal((b, 5)).astype(np.float32)),)


@pytest.mark.parametrize("use", ["float", "returned", "len", "text"])
def test_a_size_used_as_a_plain_number_traces_each_size(use):
    # (each size's own trace: the loss scaled by 1/n, n returned, ... equal eager's)
    step = _same(_counting_step(use), _x_batch, sizes=[4, 4, 6, 9, 9, 12])
    # (a size returned as it is comes out of a template as the new size: `_same` checks it
    # against eager's n at every call)
    assert bool(step._sizes.templates) == (use == "returned")
    if use in ("float", "len"):
        # (the first call meets a fresh optimiser and runs eagerly: 4 traces at its second,
        # and 6's first trace, handed n as a SymInt, is done again with ints)
        assert step.n_traces == 5


def test_a_slice_clamped_at_a_smaller_size_traces_again():
    def make():
        model = nn.Linear(5, 1)
        opt = llgrad.optim.SGD(model.parameters(), 0.05)

        def step(x):
            loss = model(x[:20]).pow(2).mean()      # 20 rows at 32 and 48; all 8 at 8
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step, list(model.parameters())
    step = _same(make, _x_batch, sizes=[32, 32, 48, 64, 8, 12, 40])
    # 32, 48 (20 rows at both; 64 too); 8 and 12 (all rows at both: a template whose slice
    # ends at the size, which 40's clamp does not fit; 40 runs 32's and 48's)
    assert step.n_traces == 4


def test_sequence_first_layouts_and_transposed_inputs():
    def make():
        rnn_in = nn.Linear(6, 6)
        opt = llgrad.optim.SGD(rnn_in.parameters(), 0.05)

        def step(x, w):                 # x: (T, B, 6), w: a transposed (B, 6) view
            h = llgrad.tanh(rnn_in(x)).sum(0) * w
            loss = h.pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step, list(rnn_in.parameters())

    def batch(rng, b):
        return (llgrad.tensor(rng.standard_normal((4, b, 6)).astype(np.float32)),
                llgrad.tensor(rng.standard_normal((6, b)).astype(np.float32)).t())
    step = _same(make, batch)
    assert step.n_traces == 2


def test_dynamic_false_and_the_environment_switch_trace_every_size(monkeypatch):
    step = _same(_mlp_step, _mlp_batch, sizes=[4, 4, 6, 9, 12], dynamic=False)
    assert step.n_traces == 4
    monkeypatch.setenv("LLGRAD_DYNAMIC_SIZES", "0")
    step = _same(_mlp_step, _mlp_batch, sizes=[4, 4, 6, 9, 12])
    assert step.n_traces == 4


def test_a_python_counter_of_rows_stays_exact():
    # a count the step keeps of the rows it saw (a Python number in the state)
    def make():
        model = nn.Linear(5, 1)
        opt = llgrad.optim.SGD(model.parameters(), 0.05)
        stats = {"rows": 0}

        def step(x):
            stats["rows"] += x.shape[0]
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss, stats["rows"]
        return step, list(model.parameters())
    _same(make, _x_batch, sizes=[4, 6, 9, 9, 12, 4])


def test_dump_shows_the_template_with_the_size_as_a_symbol():
    model = nn.Linear(4, 2)
    f = llgrad.compile(lambda x: F.relu(model(x)).sum())
    for b in (3, 5, 9):
        f(llgrad.randn(b, 4))
    text = f.dump(llgrad.randn(9, 4)).split("== size template")[1]
    assert "made at sizes 3 and 5 of s0" in text and "served 1 size(s)" in text
    assert "%x: f32[s0,4]{4,1}" in text and ": f32[2,s0]{1,2}" in text     # (a transpose)
    assert "size=(s0,2)" in text                # (an attribute: the backward's expand)


def test_state_changed_between_calls_at_sizes_made_from_a_template():
    # an lr a scheduler changes, a hook registered later, a NumPy array the step reads as a
    # tensor and rewritten between calls, a float attribute: each call at a new size, made
    # from a template where the state lets it, against eager's
    table = np.linspace(0.5, 1.5, 3).astype(np.float32)

    def make():
        model = nn.Sequential(nn.Linear(13, 26), nn.Tanh(), nn.Linear(26, 3))
        model.scale = 1.0
        opt = llgrad.optim.SGD(model.parameters(), 0.1, momentum=0.9)
        sched = llgrad.optim.lr_scheduler.ExponentialLR(opt, 0.9)
        weights = llgrad.from_numpy(table)      # (shares the array's memory)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x) * model.scale, y, weight=weights)
            loss.backward()
            opt.step()
            sched.step()
            return loss
        return step, list(model.parameters()), model

    eager_out, got_out = [], []
    for compiled, out in ((False, eager_out), (True, got_out)):
        llgrad.manual_seed(0)
        table[:] = np.linspace(0.5, 1.5, 3)
        step, params, model = make()
        if compiled:
            step = llgrad.compile(step)
        rng = np.random.default_rng(0)
        for k, b in enumerate([16, 16, 24, 40, 7, 33, 9, 50]):
            if k == 4:
                params[0].register_hook(lambda g: g * 0.5)
                model.scale = 2.0
            if k == 5:
                table[1] = 3.0
            out.append(step(*_mlp_batch(rng, b)).item())
        out += [float(p.detach().sum()) for p in params]
    np.testing.assert_allclose(got_out, eager_out, rtol=2e-5, atol=1e-6)
    assert sum(t.uses for t in step._sizes.templates) >= 2     # (40, and 9 or 50)
