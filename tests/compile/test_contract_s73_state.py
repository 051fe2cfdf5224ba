"""Compile-contract adversary s73: state changed between calls of a compiled function (module
attributes, submodules, parameters, buffers, freezing, hooks, optimiser groups and state):
torch, llgrad eagerly and llgrad.compile run the same calls and changes and every
observation (results, .grad, parameters, optimiser state) must match
(contract_harness_sweep7.runs). Inputs, captured containers and RNG: _b.py."""
import pytest
from contract_harness_sweep7 import runs

torch = pytest.importorskip("torch")


def _net(lib, n_in=3, n_out=2):
    lib.manual_seed(0)
    m = lib.nn.Linear(n_in, n_out)
    with lib.no_grad():
        m.weight.copy_(lib.arange(n_in * n_out * 1.0).reshape(n_out, n_in) / 7 - 0.3)
        m.bias.copy_(lib.arange(n_out * 1.0) / 3 - 0.2)
    return m


def _x(lib, k, n=3, rows=4):
    return lib.arange(rows * n * 1.0).reshape(rows, n) / (5 + k) - 0.5


def _step_run(lib, wrap, see, model, between, calls=5, opt=None, loss_of=None):
    """A training step compiled: zero_grad, loss, backward, (step); `between(i)` first."""
    def step(x):
        if opt is not None:
            opt.zero_grad()
        out = model(x)
        loss = loss_of(out) if loss_of else (out * out).sum()
        loss.backward()
        if opt is not None:
            opt.step()
        return loss, out
    cf = wrap(step)
    for i in range(calls):
        between(i)
        loss, out = cf(_x(lib, i))
        see(loss, out, *[p for p in model.parameters()],
            *[p.grad for p in model.parameters() if p.grad is not None])


# ---- module attributes read in forward --------------------------------------------------------
def _scaled(lib, attrs):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = _net(lib)
            for k, v in attrs.items():
                setattr(self, k, v)

        def forward(self, x):
            y = self.fc(x) * self.scale
            if self.use_bias:
                y = y + self.offset
            for _ in range(self.reps):
                y = y.tanh()
            return y
    return M()


@pytest.mark.parametrize("change", ["scale", "use_bias", "reps", "offset_tensor", "all"])
def test_plain_attributes_read_in_forward_change_between_calls(change):
    def scenario(lib, wrap, see):
        m = _scaled(lib, dict(scale=1.5, use_bias=True, reps=1, offset=0.25))

        def between(i):
            if change in ("scale", "all"):
                m.scale = [1.5, -2.0, 0.5, 3, 1.5][i]
            if change in ("use_bias", "all"):
                m.use_bias = bool(i % 2 == 0)
            if change in ("reps", "all"):
                m.reps = [1, 2, 0, 2, 1][i]
            if change in ("offset_tensor", "all"):
                m.offset = lib.tensor([0.25, -1.0]) * i if i % 2 else 0.25 * i
        _step_run(lib, wrap, see, m, between)
    runs(scenario, torch)


@pytest.mark.parametrize("new", ["Tanh", "ReLU", "Identity", "Sigmoid_then_back"])
def test_activation_submodule_swapped_between_calls(new):
    def scenario(lib, wrap, see):
        m = lib.nn.Sequential(_net(lib), lib.nn.GELU(), _net(lib, 2, 2))

        def between(i):
            if i == 2:
                m[1] = getattr(lib.nn, new.split("_")[0])()
            if i == 4 and new.endswith("back"):
                m[1] = lib.nn.GELU()
        _step_run(lib, wrap, see, m, between)
    runs(scenario, torch)


def test_named_submodule_attribute_swapped_for_one_with_other_weights():
    def scenario(lib, wrap, see):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.a, self.b = _net(lib), _net(lib)
                with lib.no_grad():
                    self.b.weight.mul_(-1)
                self.head = self.a

            def forward(self, x):
                return self.head(x).relu()
        m = M()

        def between(i):
            m.head = m.b if i % 2 else m.a
        _step_run(lib, wrap, see, m, between)
    runs(scenario, torch)


@pytest.mark.parametrize("shape", ["same", "other_rows"])
def test_parameter_replaced_between_calls(shape):
    def scenario(lib, wrap, see):
        m = _net(lib)

        def between(i):
            if i in (2, 4):
                rows = 2 if shape == "same" else 2 + i // 2
                m.weight = lib.nn.Parameter(lib.ones(rows, 3) * (0.1 * i))
                m.bias = lib.nn.Parameter(lib.zeros(rows) + 0.5)
        _step_run(lib, wrap, see, m, between)
    runs(scenario, torch)


def test_buffer_registered_between_calls_is_read_by_forward():
    def scenario(lib, wrap, see):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = _net(lib)

            def forward(self, x):
                y = self.fc(x)
                if hasattr(self, "shift"):
                    y = y - self.shift
                    self.shift.mul_(0.5)
                return y
        m = M()

        def between(i):
            if i == 2:
                m.register_buffer("shift", lib.tensor([1.0, -1.0]))
            if i == 4:
                m.shift = lib.tensor([3.0, 3.0])
        _step_run(lib, wrap, see, m, between)
        see(m.shift, dict(m.named_buffers()))
    runs(scenario, torch)


@pytest.mark.parametrize("which", ["first", "bias_only", "refreeze"])
def test_freezing_layers_between_calls_of_a_training_step(which):
    def scenario(lib, wrap, see):
        m = lib.nn.Sequential(_net(lib), lib.nn.Tanh(), _net(lib, 2, 2))
        opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def between(i):
            if i == 2:
                if which == "bias_only":
                    m[2].bias.requires_grad_(False)
                else:
                    m[0].requires_grad_(False)
            if i == 4 and which == "refreeze":
                m[0].requires_grad_(True)
        _step_run(lib, wrap, see, m, between, opt=opt)
    runs(scenario, torch)


def test_dropout_p_changed_and_eval_toggled_between_calls():
    def scenario(lib, wrap, see):
        m = lib.nn.Sequential(_net(lib), lib.nn.Dropout(0.5))

        def between(i):
            m[1].p = [0.5, 0.0, 0.9, 0.2, 1.0][i]
            m.train(i != 3)
        _step_run(lib, wrap, see, m, between)
    runs(scenario, torch)


def test_eval_and_train_called_inside_the_compiled_step():
    def scenario(lib, wrap, see):
        m = lib.nn.Sequential(_net(lib, 3, 4), lib.nn.BatchNorm1d(4), lib.nn.Dropout(0.3))

        def step(x, evaluate):
            if evaluate:
                m.eval()
                with lib.no_grad():
                    out = m(x)
                m.train()
                return out
            out = m(x)
            out.pow(2).mean().backward()
            return out
        cf = wrap(step)
        for i in range(5):
            out = cf(_x(lib, i), i % 2 == 1)
            see(out, m.training, m[1].running_mean, m[1].running_var,
                m[1].num_batches_tracked, m[0].weight.grad)
    runs(scenario, torch)


@pytest.mark.parametrize("kind", ["forward_pre", "forward", "full_backward", "tensor"])
def test_hooks_added_and_removed_between_calls(kind):
    def scenario(lib, wrap, see):
        m = lib.nn.Sequential(_net(lib), lib.nn.Tanh())
        calls, handle = [], []

        def add(i):
            k = 1.0 + i
            if kind == "forward_pre":
                return m[0].register_forward_pre_hook(lambda mod, a: (a[0] * k,))
            if kind == "forward":
                return m[0].register_forward_hook(lambda mod, a, o: o - k)
            if kind == "full_backward":
                return m[0].register_full_backward_hook(
                    lambda mod, gi, go: calls.append(k) or (gi[0] * k,))
            return m[0].weight.register_hook(lambda g: calls.append(k) or g * k)

        def between(i):
            if i in (1, 3):
                handle.append(add(i))
            if i in (2, 4):
                handle.pop().remove()
            for p in m.parameters():
                p.grad = None

        def step(x):
            out = m(x)
            out.sum().backward()
            return out
        cf = wrap(step)
        for i in range(6):
            between(i)
            x = _x(lib, i).requires_grad_()
            out = cf(x)
            see(out, x.grad, m[0].weight.grad, list(calls))
    runs(scenario, torch)


# ---- the optimiser between calls ---------------------------------------------------------------
def _opt_run(lib, wrap, see, opt_of, between, calls=6):
    m = lib.nn.Sequential(_net(lib), lib.nn.Tanh(), _net(lib, 2, 2))
    opt = opt_of(lib, m)
    _step_run(lib, wrap, see, m, lambda i: between(lib, m, opt, i), calls=calls, opt=opt)
    see([{k: v for k, v in s.items()} for s in opt.state.values()],
        [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups])


def _adam(lib, m):
    return lib.optim.Adam(m.parameters(), lr=0.01)


def _lr_and_wd_and_betas(lib, m, opt, i):
    g = opt.param_groups[0]
    g["lr"] = 0.01 * (i + 1)
    g["weight_decay"] = [0.0, 0.1][i % 2]
    g["betas"] = [(0.9, 0.999), (0.5, 0.6), (0.0, 0.9)][i % 3]


def _lr_as_a_tensor_edited_in_place(lib, m, opt, i):
    if i == 0:
        opt.param_groups[0]["lr"] = lib.tensor(0.01)
    else:
        opt.param_groups[0]["lr"].mul_(2.0)


def _group_added(lib, m, opt, i):
    if i == 0:
        for p in m[2].parameters():
            p.requires_grad_(False)
    if i == 2:
        for p in m[2].parameters():
            p.requires_grad_(True)
        opt.add_param_group({"params": list(m[2].parameters()), "lr": 0.1})


def _sgd_first_layer(lib, m):
    return lib.optim.SGD(m[0].parameters(), lr=0.1, momentum=0.9)


def _zero_grad_alternates(lib, m, opt, i):
    z = type(opt).zero_grad
    opt.zero_grad = lambda: z(opt, set_to_none=bool(i % 2))     # (rebound each call)


def _state_dict_reloaded(lib, m, opt, i):
    if i == 1:
        _state_dict_reloaded.saved = opt.state_dict()
    if i == 3:
        opt.load_state_dict(_state_dict_reloaded.saved)
    if i == 4:
        fresh = type(opt)(m.parameters(), lr=0.05)
        opt.load_state_dict(fresh.state_dict())


def _sgd(lib, m):
    return lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, nesterov=True)


def _params_of_group_swapped(lib, m, opt, i):
    # (the group's list of params edited in place: the step updates others)
    if i == 2:
        opt.param_groups[0]["params"] = list(m[2].parameters())
    if i == 4:
        opt.param_groups[0]["params"].extend(m[0].parameters())


@pytest.mark.parametrize("opt_of,between", [
    (_adam, _lr_and_wd_and_betas), (_adam, _lr_as_a_tensor_edited_in_place),
    (_sgd_first_layer, _group_added), (_adam, _zero_grad_alternates),
    (_adam, _state_dict_reloaded), (_sgd, _state_dict_reloaded),
    (_sgd, _params_of_group_swapped)],
    ids=["adam_lr_wd_betas", "adam_tensor_lr", "sgd_add_param_group",
         "adam_zero_grad_alternates", "adam_load_state_dict", "sgd_load_state_dict",
         "sgd_group_params_swapped"])
def test_optimiser_changed_between_compiled_steps(opt_of, between):
    runs(lambda lib, wrap, see: _opt_run(lib, wrap, see, opt_of, between), torch)


@pytest.mark.parametrize("sched", ["StepLR", "ExponentialLR", "OneCycleLR", "plateau"])
def test_scheduler_steps_between_compiled_steps(sched):
    def scenario(lib, wrap, see):
        m = _net(lib)
        opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)
        S = lib.optim.lr_scheduler
        s = {"StepLR": lambda: S.StepLR(opt, 2, gamma=0.3),
             "ExponentialLR": lambda: S.ExponentialLR(opt, 0.5),
             "OneCycleLR": lambda: S.OneCycleLR(opt, max_lr=0.5, total_steps=10),
             "plateau": lambda: S.ReduceLROnPlateau(opt, patience=0, factor=0.5)}[sched]()
        last = []

        def between(i):
            if i:
                s.step(*([last[-1]] if sched == "plateau" else []))

        def loss_of(out):
            v = (out * out).sum() * 0 + 5.0 + out.sum() * 0   # (a plateau: same each step)
            last.append(v.item() if sched == "plateau" else 0)
            return (out * out).sum() + v
        _step_run(lib, wrap, see, m, between, calls=6, opt=opt, loss_of=loss_of)
        see(opt.param_groups[0]["lr"])
    runs(scenario, torch)
