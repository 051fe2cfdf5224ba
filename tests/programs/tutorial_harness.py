"""Run one tutorial program three times: with PyTorch, with llgrad eagerly and with llgrad
with its training steps under llgrad.compile; compare what each run recorded.

A program is `program(torch, env)`, written once against the module parameter `torch` as
the PyTorch tutorials write it (`import llgrad as torch`). What it cannot take from the
library because the two libraries' random streams differ comes from `env`:

- env.randn(*shape) / env.rand / env.randint / env.choice: seeded NumPy draws (the same
  in every run), as tensors of the run's library;
- env.init(module): a module's initial weights: the torch run keeps its state_dict, the
  llgrad runs load that state_dict (the k-th env.init of a run gets the k-th state);
- env.step(fn): fn itself (torch, eager) or llgrad.compile(fn) (the compiled run);
- env.rec(name, value, cross=True): a value to compare (a tensor, number, list, bool);
  cross=False values depend on the library's random stream (multinomial, dropout,
  randn_like) and are compared between llgrad's eager and compiled runs only (the compile
  contract keeps RNG state: same seed, same draws);
- env.compiled: True in the compiled run (a program may check what compile kept).

The llgrad runs must raise no warning from llgrad (a compile fallback where eager works
is a gap), and every env.step function must have compiled code (not all eager)."""
import copy
import os
import re
import shutil
import tempfile
import warnings

import numpy as np
import pytest

import llgrad


class Env:
    def __init__(self, lib, mode, states, seed=0):
        self.torch = lib
        self.mode = mode                    # "torch" | "eager" | "compiled"
        self.compiled = mode == "compiled"
        self.np = np.random.default_rng(seed)
        self.states = states                # the torch run's initial state_dicts
        self.n_init = 0
        self.records = []                   # (name, value, cross)
        self.steps = []                     # the compiled functions made by env.step
        self._tmp = None                    # (made by the first env.path, removed by close)

    # ---- data ------------------------------------------------------------------------------
    def tensor(self, arr, dtype=None):
        arr = np.ascontiguousarray(arr)
        t = self.torch.tensor(arr)
        return t if dtype is None else t.to(dtype)

    def randn(self, *shape, scale=1.0):
        return self.tensor((self.np.standard_normal(shape) * scale).astype(np.float32))

    def rand(self, *shape):
        return self.tensor(self.np.random(shape).astype(np.float32))

    def randint(self, low, high, shape):
        return self.tensor(self.np.integers(low, high, shape).astype(np.int64))

    def choice(self, n):
        """A Python int in [0, n), the same in every run."""
        return int(self.np.integers(0, n))

    def path(self, name):
        if self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix=f"llgrad-tutorial-{self.mode}-")
        return os.path.join(self._tmp, name)

    def close(self):
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    # ---- weights, steps, records -------------------------------------------------------------
    def init(self, module):
        if self.mode == "torch":
            self.states.append({k: v.detach().numpy().copy()
                                for k, v in module.state_dict().items()})
        else:
            state = self.states[self.n_init]
            module.load_state_dict({k: llgrad.tensor(v.copy()) for k, v in state.items()})
        self.n_init += 1
        return module

    def step(self, fn, **options):
        if not self.compiled:
            return fn
        cf = llgrad.compile(fn, **options)
        self.steps.append(cf)
        return cf

    def wait(self):
        """Wait for the builds of the compiled steps (LLGRAD_COMPILE=background: the next
        call runs the native entry, as in sync mode; nothing in the other runs)."""
        for cf in self.steps:
            cf.wait()

    def rec(self, name, value, cross=True):
        self.records.append((name, _plain(value), cross))


def _plain(v):
    """A recorded value as NumPy arrays, numbers and tuples (a copy)."""
    if hasattr(v, "detach") and hasattr(v, "numpy"):
        return np.array(v.detach().numpy(), copy=True)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return tuple(_plain(x) for x in v)
    if type(v).__name__ == "dtype":
        return str(v).split(".")[-1]
    return v


def _close(a, b, what, rtol, atol):
    if isinstance(a, dict):
        assert a.keys() == b.keys(), what
        for k in a:
            _close(a[k], b[k], f"{what}[{k!r}]", rtol, atol)
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b), f"{what}: {a!r} != {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{what}[{i}]", rtol, atol)
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), f"{what}: {type(b).__name__}"
        assert a.shape == b.shape, f"{what}: shapes {a.shape} != {b.shape}"
        assert a.dtype == b.dtype, f"{what}: dtypes {a.dtype} != {b.dtype}"
        if a.dtype.kind in "fc":    # (elementwise, and relative to the array's scale)
            finite = np.abs(b[np.isfinite(b)])
            scale = float(finite.max()) if finite.size else 0.0
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol + rtol * scale,
                                       err_msg=what)
        else:
            np.testing.assert_array_equal(a, b, err_msg=what)
    elif isinstance(a, float) or isinstance(b, float):
        assert isinstance(b, float) == isinstance(a, float), f"{what}: {a!r} vs {b!r}"
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=what)
    elif isinstance(a, str) and isinstance(b, str) and a != b:
        _close_text(a, b, what, rtol, atol)
    else:
        assert type(a) is type(b) and a == b, f"{what}: {a!r} != {b!r}"


_NUMBER = re.compile(r"-?\d+(?:\.(\d+))?(?:e[-+]?\d+)?")


def _close_text(a, b, what, rtol, atol):
    """Printed text: the same words, and numbers equal to rtol and one unit of their last
    printed digit (two hosts' BLAS round a float32 loss differently: 1.420305 / 1.420304)."""
    assert _NUMBER.sub("#", a) == _NUMBER.sub("#", b), f"{what}: {a!r} != {b!r}"
    for m_a, m_b in zip(_NUMBER.finditer(a), _NUMBER.finditer(b)):
        x, y = float(m_a.group()), float(m_b.group())
        digits = max(len(m_a.group(1) or ""), len(m_b.group(1) or ""))
        # (a number without decimals, a count, must be equal: no unit)
        unit = 10.0 ** -digits if digits and "e" not in m_a.group() + m_b.group() else 0.0
        assert abs(x - y) <= unit + atol + rtol * max(abs(x), abs(y)), f"{what}: {a!r} != {b!r}"


def compare(ref, got, label, cross_only, rtol, atol):
    ref = [r for r in ref if r[2] or not cross_only]
    got = [r for r in got if r[2] or not cross_only]
    assert [r[0] for r in got] == [r[0] for r in ref], f"{label}: records differ"
    for (name, a, _), (_, b, _) in zip(ref, got):
        _close(b, a, f"{label}: {name}", rtol, atol)


def _run_llgrad(program, mode, states, seed, torch_warned=frozenset()):
    env = Env(llgrad, mode, states, seed)
    llgrad.manual_seed(seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # (NumPy's RuntimeWarnings inside the op table are silenced, as PyTorch is silent)
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"llgrad\.(ir|runtime)\.")
        # (both warn once a process: which of the two warns in this program depends on what
        # ran before it in the worker)
        warnings.filterwarnings("ignore", message=r"Using backward\(\) with create_graph=True")
        try:
            program(llgrad, env)
        finally:
            env.close()
    # (a warning in torch's own words that the torch run gave too is llgrad being torch;
    # torch's C++ warnings add " (Triggered internally at ...)")
    ours = [str(w.message) for w in caught if ("llgrad" in str(w.message)
            or w.filename.startswith(os.path.dirname(llgrad.__file__)))
            and not any(t.startswith(str(w.message)) for t in torch_warned)]
    assert not ours, f"{mode} run warned: {ours}"
    for cf in env.steps:
        assert cf.entries, f"{cf.fn.__name__}: no compiled code (breaks: {cf.graph_breaks})"
        cf.wait()       # (a background build's fallback warns at the next call: none comes)
        on_interpreter = [k for e in cf.entries for k in e.kernels.values()
                          if isinstance(k, str) and k.startswith("interpreted")]
        assert not on_interpreter, f"{cf.fn.__name__}: {on_interpreter}"
    return env


def run_tutorial(program, seed=0, rtol=1e-5, atol=1e-6):
    """The program with torch, with llgrad eagerly and compiled: the llgrad runs' records
    equal torch's (cross=True ones), and the compiled run's equal eager's (all of them).
    -> the three environments."""
    import torch
    states = []
    tenv = Env(torch, "torch", states, seed)
    torch.manual_seed(seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)    # (tiny ops: OpenMP threads waiting for a busy CPU cost seconds)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            program(torch, tenv)
    finally:
        tenv.close()
        torch.set_num_threads(threads)
    warned = frozenset(str(w.message) for w in caught)
    eager = _run_llgrad(program, "eager", copy.deepcopy(states), seed, warned)
    compare(tenv.records, eager.records, "eager vs torch", True, rtol, atol)
    compiled = _run_llgrad(program, "compiled", copy.deepcopy(states), seed, warned)
    compare(tenv.records, compiled.records, "compiled vs torch", True, rtol, atol)
    compare(eager.records, compiled.records, "compiled vs eager", False, rtol, atol)
    return tenv, eager, compiled


def program_params(programs, slow=()):
    """pytest params (name, program) of {name: program, or pytest.param(program, marks=...)
    for one with marks (a strict xfail)}, those named in slow marked slow."""
    out = []
    for name, p in programs.items():
        marks = list(p.marks) if hasattr(p, "marks") else []
        fn = p.values[0] if hasattr(p, "values") else p
        out.append(pytest.param(name, fn, marks=marks + ([pytest.mark.slow] if name in slow
                                                         else []), id=name))
    return out
