"""Session 75 (d), vision functionals against torch, part 3: convolutions: padding
'same'/'valid' with dilation and groups, Conv1d/2d/3d modules with every padding_mode,
depthwise and bias=False, ConvTranspose1d/2d forward(output_size=...) with groups,
dilation and output_padding, the weight and bias gradients of the functionals on permuted,
transposed, step-sliced and float64 inputs, and the errors torch raises: torch, llgrad
eager and llgrad.compile (adversarial_harness_s69_a10.check). The modules are built once
a library and dtype, outside the compiled call, with the same deterministic parameters."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

pytestmark = pytest.mark.torch

from adversary_s75_d_common import (  # noqa: E402,F401 (the shared inputs)
    PERM, PERM64, STEP, V5, X, X64, X64P, XP, XS, _ids, perm, step)

R = np.random.default_rng(753)      # (this file's further inputs)

W = R.standard_normal((4, 3, 3, 2)).astype(np.float32)
W64 = R.standard_normal((4, 3, 3, 2))
WT = ("view", np.ascontiguousarray(W.transpose(1, 0, 2, 3)), True, lambda t: t.transpose(0, 1))
B = np.array([0.1, -0.2, 0.3, 0.4], np.float32)
_MODS = {}


def _mods(lib, dtype, build):
    """build(lib) once per (library, dtype): the modules stay outside the compiled call."""
    key = (lib.__name__, str(dtype), build.__name__)
    if key not in _MODS:
        ms = build(lib)
        for m in ms:
            for k, p in enumerate(m.parameters()):
                p.data = (lib.arange(p.numel(), dtype=lib.float64).reshape(p.shape) / (p.numel() + 3)
                          - 0.4 + 0.1 * k).to(dtype)
        _MODS[key] = ms
    return _MODS[key]

def _padmode_convs(lib):
    nn = lib.nn
    return ([nn.Conv2d(3, 6, (3, 2), padding=(1, 2), padding_mode=pm, groups=3, bias=False, stride=(2, 1))
             for pm in ("reflect", "circular", "replicate", "zeros")]
            + [nn.Conv2d(3, 3, 3, padding="same", padding_mode="reflect", dilation=(2, 1), groups=3),
               nn.Conv2d(3, 2, (2, 4), padding="same", padding_mode="circular", bias=False)])

def conv_module_padmodes(torch, x):
    return [m(x) for m in _mods(torch, x.dtype, _padmode_convs)]

def _convs13(lib):
    nn = lib.nn
    return [nn.Conv1d(3, 3, 4, padding="same", padding_mode="replicate", dilation=3, groups=3, bias=False),
            nn.Conv1d(3, 2, 3, stride=4, padding=2, padding_mode="circular"),
            nn.Conv3d(3, 3, (2, 3, 2), padding=(1, 1, 1), padding_mode="reflect", groups=3, stride=(2, 1, 1)),
            nn.Conv3d(3, 2, 2, padding="same", padding_mode="circular", bias=False, dilation=(1, 2, 1))]

def conv1d_3d_modules(torch, x):
    m = _mods(torch, x.dtype, _convs13)
    s = x.reshape(2, 3, 35)
    v = x.reshape(2, 3, 5, 7, 1).expand(2, 3, 5, 7, 2)
    return m[0](s), m[1](s), m[2](v), m[3](v)

def _convts(lib):
    nn = lib.nn
    return [nn.ConvTranspose2d(3, 4, (3, 2), stride=(2, 3), padding=(1, 0), bias=False),
            nn.ConvTranspose2d(3, 6, 3, stride=2, padding=1, output_padding=1, groups=3, dilation=2),
            nn.ConvTranspose1d(3, 3, 2, stride=3, padding=1, groups=3, dilation=3)]

def convt_output_size(torch, x):
    m = _mods(torch, x.dtype, _convts)
    s = x.flatten(2)
    return (m[0](x, output_size=(10, 21)), m[0](x, output_size=[2, 3, 9, 22]), m[0](x),
            m[1](x), m[1](x, output_size=(11, 15)), m[2](s), m[2](s, output_size=[104]),
            m[2](s, output_size=(2, 3, 105)))

def conv_modes(torch, x, w):
    F = torch.nn.functional
    return (F.conv2d(x, w, padding="valid", stride=(2, 1)), F.conv2d(x, w, padding="same", dilation=(1, 3)),
            F.conv2d(x, w[:3, :1], groups=3, padding=(2, 1), dilation=2, stride=(1, 3)),
            F.conv2d(x, w, bias=torch.ones(4, dtype=x.dtype), padding=(0, 2), stride=(3, 2)))

def convt_output_size_raises(torch, x):
    m = torch.nn.ConvTranspose2d(3, 4, 3, stride=2)
    return m(x, output_size=(14, 3))

def conv_same_stride_raises(torch, x, w):
    return torch.nn.functional.conv2d(x, w, padding="same", stride=2)

def conv_groups_mismatch_raises(torch, x, w):
    return torch.nn.functional.conv2d(x, w, groups=2)

def convt_op_too_big_raises(torch, x):
    w = torch.ones(3, 2, 2, 2)
    return torch.nn.functional.conv_transpose2d(x, w, stride=2, output_padding=2)

def conv_module_grads(torch, x, w, b):
    F = torch.nn.functional
    return (F.conv2d(x, w, b, padding=(2, 0), stride=(1, 2), dilation=(2, 1)),
            F.conv_transpose2d(x, w.transpose(0, 1), b, stride=(2, 2), padding=(0, 1), output_padding=(1, 0)),
            F.conv1d(x.flatten(2), w[:, :, 1], b, padding=3, dilation=2))


RUNS = [("conv_modes", [("grad", X), ("grad", W)]), ("conv_modes", [PERM, WT]),
        ("conv_modes", [("grad", X64), ("grad", W64)]),
        ("conv_module_padmodes", [("grad", X)]), ("conv_module_padmodes", [PERM64]),
        ("conv1d_3d_modules", [("grad", X)]), ("convt_output_size", [("grad", X)]),
        ("convt_output_size", [PERM64]), ("convt_output_size_raises", [X]),
        ("conv_same_stride_raises", [X, W]), ("conv_groups_mismatch_raises", [X, W]),
        ("convt_op_too_big_raises", [X]), ("conv_module_grads", [STEP, ("grad", W), ("grad", B)])]


@pytest.mark.slow       # (a compile a case)
@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("name,specs", RUNS, ids=_ids(RUNS))
def test_convs(name, specs):
    check(globals()[name], *specs, rtol=1e-4, atol=2e-5)
