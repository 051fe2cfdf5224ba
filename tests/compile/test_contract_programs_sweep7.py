"""More differential programs of the compile contract (seventh round), each run with torch
(the oracle), llgrad eagerly and llgrad.compile over several calls with the program's state
changed between them: aliasing, errors midway, optimisers, hooks, Python state read and
written inside, nested and recursive compiled functions. Every observation must match (or
the call runs eagerly with a warning naming the user's line)."""
import dataclasses
import enum
import importlib
import itertools
import math
import warnings

import pytest
from contract_harness_sweep7 import runs

torch = pytest.importorskip("torch")

def _mk_bn(lib):
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Dropout(0.3), lib.nn.BatchNorm1d(4), lib.nn.Linear(4, 2))
    x = lib.arange(12.).reshape(4, 3) / 10
    return m, x


def _mk_linear(lib):
    lib.manual_seed(0)
    m = lib.nn.Linear(3, 2)
    x = lib.arange(12.).reshape(4, 3) / 10; y = lib.tensor([0, 1, 0, 1])
    return m, x, y


def _mk_relu(lib):
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Linear(4, 2))
    x = lib.arange(12.).reshape(4, 3) / 10; y = lib.tensor([0, 1, 0, 1])
    return m, x, y


def _mk_tanh(lib):
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2))
    x = lib.arange(12.).reshape(4, 3) / 10; y = lib.tensor([0, 1, 0, 1])
    return m, x, y


def the_same_tensor_passed_twice_and_written_in_place(lib, wrap, see):
    # same tensor passed twice, written in place via one name
    def f(a, b):
        a.mul_(2)
        return a + b
    cf = wrap(f)
    x = lib.ones(3)
    see(cf(x, x), x)
    y = lib.ones(3); z = lib.ones(3)
    see(cf(y, z), y, z)
    see(cf(x, x), x)


def a_returned_view_of_an_intermediate_written_after_the_call(lib, wrap, see):
    def f(a):
        t = a * 2
        v = t[1:]
        return t, v
    cf = wrap(f)
    for k in range(3):
        a = lib.arange(4.) + k
        t, v = cf(a)
        v.mul_(10)
        see(t, v, t._version, v._version)


def closures_and_lists_over_tensors_rebound_between_calls(lib, wrap, see):
    w = [lib.ones(3)]
    t = lib.ones(3) * 2
    def f(x):
        return x * t + w[0]
    cf = wrap(f)
    see(cf(lib.ones(3)))
    t = lib.ones(3) * 5
    see(cf(lib.ones(3)))
    w[0] = lib.zeros(3)
    see(cf(lib.ones(3)))
    t.mul_(2)
    see(cf(lib.ones(3)))


def python_control_flow_on_values_items_lists_and_rows(lib, wrap, see):
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x - 1
    cf = wrap(f)
    see(cf(lib.ones(2)), cf(-lib.ones(2)), cf(lib.ones(2)))
    def g(x):
        return x * x.sum().item() + len(x.tolist())
    cg = wrap(g)
    see(cg(lib.ones(2)), cg(lib.ones(3)), cg(lib.arange(3.)))
    def h(x):
        s = 0
        for r in x:
            s = s + r * 2
        return s
    ch = wrap(h)
    see(ch(lib.ones(2, 2)), ch(lib.ones(3, 2)), ch(lib.arange(4.).reshape(2, 2)))


def an_error_midway_leaves_the_writes_and_python_effects_of_eager(lib, wrap, see):
    state = {"n": 0}
    log = []
    def f(x, y):
        x.add_(1)
        state["n"] += 1
        log.append(x.sum().item())
        z = x @ y   # raises on bad shapes
        state["after"] = True
        return z
    cf = wrap(f)
    x = lib.ones(2, 3); y = lib.ones(3, 2)
    see(cf(x, y), x, dict(state), list(log))
    try:
        cf(x, lib.ones(4, 2))
    except (RuntimeError, ValueError, IndexError, TypeError, KeyError, AssertionError) as e:
        see(e)
    see(x, dict(state), list(log))
    see(cf(x, y), x, dict(state), list(log))


def nested_compiled_functions_and_recursion(lib, wrap, see):
    @wrap
    def inner(x, k):
        return x * k
    @wrap
    def outer(x):
        return inner(x, 2) + inner(x, 3)
    see(outer(lib.ones(2)), inner(lib.ones(2), 5), outer(lib.ones(3)))
    def fact(x, n):
        return x if n == 0 else fact(x * n, n - 1)
    cf = wrap(fact)
    see(cf(lib.ones(2), 3), cf(lib.ones(2), 4))


def a_compiled_module_method_with_attributes_and_weights_changed(lib, wrap, see):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(3, 2)
            self.scale = 1.0
        def forward(self, x):
            return self.lin(x) * self.scale
    m = M()
    m.forward = wrap(m.forward)
    x = lib.ones(4, 3)
    see(m(x))
    m.scale = 2.0
    see(m(x))
    with lib.no_grad():
        m.lin.weight.mul_(2)
    see(m(x))
    m.lin.weight.requires_grad_(False)
    out = m(x); see(out)
    out.sum().backward(); see(m.lin.weight.grad, m.lin.bias.grad)


def backward_twice_inside_with_retain_graph(lib, wrap, see):
    def f(x):
        y = (x * x).sum()
        y.backward(retain_graph=True)
        y.backward()
        return x.grad.clone()
    cf = wrap(f)
    x = lib.ones(3, requires_grad=True)
    see(cf(x), x.grad)
    see(cf(x), x.grad)
    x.grad = None
    see(cf(x), x.grad)


def an_sgd_step_inside_with_lr_zero_grad_and_requires_grad_changed(lib, wrap, see):
    lib.manual_seed(0)
    m = lib.nn.Linear(3, 2)
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    x = lib.ones(4, 3); y = lib.tensor([0, 1, 0, 1])
    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss
    cs = wrap(step)
    for k in range(3):
        see(cs(x, y), m.weight, m.bias)
    opt.param_groups[0]["lr"] = 0.5
    see(cs(x, y), m.weight)
    opt.zero_grad(set_to_none=False)
    see(m.weight.grad)
    see(cs(x, y), m.weight)
    m.weight.requires_grad_(False)
    see(cs(x, y), m.weight, m.bias)


def python_number_arguments_of_each_type_and_keyword(lib, wrap, see):
    def f(x, k):
        return x * k
    cf = wrap(f)
    x = lib.arange(3)
    see(cf(x, 2), cf(x, 2.5), cf(x, True), cf(x, 2), cf(x.float(), 2), cf(x, lib.tensor(2.5)), cf(x, lib.tensor(3)))
    def g(x, k=None, flag=False, s="a"):
        if k is None: k = 1
        y = x * k
        if flag: y = -y
        if s == "b": y = y + 1
        return y
    cg = wrap(g)
    see(cg(x), cg(x, 2), cg(x, None, True), cg(x, s="b"), cg(x, flag=True, s="b"), cg(x))


def a_grad_read_inside_then_accumulated_outside(lib, wrap, see):
    def f(x):
        return x.grad, x.grad is None
    cf = wrap(f)
    x = lib.ones(2, requires_grad=True)
    see(cf(x))
    (x * 3).sum().backward()
    g, n = cf(x); see(g, n)
    (x * 3).sum().backward()
    see(g)   # accumulated in place in torch
    x.grad = None
    see(cf(x))


def tensors_appended_to_a_captured_list_and_dict(lib, wrap, see):
    acc = []
    d = {}
    def f(x):
        y = x * 2
        acc.append(y)
        d["last"] = y
        d.setdefault("first", y)
        return y.sum()
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.ones(2) * k))
    see(acc, d, acc[0] is d["first"], acc[-1] is d["last"])


def a_compiled_function_called_from_a_backward_hook(lib, wrap, see):
    calls = []
    @wrap
    def scale(g):
        return g * 2
    def f(x, w):
        return (x * w).sum()
    cf = wrap(f)
    w = lib.ones(3, requires_grad=True)
    def hook(g):
        calls.append(g.clone())
        return scale(g)
    w.register_hook(hook)
    for k in range(3):
        x = lib.arange(3.) + k
        out = cf(x, w)
        out.backward()
        see(out, w.grad, len(calls))


def train_eval_momentum_and_tracking_of_batch_norm_changed_between_calls(lib, wrap, see):
    m = lib.nn.Sequential(lib.nn.Linear(3, 3), lib.nn.Dropout(0.5), lib.nn.BatchNorm1d(3))
    def f(x):
        return m(x)
    cf = wrap(f)
    x = lib.arange(12.).reshape(4, 3)
    see(cf(x), m[2].running_mean, m[2].num_batches_tracked)
    m.eval()
    see(cf(x), m[2].running_mean)
    m.train()
    see(cf(x), m[2].running_mean, m[2].num_batches_tracked)
    m[2].momentum = None
    see(cf(x), m[2].running_mean)
    m[2].track_running_stats = False
    see(cf(x), m[2].running_mean)
    with lib.no_grad():
        see(cf(x))


def second_derivatives_inside_by_autograd_grad(lib, wrap, see):
    def f(x):
        y = x.sin()
        g1, = lib.autograd.grad(y.sum(), x, create_graph=True)
        g2, = lib.autograd.grad(g1.sum(), x, retain_graph=True)
        return y, g1, g2
    cf = wrap(f)
    for k in range(3):
        x = (lib.arange(3.) * (k + 1)).requires_grad_()
        y, g1, g2 = cf(x)
        see(y, g1, g2, g1.requires_grad, g2.requires_grad)
        (y.sum() + g1.sum()).backward()
        see(x.grad)


def gradient_accumulation_over_calls_with_both_zero_grad_kinds(lib, wrap, see):
    m, x, y = _mk_relu(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.1)
    def step(x, y, k):
        loss = lib.nn.functional.cross_entropy(m(x), y) / 2
        loss.backward()
        if k % 2 == 1:
            opt.step()
            opt.zero_grad(set_to_none=(k % 4 == 1))
        return loss
    cs = wrap(step)
    for k in range(6):
        see(cs(x, y, k), m[0].weight, m[0].weight.grad)


def adamw_with_a_scheduler_and_param_group_options_changed(lib, wrap, see):
    m, x, y = _mk_relu(lib)
    opt = lib.optim.AdamW(m.parameters(), lr=0.01, weight_decay=0.1)
    sched = lib.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        n = lib.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        opt.step()
        return loss, n
    cs = wrap(step)
    for k in range(3):
        see(cs(x, y), m[0].weight); sched.step()
    opt.param_groups[0]["weight_decay"] = 0.0
    see(cs(x, y), m[0].weight)
    opt.param_groups[0]["betas"] = (0.5, 0.9)
    see(cs(x, y), m[0].weight)
    opt.param_groups[0]["maximize"] = True
    see(cs(x, y), m[0].weight)


def a_param_group_added_and_optimizer_state_loaded_between_calls(lib, wrap, see):
    m, x, y = _mk_relu(lib)
    opt = lib.optim.SGD(m[0].parameters(), lr=0.1, momentum=0.9)
    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss
    cs = wrap(step)
    see(cs(x, y), m[0].weight, m[2].weight, m[2].weight.grad)
    opt.add_param_group({"params": m[2].parameters(), "lr": 0.05})
    see(cs(x, y), m[0].weight, m[2].weight)
    see(cs(x, y), m[0].weight, m[2].weight)
    sd = opt.state_dict()
    opt.param_groups[0]["nesterov"] = True
    see(cs(x, y), m[0].weight, m[2].weight)
    opt.load_state_dict(sd)
    see(cs(x, y), m[0].weight, m[2].weight)
    opt.state.clear()
    see(cs(x, y), m[0].weight, m[2].weight)


def asserts_raises_and_warnings_that_depend_on_values(lib, wrap, see):
    def f(x):
        assert x.sum() > 0, "need positive"
        if x.max() > 5:
            raise ValueError(f"too big {x.max().item()}")
        warnings.warn(f"sum is {x.sum().item()}")
        return x * 2
    cf = wrap(f)
    for v in [1., 2., -1., 7., 1.]:
        try:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                r = cf(lib.full((2,), v))
            see(r, [str(i.message) for i in w if not str(i.message).startswith("llgrad")])
        except (RuntimeError, ValueError, IndexError, TypeError, KeyError, AssertionError) as e:
            see(e)


def a_compiled_sequential_whose_layers_are_replaced(lib, wrap, see):
    m, x, _ = _mk_relu(lib)
    cm = wrap(m)
    see(cm(x))
    m[0].weight = lib.nn.Parameter(lib.ones(4, 3))
    see(cm(x))
    m[1] = lib.nn.Tanh()
    see(cm(x))
    m.append(lib.nn.Softmax(dim=1))
    see(cm(x))
    del m[3]
    see(cm(x))
    m[2].bias = None
    see(cm(x))
    m[0].weight.data = lib.zeros(4, 3)
    see(cm(x))
    m.half_flag = True
    see(cm(x.double()) if False else cm(x))
    m.double()
    see(cm(x.double()))


def python_values_read_out_of_tensors_and_returned(lib, wrap, see):
    names = ["a", "b", "c"]
    def f(x):
        i = x.argmax()
        return names[i], int(x.sum()), float(x[0]), bool(x[1] > 0), x.tolist(), f"{x.sum().item():.1f}", x[i.item()]
    cf = wrap(f)
    for v in ([1., -1., 2.], [3., 2., 1.], [0., 5., 1.], [1., -1., 2.]):
        see(cf(lib.tensor(v)))


def sizes_computed_from_items(lib, wrap, see):
    def f(x):
        n = int(x.sum().item())
        return lib.arange(n) * 2, x.topk(n % 3 + 1).values, x.repeat(n)[: n + 1]
    cf = wrap(f)
    for v in ([1., 1., 0.], [1., 1., 2.], [0., 0., 1.], [1., 1., 0.]):
        see(cf(lib.tensor(v)))


def an_index_list_built_from_values(lib, wrap, see):
    def f(x):
        idx = [i for i, v in enumerate(x.tolist()) if v > 0]
        return x[idx], x[lib.tensor(idx, dtype=lib.long)] if idx else x[:0]
    cf = wrap(f)
    for v in ([1., -1., 2.], [1., 2., 3.], [-1., -2., -3.], [1., -1., 2.]):
        see(cf(lib.tensor(v)))


def python_conversions_of_tensors(lib, wrap, see):
    def f(x):
        return math.floor(x.sum()), int(x.max()), float(x.mean()), x.sum().__round__() if hasattr(x, "__round__") else 0, complex(x[0]).real
    cf = wrap(f)
    for v in ([1.5, 3., 0.], [0., 2., 1.], [1.5, 3., 0.]):
        see(cf(lib.tensor(v)))


def cross_entropy_targets_in_and_out_of_range(lib, wrap, see):
    F = lib.nn.functional
    def f(x, t):
        return F.cross_entropy(x, t), F.nll_loss(x.log_softmax(1), t, ignore_index=1)
    cf = wrap(f)
    x = lib.arange(6.).reshape(2, 3)
    for t in ([0, 1], [2, 0], [1, 1], [0, 3], [0, -1], [0, 1]):
        try: see(cf(x, lib.tensor(t)))
        except (RuntimeError, ValueError, IndexError, TypeError, KeyError, AssertionError) as e: see(e)


def clip_grad_norm_with_error_if_nonfinite(lib, wrap, see):
    m = lib.nn.Linear(2, 2)
    def f(x):
        loss = (m(x) ** 2).sum()
        loss.backward()
        return lib.nn.utils.clip_grad_norm_(m.parameters(), 1.0, error_if_nonfinite=True)
    cf = wrap(f)
    for v in (1., 2., float("inf"), 1.):
        m.zero_grad()
        try: see(cf(lib.full((1, 2), v)), m.weight.grad)
        except (RuntimeError, ValueError, IndexError, TypeError, KeyError, AssertionError) as e: see(e, m.weight.grad)


def split_sizes_from_a_tensor(lib, wrap, see):
    def f(x, sizes):
        return x.split(sizes.tolist()), lib.split(x, 2), x.new_zeros(int(x.max()))
    cf = wrap(f)
    for sz in ([1, 2], [2, 1], [3, 0], [1, 2]):
        see(cf(lib.tensor([1., 2., 3.]) * sz[0], lib.tensor(sz)))


def python_containers_and_objects_read_inside(lib, wrap, see):
    cfg = {"scale": 2, "mode": "a"}
    items = [1.0, 2.0]
    s = {1}
    class C: pass
    obj = C(); obj.k = 3
    def f(x):
        y = x * cfg["scale"] * len(items) + sum(items)
        if 2 in s: y = y + 100
        if hasattr(obj, "extra"): y = y + obj.extra
        if getattr(obj, "k", 0) > 3: y = -y
        for k in sorted(cfg): y = y + len(k)
        return y
    cf = wrap(f)
    see(cf(lib.ones(2)))
    items.append(3.0); see(cf(lib.ones(2)))
    s.add(2); see(cf(lib.ones(2)))
    obj.extra = 5; see(cf(lib.ones(2)))
    obj.k = 4; see(cf(lib.ones(2)))
    cfg["new"] = 1; see(cf(lib.ones(2)))
    items[0] = 10.0; see(cf(lib.ones(2)))
    del obj.extra; see(cf(lib.ones(2)))
    s.discard(2); see(cf(lib.ones(2)))


def a_list_popped_inside(lib, wrap, see):
    queue = [lib.ones(2), lib.ones(2) * 2, lib.ones(2) * 3]
    def f(x):
        t = queue.pop()
        return x + t, len(queue)
    cf = wrap(f)
    see(cf(lib.ones(2)), cf(lib.ones(2)), cf(lib.ones(2)), queue)
    cnt = itertools.count()
    def g(x):
        return x * next(cnt)
    cg = wrap(g)
    see(cg(lib.ones(2)), cg(lib.ones(2)))


def an_objects_class_and_methods_changed(lib, wrap, see):
    class A:
        def scale(self): return 2
    class B(A):
        def scale(self): return 3
    o = A()
    def f(x):
        return x * o.scale() * (2 if isinstance(o, B) else 1)
    cf = wrap(f)
    see(cf(lib.ones(2)))
    o.__class__ = B
    see(cf(lib.ones(2)))
    A.scale = lambda self: 7
    o.__class__ = A
    see(cf(lib.ones(2)))
    o.scale = lambda: 11
    see(cf(lib.ones(2)))


def counters_and_state_dicts_updated_inside(lib, wrap, see):
    n = [0]
    def f(x):
        n[0] += 1
        return x * n[0]
    cf = wrap(f)
    see(cf(lib.ones(2)), cf(lib.ones(2)), cf(lib.ones(2)), n)
    state = {"t": lib.zeros(2)}
    def g(x):
        state["t"] = state["t"] + x
        return state["t"].sum()
    cg = wrap(g)
    see(cg(lib.ones(2)), cg(lib.ones(2)), cg(lib.ones(2)), state)


def adam_state_and_requires_grad_toggled_between_steps(lib, wrap, see):
    m, x, y = _mk_tanh(lib)
    opt = lib.optim.Adam(m.parameters(), lr=0.01)
    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss
    cs = wrap(step)
    see(cs(x, y))
    with lib.no_grad():
        see(cs(x, y) if False else 0)
    m[0].weight.requires_grad_(False)
    see(cs(x, y), m[0].weight, m[0].weight.grad)
    m[0].weight.requires_grad_(True)
    see(cs(x, y), m[0].weight, m[0].weight.grad)
    for p in m.parameters(): p.grad = None
    opt.state[m[2].weight]["step"] = lib.tensor(100.)
    see(cs(x, y), m[2].weight)
    m.eval()
    see(cs(x, y), m[2].weight)


def dtype_and_device_arguments(lib, wrap, see):
    def f(x, dtype=None, device="cpu"):
        return x.to(dtype=dtype, device=device) * 2 if dtype else x.to(device) * 3
    cf = wrap(f)
    x = lib.arange(3)
    see(cf(x), cf(x, lib.float64), cf(x, lib.float32), cf(x, dtype=lib.int16), cf(x, None, "cpu"), cf(x, lib.bool))


def varargs_and_kwargs_of_changing_length(lib, wrap, see):
    def f(*xs, scale=1.0, **kw):
        out = sum(xs) * scale
        for k, v in sorted(kw.items()):
            out = out + v
        return out
    cf = wrap(f)
    a = lib.ones(2)
    see(cf(a), cf(a, a), cf(a, a, a, scale=2.0), cf(a, b=a), cf(a, b=a, c=a * 2), cf(a, c=a, b=a * 3))


def grad_modes_around_the_call(lib, wrap, see):
    p = lib.nn.Parameter(lib.ones(3))
    def f(x):
        return (x * p).sum()
    cf = wrap(f)
    for k in range(3):
        out = cf(lib.ones(3) * k); out.backward()
        see(out, p.grad)
    with lib.inference_mode():
        out = cf(lib.ones(3)); see(out, out.is_inference())
    with lib.no_grad():
        out = cf(lib.ones(3)); see(out, out.requires_grad)
    lib.set_grad_enabled(False)
    out = cf(lib.ones(3)); see(out)
    lib.set_grad_enabled(True)
    out = cf(lib.ones(3)); out.backward(); see(out, p.grad)


def a_compiled_module_through_train_eval_state_dict_and_double(lib, wrap, see):
    m, x = _mk_bn(lib)
    cm = wrap(m)
    see(cm(x), m[2].running_mean)
    cm.eval(); see(cm(x), m.training, m[1].training)
    cm.train(); see(cm(x), m[2].running_var)
    sd = {k: v.clone() for k, v in m.state_dict().items()}
    see(cm(x))
    m.load_state_dict(sd); see(cm(x), m[2].num_batches_tracked)
    m[2].reset_running_stats(); see(cm(x), m[2].running_mean)
    m.requires_grad_(False); out = cm(x); see(out)
    m.requires_grad_(True); out = cm(x); out.sum().backward(); see(m[3].weight.grad)
    m.zero_grad(); see(m[3].weight.grad)
    m.double(); see(cm(x.double()))


def a_module_that_keeps_state_between_forwards(lib, wrap, see):
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = lib.nn.Linear(3, 3)
            self.steps = 0
            self.cache = None
        def forward(self, x):
            self.steps += 1
            h = self.l(x)
            if self.cache is not None:
                h = h + self.cache
            self.cache = h.detach()
            return h.sum() * self.steps
    n = Net()
    cn = wrap(n)
    for k in range(4):
        see(cn(lib.ones(2, 3) * k), n.steps, n.cache)
    n.cache = None
    see(cn(lib.ones(2, 3)), n.steps, n.cache)


def a_backward_that_raises_after_an_optimizer_step(lib, wrap, see):
    m, x, y = _mk_linear(lib)
    opt = lib.optim.Adam(m.parameters(), lr=0.1)
    def step(x, y, bad):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        if bad:
            loss.backward()      # graph freed: raises after the step
        return loss
    cs = wrap(step)
    for bad in (False, False, True, False, True):
        try:
            see(cs(x, y, bad))
        except (RuntimeError, ValueError, IndexError, TypeError, KeyError, AssertionError) as e:
            see(e)
        see(m.weight, m.weight.grad, opt.state[m.weight]["step"] if m.weight in opt.state else None)


def a_nan_check_that_raises_before_the_step(lib, wrap, see):
    m, x, y = _mk_linear(lib)
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)
    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        if not lib.isfinite(loss):
            raise RuntimeError("nan loss")
        opt.step()
        return loss
    cs = wrap(step)
    for k in range(5):
        xx = x if k != 2 and k != 4 else x * float("nan")
        try:
            see(cs(xx, y))
        except (RuntimeError, ValueError, IndexError, TypeError, KeyError, AssertionError) as e:
            see(e)
        see(m.weight, m.weight.grad)


def autograd_grad_with_allow_unused_and_inputs_not_requiring_grad(lib, wrap, see):
    def f(x, w):
        y = x * w
        g1 = lib.autograd.grad(y.sum(), w, retain_graph=True)[0]
        g2 = lib.autograd.grad((y ** 2).sum(), [w, x], allow_unused=True)
        return g1, g2
    cf = wrap(f)
    for k in range(3):
        w = lib.ones(3, requires_grad=True)
        x = lib.arange(3.).requires_grad_(k == 1)
        try:
            see(cf(x, w))
        except (RuntimeError, ValueError, IndexError, TypeError, KeyError, AssertionError) as e:
            see(e)


def a_captured_tensor_given_other_memory_with_set_and_data(lib, wrap, see):
    buf = lib.zeros(3)
    def f(x):
        buf.add_(x)
        return buf * 2
    cf = wrap(f)
    see(cf(lib.ones(3)), buf)
    see(cf(lib.ones(3)), buf)
    other = lib.full((3,), 5.)
    buf.set_(other)
    see(cf(lib.ones(3)), buf, other)
    buf.data = lib.full((3,), 7.)
    see(cf(lib.ones(3)), buf, other)
    buf.set_(lib.full((6,), 1.)[::2])
    see(cf(lib.ones(3)), buf)


def a_parameters_data_and_momentum_buffer_replaced_between_steps(lib, wrap, see):
    lib.manual_seed(0)
    m = lib.nn.Linear(3, 2)
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    x = lib.ones(4, 3); y = lib.tensor([0, 1, 0, 1])
    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss
    cs = wrap(step)
    see(cs(x, y), m.weight)
    see(cs(x, y), m.weight)
    old = m.weight.data
    m.weight.data = lib.full((2, 3), 0.5)
    see(cs(x, y), m.weight, old)
    with lib.no_grad():
        m.weight.copy_(lib.full((2, 3), 0.1))
    see(cs(x, y), m.weight)
    m.weight.data = lib.full((3, 2), 0.5).t()
    see(cs(x, y), m.weight, m.weight.grad)
    buf = opt.state[m.weight]["momentum_buffer"]
    buf.zero_()
    see(cs(x, y), m.weight)
    opt.state[m.weight]["momentum_buffer"] = None
    see(cs(x, y), m.weight)


def a_parameter_replaced_and_deleted(lib, wrap, see):
    lib.manual_seed(0)
    m = lib.nn.Linear(3, 2)
    x = lib.ones(4, 3)
    def f(x):
        return m(x).sum()
    cf = wrap(f)
    see(cf(x))
    m.weight = lib.nn.Parameter(lib.full((2, 3), 2.))
    see(cf(x))
    del m.weight
    m.weight = lib.full((2, 3), 3.)    # plain tensor attribute now
    see(cf(x))
    m.register_buffer("weight2", lib.ones(1))
    see(cf(x))


def a_compiled_function_calling_itself(lib, wrap, see):
    box = {}
    def f(x, n):
        if n == 0:
            return x
        return box["cf"](x * 2, n - 1) + 1
    box["cf"] = cf = wrap(f)
    see(cf(lib.ones(2), 0), cf(lib.ones(2), 2), cf(lib.ones(2), 3), cf(lib.ones(2), 2))


def a_compiled_function_writing_a_captured_tensor_called_twice_by_another(lib, wrap, see):
    @wrap
    def inner(x, w):
        w.add_(1)
        return x * w
    def outer(x, w):
        return inner(x, w).sum() + inner(x, w).sum()
    co = wrap(outer)
    w = lib.zeros(2)
    for k in range(3):
        see(co(lib.ones(2), w), w)
    see(inner(lib.ones(2), w), w)


def gradients_and_random_draws_through_nested_compiled_functions(lib, wrap, see):
    @wrap
    def inner(x):
        return x.exp()
    def outer(x, w):
        y = inner(x * w)
        return y.sum()
    co = wrap(outer)
    w = lib.ones(2, requires_grad=True)
    for k in range(3):
        out = co(lib.ones(2) * k, w); out.backward()
        see(out, w.grad)
    lib.manual_seed(1)
    @wrap
    def drop(x):
        return lib.nn.functional.dropout(x, 0.5)
    def outer2(x):
        return drop(x) + drop(x)
    c2 = wrap(outer2)
    see(c2(lib.ones(8)), c2(lib.ones(8)), drop(lib.ones(8)))


def an_lr_decayed_inside_runs_eagerly(lib, wrap, see):
    m, x, y = _mk_linear(lib)
    opt = lib.optim.Adam(m.parameters(), lr=0.1)
    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        for g in opt.param_groups:
            g["lr"] *= 0.9
        return loss
    cs = wrap(step)
    for k in range(4):
        see(cs(x, y), m.weight, opt.param_groups[0]["lr"])


def a_tensor_lr_filled_between_steps(lib, wrap, see):
    m, x, y = _mk_linear(lib)
    opt = lib.optim.SGD(m.parameters(), lr=lib.tensor(0.1))
    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss
    cs = wrap(step)
    for k in range(3):
        see(cs(x, y), m.weight)
        opt.param_groups[0]["lr"].fill_(0.05 * (k + 2))
    opt.param_groups[0]["lr"] = 0.3
    see(cs(x, y), m.weight)


def nonlocal_tensors_and_counters_rebound_inside(lib, wrap, see):
    state = lib.zeros(2)
    cnt = 0
    def f(x):
        nonlocal state, cnt
        state = state + x
        cnt += 1
        return state.sum()
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.ones(2)), state, cnt)


def globals_rebound_inside(lib, wrap, see):
    global GT
    GT = lib.zeros(2)
    def f(x):
        global GT
        GT = GT * 2 + x
        return GT.sum()
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.ones(2)), GT)


def list_slots_written_inside(lib, wrap, see):
    state = [lib.zeros(2), None]
    def f(x):
        state[0] = state[0] + x
        state[1] = x.detach() if state[1] is None else None
        return state[0].sum()
    cf = wrap(f)
    for k in range(4):
        see(cf(lib.ones(2) * k), state)


def object_attributes_written_inside(lib, wrap, see):
    class H: pass
    h = H(); h.t = lib.zeros(2); h.n = 0
    def f(x):
        h.t = h.t + x
        h.n += 1
        h.last = x
        return h.t
    cf = wrap(f)
    for k in range(3):
        see(cf(lib.ones(2) * k), h.t, h.n, h.last)
    see(cf(lib.ones(2)) is h.t)


def vmap_and_func_grad_inside(lib, wrap, see):
    def f(x, w):
        return lib.func.vmap(lambda r: (r * w).sum())(x), lib.func.grad(lambda v: (v ** 2 * w).sum())(x[0])
    cf = wrap(f)
    w = lib.arange(3.)
    for k in range(3):
        see(cf(lib.ones(2, 3) * k, w))
    w.add_(1)
    see(cf(lib.ones(2, 3), w))


def checkpoint_inside(lib, wrap, see):
    cp = importlib.import_module(lib.__name__ + ".utils.checkpoint")
    lin = lib.nn.Linear(3, 3)
    def f(x):
        return cp.checkpoint(lambda t: lin(t).tanh(), x, use_reentrant=False).sum()
    cf = wrap(f)
    for k in range(3):
        x = (lib.ones(2, 3) * k).requires_grad_()
        out = cf(x); out.backward()
        see(out, x.grad, lin.weight.grad)


def autograd_through_compiled_nodes_with_inputs_retain_and_create_graph(lib, wrap, see):
    def f(x, w, b):
        return ((x @ w).tanh() + b).pow(2).sum()
    cf = wrap(f)
    w = lib.ones(3, 2, requires_grad=True) * 1
    w.retain_grad()
    wl = lib.full((3, 2), 0.5, requires_grad=True)
    b = lib.zeros(2, requires_grad=True)
    x = lib.arange(12.).reshape(4, 3) / 10
    o1 = cf(x, wl, b); o2 = cf(x * 2, wl, b)
    (o1 + o2).backward(inputs=[wl])
    see(wl.grad, b.grad)
    o1 = cf(x, wl, b)
    g = lib.autograd.grad(o1, [b], retain_graph=True)
    see(g, wl.grad, b.grad)
    o1.backward(); see(wl.grad, b.grad)
    try:
        o1.backward()
    except (RuntimeError, ValueError, IndexError, TypeError, KeyError, AssertionError) as e:
        see(e)
    o3 = cf(x, wl, b)
    gw, = lib.autograd.grad(o3, wl, create_graph=True)
    see(gw, gw.requires_grad)
    gw.sum().backward(); see(wl.grad, b.grad)
    try:
        lib.autograd.grad(cf(x, wl, b), [lib.ones(1, requires_grad=True)])
    except (RuntimeError, ValueError, IndexError, TypeError, KeyError, AssertionError) as e:
        see(e)
    see(lib.autograd.grad(cf(x, wl, b), [lib.ones(1, requires_grad=True)], allow_unused=True))


def hooks_of_inputs_and_their_producers_in_eagers_order(lib, wrap, see):
    order = []
    def f(x, w):
        return (x * w).sum()
    cf = wrap(f)
    w = lib.ones(2, requires_grad=True)
    w.register_hook(lambda g: order.append(("w", g.tolist())))
    x = lib.ones(2, requires_grad=True)
    x.register_hook(lambda g: order.append(("x", g.tolist())) or g * 2)
    for k in range(3):
        y = x * 3
        y.register_hook(lambda g: order.append(("y", g.tolist())))
        out = cf(y, w) * (k + 1)
        out.backward()
        see(order, x.grad, w.grad)


def several_outputs_backpropagated_apart_and_together(lib, wrap, see):
    def f(x):
        return x.sum() * 2, x * 3
    cf = wrap(f)
    x = lib.ones(2, requires_grad=True)
    a, b = cf(x)
    b.sum().backward()
    see(x.grad)
    a.backward()
    see(x.grad)
    try:
        b.sum().backward()
    except (RuntimeError, ValueError, IndexError, TypeError, KeyError, AssertionError) as e:
        see(e)
    a, b = cf(x)
    lib.autograd.backward([a, b.sum()], retain_graph=True)
    see(x.grad)
    lib.autograd.backward([a, b], [lib.tensor(2.), lib.ones(2)])
    see(x.grad)


def a_manual_sgd_step_reading_grad_inside(lib, wrap, see):
    w = lib.ones(3, requires_grad=True)
    def step(x):
        loss = (x * w).sum()
        loss.backward()
        g = w.grad
        with lib.no_grad():
            w.sub_(0.1 * g)
        return g * 1
    cs = wrap(step)
    for k in range(3):
        see(cs(lib.ones(3)), w, w.grad)
        w.grad.zero_()
    g = w.grad
    see(cs(lib.ones(3)), g, g is w.grad)


def zero_grad_keeping_the_grad_tensors(lib, wrap, see):
    m = lib.nn.Linear(2, 2)
    opt = lib.optim.SGD(m.parameters(), lr=0.1)
    def step(x):
        opt.zero_grad(set_to_none=False)
        loss = m(x).sum()
        loss.backward()
        opt.step()
        return loss
    cs = wrap(step)
    see(cs(lib.ones(1, 2)), m.weight.grad)
    g = m.weight.grad
    see(cs(lib.ones(1, 2)), g is m.weight.grad, g)
    see(cs(lib.ones(1, 2)), g is m.weight.grad, g)


def properties_and_getattr_of_user_classes(lib, wrap, see):
    ext = {"v": 1.0}
    class Cfg:
        def __init__(self): self._s = 2.0
        @property
        def scale(self): return self._s * ext["v"]
        def __getattr__(self, name):
            if name == "dyn": return ext["v"] + 10
            raise AttributeError(name)
    cfg = Cfg()
    def f(x):
        return x * cfg.scale + cfg.dyn
    cf = wrap(f)
    see(cf(lib.ones(2)))
    cfg._s = 3.0; see(cf(lib.ones(2)))
    ext["v"] = 5.0; see(cf(lib.ones(2)))


def class_attributes_and_defaults_changed(lib, wrap, see):
    vals = (1.0, 2.0)
    class Cfg:
        lr = 0.1
    def f(x, cfg=Cfg):
        return x * cfg.lr + sum(vals)
    cf = wrap(f)
    see(cf(lib.ones(2)))
    Cfg.lr = 0.5; see(cf(lib.ones(2)))
    class Cfg2(Cfg): lr = 0.7
    see(cf(lib.ones(2), Cfg2))
    Cfg2.lr = 0.9; see(cf(lib.ones(2), Cfg2))
    f.__defaults__ = (Cfg2,); see(cf(lib.ones(2)))


def enums_and_dataclasses(lib, wrap, see):
    class Mode(enum.Enum):
        A = 1; B = 2
    @dataclasses.dataclass
    class C:
        mode: Mode
        k: float
    c = C(Mode.A, 2.0)
    def f(x, c):
        return x * c.k if c.mode is Mode.A else x - c.k
    cf = wrap(f)
    see(cf(lib.ones(2), c))
    c.mode = Mode.B; see(cf(lib.ones(2), c))
    see(cf(lib.ones(2), C(Mode.A, 5.0)))
    c2 = dataclasses.replace(c, k=9.0); see(cf(lib.ones(2), c2))


def an_error_inside_no_grad_restores_the_grad_mode(lib, wrap, see):
    def f(x, bad):
        with lib.no_grad():
            y = x * 2
            if bad:
                raise KeyError("boom")
        with lib.enable_grad():
            z = y + x
        return z
    cf = wrap(f)
    x = lib.ones(2, requires_grad=True)
    for bad in (True, False, True, False):
        try: see(cf(x, bad))
        except KeyError as e: see(e)
        see(lib.is_grad_enabled(), (x * 3).requires_grad, lib.is_inference_mode_enabled())
    with lib.no_grad():
        for bad in (True, False):
            try: see(cf(x, bad))
            except KeyError as e: see(e)
            see(lib.is_grad_enabled())


def an_error_after_a_random_draw(lib, wrap, see):
    lib.manual_seed(0)
    def f(x, n):
        a = lib.rand(2)
        if n > 1:
            raise ValueError("n")
        return x + a + lib.rand(2)
    cf = wrap(f)
    for n in (0, 2, 0, 2, 1):
        try: see(cf(lib.ones(2), n))
        except ValueError as e: see(e)
        see(lib.rand(1))


def an_error_after_a_batch_norm_update(lib, wrap, see):
    m = lib.nn.BatchNorm1d(2)
    def f(x, bad):
        y = m(x)
        if bad:
            raise RuntimeError("after bn")
        return y
    cf = wrap(f)
    for bad in (False, True, False, True):
        try: see(cf(lib.arange(8.).reshape(4, 2), bad))
        except RuntimeError as e: see(e)
        see(m.running_mean, m.num_batches_tracked)


def an_error_after_writes_to_the_input_and_a_dict(lib, wrap, see):
    def f(x, d):
        x.add_(1)
        d["k"] = x.sum()
        y = x.view(3)      # raises for some shapes
        return y
    cf = wrap(f)
    d = {}
    for shape in ((3,), (1, 3), (2, 2), (3,)):
        x = lib.zeros(shape)
        try: see(cf(x, d))
        except RuntimeError as e: see(e)
        see(x, d)


def a_list_holding_one_tensor_several_times(lib, wrap, see):
    def f(xs):
        return sum((x * (i + 1)).sum() for i, x in enumerate(xs))
    cf = wrap(f)
    w = lib.ones(2, requires_grad=True)
    for xs in ([w, w], [w, lib.ones(2)], [w, w, w], (w,), [w[0:1], w[1:2]]):
        out = cf(xs); out.backward(); see(out, w.grad)


def a_dict_argument_written_inside(lib, wrap, see):
    def f(d):
        d["out"] = d["a"] * d["b"]
        return d["out"].sum()
    cf = wrap(f)
    w = lib.ones(2, requires_grad=True)
    d = {"a": w, "b": lib.full((2,), 2.)}
    for k in range(3):
        out = cf(d); out.backward(); see(out, w.grad, d["out"], d["out"].requires_grad)
    d["b"] = w
    out = cf(d); out.backward(); see(out, w.grad)
    del d["out"]
    out = cf(d); see(out, "out" in d)


PROGRAMS = [the_same_tensor_passed_twice_and_written_in_place, a_returned_view_of_an_intermediate_written_after_the_call, closures_and_lists_over_tensors_rebound_between_calls, python_control_flow_on_values_items_lists_and_rows, an_error_midway_leaves_the_writes_and_python_effects_of_eager, nested_compiled_functions_and_recursion, a_compiled_module_method_with_attributes_and_weights_changed, backward_twice_inside_with_retain_graph, an_sgd_step_inside_with_lr_zero_grad_and_requires_grad_changed, python_number_arguments_of_each_type_and_keyword, a_grad_read_inside_then_accumulated_outside, tensors_appended_to_a_captured_list_and_dict, a_compiled_function_called_from_a_backward_hook, train_eval_momentum_and_tracking_of_batch_norm_changed_between_calls, second_derivatives_inside_by_autograd_grad, gradient_accumulation_over_calls_with_both_zero_grad_kinds, adamw_with_a_scheduler_and_param_group_options_changed, a_param_group_added_and_optimizer_state_loaded_between_calls, asserts_raises_and_warnings_that_depend_on_values, a_compiled_sequential_whose_layers_are_replaced, python_values_read_out_of_tensors_and_returned, sizes_computed_from_items, an_index_list_built_from_values, python_conversions_of_tensors, cross_entropy_targets_in_and_out_of_range, clip_grad_norm_with_error_if_nonfinite, split_sizes_from_a_tensor, python_containers_and_objects_read_inside, a_list_popped_inside, an_objects_class_and_methods_changed, counters_and_state_dicts_updated_inside, adam_state_and_requires_grad_toggled_between_steps, dtype_and_device_arguments, varargs_and_kwargs_of_changing_length, grad_modes_around_the_call, a_compiled_module_through_train_eval_state_dict_and_double, a_module_that_keeps_state_between_forwards, a_backward_that_raises_after_an_optimizer_step, a_nan_check_that_raises_before_the_step, autograd_grad_with_allow_unused_and_inputs_not_requiring_grad, a_captured_tensor_given_other_memory_with_set_and_data, a_parameters_data_and_momentum_buffer_replaced_between_steps, a_parameter_replaced_and_deleted, a_compiled_function_calling_itself, a_compiled_function_writing_a_captured_tensor_called_twice_by_another, gradients_and_random_draws_through_nested_compiled_functions, an_lr_decayed_inside_runs_eagerly, a_tensor_lr_filled_between_steps, nonlocal_tensors_and_counters_rebound_inside, globals_rebound_inside, list_slots_written_inside, object_attributes_written_inside, vmap_and_func_grad_inside, checkpoint_inside, autograd_through_compiled_nodes_with_inputs_retain_and_create_graph, hooks_of_inputs_and_their_producers_in_eagers_order, several_outputs_backpropagated_apart_and_together, a_manual_sgd_step_reading_grad_inside, zero_grad_keeping_the_grad_tensors, properties_and_getattr_of_user_classes, class_attributes_and_defaults_changed, enums_and_dataclasses, an_error_inside_no_grad_restores_the_grad_mode, an_error_after_a_random_draw, an_error_after_a_batch_norm_update, an_error_after_writes_to_the_input_and_a_dict, a_list_holding_one_tensor_several_times, a_dict_argument_written_inside]


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_program(program):
    runs(program, torch)
