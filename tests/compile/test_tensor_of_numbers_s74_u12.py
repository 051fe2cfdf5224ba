"""Session 74 (u12): torch.tensor of a compiled function's changing Python numbers (the DQN
tutorial's `reward = torch.tensor([reward])` and `torch.tensor([[action]], dtype=torch.long)`,
a draw `torch.tensor([random.random()])`) is made from the numbers' graph inputs
(runtime/tensor_stand_ins.py): one trace serves every value. Before, tensor() read
the numbers, so each new value traced again and from the eighth the calls ran eagerly with
the recompile-limit warning (a draw: eagerly from the first call, "cannot replay")."""
import random
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _runs(make, args, n=12, seed=0):
    """make(lib) -> fn, run on args(lib, i) for i < n with torch, llgrad eagerly and compiled
    -> (torch's, eager's, compiled's results, the compiled run's llgrad warnings, its traces)."""
    outs = []
    for lib, comp in ((torch, False), (llgrad, False), (llgrad, True)):
        fn = make(lib)
        fn = llgrad.compile(fn) if comp else fn
        random.seed(seed)
        res = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for i in range(n):
                r = fn(*args(lib, i))
                res.append([(str(x.dtype).split(".")[-1], x.detach().numpy().copy())
                            if hasattr(x, "numpy") else x for x in r])
        outs.append(res)
    warned = [str(w.message) for w in caught if "llgrad" in str(w.message)]
    return outs[0], outs[1], outs[2], warned, fn.n_traces


def _same(a, b):
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            if isinstance(u, tuple):
                assert u[0] == v[0] and u[1].shape == v[1].shape, (u, v)
                np.testing.assert_allclose(u[1], v[1], rtol=1e-6, atol=1e-7)
            else:
                assert u == v, (u, v)


def test_dqn_reward_and_action_numbers_trace_once():
    def make(lib):
        w = lib.tensor([0.5, -1.0], requires_grad=True)

        def step(x, reward, action):
            r = lib.tensor([reward])
            a = lib.tensor([[action]], dtype=lib.long)
            loss = ((x * w).sum() - r).pow(2).sum()
            loss.backward()
            g = w.grad.clone()
            w.grad = None
            return loss.detach(), g, a + 1, r
        return step
    t, e, c, warned, traces = _runs(make, lambda lib, i: (
        lib.tensor([1.0, 0.5 * i]), 0.25 * i - 1.0, i % 3))
    _same(t, e)
    _same(e, c)
    assert not warned, warned
    assert traces <= 3


def test_random_draws_made_into_a_tensor():
    def make(lib):
        def pick(q):
            sample = lib.tensor([random.random(), random.randrange(5)])
            return q * sample, lib.tensor([[random.randrange(2)]], dtype=lib.long)
        return pick
    t, e, c, warned, traces = _runs(make, lambda lib, i: (lib.tensor([2.0, 3.0]),))
    _same(t, e)
    _same(e, c)
    assert not warned, warned
    assert traces <= 2


@pytest.mark.parametrize("case", ["mixed", "float64", "zero_d", "bool", "uint8", "tuple",
                                  "int_as_float", "arith", "float_as_long"])
def test_tensor_of_numbers_dtypes_and_shapes(case):
    def make(lib):
        def f(r, a):
            return [{"mixed": lambda: lib.tensor([[a, 2], [3, r]]),
                     "float64": lambda: lib.tensor([r, 1.5], dtype=lib.float64),
                     "zero_d": lambda: lib.tensor(r) * 2,
                     "bool": lambda: lib.tensor([True, a]),
                     "uint8": lambda: lib.tensor([a, 200], dtype=lib.uint8),
                     "tuple": lambda: lib.tensor(((a, 7), (1, a))),
                     "int_as_float": lambda: lib.tensor([a], dtype=lib.float32),
                     "arith": lambda: lib.tensor([r * 2 + 1, a - 3]),
                     # (a float into an integer dtype: its number read, traced per value)
                     "float_as_long": lambda: lib.tensor([r], dtype=lib.long)}[case]()]
        return f
    t, e, c, warned, traces = _runs(make, lambda lib, i: (0.1 * i - 0.3, i % 4), n=6)
    _same(t, e)
    _same(e, c)
    assert not warned, warned
