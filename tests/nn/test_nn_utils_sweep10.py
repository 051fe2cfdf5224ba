"""A state dict of the old nn.utils.weight_norm (weight_g, weight_v) loads into a module
reparametrised with nn.utils.parametrizations.weight_norm, as in PyTorch (its load hook),
including one written by torch."""
import io

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _new_from_old(lib, sd):
    lib.manual_seed(1)
    net = lib.nn.Sequential(lib.nn.Linear(3, 2))
    net[0] = lib.nn.utils.parametrizations.weight_norm(net[0])
    result = net.load_state_dict(sd)
    return repr(result), net[0].weight.detach().numpy(), net(lib.ones(1, 3)).detach().numpy()


def test_old_weight_norm_state_dict_loads_into_parametrization():
    outs = []
    for lib in (torch, llgrad):
        lib.manual_seed(0)
        old = lib.nn.Sequential(lib.nn.utils.weight_norm(lib.nn.Linear(3, 2)))
        outs.append(_new_from_old(lib, old.state_dict()))
    assert outs[1][0] == outs[0][0]
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(outs[1][2], outs[0][2], rtol=1e-6, atol=1e-7)


def test_torch_checkpoint_of_old_weight_norm_loads():
    torch.manual_seed(0)
    old = torch.nn.Sequential(torch.nn.utils.weight_norm(torch.nn.Linear(3, 2)))
    buf = io.BytesIO()
    torch.save(old.state_dict(), buf)
    buf.seek(0)
    want = _new_from_old(torch, old.state_dict())
    got = _new_from_old(llgrad, llgrad.load(buf))
    assert got[0] == want[0]
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6, atol=1e-7)
