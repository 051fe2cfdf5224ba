"""nn.Module semantics against torch as the oracle, where llgrad differed: spectral_norm's
state-dict version metadata and its conversion of version-0 checkpoints, named_modules with
a caller's memo, float()/double()/half() leaving complex tensors alone, train()/eval()
calling a child's train override (eager and inside a compiled training step), and a
subclass's __setstate__ calling super()."""
import copy

import numpy as np
import pytest

import llgrad
from llgrad.compile import background

torch = pytest.importorskip("torch")


def _arr(t):
    return t.detach().double().numpy()


def _metadata(lib):
    lib.manual_seed(0)
    s = lib.nn.Sequential(lib.nn.utils.spectral_norm(lib.nn.Linear(3, 4)))
    return {k: dict(v) for k, v in s.state_dict()._metadata.items()}


def test_spectral_norm_state_dict_records_its_version():
    assert _metadata(llgrad) == _metadata(torch)
    assert _metadata(llgrad)["0"]["spectral_norm"] == {"weight.version": 1}


def test_spectral_norm_version_metadata_goes_with_remove():
    for lib in (torch, llgrad):
        m = lib.nn.utils.spectral_norm(lib.nn.Linear(2, 2))
        lib.nn.utils.remove_spectral_norm(m)
        lib.nn.utils.spectral_norm(m)       # (again: a second version entry would raise)
        assert dict(m.state_dict()._metadata[""]) == {
            "version": 1, "spectral_norm": {"weight.version": 1}}


def _version0_checkpoint(lib):
    """A spectral-normed Linear's checkpoint as PyTorch < 1.0 wrote it: the normalised
    weight saved, no weight_v, no spectral_norm metadata."""
    lib.manual_seed(0)
    a = lib.nn.utils.spectral_norm(lib.nn.Linear(3, 4)).eval()
    sd = a.state_dict()
    sd["weight"] = a.weight.detach().clone()
    del sd["weight_v"]
    sd._metadata = {"": {"version": 1}}
    return sd


@pytest.mark.parametrize("strict", [True, False])
def test_spectral_norm_loads_a_version0_checkpoint(strict):
    out = {}
    for lib in (torch, llgrad):
        sd = _version0_checkpoint(lib)
        lib.manual_seed(1)
        b = lib.nn.utils.spectral_norm(lib.nn.Linear(3, 4)).eval()
        keys = b.load_state_dict(sd, strict=strict)
        assert keys.missing_keys == [] and keys.unexpected_keys == []
        out[lib] = (b.weight_v, b.weight_u, b(lib.linspace(-1, 1, 6).reshape(2, 3)))
    for t, ll in zip(out[torch], out[llgrad]):
        np.testing.assert_allclose(_arr(ll), _arr(t), rtol=1e-4, atol=1e-5)


def test_spectral_norm_load_of_a_plain_linear_reports_as_torch():
    got = {}
    for lib in (torch, llgrad):
        lib.manual_seed(1)
        sd = lib.nn.Linear(3, 4).state_dict()
        m = lib.nn.utils.spectral_norm(lib.nn.Linear(3, 4))
        keys = m.load_state_dict(sd, strict=False)
        with pytest.raises(RuntimeError) as err:
            m.load_state_dict(sd)
        got[lib] = (keys.missing_keys, keys.unexpected_keys,
                    str(err.value).replace("llgrad", "torch"))
    assert got[llgrad] == got[torch]


def _memo_walk(lib):
    s = lib.nn.Sequential(lib.nn.ReLU(), lib.nn.Sequential(lib.nn.Tanh()), lib.nn.ReLU())
    memo = {s[0], s[1][0]}
    names = [n for n, _ in s.named_modules(memo=memo)]
    return names, len(memo), s in memo


def test_named_modules_skips_and_fills_the_callers_memo():
    assert _memo_walk(llgrad) == _memo_walk(torch) == (["", "1", "2"], 5, True)


@pytest.mark.parametrize("cast", ["float", "double", "half", "bfloat16"])
def test_casts_by_name_leave_complex_and_integer_tensors(cast):
    got = {}
    for lib in (torch, llgrad):
        m = lib.nn.Linear(2, 2)
        m.register_buffer("c", lib.tensor([1 + 2j, 3 - 1j], dtype=lib.complex64))
        m.register_buffer("i", lib.ones(2, dtype=lib.int32))
        getattr(m, cast)()
        got[lib] = ([str(v.dtype).split(".")[-1] for v in m.state_dict().values()],
                    m.c.numpy().tolist())
    assert got[llgrad] == got[torch]
    assert got[llgrad][1] == [1 + 2j, 3 - 1j]


def _override_calls(lib):
    calls = []

    class FrozenNorm(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = lib.nn.BatchNorm1d(3)

        def train(self, mode=True):
            calls.append(mode)
            super().train(mode)
            self.bn.eval()          # (the running statistics stay frozen)
            return self

    shared = FrozenNorm()
    s = lib.nn.Sequential(lib.nn.Sequential(shared, lib.nn.Linear(1, 1)), shared,
                          lib.nn.Dropout())
    s.eval()
    s.train()
    return calls, [m.training for m in s.modules()]


def test_train_and_eval_call_a_childs_train_override():
    calls, flags = _override_calls(llgrad)
    assert (calls, flags) == _override_calls(torch)
    assert calls == [False, False, True, True]      # (once per parent, as torch)
    assert flags == [True, True, True, False, True, True]


def _frozen_bn_net(lib):
    class FrozenBN(lib.nn.Sequential):
        def train(self, mode=True):
            super().train(mode)
            for m in self.modules():
                if isinstance(m, lib.nn.BatchNorm1d):
                    m.eval()
            return self

    lib.manual_seed(0)
    net = lib.nn.Sequential(FrozenBN(lib.nn.Linear(4, 5), lib.nn.BatchNorm1d(5)),
                            lib.nn.Tanh(), lib.nn.Linear(5, 3))
    with lib.no_grad():
        for i, p in enumerate(net.parameters()):
            p.copy_(lib.tensor(np.sin(np.arange(p.numel()) * (i + 1.3)).reshape(
                tuple(p.shape)).astype(np.float32)))
        net[0][1].running_mean.fill_(0.25)
        net[0][1].running_var.fill_(2.0)
    return net


def _frozen_bn_run(lib, compiled):
    net = _frozen_bn_net(lib)
    params = list(net.parameters())

    def step(x, y):     # (SGD by hand: torch.optim's first step costs seconds to import)
        net.train()
        net.zero_grad()
        loss = lib.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        with lib.no_grad():
            for p in params:
                p.sub_(0.1 * p.grad)
        return loss

    if compiled:
        step = lib.compile(step)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(3):
        x = lib.tensor(rng.standard_normal((6, 4)).astype(np.float32))
        y = lib.tensor(rng.integers(0, 3, 6))
        losses.append(step(x, y).item())
        if compiled:
            step.wait()
    state = {k: _arr(v) for k, v in net.state_dict().items()}
    grads = [_arr(p.grad) for p in net.parameters()]
    return losses, state, grads, getattr(step, "n_traces", None)


@pytest.mark.slow       # (a native build: seconds)
def test_compiled_step_with_a_frozen_batchnorm_override_matches_eager_and_torch():
    ref = _frozen_bn_run(torch, False)
    eager = _frozen_bn_run(llgrad, False)
    comp = _frozen_bn_run(llgrad, True)
    background.wait_all()
    assert eager[1]["0.1.running_mean"].tolist() == [0.25] * 5      # (frozen: eval mode)
    assert eager[1]["0.1.num_batches_tracked"] == 0
    for got in (eager, comp):
        np.testing.assert_allclose(got[0], ref[0], rtol=1e-5)
        assert list(got[1]) == list(ref[1])
        for k in ref[1]:
            np.testing.assert_allclose(got[1][k], ref[1][k], rtol=1e-5, atol=1e-6)
        for a, b in zip(got[2], ref[2]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert comp[3] == 1


def _restoring(lib):
    class Restoring(lib.nn.Linear):
        def __setstate__(self, state):
            super().__setstate__(state)
            self.restored = True
    return Restoring


def test_subclass_setstate_may_call_super():
    m = _restoring(llgrad)(2, 2)
    clone = copy.deepcopy(m)
    assert clone.restored and list(clone.state_dict()) == ["weight", "bias"]
    x = llgrad.ones(1, 2)
    np.testing.assert_array_equal(_arr(clone(x)), _arr(m(x)))
    assert copy.deepcopy(_restoring(torch)(2, 2)).restored


def test_setstate_fills_the_stores_an_older_pickle_lacks():
    for lib in (torch, llgrad):
        m = lib.nn.Linear(1, 1)
        state = {k: v for k, v in m.__dict__.items() if k not in (
            "_non_persistent", "_non_persistent_buffers_set")}
        n = lib.nn.Linear.__new__(lib.nn.Linear)
        n.__setstate__(state)
        n.register_buffer("b", lib.ones(1), persistent=False)
        assert list(n.state_dict()) == ["weight", "bias"]
        assert tuple(n(lib.ones(1)).shape) == (1,)


def test_eager_step_with_a_frozen_batchnorm_override_matches_torch():
    ref, got = _frozen_bn_run(torch, False), _frozen_bn_run(llgrad, False)
    assert got[1]["0.1.num_batches_tracked"] == 0
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5)
    for k in ref[1]:
        np.testing.assert_allclose(got[1][k], ref[1][k], rtol=1e-5, atol=1e-6)
