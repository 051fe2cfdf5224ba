"""A compiled module's load_state_dict takes a checkpoint of PyTorch's compiled module, whose
every key is under '_orig_mod.' (torch.compile's OptimizedModule), as PyTorch's compiled
module does; a plain module stays strict about such keys."""
import io

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn


def _net(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.Linear(4, 2))


def test_prefixed_keys_load_into_the_compiled_module():
    source = _net(llgrad)
    source[1].running_mean.fill_(0.5)
    prefixed = {"_orig_mod." + k: v.clone() for k, v in source.state_dict().items()}
    target = llgrad.compile(nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)))
    result = target.load_state_dict(prefixed)
    assert not result.missing_keys and not result.unexpected_keys
    for (k, a), (_, b) in zip(target.state_dict().items(), source.state_dict().items()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)
    with pytest.raises(RuntimeError, match="_orig_mod.0.weight"):
        nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)).load_state_dict(prefixed)


def test_own_keys_and_mixed_keys_are_left_as_given():
    target = llgrad.compile(_net(llgrad))
    own = target.state_dict()
    assert not target.load_state_dict(own).unexpected_keys
    mixed = dict(own)
    mixed["_orig_mod.0.weight"] = mixed.pop("0.weight")
    with pytest.raises(RuntimeError, match="Unexpected key"):
        target.load_state_dict(mixed)


@pytest.mark.slow                   # (torch.compile imports dynamo: seconds)
def test_a_torch_compiled_checkpoint_loads_and_gives_torchs_outputs():
    torch = pytest.importorskip("torch")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = torch.compile(_net(torch))
    buf = io.BytesIO()
    torch.save(compiled.state_dict(), buf)
    buf.seek(0)
    target = llgrad.compile(nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)))
    target.load_state_dict(llgrad.load(buf))
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    target.eval()
    want = compiled._orig_mod.eval()(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(target(llgrad.tensor(x)).detach().numpy(), want, rtol=1e-5,
                               atol=1e-6)
