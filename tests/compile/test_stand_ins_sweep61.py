"""Sweep 61 (H1): numbers a compiled step computes in Python that used to cost a trace per
value (then eager runs from the recompile limit on), each checked against PyTorch:

- two numbers read out of tensors in one return value (`int(correct.sum()) /
  int(mask.sum())`, PyG's accuracy): one output (tracer/returned.py, ReturnedScalars);
- math.sqrt / math.cos / math.floor of a step count the step keeps in the optimiser's
  state (a hand-written AdamW's `math.sqrt(1 - beta2 ** state["step"])`): traced
  (compile/math_stand_ins.py, runtime/symbolic_math.py);
- such a number as addcdiv_ / addcmul_'s value (`p.addcdiv_(m, denom, value=-step_size)`):
  an operand (runtime/methods_alpha.stand_in_value)."""
import math
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _quiet(cf, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (a fallback to eager warns: a failure here)
        return cf(*args)


# ---- returned numbers ------------------------------------------------------------------------
def _accuracy(lib, masks, y):
    def test(x):
        pred = (x > 0).long()
        return [int((pred[m] == y[m]).sum()) / int(m.sum()) for m in masks]
    return test


def test_two_returned_ints_are_one_output():
    rng = np.random.default_rng(0)
    y_np = rng.integers(0, 2, 12)
    masks_np = [np.arange(12) < 5, np.arange(12) >= 5]
    libs = {}
    for lib in (torch, llgrad):
        libs[lib] = _accuracy(lib, [lib.tensor(m) for m in masks_np], lib.tensor(y_np))
    cf = llgrad.compile(libs[llgrad])
    for _ in range(5):
        x = rng.standard_normal(12).astype(np.float32)
        got, want = _quiet(cf, llgrad.tensor(x)), libs[torch](torch.tensor(x))
        assert got == want and [type(v) for v in got] == [float, float]
    assert cf.n_traces == 1


def _mixed(lib):
    def f(x, n):
        s = (x * 4).round() / 4         # (sums exact in float32: eager's number to the bit)
        return (s.sum().item() + s.max().item()) / (n > 0).sum().item(), \
            (n > 0).sum().item() // (n < 0).sum().clamp(min=1).item(), \
            round(s.sum().item() / s.abs().max().item(), 3), \
            (x > 0).any().item() == (n > 0).all().item()
    return f


def test_returned_numbers_of_mixed_kinds():
    """A float with an int (held exactly in float64 under 2**53, guarded), ints floor-divided,
    bools compared, a round() of a ratio: each call's numbers, no trace per value."""
    rng = np.random.default_rng(1)
    cf = llgrad.compile(_mixed(llgrad))
    for _ in range(5):
        x = rng.standard_normal(9).astype(np.float32)
        n = rng.integers(-3, 4, 9)
        got = _quiet(cf, llgrad.tensor(x), llgrad.tensor(n))
        want = _mixed(torch)(torch.tensor(x), torch.tensor(n))
        assert got == want and [type(v) for v in got] == [type(v) for v in want]
    assert cf.n_traces == 1


def test_returned_int_past_float64_traces_again():
    """An int64 joined with a float: 2**60 + 1 is not a float64, so that call traces again
    (the guard) and gives Python's number."""
    def f(n, x):
        return n.sum().item() * x.sum().item()
    cf = llgrad.compile(f)
    for v in (3, 5, 2 ** 60 + 1, 7):
        got = cf(llgrad.tensor([v, 0]), llgrad.tensor([1.5, 0.0]))
        cf.wait()           # (the next call runs native code, in the background mode too)
        want = f(torch.tensor([v, 0]), torch.tensor([1.5, 0.0]))
        assert got == want and type(got) is type(want)
    assert cf.n_traces == 2


def test_returned_ratio_raises_zero_division_as_eager():
    def f(x, y):
        return (x > 5).sum().item() / (y > 0).sum().item()
    cf = llgrad.compile(f)
    assert cf(llgrad.ones(3) * 6, llgrad.ones(3)) == 1.0
    with pytest.raises(ZeroDivisionError):
        cf(llgrad.ones(3) * 6, -llgrad.ones(3))
    with pytest.raises(ZeroDivisionError):
        f(torch.ones(3) * 6, -torch.ones(3))


# ---- math of a step count ----------------------------------------------------------------------
def _adamw_class(lib):
    class AdamW(lib.optim.Optimizer):
        """Hugging Face's classic AdamW (transformers.optimization.AdamW)."""
        def __init__(self, params, lr=1e-2, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01):
            super().__init__(params, dict(lr=lr, betas=betas, eps=eps,
                                          weight_decay=weight_decay))

        @lib.no_grad()
        def step(self):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = 0
                        state["exp_avg"] = lib.zeros_like(p)
                        state["exp_avg_sq"] = lib.zeros_like(p)
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    beta1, beta2 = group["betas"]
                    state["step"] += 1
                    exp_avg.mul_(beta1).add_(p.grad, alpha=1.0 - beta1)
                    exp_avg_sq.mul_(beta2).addcmul_(p.grad, p.grad, value=1.0 - beta2)
                    denom = exp_avg_sq.sqrt().add_(group["eps"])
                    bias_correction1 = 1.0 - beta1 ** state["step"]
                    bias_correction2 = 1.0 - beta2 ** state["step"]
                    step_size = group["lr"] * math.sqrt(bias_correction2) / bias_correction1
                    p.addcdiv_(exp_avg, denom, value=-step_size)
                    if group["weight_decay"] > 0.0:
                        p.add_(p, alpha=(-group["lr"] * group["weight_decay"]))
    return AdamW


def _train(lib, compiled, steps=6):
    rng = np.random.default_rng(2)
    w = rng.standard_normal((3, 5)).astype(np.float32)
    x = lib.tensor(rng.standard_normal((16, 5)).astype(np.float32))
    y = lib.tensor(rng.standard_normal((16, 3)).astype(np.float32))
    model = lib.nn.Linear(5, 3)
    with lib.no_grad():
        model.weight.copy_(lib.tensor(w))
        model.bias.zero_()
    opt = _adamw_class(lib)(model.parameters())

    def step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.item()
    fn = llgrad.compile(step) if compiled else step
    losses = [_quiet(fn, x, y) if compiled else fn(x, y) for _ in range(steps)]
    return losses, [p.detach().numpy().copy() for p in model.parameters()], fn


def test_hand_written_adamw_traces_twice():
    """math.sqrt of the bias correction and the step size as addcdiv_'s value: the step
    counts become inputs after the first trace, PyTorch's numbers at every step."""
    want, want_params, _ = _train(torch, False)
    got, got_params, cf = _train(llgrad, True)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for g, w in zip(got_params, want_params):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert cf.n_traces <= 2
    assert math.sqrt is not None and type(math.sqrt).__name__ == "builtin_function_or_method"


class _Counter:
    def __init__(self):
        self.t = 0


def _update(lib, counter):
    def upd(p, m, d):
        counter.t += 1
        bc1, bc2 = 1 - 0.9 ** counter.t, 1 - 0.999 ** counter.t
        step_size = 0.1 * math.sqrt(bc2) / bc1
        p.addcdiv_(m, d, value=-step_size)
        p.addcmul_(m, d, value=step_size * 0.5)
        cycle = math.floor(counter.t / 3)
        return p.add(m, alpha=math.cos(step_size) + cycle)
    return upd


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_math_of_a_counter_and_addc_values_match_torch(dtype):
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(40).astype(dtype), rng.standard_normal(40).astype(dtype),
              (rng.random(40) + 0.5).astype(dtype)]
    tc, lc = _Counter(), _Counter()
    tp, tm, td = (torch.tensor(a) for a in arrays)
    lp, lm, ld = (llgrad.tensor(a) for a in arrays)
    cf = llgrad.compile(_update(llgrad, lc))
    f = _update(torch, tc)
    for _ in range(7):
        got, want = _quiet(cf, lp, lm, ld), f(tp, tm, td)
        np.testing.assert_array_equal(lp.numpy(), tp.numpy())
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        assert lc.t == tc.t
    assert cf.n_traces == 2


def test_sqrt_of_a_counter_leaving_its_domain_raises_as_python():
    counter = _Counter()

    def f(x):
        counter.t += 1
        return x * math.sqrt(3 - counter.t)
    cf = llgrad.compile(f)
    for k in range(3):
        assert cf(llgrad.ones(2)).tolist() == (torch.ones(2) * math.sqrt(2 - k)).tolist()
    with pytest.raises(ValueError, match="math domain error"):
        cf(llgrad.ones(2))
    assert type(math.sqrt).__name__ == "builtin_function_or_method"


def test_addcdiv_stand_in_value_under_autograd_keeps_its_gradient():
    """Outside no_grad on tensors that require grad the value stays a guarded number (its
    gradient's roundings are the op's): the gradients are PyTorch's."""
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal(6).astype(np.float32) for _ in range(2)] + \
        [(rng.random(6) + 0.5).astype(np.float32)]
    results = {}
    for lib in (torch, llgrad):
        counter = _Counter()

        def f(a, b, c):
            counter.t += 1
            return a.addcdiv(b, c, value=0.5 / counter.t).sum()
        fn = llgrad.compile(f) if lib is llgrad else f
        out = []
        for _ in range(3):
            a, b, c = (lib.tensor(x, requires_grad=True) for x in arrays)
            fn(a, b, c).backward()
            out.append([t.grad.numpy().copy() for t in (a, b, c)])
        results[lib] = out
    for got, want in zip(results[llgrad], results[torch]):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6)
