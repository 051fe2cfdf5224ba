"""Lockstep runner for whole training programs written against the torch API: the same
program runs on torch, on llgrad eagerly and on llgrad with its step compiled, from the same
initial weights (torch's state_dict copied into llgrad through numpy), and after every step
the losses, parameters, .grad, buffers and optimizer state of the three runs are compared.

A program is a generator `program(T, compile_fn)`: T is the torch or llgrad module, and
`compile_fn(f)` returns the step function to call (f itself, or llgrad.compile(f)); it
yields a dict per step whose values are compared by kind (see `_compare`)."""
import warnings

import numpy as np
import torch

import llgrad


def mlp(T, dropout=0.0, bn=False):
    """A 4-8-3 classifier, optionally with BatchNorm1d and Dropout."""
    nn = T.nn
    layers = [nn.Linear(4, 8)] + ([nn.BatchNorm1d(8)] if bn else []) + [nn.Tanh()]
    layers += ([nn.Dropout(dropout)] if dropout else []) + [nn.Linear(8, 3)]
    return nn.Sequential(*layers)


def load_from_torch(dst, src):
    """Loads torch module `src`'s state_dict into llgrad module `dst` through numpy."""
    dst.load_state_dict({k: llgrad.tensor(v.detach().numpy().copy())
                         for k, v in src.state_dict().items()})


def build(T, make=mlp, **kw):
    """`make(T, **kw)` with torch's seed-0 initial weights, for either library."""
    torch.manual_seed(0)
    reference = make(torch, **kw)
    if T is torch:
        return reference
    model = make(llgrad, **kw)
    load_from_torch(model, reference)
    return model


def batches(T, n=5, seed=1, rows=6):
    """n (x, y) batches of 4-feature inputs and 3-class labels."""
    rng = np.random.default_rng(seed)
    return [(T.tensor(rng.standard_normal((rows, 4)).astype(np.float32)),
             T.tensor(rng.integers(0, 3, rows))) for _ in range(n)]


def classifier_step(T, clip=None):
    """The usual step: zero_grad, cross-entropy, backward, optional clipping, step."""
    F = T.nn.functional

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        if clip == "norm":
            T.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        elif clip == "value":
            T.nn.utils.clip_grad_value_(model.parameters(), 0.05)
        opt.step()
        return loss.detach()
    return step


def _array(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def close(a, b, what, tol):
    """a and b (tensors, numbers, None or nested lists of them) agree to tol."""
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), what
        for i, (u, v) in enumerate(zip(a, b)):
            close(u, v, f"{what}[{i}]", tol)
        return
    if a is None or b is None:
        assert a is None and b is None, what
        return
    np.testing.assert_allclose(_array(b), _array(a), rtol=tol, atol=tol, err_msg=what)


def close_modules(a, b, what, tol, grads=True):
    """Parameters (and their .grad unless grads=False) and buffers of two modules agree."""
    pa, pb = list(a.named_parameters()), list(b.named_parameters())
    assert [n for n, _ in pa] == [n for n, _ in pb], what
    for (name, p), (_, q) in zip(pa, pb):
        close(p, q, f"{what} {name}", tol)
        assert p.requires_grad == q.requires_grad, (what, name)
        if grads:
            close(p.grad, q.grad, f"{what} {name}.grad", tol)
    for (name, p), (_, q) in zip(a.named_buffers(), b.named_buffers()):
        close(p, q, f"{what} buffer {name}", tol)


_IGNORED_GROUP_KEYS = {"params", "foreach", "fused", "capturable", "differentiable",
                       "decoupled_weight_decay"}


def close_optimizers(a, b, what, tol):
    """Hyper-parameters of every param group and every per-parameter state agree."""
    sa, sb = a.state_dict(), b.state_dict()
    assert len(sa["param_groups"]) == len(sb["param_groups"]), what
    for ga, gb in zip(sa["param_groups"], sb["param_groups"]):
        assert ga["params"] == gb["params"], what
        for key in set(ga) - _IGNORED_GROUP_KEYS:
            va, vb = ga[key], gb[key]
            if isinstance(va, (float, int)) and not isinstance(va, bool):
                assert abs(float(va) - float(vb)) <= 1e-6 * max(1.0, abs(float(va))), \
                    (what, key, va, vb)
            elif not hasattr(va, "shape"):
                assert va == vb, (what, key, va, vb)
    assert sa["state"].keys() == sb["state"].keys(), what
    for i, state in sa["state"].items():
        assert state.keys() == sb["state"][i].keys(), (what, i)
        for key, value in state.items():
            close(value, sb["state"][i][key], f"{what} state[{i}][{key}]", tol)


def _compare(ref, rec, what, tol):
    assert ref.keys() == rec.keys(), what
    for key, value in rec.items():
        if key.endswith("_fn"):       # (the functions called: eager's and compiled ones)
            continue
        if hasattr(value, "named_parameters"):
            close_modules(ref[key], value, f"{what} {key}", tol)
        elif hasattr(value, "param_groups"):
            close_optimizers(ref[key], value, f"{what} {key}", tol)
        else:
            close(ref[key], value, f"{what} {key}", tol)


def eager(f):
    """The compile_fn of the eager runs."""
    return f


def compiled(f):
    """The compile_fn of the compiled run."""
    return llgrad.compile(f, backend="llvm")


def lockstep(program, with_torch=True, torch_tol=1e-5, tol=1e-5):
    """Runs `program` on torch (unless with_torch is False), llgrad eager and llgrad
    compiled in lockstep, comparing after every step; returns (steps, the compiled run's
    last record, warnings raised by llgrad)."""
    runs = [(llgrad, eager, "eager"), (llgrad, compiled, "compiled")]
    if with_torch:
        runs.insert(0, (torch, eager, "torch"))
    gens = [(name, program(T, fn)) for T, fn, name in runs]
    steps = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        while True:
            recs = [(name, next(gen, None)) for name, gen in gens]
            if all(r is None for _, r in recs):
                break
            assert all(r is not None for _, r in recs), (steps, recs)
            _compare(recs[-2][1], recs[-1][1], f"step {steps} eager vs compiled", tol)
            if with_torch:
                _compare(recs[0][1], recs[1][1], f"step {steps} torch vs eager", torch_tol)
            last = recs[-1][1]
            steps += 1
    llgrad_warnings = [str(w.message) for w in caught if "llgrad" in str(w.message)]
    return steps, last, llgrad_warnings
