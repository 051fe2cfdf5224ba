"""Code shared between batch sizes (codegen/size_params.py): a compiled training step called
at a sweep of sizes builds LLVM code for its first size and once more for the family, and
every later size runs that code with its numbers as run-time values. Its results are
bitwise those of code specialised to each size (LLGRAD_SHARE_SIZES=0) and match eager; a
module that differs in more than the template's parameters is never matched."""
import copy

import numpy as np
import pytest
from llvmlite import ir

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F
from llgrad.codegen import size_params

SIZES = [32, 24, 17, 9, 40, 3, 12, 64]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.norm, self.fc2 = nn.Linear(12, 48), nn.LayerNorm(48), nn.Linear(48, 5)

    def forward(self, x):
        return self.fc2(F.gelu(self.norm(self.fc1(x))))


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def _batches(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [(llgrad.from_numpy(rng.standard_normal((b, 12)).astype(np.float32)),
             llgrad.from_numpy(rng.integers(0, 5, b))) for b in sizes]


def _run(step, model, sizes):
    opt = llgrad.optim.Adam(model.parameters(), lr=1e-2)
    losses = [step(model, opt, x, y).item() for x, y in _batches(sizes) for _ in range(3)]
    return losses, [p.detach().numpy().copy() for p in model.parameters()]


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    from llgrad.codegen.native import cache, jit
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(tmp_path))
    jit._reset()
    cache._reset()
    yield monkeypatch
    monkeypatch.undo()
    jit._reset()
    cache._reset()


def test_a_sweep_of_sizes_builds_llvm_code_twice(fresh_cache):
    llgrad.manual_seed(0)
    model = Net()
    reference = copy.deepcopy(model)
    # (a trace per size, dynamic=False: the code sharing, not size_templates.py)
    step = llgrad.compile(train_step, recompile_limit=16, dynamic=False)
    losses, params = _run(step, model, SIZES)
    # (the step, its backward included, is one module) the first size's, then the family's
    assert step.n_llvm_compiles == 2
    assert step.n_traces == len(SIZES)
    shared = [k for e in step.entries for k in e.kernels.values()
              if getattr(k, "shares_sizes", False)]
    assert len(shared) == len(SIZES) - 1
    e_losses, e_params = _run(train_step, reference, SIZES)
    np.testing.assert_allclose(losses, e_losses, rtol=1e-5)
    for p, q in zip(params, e_params):
        np.testing.assert_allclose(p, q, rtol=1e-4, atol=1e-5)


@pytest.fixture
def one_thread():
    before = llgrad.get_num_threads()
    llgrad.set_num_threads(1)
    yield
    llgrad.set_num_threads(before)


def test_shared_code_gives_the_specialised_code_bits(fresh_cache, one_thread):
    # (one thread: on more, shared code may split a loop's work at another dimension, and
    # sum a reduction's partial results in another order)
    llgrad.manual_seed(1)
    model = Net()
    other = copy.deepcopy(model)
    shared = llgrad.compile(train_step, recompile_limit=16)
    got = _run(shared, model, SIZES)
    fresh_cache.setenv("LLGRAD_SHARE_SIZES", "0")
    specialised = llgrad.compile(train_step, recompile_limit=16)
    want = _run(specialised, other, SIZES)
    # (every size but the first, whose code the memory cache holds from the shared run)
    assert specialised.n_llvm_compiles == len(SIZES) - 1
    assert got[0] == want[0]
    for p, q in zip(got[1], want[1]):
        np.testing.assert_array_equal(p, q)


def test_a_ragged_last_batch_builds_once_per_size_class(fresh_cache):
    llgrad.manual_seed(2)
    model = Net()
    step = llgrad.compile(train_step)
    opt = llgrad.optim.SGD(model.parameters(), lr=0.1)
    data = _batches([16, 16, 16, 7])
    for _ in range(3):                  # epochs
        for x, y in data:
            step(model, opt, x, y)
    assert step.n_llvm_compiles == 2
    assert step.n_traces == 2


def test_a_batch_the_plan_groups_otherwise_is_a_family_of_its_own(fresh_cache):
    # at batch 5 the logits are 5 x 5, and the scheduler groups the loss's loops otherwise
    llgrad.manual_seed(3)
    model = Net()
    reference = copy.deepcopy(model)
    step = llgrad.compile(train_step, recompile_limit=16)
    sizes = [32, 24, 5, 12, 6]
    losses, _ = _run(step, model, sizes)
    assert step.n_llvm_compiles == 3
    np.testing.assert_allclose(losses, _run(train_step, reference, sizes)[0], rtol=1e-5)


# ---- the templates themselves, on modules built by hand ----------------------------------
I64 = ir.IntType(64)


def _module(n, step_of=lambda n: 4, name="entry_a"):
    """void f(ptr p): for i in [0, n): p[i * step] = i * 3 + n (a loop bound, a size and a
    constant that is a function of n: step_of)."""
    mod = ir.Module(name=name)
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ir.PointerType()]), name=name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    head, body, done = (fn.append_basic_block(x) for x in ("head", "body", "done"))
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64)
    i.add_incoming(ir.Constant(I64, 0), fn.blocks[0])
    b.cbranch(b.icmp_signed("<", i, ir.Constant(I64, n)), body, done)
    b.position_at_end(body)
    v = b.add(b.mul(i, ir.Constant(I64, 3)), ir.Constant(I64, n))
    b.store(v, b.gep(fn.args[0], [b.mul(i, ir.Constant(I64, step_of(n)))], source_etype=I64))
    i.add_incoming(b.add(i, ir.Constant(I64, 1)), body)
    b.branch(head)
    b.position_at_end(done)
    b.ret_void()
    return mod


def test_derive_finds_the_numbers_that_differ():
    positions = size_params.derive(_module(16), "entry_a", _module(12), "entry_a")
    assert sorted(p[2].constant for p in positions) == [16, 16]
    t = size_params.parametrize(_module(16), "entry_a", positions)
    assert len(t.positions) == 2 and t.slots == [0, 0]      # (equal at both sizes: one slot)
    mod = _module(7)
    text = str(mod)
    table = size_params.match(t, mod, "entry_a")
    assert list(table) == [7]
    other = _module(9, name="entry_b")          # (another entry name: the same code)
    assert list(size_params.match(t, other, "entry_b")) == [9]


def test_numbers_sharing_a_slot_must_be_equal_again():
    """The bound, the size and the stride are all n at 16 and 12, so they share one slot
    (one load: LLVM sees the stride of a load and of a store as one value); at 7 the stride
    is 8 (max(n, 8)) while the others are 7: the template cannot serve it, and the module
    is left as it was."""
    step_of = lambda n: max(n, 8)               # noqa: E731
    positions = size_params.derive(_module(16, step_of), "entry_a", _module(12, step_of),
                                   "entry_a")
    t = size_params.parametrize(_module(16, step_of), "entry_a", positions)
    assert len(t.positions) == 3 and t.slots == [0, 0, 0] and t.n_slots == 1
    text = str(t_mod := _module(7, step_of))
    assert size_params.match(t, t_mod, "entry_a") is None
    assert str(t_mod) == text
    assert list(size_params.match(t, _module(9, step_of), "entry_a")) == [9]
    assert list(size_params.base_table(t)) == [16]


def test_a_number_equal_at_two_sizes_is_not_a_parameter():
    # step_of is 4 at 16 and 12 (a saturated min): at 7 it is 3, which the template holds
    # as a constant, so the module at 7 is not matched, and is left as it was
    step_of = lambda n: min(4, n // 2)          # noqa: E731
    positions = size_params.derive(_module(16, step_of), "entry_a", _module(12, step_of),
                                   "entry_a")
    t = size_params.parametrize(_module(16, step_of), "entry_a", positions)
    mod = _module(7, step_of)
    text = str(mod)
    assert size_params.match(t, mod, "entry_a") is None
    assert str(mod) == text
    assert size_params.match(t, _module(20, step_of), "entry_a") is not None


def test_modules_that_differ_in_more_than_numbers_share_nothing():
    a, b = _module(16), _module(12)
    b.functions[0].blocks[2].instructions[1].opname = "sub"   # (add -> sub)
    b.functions[0].blocks[2].instructions[1]._clear_string_cache()
    assert size_params.derive(a, "entry_a", b, "entry_a") is None


def test_the_dump_says_which_code_a_size_shares(fresh_cache):
    from llgrad.compile.dump import format_entry
    f = llgrad.compile(lambda x: (x * 2.0).sum(1).exp().sum())
    for n in (8, 6, 5):
        for _ in range(2):
            f(llgrad.randn(n, 3))
    lines = [line for line in format_entry(f.entries[-1], llvm=True).splitlines()
             if line.startswith("shared between sizes")]
    assert len(lines) == 1 and lines[0].endswith("_size_table = [5]")


def test_shared_code_lives_as_long_as_what_uses_it(fresh_cache):
    # (as every kernel's code: the family keeps its templates weakly, so with no in-memory
    # cache the code goes with the last compiled function that ran it)
    import gc
    from llgrad.codegen.native import jit
    fresh_cache.setenv("LLGRAD_KERNEL_CACHE_MB", "0")
    jit._reset()

    def sweep(scale):
        f = llgrad.compile(lambda x: (x * scale).sum(1).exp().sum())
        for n in (8, 6, 5):
            for _ in range(2):
                f(llgrad.randn(n, 3))
        return f
    fresh_cache.setenv("LLGRAD_SHARE_SIZES", "0")
    del sweep(3.0).fn                   # (the plumbing's own modules, which stay, built)
    gc.collect()
    plumbing = jit.live()["compiled"]
    fresh_cache.setenv("LLGRAD_SHARE_SIZES", "1")
    f = sweep(2.0)
    assert f.n_llvm_compiles == 2 and jit.live()["compiled"] >= plumbing + 2
    del f
    gc.collect()
    assert jit.live()["compiled"] == plumbing
