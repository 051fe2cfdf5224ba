"""Programs whose input shapes change between calls (sweep 21): compiled calls (native code,
sizes sharing code through size templates) against eager llgrad and torch, every result,
gradient, parameter, buffer, optimiser and scheduler figure and random draw after each call."""
import numpy as np
import pytest
from contract_harness_sweep7 import runs

import llgrad

torch = pytest.importorskip("torch")


# ---- randn_like of a view that is not dense (a VAE's mu from chunk) ---------------------------
_LAYOUTS = {
    "chunk": lambda lib: lib.ones(9, 4).chunk(2, -1)[0],          # 18 values, strides (4, 1)
    "every_other": lambda lib: lib.ones(40)[::2],
    "expanded": lambda lib: lib.ones(1, 4).expand(5, 4),
    "columns": lambda lib: lib.ones(5, 8)[:, 1:5],
    "transposed": lambda lib: lib.ones(5, 4).t(),                  # dense: its own layout
    "channels_last_slice": lambda lib: lib.ones(2, 4, 3, 3).contiguous(
        memory_format=lib.channels_last)[:, :2],
}


@pytest.mark.parametrize("layout", sorted(_LAYOUTS))
def test_randn_like_of_a_view_draws_as_torchs(layout):
    # (eager drew a non-dense view's 16+ values one by one: torch's empty_like gives such a
    # view a contiguous result, which normal_ fills with its vectorised draws)
    def draws(lib):
        lib.manual_seed(0)
        r = lib.randn_like(_LAYOUTS[layout](lib))
        return r.numpy().copy(), r.stride(), lib.rand(1).item()
    (want, want_strides, want_next), (got, strides, nxt) = draws(torch), draws(llgrad)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert (strides, nxt) == (want_strides, want_next)


def vae_steps_over_batch_sizes(lib, wrap, see):
    enc, dec = lib.nn.Linear(4, 4), lib.nn.Linear(2, 4)
    opt = lib.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=0.01)

    def step(x, beta):
        opt.zero_grad()
        mu, logv = enc(x).chunk(2, -1)
        z = mu + lib.randn_like(mu) * (0.5 * logv).exp()
        rec = lib.nn.functional.mse_loss(dec(z), x, reduction="sum") / x.shape[0]
        kl = -0.5 * (1 + logv - mu.pow(2) - logv.exp()).sum(1).mean()
        loss = rec + beta * kl
        loss.backward()
        opt.step()
        return loss, z
    g = wrap(step)
    for k, n in enumerate([4, 4, 9, 9, 6, 6, 1, 9, 12, 12]):
        see(g(lib.arange(n * 4.).reshape(n, 4).cos(), min(1.0, k / 5)), enc.weight, lib.rand(1))


def test_vae_steps_over_batch_sizes():
    runs(vae_steps_over_batch_sizes, torch, backend="llvm")


@pytest.mark.parametrize("replacement", [False, True])
def test_multinomial_of_transposed_probabilities_draws_as_torchs(replacement):
    # (its Exp(1) draws filled a row-major buffer: torch's empty_like keeps the transposed
    # layout, and exponential_ fills it in memory order)
    def draws(lib):
        p = (lib.arange(30.).reshape(6, 5) % 7 + 1).t()
        lib.manual_seed(0)
        return lib.multinomial(p, 3, replacement).tolist(), lib.rand(1).item()
    assert draws(llgrad) == draws(torch)


@pytest.mark.parametrize("op", ["randn_like", "rand_like", "randint_like"])
@pytest.mark.parametrize("fmt", ["contiguous_format", "channels_last", "preserve_format"])
def test_random_likes_take_the_memory_format(op, fmt):
    # (memory_format was accepted and ignored: the draws came in the input's layout)
    def draws(lib):
        x = lib.ones(2, 3, 4, 4).permute(0, 1, 3, 2)
        lib.manual_seed(0)
        args = (x, 10) if op == "randint_like" else (x,)
        r = getattr(lib, op)(*args, memory_format=getattr(lib, fmt))
        return r.numpy().copy(), r.stride(), lib.rand(1).item()
    (want, want_strides, want_next), (got, strides, nxt) = draws(torch), draws(llgrad)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert (strides, nxt) == (want_strides, want_next)
