"""Compile-contract adversary s73 (e): training-loop state between calls of a compiled step:
BatchNorm's momentum and statistics reset, tied weights made between calls, an EMA's decay,
gradient accumulation chosen by an argument, a LambdaLR stepped inside reading a closure,
clip_grad_norm_ with a max_norm from a dict, a .grad the step reads, an input that is a
view of a non-leaf written inside: torch, llgrad eagerly and llgrad.compile
(contract_harness_sweep7.runs)."""
import pytest
from contract_harness_sweep7 import runs

torch = pytest.importorskip("torch")


def _a(lib, n=4, k=0.0):
    return lib.arange(n * 1.0) / 3 - 0.5 + k


def _lin(lib, i, o, k=0.0):
    m = lib.nn.Linear(i, o)
    with lib.no_grad():
        m.weight.copy_(lib.arange(i * o * 1.0).reshape(o, i) / 7 - 0.3 + k)
        m.bias.copy_(lib.arange(o * 1.0) / 3 - 0.2)
    return m


def _xs(lib, i, rows=4, n=3):
    return lib.arange(rows * n * 1.0).reshape(rows, n) / (5 + i) - 0.5


@pytest.mark.parametrize("change", ["momentum", "momentum_none", "reset", "track_off"])
def test_batchnorm_settings_changed_between_calls(change):
    def scenario(lib, wrap, see):
        m = lib.nn.Sequential(_lin(lib, 3, 4), lib.nn.BatchNorm1d(4))
        bn = m[1]

        def step(x):
            y = m(x)
            y.pow(2).mean().backward()
            return y
        cf = wrap(step)
        for i in range(5):
            if i == 2:
                if change == "momentum":
                    bn.momentum = 0.5
                elif change == "momentum_none":
                    bn.momentum = None
                elif change == "reset":
                    bn.reset_running_stats()
                else:
                    bn.track_running_stats = False
            see(cf(_xs(lib, i)), bn.running_mean, bn.running_var, bn.num_batches_tracked,
                bn.weight.grad)
    runs(scenario, torch)


def test_weights_tied_between_calls():
    def scenario(lib, wrap, see):
        enc, dec = _lin(lib, 3, 3), _lin(lib, 3, 3, 0.2)
        opt = lib.optim.SGD([*enc.parameters(), *dec.parameters()], lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = dec(enc(x).tanh()).pow(2).sum()
            loss.backward()
            opt.step()
            return loss
        cf = wrap(step)
        for i in range(5):
            if i == 2:
                dec.weight = enc.weight
            see(cf(_xs(lib, i)), enc.weight, dec.weight, enc.weight.grad, dec.bias)
    runs(scenario, torch)


def test_ema_decay_attribute_changed_between_calls():
    def scenario(lib, wrap, see):
        m, ema = _lin(lib, 3, 2), _lin(lib, 3, 2, 1.0)
        cfg = type("Cfg", (), {})()
        cfg.decay = 0.9

        @lib.no_grad()
        def update():
            for e, p in zip(ema.parameters(), m.parameters()):
                e.mul_(cfg.decay).add_(p, alpha=1 - cfg.decay)
            return ema(_xs(lib, 0)).sum()
        cf = wrap(update)
        for i in range(5):
            cfg.decay = [0.9, 0.5, 0.99, 0.0, 1.0][i]
            with lib.no_grad():
                m.weight.add_(0.1)
            see(cf(), *ema.parameters())
    runs(scenario, torch)


def test_gradient_accumulation_step_chosen_by_an_argument():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        opt = lib.optim.Adam(m.parameters(), lr=0.05)

        def step(x, apply):
            loss = m(x).pow(2).mean() / 2
            loss.backward()
            if apply:
                opt.step()
                opt.zero_grad()
            return loss
        cf = wrap(step)
        for i in range(7):
            see(cf(_xs(lib, i), i % 2 == 1), m.weight, m.weight.grad)
    runs(scenario, torch)


def test_lambda_lr_stepped_inside_reads_a_closure_changed_between_calls():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        box = {"f": 1.0}
        sched = lib.optim.lr_scheduler.LambdaLR(opt, lambda ep: box["f"] / (ep + 1))

        def step(x):
            opt.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            opt.step()
            sched.step()
            return loss
        cf = wrap(step)
        for i in range(5):
            if i == 2:
                box["f"] = 3.0
            see(cf(_xs(lib, i)), m.weight, opt.param_groups[0]["lr"])
    runs(scenario, torch)


def test_clip_grad_norm_with_max_norm_from_a_dict_changed_between_calls():
    def scenario(lib, wrap, see):
        m = _lin(lib, 3, 2)
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        cfg = {"clip": 0.5}

        def step(x):
            opt.zero_grad()
            loss = m(x).pow(2).sum()
            loss.backward()
            norm = lib.nn.utils.clip_grad_norm_(m.parameters(), cfg["clip"])
            opt.step()
            return loss, norm
        cf = wrap(step)
        for i in range(5):
            cfg["clip"] = [0.5, 100.0, 0.01, 2.0, 0.5][i]
            see(*cf(_xs(lib, i)), m.weight, m.bias.grad)
    runs(scenario, torch)


def test_step_reads_a_grad_the_caller_sets_or_clears_between_calls():
    def scenario(lib, wrap, see):
        w = lib.tensor([1.0, -2.0, 0.5], requires_grad=True)

        def step(x):
            y = (x * w).sum()
            y.backward()
            with lib.no_grad():
                w.sub_(0.1 * w.grad)
            return y
        cf = wrap(step)
        for i in range(6):
            if i == 2:
                w.grad = None
            if i == 3:
                w.grad = lib.full((3,), 10.0)
            if i == 4:
                w.grad.zero_()
            see(cf(_a(lib, 3, i)), w, w.grad)
    runs(scenario, torch)


def test_input_a_view_of_a_non_leaf_written_inside_then_backpropagated_by_the_caller():
    def scenario(lib, wrap, see):
        def f(v, k):
            v.mul_(k)
            return v.sum()
        cf = wrap(f)
        a = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        for i in range(4):
            b = a * 1
            v = b[1:] if i % 2 else b[:2]
            s = cf(v, float(i + 2))
            (b.pow(2).sum() + s).backward()
            see(s, b, a.grad)
    runs(scenario, torch)


def test_frozen_by_attribute_and_submodule_deleted_between_calls():
    def scenario(lib, wrap, see):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc, self.extra = _lin(lib, 3, 2), _lin(lib, 2, 2, 0.5)

            def forward(self, x):
                y = self.fc(x)
                extra = getattr(self, "extra", None)
                return extra(y) if extra is not None else y
        m = M()
        cf = wrap(lambda x: m(x).pow(2).sum())
        for i in range(5):
            if i == 1:
                m.fc.weight.requires_grad = False
            if i == 2:
                del m.extra
            if i == 3:
                m.fc.weight.requires_grad = True
                m.extra = None
            if i == 4:
                m.extra = _lin(lib, 2, 2, -0.5)
            cf(_xs(lib, i)).backward()
            see(m.fc.weight.grad, m.fc.bias.grad)
    runs(scenario, torch)
